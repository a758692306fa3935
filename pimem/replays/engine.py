"""The replay loop: a recorded session walked through Pi 0.87.1's agent loop under other settings.

:func:`replay` appends the recorded path entry by entry to a new session and checks for compaction
where Pi's agent loop would (``next_turn``, ``agent_end``, ``before_prompt``, and the overflow of
a request at ``before_call``); the strategy decides what a check does, the token source what it
reads. The design, the checks and what a replay cannot know: ``docs/replay.md``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import random
import time
import warnings
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from pimem.base.js import utf16_len
from pimem.core.agent_session import CompactFailedEvent, Hooks, run_compaction
from pimem.core.compaction.compaction import CompactionSettings, ModelInfo
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.llm import Summarizer
from pimem.core.pi_ai import is_context_overflow
from pimem.core.session_manager import Session, require_message_objects
from pimem.sessions import session as sessions
from pimem.errors import (
    ArgumentTypeError,
    ConfigurationError,
    JavaScriptTypeError,
    ReplayWarning,
    SummarizationError,
)
from pimem.replays.config import TRIGGERS, ReplayConfig, StrategySpec, Trigger, resolve_model
from pimem.replays.navigate import navigate
from pimem.replays.recording import (
    RecordedPath,
    recorded_release,
    recording_token_cache,
    has_tool_calls,
    input_tokens,
    output_tokens,
    timestamp_ms,
)
from pimem.replays.result import CALL_COLUMNS, EVENT_COLUMNS, CallRow, EventRow, ReplayResult, Rows
from pimem.replays.settings import check_room, check_settings
from pimem.replays.strategies.base import CheckPoint, TurnView, get_strategy
from pimem.replays.tokens import TOKEN_SOURCES, TokenSourceName
from pimem.replays.tokens import make_token_source
from pimem.sessions.load import SessionLike, as_session
from pimem.summarizers.registry import default_summarizer
from pimem.base.js import js_stringify

if TYPE_CHECKING:
    from pimem.core.agent_session import CompactionReason

__all__ = ["replay", "Replayer", "ReplayResult", "ReplayConfig", "navigate", "check_settings", "EVENT_COLUMNS",
           "CALL_COLUMNS", "TOKEN_SOURCES", "TRIGGERS", "TokenSourceName", "Trigger", "CountingSummarizer",
           "SampledSummarizer"]


def replay(
    session: SessionLike,
    settings: CompactionSettings | Mapping[str, Any] | None = None,
    *,
    model: ModelInfo | None = None,
    context_window: int | None = None,
    summarizer: Summarizer | None = None,
    leaf_id: str | None = None,
    token_source: TokenSourceName = "calibrated",
    triggers: Trigger = "threshold",
    hooks: Hooks | None = None,
    seed: int = 0,
    progress: bool = False,
    stop_on_error: bool = False,
    sample: int = 0,
    strategy: StrategySpec = None,
) -> ReplayResult:
    """Replay the recorded path of ``session`` into a new session, compacting where Pi 0.87.1's agent
    loop would have (``docs/replay.md``).

    Args:
        session: a ``Session``, a replay result (its replayed session is replayed again) or a session
            file's path (:func:`pimem.as_session`).
        settings: the ``CompactionSettings`` to replay under, or a mapping of their fields (default Pi's).
        model: a ``ModelInfo``; default from the session's model via the table in
            ``pimem.core.settings_manager``.
        context_window: overrides the model's context window.
        summarizer: writes the summaries (default the offline ``ExtractiveSummarizer``).
        leaf_id: the leaf whose path is replayed (default the session's current leaf).
        token_source: ``"calibrated"``, ``"estimate"``, ``"chars"`` or ``"tiktoken"``.
        triggers: ``"threshold"`` (Pi's automatic checks), ``"recorded"`` (compact where the recording
            did, reason ``manual``) or ``"none"`` (measure only).
        hooks: Pi's ``before_compact`` / ``compact_failed`` hooks (``pimem.core.agent_session.Hooks``).
        seed: seeds the new session's ids, so that the same inputs give the same file byte for byte.
        progress: show a progress bar.
        stop_on_error: raise on a failing summarizer instead of recording a ``compact_failed`` event
            and going on.
        sample: numbers the draw of every summary request (``SummaryRequest.sample``): with a model at
            temperature > 0 behind a cache, ``sample=0, 1, …`` give distinct cached draws.
        strategy: the compaction strategy (a name such as ``"masking:keep_turns=5"``, a mapping or a
            :class:`~pimem.replays.strategies.CompactionStrategy`; default Pi 0.87.1).

    Settings that leave no room in the window raise :class:`~pimem.errors.ConfigurationError`
    (:func:`check_settings`).
    """
    original = as_session(session)
    if settings is None:
        settings = CompactionSettings()
    elif isinstance(settings, Mapping):
        fields = [f.name for f in dataclasses.fields(CompactionSettings)]
        unknown = [k for k in settings if k not in fields]
        if unknown:
            raise ArgumentTypeError(f"settings: no field {unknown[0]!r} (fields: {', '.join(fields)})")
        settings = CompactionSettings(**settings)
    elif not isinstance(settings, CompactionSettings):
        raise ArgumentTypeError(f"settings must be CompactionSettings, a mapping of their fields or None; "
                                f"got {type(settings).__name__}")
    if summarizer is None:
        summarizer = default_summarizer()
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
        raise ConfigurationError(f"sample must be a non-negative integer, not {sample!r}")
    if sample:
        summarizer = SampledSummarizer(summarizer, sample)
    config = ReplayConfig(settings=settings, summarizer=summarizer, model=model, context_window=context_window,
                          leaf_id=leaf_id, token_source=token_source, triggers=triggers, hooks=hooks, seed=seed,
                          stop_on_error=stop_on_error, progress=progress, strategy=strategy)
    return Replayer(original, config).run()


class Replayer:
    """One replay of a recorded path (``docs/replay.md``): the loop, its check points and compactions."""

    def __init__(self, original: Session, config: ReplayConfig) -> None:
        # settings that do not fit a given window fail before any work (warnings come with the result)
        check_settings(config.settings, config.window)
        self.config = config
        self.settings = config.settings
        self.model_arg = config.model
        self.window_arg = config.context_window
        self.summarizer = config.summarizer
        self.token_source = config.token_source
        self.triggers = config.triggers
        self.hooks = config.hooks
        self.turn = 0
        self.edit_ids: list[str] = []
        self.path = original.get_branch(config.leaf_id)
        # "as recorded": the strategy of the release that wrote the recorded compactions, when it shows
        self.release = recorded_release(self.path) if config.triggers == "recorded" and config.strategy is None else None
        self.strategy = get_strategy(self.release or config.strategy)
        self.new, self.rng = _seeded_session(original, config.seed)
        # Pi's generateId avoids the ids of the session it writes: the replayed one will hold the recorded
        # entries still to come, so the replay's own entries never take one of their ids
        self.new.reserved_ids = _RecordedIds(original)
        # The recording's context (walked once by the token source that reads it) and the replay's
        # projection, kept incrementally; estimates by message identity are shared (the replayed
        # entries hold the recorded message objects).
        self.tokens = make_token_source(config.token_source)
        require_message_objects(self.path)  # a clear error, before any walk reads a message
        est_cache = recording_token_cache(self.path)
        self.tokens.start(self.path, est_cache)
        self.rec: RecordedPath = self.tokens.recording()
        self.rep = ContextTracker(cache=est_cache, counter=self.tokens.counter())
        self.warnings: list[str] = []
        self.events = Rows(EventRow)  # about one row per recorded entry: held by column
        self.calls = Rows(CallRow)
        self.compactions: list[dict] = []
        self.leaf_at: list[Any] = []
        self.last_assistant: dict | None = None
        self.last_tool_results: list[dict] = []
        self.next_turn_checked = False  # the check before the next request was made (at a steering message)
        self.in_run = False
        self.overflow_attempted = False
        self.refused_requests = 0
        self.failed_turns = 0
        self.refusal_kept = False  # Pi's last assistant is a refusal kept in the context (a failed retry)
        self.failed_run = False  # a turn failed: the rest of its recorded run never happened
        self.completed = False  # the last run ended with a completed answer and no prompt came since
        self.unasked = 0  # recorded answers to a completed answer, which Pi 0.87.1 never asks for
        self.unasked_left_out = 0  # the recorded entries of their runs
        self.written: collections.Counter[str] = collections.Counter()  # entries the replay wrote, by kind
        self.left_out: list[Any] = []  # ids of the recorded entries of failed runs left out of the replayed session
        self._models: dict[Any, Any] = {}
        self.step = 0
        # The replay's clock (see predates): the compactions and context edits appended to the replayed branch so
        # far, and for each replayed assistant message (the only messages whose usage a check reads) how many
        # had been appended before it (one tuple, shared by the messages appended between two of them).
        self._written_before: tuple[int, int] = (0, 0)
        self._position: dict[int, tuple[int, int]] = {}
        self._checked_windows: set[Any] = set()
        self._thresholds: dict[Any, Any] = {}
        # the previous request: (its projected messages list, how many, their estimate, its tokens)
        self._prev_request: tuple[list[dict] | None, int, int, float] = (None, 0, 0, 0.0)
        if config.context_window is not None or config.model is not None:
            self.model_info()

    # -- measures ----------------------------------------------------------------------------------

    def model_info(self) -> Any:
        key: Any = None if self.model_arg is not None else (
            (self.rep.projection.model or {}).get("provider"), (self.rep.projection.model or {}).get("modelId"))
        try:
            hash(key)
        except TypeError:  # a provider or model id that is a list or an object (a damaged file)
            key = js_stringify(list(key))
        info = self._models.get(key)
        if info is None:
            info = resolve_model(self.model_arg, self.window_arg, self.rep.projection.model)
            self._models[key] = info
            self._check_window(info.context_window)
        return info

    def _check_window(self, window: int) -> None:
        """:func:`check_settings` once per distinct window (errors raise; warnings are recorded)."""
        if window in self._checked_windows:
            return
        self._checked_windows.add(window)
        for problem in check_settings(self.settings, window):
            self.warn(problem)
        try:
            problems = check_room(self.settings, window, self.tokens.overhead)
        except ConfigurationError as exc:
            fit = self.tokens.warning()
            if fit is None:
                raise
            # the overhead comes from a fit that is not to be trusted: the recorded usage is the
            # suspect, not the window
            raise ConfigurationError(
                f"the token calibration of this session cannot be trusted ({fit}); its overhead of "
                f"{self.tokens.overhead:,.0f} tokens leaves no room in the {window:,}-token window. Check the "
                f"recorded usage, or replay with token_source='chars' or 'tiktoken'") from exc
        for problem in problems:
            self.warn(problem)

    # -- events ------------------------------------------------------------------------------------

    def _row(self, **values: Any) -> EventRow:
        """An event row of the columns given (the others are missing: a check row holds 12 of the
        table's 30, and a replay writes about one per recorded entry)."""
        return self.events.append({"step": self.step,
                                   "entry_id": self.path[self.step].get("id") if self.step < len(self.path) else None,
                                   "leaf_id": self.new.leaf_id, **values})

    def threshold(self) -> float:
        return self.model_info().context_window - self.settings.reserve_tokens

    def warn(self, message: str) -> None:
        """Record a warning on the result and issue it (once per message)."""
        if message not in self.warnings:
            self.warnings.append(message)
            warnings.warn(message, ReplayWarning, stacklevel=4)

    def known_tokens(self, tokens: float, what: str) -> float:
        """``tokens``, or NaN with a warning when it is negative: no impossible count is reported."""
        if isinstance(tokens, (int, float)) and tokens < 0:
            self.warn(f"a negative {what} token count ({tokens:,.0f}) at step {self.step} was replaced by NaN")
            return float("nan")
        return tokens

    def check_point(self, check: str, reason: str, tokens: float, will_retry: bool = False) -> Any:
        window = self.model_info().context_window
        return CheckPoint(check=check, reason=reason, tokens=tokens, context_window=window,
                          threshold=window - self.settings.reserve_tokens, settings=self.settings,
                          tracker=self.rep, will_retry=will_retry)

    def check_row(self, check: str, tokens: float, note: str | None = None) -> EventRow:
        tokens = self.known_tokens(tokens, "check")
        window = self.model_info().context_window
        decision = bool(note is None and window > 0
                        and self.strategy.should_compact(self.check_point(check, "threshold", tokens)))
        threshold = self._thresholds.get(window)
        if threshold is None:  # one number per window, not one per row
            threshold = self._thresholds[window] = window - self.settings.reserve_tokens
        return self._row(kind="check", check=check, reason="threshold", context_tokens=tokens,
                         threshold=threshold, context_window=window,
                         should_compact=decision, fired=False, note=note)

    # -- check points ------------------------------------------------------------------------------

    def acting(self) -> bool:
        return self.triggers == "threshold"

    def predates(self, message: dict) -> bool:
        """Whether the replayed ``message`` was written before the latest compaction on the branch.

        Pi compares the message's ``timestamp`` with the compaction entry's, both from its live clock,
        so the comparison is the order in which they were written. A replay cannot compare the
        recorded timestamps: a recorded answer is stamped when its request started, earlier than the
        entry written before it (every assistant of the real Pi sessions in ``shared/datasets``), so
        a compaction stamped like that entry would seem to postdate the answer to the request sent
        after it. The replay compares the order of writing on the replayed branch instead.
        """
        before = self._position.get(id(message))
        return before is not None and before[0] < self._written_before[0]

    def edited_after(self, message: dict) -> bool:
        """Whether a ``context_edit`` was written after the replayed ``message`` (Pi's
        ``hasPostAssistantContextEdit``: the message's usage no longer describes the projection)."""
        before = self._position.get(id(message))
        return before is not None and before[1] < self._written_before[1]

    def check_next_turn(self) -> None:
        if not self.settings.enabled:
            return
        row = self.check_row("next_turn", self.tokens.next_turn_tokens(self.rep))
        if row["should_compact"] and self.acting():
            row["fired"] = self.run_compaction("threshold", False, "next_turn")

    def check_after_assistant(self, check: str, skip_aborted: bool) -> None:
        """``_checkCompaction`` (``agent_end`` and ``before_prompt``)."""
        message = self.last_assistant
        if message is None or not self.settings.enabled:
            return
        if skip_aborted and message.get("stopReason") == "aborted":
            return
        if self.predates(message):
            self.check_row(check, float("nan"), note="assistant predates the latest compaction")
            return
        info = self.model_info()
        window = info.context_window
        same_model = self.model_arg is not None or (
            message.get("provider") == (self.rep.projection.model or {}).get("provider"))
        overflow = same_model and (
            (message.get("stopReason") == "error" and is_context_overflow(message))
            or (self.tokens.silent_overflow and not self.edited_after(message) and is_context_overflow(message, window)))
        if overflow:
            decision = self.strategy.should_compact(self.check_point(check, "overflow", input_tokens(message)))
            row = self._row(kind="check", check=check, reason="overflow", context_tokens=input_tokens(message),
                            threshold=window - self.settings.reserve_tokens, context_window=window,
                            should_compact=bool(decision), fired=False)
            if self.acting() and decision:
                row["fired"] = self.run_compaction("overflow", False, check)
            return
        tokens, note = self.tokens.check_tokens(self.rep, message, self.predates)
        row = self.check_row(check, tokens, note)
        if row["should_compact"] and self.acting():
            row["fired"] = self.run_compaction("threshold", False, check)

    def send_request(self, message: dict) -> bool:
        """The request for the recorded response ``message``, as the provider would take it.

        A request larger than the window is refused with an overflow error, which ends the run;
        Pi then compacts (reason ``overflow``, will retry) and sends it again, once per run
        (``docs/replay.md``, ``before_call``). Returns False when the turn failed: the request was
        refused and compacting did not make it fit. A ``turn_failed`` event says why.
        """
        window = self.model_info().context_window
        if window <= 0:
            return True
        while True:
            tokens = self.call_tokens(message)
            if not tokens > window:
                return True
            failure = self.recover_from_overflow(message, tokens, window)
            if failure is not None:
                self.failed_turns += 1
                self._row(kind="turn_failed", check="before_call", reason="overflow", context_tokens=tokens,
                          context_window=window, threshold=window - self.settings.reserve_tokens, fired=False,
                          note=failure, error=_refusal(tokens, window))
                return False

    def recover_from_overflow(self, message: dict, tokens: float, window: int) -> str | None:
        """Pi's ``_checkCompaction`` for a refused request: None after a compaction (retry), else why not.

        The refusal is written as Pi writes it: an assistant message with the provider's overflow
        error, omitted from the context by a ``context_edit`` before the recovery compaction.
        """
        decision = self.strategy.should_compact(self.check_point("before_call", "overflow", tokens, True))
        self.refused_requests += 1
        row = self._row(kind="check", check="before_call", reason="overflow", context_tokens=tokens,
                        threshold=window - self.settings.reserve_tokens, context_window=window,
                        should_compact=bool(decision), fired=False, will_retry=True,
                        note="refused by the provider: request larger than the window")
        anchor_ts = self.rep.path[-1].get("timestamp") if self.rep.path else None
        refusal = self.new.append_message(_refused_attempt(message, tokens, window, anchor_ts), timestamp=anchor_ts)
        self._append_written(refusal)
        if not self.settings.enabled:
            return "compaction is disabled"
        if not self.acting():
            return f"the replay does not compact on its own (triggers={self.triggers})"
        if not decision:
            return f"the strategy {self.strategy.spec()} does not compact on overflow"
        if self.overflow_attempted:
            self.overflow_failed("before_call")
            self.refusal_kept = True
            return "overflow recovery already attempted in this run"
        self.overflow_attempted = True
        omitted = self.new.append_context_edit(refusal["id"], None, timestamp=anchor_ts)
        self._append_written(omitted)
        row["fired"] = self.run_compaction("overflow", True, "before_call")
        if row["fired"]:
            return None
        last = self.events[-1]
        if last["kind"] == "compact_skipped":
            return "nothing to compact"
        return f"overflow compaction {last.get('note') or 'failed'}: {last.get('error') or ''}".rstrip(": ")

    def overflow_failed(self, check: str) -> None:
        """Pi's failure event when an overflow recurs after its one compact-and-retry attempt."""
        message_text = ("Context overflow recovery failed after one compact-and-retry attempt. "
                        "Try reducing context or switching to a larger-context model.")
        self._row(kind="compact_failed", check=check, reason="overflow", error=message_text,
                  fired=False, note="failed", from_hook=False)
        if self.hooks is not None:
            self.hooks.emit("compact_failed", CompactFailedEvent(
                reason="overflow", error_message=message_text, aborted=False, will_retry=False,
                from_extension=False))

    def call_tokens(self, message: dict) -> float:
        """The size of the request for the recorded response ``message`` (per token source)."""
        return self.tokens.call_tokens(message, self.rec, self.rep)

    def cached_prefix(self, tokens: float) -> float:
        """The tokens of this request that repeat the previous request's prefix (a prompt cache can
        read them): system prompt and tools (the calibration's overhead) plus the leading projected
        messages both requests share, converted to the request's units by its own rate. A
        compaction or a context edit changes the projected messages from its position on, so the
        prefix stops there. Capped by both requests' sizes; 0 for the first request."""
        messages = self.rep.projection.messages
        total = self.rep.total_estimate
        prev, prev_count, prev_total, prev_tokens = self._prev_request
        # The tracker only ever extends its message list; a compaction or an edit builds a new
        # one. So the list object and its length stand for the previous request's messages,
        # and while it is the same list they are all shared (their estimate is the running sum).
        self._prev_request = (messages, len(messages), total, tokens)
        if prev is None or not (tokens == tokens) or not (prev_tokens == prev_tokens):
            return 0.0
        if prev is messages:
            shared = prev_total
        else:
            est = self.rep.cache.estimate
            shared = 0
            for a, b in zip(itertools.islice(prev, prev_count), messages):
                if a is not b and a != b:
                    break
                shared += est(a)
        overhead = self.tokens.overhead
        variable = max(tokens - overhead, 0.0)
        prefix = min(overhead, tokens) + (variable * shared / total if total else 0.0)
        return float(min(prefix, tokens, prev_tokens))

    # -- compaction --------------------------------------------------------------------------------

    def run_compaction(self, reason: CompactionReason, will_retry: bool, check: str, recorded: dict | None = None) -> bool:
        """Pi's ``_runAutoCompaction`` (``compact()`` for ``manual``) via ``pimem.core.agent_session.run_compaction``."""
        extra: dict[str, Any] = {}
        if recorded is not None:
            extra = {"recorded_first_kept_entry_id": recorded.get("firstKeptEntryId"),
                     "recorded_tokens_before": recorded.get("tokensBefore")}
        elif self.events and self.events[-1].get("kind") == "check":
            # the size the token source gave the check that fired: beside Pi's tokensBefore, which an
            # open-loop replay reads from the uncompacted recording's usage (docs/replay.md)
            extra = {"context_tokens": self.events[-1].get("context_tokens")}
        info = self.model_info()
        branch = self.rep.path
        leaf = self.new.leaf_id
        window = dict(context_window=info.context_window,
                      threshold=info.context_window - self.settings.reserve_tokens)
        # The tracker holds the replayed branch: its preparation and system message spare
        # run_compaction two walks of the branch.
        try:
            preparation = self.strategy.prepare(self.rep, self.settings)
        except JavaScriptTypeError as exc:
            if reason == "manual" or self.config.stop_on_error:
                raise
            # Pi's _runAutoCompaction prepares inside its try: the error is caught before the
            # compaction starts (no event, no message) and the agent goes on.
            self._row(kind="compact_failed", check=check, reason=reason, error=str(exc), fired=False,
                      will_retry=will_retry, note="failed", leaf_id=self.new.leaf_id, **window, **extra)
            return False
        if reason != "manual" and preparation is None:
            # Pi's automatic compaction returns at once when prepareCompaction finds nothing
            # (no hook, no event).
            self._row(kind="compact_skipped", check=check, reason=reason, note="nothing to compact",
                      **window, **extra)
            return False
        anchor_ts = branch[-1].get("timestamp") if branch else None
        counting = CountingSummarizer(self.summarizer)
        start = time.perf_counter()
        outcome = run_compaction(self.new, self.settings, counting, model=info, reason=reason, hooks=self.hooks,
                                 thinking_level=self.rep.projection.thinking_level, will_retry=will_retry,
                                 timestamp=anchor_ts, preparation=preparation,
                                 # a copy only for hooks, which may keep it (it costs O(path))
                                 path_entries=list(self.rep.path) if self.hooks is not None else self.rep.path,
                                 system_message=self.rep.current_system_message(),
                                 compactor=self.strategy.summarize)
        latency = time.perf_counter() - start
        usage_cols = dict(summary_calls=counting.calls, request_tokens=counting.request_tokens,
                          response_tokens=counting.response_tokens, latency_s=latency)
        if outcome.status == "skipped":
            self._row(kind="compact_skipped", check=check, reason=reason, note="nothing to compact",
                      **window, **extra)
            return False
        if outcome.status != "compacted":
            if self.config.stop_on_error and outcome.status == "failed":
                raise SummarizationError(outcome.error_message)
            prep = outcome.preparation
            prep_cols = {} if prep is None else dict(
                first_kept_entry_id=prep.first_kept_entry_id, tokens_before=prep.tokens_before,
                messages_summarized=len(prep.messages_to_summarize),
                turn_prefix_messages=len(prep.turn_prefix_messages), split_turn=bool(prep.is_split_turn))
            self._row(kind="compact_failed", check=check, reason=reason, error=outcome.error_message,
                      fired=False, will_retry=will_retry, note=outcome.status, from_hook=outcome.from_extension,
                      leaf_id=leaf, **prep_cols, **usage_cols, **window, **extra)
            return False
        entry, preparation = outcome.entry, outcome.preparation
        assert entry is not None and preparation is not None  # a compacted outcome carries both
        self._append_written(entry)
        self.compactions.append(entry)
        summary = entry.get("summary") or ""
        self._row(kind="compaction", check=check, reason=reason, fired=True, will_retry=will_retry,
                  leaf_id=leaf, compaction_id=entry.get("id"), first_kept_entry_id=entry.get("firstKeptEntryId"),
                  messages_summarized=len(preparation.messages_to_summarize),
                  turn_prefix_messages=len(preparation.turn_prefix_messages),
                  split_turn=bool(preparation.is_split_turn), tokens_before=entry.get("tokensBefore"),
                  tokens_after=self.rep.total_estimate, summary_tokens=math.ceil(utf16_len(summary) / 4),
                  from_hook=outcome.from_extension, **usage_cols, **window, **extra)
        return True

    def apply_context_edits(self, entry: dict) -> None:
        """Append the strategy's context edits before the assistant call of ``entry``."""
        if not self.acting():
            return
        edits = self.strategy.context_edits(TurnView(turn=self.turn, context_window=self.model_info().context_window,
                                                     settings=self.settings, tracker=self.rep))
        if not edits:
            return
        before = self.rep.total_estimate
        anchor_ts = self.rep.path[-1].get("timestamp") if self.rep.path else entry.get("timestamp")
        for edit in edits:
            appended = self.new.append_context_edit(edit.target_id, edit.replacement, timestamp=anchor_ts)
            self._append_written(appended)
            self.edit_ids.append(appended["id"])
        self._row(kind="context_edit", check="turn", reason="strategy", fired=True, tokens_before=before,
                  tokens_after=self.rep.total_estimate, context_edits=len(edits),
                  context_window=self.model_info().context_window)

    # -- walk --------------------------------------------------------------------------------------

    def _append_written(self, entry: dict) -> None:
        """Track an entry the replay wrote itself (a compaction, a refusal, a context edit)."""
        self.written[entry["type"] if entry["type"] != "message" else "refusal"] += 1
        self._append_replayed(entry)

    def _append_replayed(self, entry: dict) -> None:
        """Track an entry just appended to the new session."""
        etype = entry.get("type")
        if etype == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                self._position[id(message)] = self._written_before
        elif etype == "compaction":
            compactions, edits = self._written_before
            self._written_before = (compactions + 1, edits)
        elif etype == "context_edit":
            compactions, edits = self._written_before
            self._written_before = (compactions, edits + 1)
        self.rep.append(entry)

    def append(self, entry: dict) -> None:
        """Append a recorded entry to the new session: the recorded dict itself where its parent is
        the new leaf already (nearly every entry: a replay holds no second copy of the path), else a
        copy with the new leaf as its parent."""
        parent = self.new.leaf_id
        if entry.get("parentId") != parent or parent is None and "parentId" not in entry:
            entry = dict(entry)
            entry["parentId"] = parent
        self.new.append_entry(entry)
        self._append_replayed(entry)

    def run(self) -> ReplayResult:
        """Walk the recorded path once; the result of the replay."""
        path = self.path
        problem = self.tokens.warning()
        if problem:
            self.warn(problem)
        if self.release:
            self.warn(f"the recorded compactions were written by Pi {self.release.removeprefix('pi-')} (no file lists, "
                      f"the old checkpoint summaries): replayed as recorded with the strategy {self.release}")
        iterator: Iterable[int] = range(len(path))
        if self.config.progress:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, total=len(path), desc="replay", leave=False)
        for i in iterator:
            self.step = i
            entry = path[i]
            etype = entry.get("type")
            if etype == "compaction":
                self.rec.append(entry)
                if self.triggers == "recorded":
                    self.run_compaction("manual", False, "recorded", recorded=entry)
                self.leaf_at.append(self.new.leaf_id)
                continue
            if etype == "label" and self.new.get_entry(entry.get("targetId")) is None:
                self.rec.append(entry)
                self.leaf_at.append(self.new.leaf_id)
                continue
            message: Any = entry.get("message") if etype == "message" else None
            role = message.get("role") if message else None
            if (etype == "message" and role not in ("assistant", "toolResult")) or etype in ("custom_message",
                                                                                           "branch_summary"):
                self.completed = False  # a prompt, a bash run or an extension's message: Pi may be asked again
            if role == "assistant" and self.completed and not self.failed_run:
                # Pi 0.87.1 asks for nothing after a completed answer until the next prompt
                # (agent.continue cannot continue from it): this recorded answer, and its run, never happen
                self.unasked += 1
                self.failed_run = True
            if self.failed_run and role in ("assistant", "toolResult"):
                # Pi's run ended with the refusal: its answer, tool results and later calls never happened
                self.rec.append(entry)
                self.left_out.append(entry.get("id"))
                self.unasked_left_out += self.completed
                self.leaf_at.append(self.new.leaf_id)
                continue
            if role == "user":
                self.failed_run = False
            if role == "assistant":
                self.apply_context_edits(entry)
                if self.last_tool_results and self.in_run and not self.next_turn_checked:
                    self.check_next_turn()
                accepted = self.send_request(message)
                self.tokens.record_call(message, self.rec, self.rep)
                tokens = self.known_tokens(self.call_tokens(message), "call")
                self.calls.append({"step": i, "entry_id": entry.get("id"), "context_tokens": tokens,
                                   "recorded_tokens": input_tokens(message),
                                   # a refused request caches nothing: the next one reads what the last answered wrote
                                   "prefix_tokens": self.cached_prefix(tokens) if accepted else 0.0,
                                   "output_tokens": output_tokens(message),
                                   "timestamp": timestamp_ms(message.get("timestamp", entry.get("timestamp"))),
                                   "refused": not accepted})
                if not accepted:
                    self.rec.append(entry)
                    self.left_out.append(entry.get("id"))
                    self.failed_run = True
                    self.in_run = False
                    self.last_tool_results = []
                    self.leaf_at.append(self.new.leaf_id)
                    continue
            elif role == "user":
                if self.in_run and self.last_tool_results:
                    # a steering message inside the run: Pi checks once before the next request,
                    # before the steering messages are appended
                    if not self.next_turn_checked:
                        self.check_next_turn()
                        self.next_turn_checked = True
                elif self.refusal_kept:
                    self.overflow_failed("before_prompt")  # Pi's last assistant is the kept refusal
                    self.in_run = True
                elif self.last_assistant is not None:
                    self.check_after_assistant("before_prompt", skip_aborted=False)
                    self.in_run = True
                else:
                    self.in_run = True
                self.overflow_attempted = False  # Pi resets it when a user message starts
            self.rec.append(entry)
            self.append(entry)
            if role == "assistant":
                self.turn += 1
                if accepted:  # after a failed turn Pi's last assistant is the refusal (or the one before)
                    self.last_assistant = message
                    self.refusal_kept = False
                self.last_tool_results = []
                self.next_turn_checked = False
                if accepted and message.get("stopReason") not in ("error", "length"):
                    self.overflow_attempted = False
                ends_run = message.get("stopReason") in ("error", "aborted") or not has_tool_calls(message)
                if ends_run:
                    self.in_run = False
                    self.completed = accepted and message.get("stopReason") == "stop"
                    if accepted:  # a failed turn's agent_end check was its overflow recovery
                        self.check_after_assistant("agent_end", skip_aborted=True)
                else:
                    self.in_run = True
            elif role == "toolResult":
                self.last_tool_results.append(message)
            self.leaf_at.append(self.new.leaf_id)
        failed_recorded = [e for e in self.events.where("kind", "compact_failed") if e.get("check") == "recorded"]
        if failed_recorded:
            self.warn(f"{len(failed_recorded)} recorded compaction(s) could not be made again with the strategy "
                      f"{self.strategy.spec()} ({failed_recorded[0].get('error')}); replay the compactions of another "
                      f"Pi release with its strategy: --strategy pi-0.13.2 or pi-1.6.0")
        if self.unasked:
            self.warn(f"{self.unasked:,} recorded answer(s) follow a completed answer with no prompt between (an older "
                      f"Pi's continuation): Pi 0.87.1 asks for none, so they and their runs are left out")
        if self.refused_requests:
            left_out = len(self.left_out) - self.unasked_left_out
            self.warn(_refusal_warning(self.refused_requests, self.failed_turns, left_out,
                                       self.model_info().context_window))
        self.new.reserved_ids = ()  # every recorded entry is in (or left out): the recording is not held
        return ReplayResult(  # its tables are made from the rows when first read
            session=self.new, compactions=self.compactions, settings=self.settings,
            token_source=self.token_source, triggers=self.triggers,
            context_window=self.model_info().context_window, _leaf_at=self.leaf_at,
            calibration_slope=self.tokens.calibration.slope, calibration=self.tokens.calibration,
            floored_calls=self.tokens.floored_calls, left_out_ids=self.left_out, written_entries=dict(self.written),
            warnings=self.warnings, strategy=self.strategy.spec(), context_edit_ids=self.edit_ids,
            _event_rows=self.events, _call_rows=self.calls,
        )


def _refused_attempt(message: dict, tokens: float, window: int, timestamp: Any) -> dict:
    """The assistant message Pi records for a request the provider refused as too long."""
    ms = timestamp_ms(timestamp)
    return {
        "role": "assistant", "content": [], "api": message.get("api"), "provider": message.get("provider"),
        "model": message.get("model"),
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "error",
        "errorMessage": f"prompt is too long: {math.ceil(tokens)} tokens > {window} maximum",
        "timestamp": ms if ms is not None else message.get("timestamp"),
    }


def _refusal(tokens: float, window: int) -> str:
    return (f"the provider would refuse this request: {tokens:,.0f} tokens do not fit the {window:,}-token "
            f"context window")


def _refusal_warning(refused: int, failed: int, left_out: int, window: int) -> str:
    text = (f"{refused:,} request(s) larger than the {window:,}-token context window would have been refused by "
            f"the provider")
    if not failed:
        return text + "; an overflow compaction made each fit on its retry"
    return (text + f"; {failed:,} turn(s) failed (compacting did not make the request fit; see the turn_failed "
            f"events): each failed run ends at its refusal, as Pi's does, so {left_out:,} recorded entries of those "
            f"runs are left out, and the replay goes on at the next recorded prompt")


class _RecordedIds:
    """The recorded session's entry ids as a container (its own index, no copy)."""

    __slots__ = ("session",)

    def __init__(self, session: Any) -> None:
        self.session = session

    def __contains__(self, entry_id: object) -> bool:
        return self.session.get_entry(entry_id) is not None


def _seeded_session(original: Any, seed: int) -> tuple[Any, random.Random]:
    header = original.header or {}
    # bytes: the same seed as the str for every valid id, and no failure on a lone surrogate
    rng = random.Random(f"pimem-replay:{seed}:{header.get('id')}".encode("utf-8", "surrogatepass"))
    # session_id=None: Pi's UUIDv7 for the header timestamp, random bits from the seeded rng
    new = sessions.Session.new(header.get("cwd", ""), session_id=None, timestamp=header.get("timestamp"), rng=rng)
    return new, rng


class CountingSummarizer:
    """Wraps a summarizer to count calls and the tokens its responses report."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.request_tokens = 0.0
        self.response_tokens = 0.0
        self.model = getattr(inner, "model", "")

    def complete(self, request: Any) -> Any:
        self.calls += 1
        response = self.inner.complete(request)
        usage = getattr(response, "usage", None) or {}
        self.request_tokens += (usage.get("input") or 0) + (usage.get("cacheRead") or 0) + (usage.get("cacheWrite") or 0)
        self.response_tokens += usage.get("output") or 0
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SampledSummarizer:
    """Numbers every request as draw ``sample`` before passing it on (caches key on it)."""

    def __init__(self, inner: Any, sample: int) -> None:
        self.inner = inner
        self.sample = sample
        self.model = getattr(inner, "model", "")

    def complete(self, request: Any) -> Any:
        return self.inner.complete(dataclasses.replace(request, sample=self.sample))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
