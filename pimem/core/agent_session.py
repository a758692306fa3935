"""Extension hooks around compaction and ``/tree`` navigation, as Pi 0.87.1 runs them.

Hooks are plain callables registered on :class:`Hooks`:

* ``before_compact(event: BeforeCompactEvent) -> None | Cancel | CompactionResult`` — Pi's
  ``session_before_compact``: cancel, or supply the compaction (the entry gets ``fromHook: true``).
* ``compact_failed(event: CompactFailedEvent)`` — Pi's ``session_compact_failed``.
* ``before_tree(event: BeforeTreeEvent) -> None | Cancel | str | TreeHookResult`` — Pi's
  ``session_before_tree``: cancel, supply the branch summary, or override instructions/label.

As in Pi's extension runner, handlers run in order, the last non-empty result wins, a
``Cancel`` stops at once, and an exception in a handler is recorded (``Hooks.errors`` and a
warning) without stopping the operation. :func:`run_compaction` and
:func:`run_tree_navigation` mirror ``AgentSession``'s compaction and ``navigateTree``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from pimem.base.js import iso_now, js_truthy
from pimem.core.compaction.branch_summarization import (
    BranchSummaryResult,
    collect_entries_for_branch_summary,
    generate_branch_summary,
)
from pimem.core.compaction.compaction import (
    CompactionPreparation,
    CompactionResult,
    CompactionSettings,
    ModelInfo,
    compact,
    prepare_compaction,
)
from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse
from pimem.core.pi_ai import content_text
from pimem.core.porting import not_ported, port
from pimem.core.session_manager import COMPUTE_SYSTEM_MESSAGE
from pimem.errors import ArgumentTypeError, ConfigurationError, EntryNotFoundError, SummarizationError

__all__ = [
    "Cancel",
    "CANCEL",
    "Hooks",
    "BeforeCompactEvent",
    "CompactFailedEvent",
    "BeforeTreeEvent",
    "TreeHookResult",
    "CompactionOutcome",
    "TreeOutcome",
    "run_compaction",
    "run_tree_navigation",
]

CompactionReason = Literal["manual", "threshold", "overflow"]


class Cancel:
    """Return this (or :data:`CANCEL`) from a ``before_*`` hook to cancel the operation."""

    def __repr__(self) -> str:
        return "Cancel()"

    def __bool__(self) -> bool:
        return True


CANCEL = Cancel()


@dataclass
class BeforeCompactEvent:
    """``session_before_compact``."""

    preparation: CompactionPreparation
    branch_entries: Sequence[dict]
    custom_instructions: str | None
    reason: CompactionReason
    will_retry: bool


@dataclass
class CompactFailedEvent:
    """``session_compact_failed``."""

    reason: CompactionReason
    error_message: str | None
    aborted: bool
    will_retry: bool
    from_extension: bool


@dataclass
class BeforeTreeEvent:
    """``session_before_tree`` (Pi's tree preparation)."""

    target_id: str
    old_leaf_id: str | None
    common_ancestor_id: str | None
    entries_to_summarize: list[dict]
    user_wants_summary: bool
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None


@dataclass
class TreeHookResult:
    """A full ``session_before_tree`` result: a summary and/or overrides."""

    summary: str | None = None
    details: Any = None
    usage: dict | None = None
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None
    cancel: bool = False


@dataclass
class Hooks:
    """Lists of hook callables; ``errors`` collects exceptions raised by handlers.

    Args:
        before_compact: called with a ``BeforeCompactEvent``; may return :class:`Cancel` or a
            :class:`CompactionResult` (or ``{"compaction": ...}``) to use instead of a summary.
        compact_failed: called with a ``CompactFailedEvent`` when a compaction fails or is cancelled.
        before_tree: called with a ``BeforeTreeEvent``; may return :class:`Cancel`, a summary text,
            a :class:`BranchSummaryResult` or a ``TreeHookResult``.
        errors: ``(hook name, exception)`` for each handler that raised (the handler is then skipped).
    """

    before_compact: list[Callable[[BeforeCompactEvent], Any]] = field(default_factory=list)
    compact_failed: list[Callable[[CompactFailedEvent], Any]] = field(default_factory=list)
    before_tree: list[Callable[[BeforeTreeEvent], Any]] = field(default_factory=list)
    errors: list[tuple[str, BaseException]] = field(default_factory=list)

    def emit_before(self, name: str, event: Any) -> Any:
        """Call every ``name`` handler; the last non-empty result wins, a cancel stops at once."""
        result = None
        for handler in getattr(self, name):
            try:
                value = handler(event)
            except Exception as exc:  # recorded, as Pi's runner reports handler errors
                self.errors.append((name, exc))
                warnings.warn(f"{name} hook {getattr(handler, '__name__', handler)!r} raised: {exc}", stacklevel=3)
                continue
            if value is not None and value is not False:
                result = value
                if _is_cancel(value):
                    return value
        return result

    def emit(self, name: str, event: Any) -> None:
        """Call every ``name`` handler for its effect (errors are recorded and warned)."""
        for handler in getattr(self, name):
            try:
                handler(event)
            except Exception as exc:
                self.errors.append((name, exc))
                warnings.warn(f"{name} hook {getattr(handler, '__name__', handler)!r} raised: {exc}", stacklevel=3)


def _is_cancel(value: Any) -> bool:
    return isinstance(value, Cancel) or (isinstance(value, TreeHookResult) and value.cancel) or (
        isinstance(value, dict) and js_truthy(value.get("cancel"))
    )


def _hook_compaction(value: Any) -> CompactionResult | None:
    if isinstance(value, CompactionResult):
        return value
    if isinstance(value, dict):
        c = value.get("compaction", value if "summary" in value else None)
        if isinstance(c, CompactionResult):
            return c
        if isinstance(c, dict):
            return CompactionResult(
                summary=c.get("summary"),  # type: ignore[arg-type]  # written as returned, as Pi does
                first_kept_entry_id=c.get("firstKeptEntryId"),
                tokens_before=c.get("tokensBefore"),
                usage=c.get("usage"),
                details=c.get("details"),
            )
    return None


@dataclass
class CompactionOutcome:
    """What one compaction attempt did.

    ``status``: ``"compacted"``, ``"skipped"`` (nothing to compact; no event, as Pi's automatic
    path), ``"cancelled"`` (a hook cancelled), ``"aborted"`` (the summarizer answered
    ``aborted``) or ``"failed"`` (``error_message`` holds Pi's text).
    """

    status: str
    reason: CompactionReason
    preparation: CompactionPreparation | None = None
    result: CompactionResult | None = None
    entry: dict | None = None
    from_extension: bool = False
    error_message: str | None = None
    aborted: bool = False
    will_retry: bool = False
    requests: list[SummaryRequest] = field(default_factory=list)
    responses: list[SummaryResponse] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "compacted"


class _Recording:
    def __init__(self, inner: Any, outcome: CompactionOutcome):
        self.inner = inner
        self.outcome = outcome
        self.aborted = False

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.outcome.requests.append(request)
        response = self.inner.complete(request)
        self.outcome.responses.append(response)
        if response.stop_reason == "aborted":
            self.aborted = True
            raise _Aborted()
        return response


class _Aborted(Exception):
    pass


def _settings_for(settings: Any, model: ModelInfo) -> CompactionSettings:
    if isinstance(settings, CompactionSettings):
        return settings
    if hasattr(settings, "compaction_for"):
        if model.provider is None and model.id is None:
            return settings.compaction_for()
        return settings.compaction_for(model.provider, model.id)
    if settings is None:
        return CompactionSettings()
    raise ArgumentTypeError(f"settings must be CompactionSettings or Settings, not {type(settings).__name__}")


@port("agent-session.js", "AgentSession._runAutoCompaction")
def run_compaction(
    session: Any,
    settings: Any,
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    reason: CompactionReason,
    hooks: Hooks | None = None,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    will_retry: bool = False,
    timestamp: Any = None,
    preparation: CompactionPreparation | None = None,
    path_entries: Sequence[dict] | None = None,
    system_message: dict | None | Any = COMPUTE_SYSTEM_MESSAGE,
    compactor: Callable[..., CompactionResult] | None = None,
) -> CompactionOutcome:
    """One compaction as ``AgentSession.compact`` (manual) / ``_runAutoCompaction`` do it.

    Prepares on the session's current branch, runs ``before_compact`` hooks, summarizes
    (unless a hook supplied the result), appends the CompactionEntry (``fromHook`` when a
    hook supplied it) and returns the outcome. Failures fire ``compact_failed`` with Pi's
    messages; Pi's manual ``/compact`` would also raise, pimem returns the outcome instead.

    A caller that already has them may pass the branch (``path_entries``, root first), its
    ``preparation`` under these settings and its current ``system_message`` (see
    ``Session.append_compaction``); they must be what the session's current branch gives.
    ``compactor`` replaces :func:`~pimem.core.compaction.compaction.compact` (same arguments) for compaction
    strategies other than Pi's.

    Args:
        session: the session (changed in place).
        settings: the compaction settings.
        summarizer: the model that writes the summary.
        model: the model's limits.
        reason: ``manual``, ``threshold`` or ``overflow``.
        hooks: extension hooks.
        custom_instructions: instructions added to the prompt.
        thinking_level: the session's thinking level.
        will_retry: the request that overflowed is retried after it (an overflow compaction).
        timestamp: the entry's time (default: now).
        preparation: the preparation, when the caller has it.
        path_entries: the current branch, root first, when the caller has it.
        system_message: the branch's current system message, when the caller has it.
        compactor: replaces :func:`compact` (same arguments).
    """
    hooks = hooks or Hooks()
    manual = reason == "manual"
    # Pi's failure event never retries; manual compaction never retries.
    will_retry = False if manual else bool(will_retry)
    outcome = CompactionOutcome(status="skipped", reason=reason, will_retry=will_retry)
    if path_entries is None:
        path_entries = session.get_branch()
    if preparation is None:
        preparation = prepare_compaction(path_entries, _settings_for(settings, model))
    outcome.preparation = preparation
    if preparation is None:
        if not manual:
            return outcome  # automatic: nothing to do, no event
        last = path_entries[-1] if path_entries else None
        message = "Already compacted" if last is not None and last.get("type") == "compaction" else (
            "Nothing to compact (session too small)"
        )
        return _fail(outcome, hooks, f"Compaction failed: {message}", aborted=False)

    hook_value = hooks.emit_before(
        "before_compact",
        BeforeCompactEvent(
            preparation=preparation,
            branch_entries=path_entries,
            custom_instructions=custom_instructions if manual else None,
            reason=reason,
            will_retry=will_retry,
        ),
    )
    if hook_value is not None and _is_cancel(hook_value):
        outcome.status = "cancelled"
        return _fail(outcome, hooks, None, aborted=True)
    supplied = _hook_compaction(hook_value) if hook_value is not None else None
    outcome.from_extension = supplied is not None

    if supplied is not None:
        result = supplied
    else:
        recording = _Recording(summarizer, outcome)
        try:
            result = (compactor or compact)(
                preparation,
                recording,
                model=model,
                custom_instructions=custom_instructions if manual else None,
                thinking_level=thinking_level,
            )
        except _Aborted:
            outcome.status = "aborted"
            return _fail(outcome, hooks, None, aborted=True)
        except Exception as exc:  # SummarizationError and anything the summarizer raises
            prefix = "Compaction failed" if manual else (
                "Context overflow recovery failed" if reason == "overflow" else "Auto-compaction failed"
            )
            return _fail(outcome, hooks, f"{prefix}: {exc}", aborted=False)

    outcome.result = result
    known = {} if system_message is COMPUTE_SYSTEM_MESSAGE else {"system_message": system_message}
    outcome.entry = session.append_compaction(result, from_hook=outcome.from_extension, timestamp=timestamp, **known)
    outcome.status = "compacted"
    return outcome


def _fail(outcome: CompactionOutcome, hooks: Hooks, message: str | None, *, aborted: bool) -> CompactionOutcome:
    if outcome.status not in ("cancelled", "aborted"):
        outcome.status = "failed"
    outcome.error_message = message
    outcome.aborted = aborted
    hooks.emit(
        "compact_failed",
        CompactFailedEvent(
            reason=outcome.reason,
            error_message=message,
            aborted=aborted,
            will_retry=False,
            from_extension=outcome.from_extension,
        ),
    )
    return outcome


@dataclass
class TreeOutcome:
    """What one ``/tree`` navigation did (Pi's ``navigateTree`` result and more)."""

    cancelled: bool = False
    aborted: bool = False
    editor_text: str | None = None
    summary_entry: dict | None = None
    new_leaf_id: str | None = None
    old_leaf_id: str | None = None
    from_extension: bool | None = None
    result: BranchSummaryResult | None = None
    entries_to_summarize: list[dict] = field(default_factory=list)
    common_ancestor_id: str | None = None


@port("agent-session.js", "AgentSession.navigateTree")
def run_tree_navigation(
    session: Any,
    target_id: str,
    summarizer: Summarizer | None = None,
    *,
    model: ModelInfo | None = None,
    summarize: bool = False,
    hooks: Hooks | None = None,
    custom_instructions: str | None = None,
    replace_instructions: bool | None = None,
    label: str | None = None,
    reserve_tokens: float = 16384,
    timestamp: Any = None,
) -> TreeOutcome:
    """``AgentSession.navigateTree``: move to ``target_id``, optionally leaving a branch summary.

    ``reserve_tokens`` is Pi's ``branchSummary.reserveTokens`` setting. A summarizer error
    raises :class:`RuntimeError` with Pi's message, as Pi does.

    Args:
        session: the session (changed in place).
        target_id: the entry to move to.
        summarizer: the model that writes the summary.
        model: the model's limits.
        summarize: leave a summary of the abandoned branch.
        hooks: extension hooks.
        custom_instructions: instructions added to (or replacing) the prompt's.
        replace_instructions: ``custom_instructions`` replace the prompt's instead of being added.
        label: a label for the summary entry (or the target, without one).
        reserve_tokens: tokens left out of the window for the summary's budget.
        timestamp: the new entries' time (default: now).
    """
    hooks = hooks or Hooks()
    old_leaf = session.leaf_id
    if target_id == old_leaf:
        return TreeOutcome(old_leaf_id=old_leaf, new_leaf_id=old_leaf)
    if summarize and model is None:
        raise ConfigurationError("No model available for summarization")
    target = session.get_entry(target_id)
    if target is None:
        raise EntryNotFoundError(f"Entry {target_id} not found")
    entries, common = collect_entries_for_branch_summary(session, old_leaf, target_id)
    outcome = TreeOutcome(old_leaf_id=old_leaf, entries_to_summarize=entries, common_ancestor_id=common)

    supplied: Any = None
    hook_value = hooks.emit_before(
        "before_tree",
        BeforeTreeEvent(
            target_id=target_id,
            old_leaf_id=old_leaf,
            common_ancestor_id=common,
            entries_to_summarize=entries,
            user_wants_summary=bool(summarize),
            custom_instructions=custom_instructions,
            replace_instructions=replace_instructions,
            label=label,
        ),
    )
    if hook_value is not None:
        if _is_cancel(hook_value):
            outcome.cancelled = True
            return outcome
        if isinstance(hook_value, str):
            hook_value = TreeHookResult(summary=hook_value)
        elif isinstance(hook_value, BranchSummaryResult):
            hook_value = TreeHookResult(summary=hook_value.summary, details=hook_value.details, usage=hook_value.usage)
        if isinstance(hook_value, TreeHookResult):
            # Pi tests the extension's summary *object*: an empty summary text still counts as supplied
            # (nothing is generated, and with no text no branch summary entry is appended).
            if hook_value.summary is not None and summarize:
                supplied = hook_value
            if hook_value.custom_instructions is not None:
                custom_instructions = hook_value.custom_instructions
            if hook_value.replace_instructions is not None:
                replace_instructions = hook_value.replace_instructions
            if hook_value.label is not None:
                label = hook_value.label

    summary_text: str | None = None
    details: Any = None
    usage: dict | None = None
    from_extension = False
    if summarize and entries and supplied is None:
        result = generate_branch_summary(
            entries,
            summarizer,  # type: ignore[arg-type]  # None fails where Pi fails without a model
            model=model,  # type: ignore[arg-type]
            reserve_tokens=reserve_tokens,
            custom_instructions=custom_instructions,
            replace_instructions=bool(replace_instructions),
        )
        outcome.result = result
        if result.aborted:
            outcome.cancelled = True
            outcome.aborted = True
            return outcome
        if result.error:
            raise SummarizationError(result.error)
        summary_text = result.summary
        usage = result.usage
        details = {"readFiles": result.read_files or [], "modifiedFiles": result.modified_files or []}
    elif supplied is not None:
        summary_text, details, usage, from_extension = supplied.summary, supplied.details, supplied.usage, True

    if target.get("type") == "message" and target["message"].get("role") == "user":
        new_leaf = target.get("parentId")
        outcome.editor_text = content_text(target["message"].get("content"), "")
    elif target.get("type") == "custom_message":
        new_leaf = target.get("parentId")
        outcome.editor_text = content_text(target.get("content"), "")
    else:
        new_leaf = target_id

    if summary_text:
        payload = {"summary": summary_text, "details": details, "usage": usage}
        entry = session.branch_with_summary(new_leaf, payload, timestamp, from_hook=from_extension)
        outcome.summary_entry = entry
        if label:
            _append_label(session, entry["id"], label, timestamp)
    elif new_leaf is None:
        session.reset_leaf()
    else:
        session.branch(new_leaf)
    if label and not summary_text:
        _append_label(session, target_id, label, timestamp)
    outcome.new_leaf_id = session.leaf_id
    outcome.from_extension = from_extension if summary_text else None
    return outcome


def _append_label(session: Any, target_id: str, label: str, timestamp: Any) -> None:
    session.append_label_change(target_id, label, timestamp if isinstance(timestamp, str) else iso_now())


not_ported("agent-session.js", "AgentSession.compact",
           "run_compaction with reason='manual' (Pi's manual compact and _runAutoCompaction share the steps)")
