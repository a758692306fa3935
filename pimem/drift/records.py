"""Each compaction with what it replaced, what the agent still saw, and what the recording did next.

A :class:`CompactionRecord` splits the active path around one compaction entry ``C``:

========== ========================================================================================
``span``   the messages ``C`` summarized (history and split-turn prefix), as
           :func:`~pimem.sessions.compactions.compaction_spans` finds them (Pi's projection before ``C``)
``kept``   the kept tail: the messages after the summary in the context right after ``C`` (entries
           from ``firstKeptEntryId`` up to ``C``). The agent still sees them, so a fact they show
           needs no summary, and nothing copied from them is summary content
``later``  the messages of the entries after ``C`` on the path, to the leaf (``horizon="end"``) or
           to the next compaction (``horizon="next"``): what the recording did next
========== ========================================================================================

:func:`resummarize` writes new summaries for the *same* compactions: for each recorded compaction it
prepares exactly the span Pi summarized (the recorded ``firstKeptEntryId``; a split turn when the
first kept entry does not start a turn), sends Pi's requests to any summarizer, with the previous
summary being that summarizer's own previous answer (a chain, as Pi would build it), and appends
the file blocks as ``compact()`` does. Every source is then measured on identical spans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pimem.core.compaction.compaction import (
    CompactionPreparation,
    CompactionSettings,
    build_history_prompt,
    build_turn_prefix_prompt,
    extract_file_operations,
    find_projected_turn_start_index,
    get_messages_from_projected_entries_for_compaction,
    is_projected_turn_start,
)
from pimem.core.compaction.utils import (
    FileOperations,
    compute_file_lists,
    extract_file_ops_from_messages,
    format_file_operations,
)
from pimem.core.llm import Summarizer, SummaryRequest
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.core.incremental.paths import build_session_path, build_session_projection
from pimem.core.session_manager import (
    is_walked_path,
    session_entry_to_context_messages,
    session_entry_to_context_messages_of,
)
from pimem.errors import ConfigurationError, EntryNotFoundError, SummarizationError
from pimem.replays.tokens import partial_recording
from pimem.sessions.compactions import compaction_spans, projection_after
from pimem.sessions.spans import first_kept_index
from pimem.sessions.session import Session
from pimem.sessions.load import session_or_entries
from pimem.text.sections import summarizer_text
from pimem.text.messages import message_text

__all__ = ["CompactionRecord", "PathMessages", "compaction_records", "resummarize", "resummarized_session",
           "Resummarized", "source_text"]


class PathMessages:
    """The messages of every entry of an active path, in order, shared by the records of that path.

    ``messages``: ``(entry_id, message)`` pairs; ``cache``: derived look-up structures that records
    of the same path share (built once, by :mod:`pimem.drift.needed`).
    """

    def __init__(self, messages: list[tuple[str | None, dict]]) -> None:
        self.messages = messages
        self.cache: dict[Any, Any] = {}


@dataclass
class CompactionRecord:
    """One compaction on the active path with its span, kept tail and later trajectory.

    ``later`` is ``path.messages[later_start:later_end]``. ``span_in_file`` is False when the span is
    not in the file at all (a transcript that starts mid-conversation at this compaction): nothing its
    summary says can be checked.
    """

    index: int
    entry: dict
    span: list[tuple[str | None, dict]]
    kept: list[tuple[str | None, dict]]
    later: list[tuple[str | None, dict]]
    previous_summary: str | None
    read_files: list[str]
    modified_files: list[str]
    path_position: int
    notes: list[str] = field(default_factory=list)
    path: PathMessages | None = None
    later_start: int = 0
    span_in_file: bool = True

    @property
    def summary(self) -> str:
        """The stored summary (with Pi's file blocks)."""
        return str(self.entry.get("summary", ""))

    @property
    def written(self) -> str:
        """What the summarizer wrote (no file blocks)."""
        return summarizer_text(self.summary)

    def with_summary(self, summary: str) -> CompactionRecord:
        """The same record with another stored summary (same span, tail and trajectory)."""
        entry = dict(self.entry)
        entry["summary"] = summary
        return CompactionRecord(self.index, entry, self.span, self.kept, self.later, self.previous_summary,
                                self.read_files, self.modified_files, self.path_position, list(self.notes),
                                self.path, self.later_start, self.span_in_file)


def entry_messages(entry: dict) -> list[dict]:
    """The non-system context messages ``entry`` contributes (none for a compaction)."""
    if entry.get("type") == "compaction":
        return []
    return [m for m in session_entry_to_context_messages(entry) if m.get("role") != "system"]


def compaction_records(
    result_or_session: Any, *, leaf_id: str | None = None, horizon: str = "end", spans: Sequence[Any] | None = None
) -> list[CompactionRecord]:
    """The compactions on the active path, each split into span, kept tail and later trajectory.

    ``spans``: the path's :func:`~pimem.sessions.compactions.compaction_spans`, when already computed.
    """
    if horizon not in ("end", "next"):
        raise ConfigurationError(f"horizon must be 'end' or 'next', not {horizon!r}")
    source = session_or_entries(result_or_session)
    path = build_session_path(source, leaf_id)
    position = {id(e): i for i, e in enumerate(path)}
    shared = PathMessages([])
    first_message: list[int] = []  # index into shared.messages of each path entry's first message
    for e, brought in zip(path, session_entry_to_context_messages_of(path).per_entry()):
        first_message.append(len(shared.messages))
        if e.get("type") != "compaction":  # entry_messages of each entry
            shared.messages.extend((e.get("id"), m) for m in brought if m.get("role") != "system")
    records: list[CompactionRecord] = []
    partial: str | None = None  # why the recording starts mid-conversation ("" when it does not), once
    walked = is_walked_path(path)
    injected = {e.get("id") for e in path if isinstance(e.get("source"), dict) and e["source"].get("isMeta")}
    for span in spans if spans is not None else compaction_spans(source, leaf_id=leaf_id):
        pos = position[id(span.entry)]
        kept: list[tuple[str | None, dict]] = []
        for pe in projection_after(span, path, pos, walked).entries:
            src = pe.source_entry
            if src.get("type") == "compaction":
                continue
            kept.extend((src.get("id"), m) for m in pe.messages if m.get("role") != "system")
        start = first_message[pos + 1] if pos + 1 < len(path) else len(shared.messages)
        end = len(shared.messages)
        if horizon == "next":
            nxt = next((i for i in range(pos + 1, len(path)) if path[i].get("type") == "compaction"), None)
            if nxt is not None:
                end = first_message[nxt]
        later = shared.messages[start:end]
        previous = str(span.previous.get("summary", "")) if span.previous is not None else None
        notes = list(span.notes)
        span_in_file = True
        if span.previous is None:
            if partial is None:
                partial = partial_recording(path) or ""
            if partial and not span.messages:
                span_in_file = False
                notes.append(f"the summarized span is not in the file ({partial}): nothing the summary says can be "
                             "checked, so faithfulness, recall_faithful and score are left out")
            elif partial:
                notes.append(f"the summarized span starts before the file ({partial}): what the summary says of the "
                             "turns before it counts as unsupported, so faithfulness, recall_faithful and score are "
                             "lower bounds")
        if not later:
            notes.append("nothing follows this compaction on the path: no later trajectory to ground measures in")
        read_files, modified_files = _with_other_agents_files(span.messages, span.read_files, span.modified_files)
        messages = [(eid, _marked(m) if eid in injected else m) for eid, m in span.messages]
        records.append(CompactionRecord(span.index, span.entry, messages, kept, later, previous,
                                        read_files, modified_files, pos, notes, shared, start, span_in_file))
    return records


# The file tools of other agents' imported sessions (Claude Code): name → (Pi's kind, argument naming the file).
# Pi's own are ``read`` / ``write`` / ``edit`` with ``path``, which Pi's file operations already count.
OTHER_AGENT_FILE_TOOLS: dict[str, tuple[str, str]] = {
    "Read": ("read", "file_path"), "Write": ("written", "file_path"), "Edit": ("edited", "file_path"),
    "MultiEdit": ("edited", "file_path"), "NotebookEdit": ("edited", "notebook_path"),
}


def _with_other_agents_files(messages: Sequence[tuple[str | None, dict]], read_files: Sequence[str],
                             modified_files: Sequence[str]) -> tuple[list[str], list[str]]:
    """Pi's file lists of a span with the files that other agents' file tools (:data:`OTHER_AGENT_FILE_TOOLS`)
    read and wrote added: an imported Claude Code session writes with ``Write`` / ``Edit``, which Pi's
    lists do not see. A Pi session's lists come back unchanged."""
    ops = FileOperations(set(read_files), set(), set(modified_files))
    found = False
    for _, m in messages:
        if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        for block in m["content"]:
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            tool = OTHER_AGENT_FILE_TOOLS.get(str(block.get("name")))
            args = block.get("arguments")
            if tool is not None and isinstance(args, dict) and isinstance(args.get(tool[1]), str):
                getattr(ops, tool[0]).add(args[tool[1]])
                found = True
    if not found:
        return list(read_files), list(modified_files)
    read_only, modified = compute_file_lists(ops)
    return list(read_only), list(modified)


def _marked(message: dict) -> dict:
    """A user message that an agent injected (a skill's text, a slash command's expansion: Claude Code's
    ``isMeta`` records) marked as such, so that it is not read as the user's own words."""
    return {**message, "injected": True} if message.get("role") == "user" else message


# --------------------------------------------------------------------------- text views of messages


def source_text(message: dict, *, results: bool = True, thinking: bool = True) -> str:
    """The text of one message the measures read: user / assistant text, thinking, tool-call arguments
    (every string value, one per line), bash commands, and (with ``results``) tool results and bash
    output (:func:`pimem.text.messages.message_text` with these options)."""
    return message_text(message, separator="\n", thinking="" if thinking else None, tool_calls="strings",
                        images=False, results=results, command_prefix="")


# --------------------------------------------------------------------------- new summaries, same spans


@dataclass
class Resummarized:
    """Summaries a summarizer wrote for the recorded compactions (``None`` where it failed)."""

    summaries: list[str | None]
    errors: list[str | None]
    max_tokens: list[int | None]
    entries: list[dict | None] = field(default_factory=list)  # the new compaction entries


def _preparation_at(path_before: Sequence[dict], first_kept_id: Any, previous_summary: str | None,
                    settings: Any, compaction_id: Any = None) -> Any:
    """Pi's preparation for a compaction whose first kept entry is known (no cut-point search).

    A first kept id equal to the compaction's own id (an imported compaction that kept nothing)
    summarizes everything after the previous compaction."""
    projection = build_session_projection(list(path_before))
    entries = projection.entries
    sources = [e.source_entry for e in entries]
    prev_index = 0 if entries and sources[0].get("type") == "compaction" and entries[0].messages else -1
    start = 1 if prev_index == 0 else 0
    cut = first_kept_index(sources, start, first_kept_id, compaction_id)
    if cut is None:
        raise EntryNotFoundError(f"first kept entry {first_kept_id!r} is not on the projected path before the compaction")
    turn_start = -1
    if cut < len(entries) and not is_projected_turn_start(entries[cut]):
        turn_start = find_projected_turn_start_index(entries, cut, start)
    split = turn_start != -1
    history_end = turn_start if split else cut
    to_summarize = get_messages_from_projected_entries_for_compaction(projection, start, history_end)
    prefix = get_messages_from_projected_entries_for_compaction(projection, history_end, cut) if split else []
    file_ops = extract_file_operations(to_summarize, sources, prev_index)
    extract_file_ops_from_messages(prefix, file_ops)
    return CompactionPreparation(first_kept_entry_id=first_kept_id, messages_to_summarize=to_summarize,
                                 turn_prefix_messages=prefix, is_split_turn=split, tokens_before=None,
                                 previous_summary=previous_summary, file_ops=file_ops, settings=settings)


def _ask(summarizer: Summarizer, kind: str, prompt: str, max_tokens: int | None) -> str:
    request = SummaryRequest(kind=kind, system_prompt=SUMMARIZATION_SYSTEM_PROMPT, prompt=prompt,  # type: ignore[arg-type]
                             max_tokens=max_tokens, model=str(getattr(summarizer, "model", "") or ""))
    response = summarizer.complete(request)
    if response.stop_reason in ("error", "aborted", "length") or response.called_tool:
        why = response.error_message or response.stop_reason
        raise SummarizationError(f"{kind} summary failed: {why}")
    return response.text


def resummarize(
    session: Any,
    summarizer: Summarizer,
    *,
    max_tokens: int | Sequence[int | None] | None = None,
    settings: Any = None,
    leaf_id: str | None = None,
) -> Resummarized:
    """New summaries of the recorded compactions' exact spans by ``summarizer`` (see module docs).

    ``max_tokens``: the budget of each compaction's summary (one value, one per compaction, or None
    for Pi's own ``0.8 × reserveTokens`` of ``settings``); a split turn gives 8/13 of it to the
    history and 5/13 to the turn prefix, Pi's 0.8 : 0.5. A request that fails (error, length stop,
    tool call, exception) leaves ``None`` and its message in ``errors``; the chain goes on from the
    last summary that succeeded.
    """
    settings = settings or CompactionSettings()
    source = session_or_entries(session)
    path = build_session_path(source, leaf_id)
    compactions = [i for i, e in enumerate(path) if e.get("type") == "compaction"]
    if isinstance(max_tokens, Sequence) and not isinstance(max_tokens, str):
        budgets = list(max_tokens)
        if len(budgets) != len(compactions):
            raise ConfigurationError(f"max_tokens has {len(budgets)} values for {len(compactions)} compactions")
    else:
        default = max_tokens if max_tokens is not None else math.floor(0.8 * settings.reserve_tokens)
        budgets = [default] * len(compactions)
    out = Resummarized([], [], budgets)
    out.entries = []
    replaced: dict[int, dict] = {}
    last_summary: str | None = None
    for n, pos in enumerate(compactions):
        entry = path[pos]
        before = [replaced.get(i, e) for i, e in enumerate(path[:pos])]
        try:
            prep = _preparation_at(before, entry.get("firstKeptEntryId"), None, settings, entry.get("id"))
            has_previous = any(e.get("type") == "compaction" for e in before)
            prep.previous_summary = last_summary if has_previous else None
            budget = budgets[n]
            if prep.is_split_turn and prep.turn_prefix_messages:
                history_budget = None if budget is None else max(1, budget * 8 // 13)
                prefix_budget = None if budget is None else max(1, budget - budget * 8 // 13)
                history = prep.previous_summary if prep.previous_summary is not None else "No prior history."
                if prep.messages_to_summarize:
                    history = _ask(summarizer, "history", build_history_prompt(
                        prep.messages_to_summarize, None, prep.previous_summary), history_budget)
                prefix = _ask(summarizer, "turn_prefix", build_turn_prefix_prompt(prep.turn_prefix_messages),
                              prefix_budget)
                text = f"{history}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix}"
            else:
                text = _ask(summarizer, "history", build_history_prompt(
                    prep.messages_to_summarize, None, prep.previous_summary), budget)
            read_files, modified_files = compute_file_lists(prep.file_ops)
            stored = text + format_file_operations(read_files, modified_files)
            new_entry = dict(entry)
            new_entry["summary"] = stored
            new_entry["details"] = {"readFiles": read_files, "modifiedFiles": modified_files}
            new_entry.pop("fromHook", None)
            replaced[pos] = new_entry
            out.entries.append(new_entry)
            last_summary = stored
            out.summaries.append(stored)
            out.errors.append(None)
        except Exception as exc:  # noqa: BLE001 - one failed compaction is recorded, the rest still run
            out.summaries.append(None)
            out.errors.append(f"{type(exc).__name__}: {exc}")
            out.entries.append(None)
    return out


def resummarized_session(session: Any, summarizer: Summarizer, **kwargs: Any) -> Any:
    """A copy of ``session`` whose compactions on the active path hold ``summarizer``'s summaries of
    the same spans (:func:`resummarize`; same entry ids and cut points). Write it with ``.write(path)``
    to keep another model's summaries as a recording that :func:`pimem.drift.compare_sources` reads
    as one more source. Raises when any compaction could not be summarized.
    """
    source = session_or_entries(session)
    result = resummarize(source, summarizer, **kwargs)
    failed = [f"compaction {i}: {e}" for i, e in enumerate(result.errors) if e]
    if failed:
        raise SummarizationError("could not summarize every compaction: " + "; ".join(failed))
    by_id = {e["id"]: e for e in result.entries if e is not None}
    entries = source.entries if hasattr(source, "entries") else list(source)
    header = dict(source.header) if hasattr(source, "header") else {"type": "session", "version": 3, "id": "resummarized",
                                                                   "timestamp": "1970-01-01T00:00:00.000Z", "cwd": ""}
    return Session(header, [by_id.get(e.get("id"), e) if e.get("type") == "compaction" else e for e in entries])
