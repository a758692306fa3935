"""Compaction exactly as Pi 0.87.1 does it (core/compaction/compaction.js).

Cut points, preparation and the summary requests are ports of Pi's functions; the LLM call
goes through a summarizer (``complete(SummaryRequest) -> SummaryResponse``). The pure
functions are the reference, linear in the path length. :class:`ContextTracker` keeps a
projection, its token sums, cut points and file operations up to date along a growing
session: ``should_compact`` after every entry costs O(1) and ``prepare`` O(log n) plus the
copies of its result lists.
"""

from __future__ import annotations

import math
import operator
import os
import time
import uuid
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from pimem.context import (
    _MISSING,
    ProjectedEntry,
    SessionProjection,
    _context_entries_and_types,
    _project_parts,
    _projected_entry,
    convert_to_llm,
    get_current_system_message,
    get_session_context_settings,
    js_truthy,
    project_context_entry,
    session_entry_to_context_messages,
    build_session_path,
)
from pimem.prompts import (
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
)
from pimem.serialize import (
    FileOperations,
    SerializationCache,
    add_file_ops,
    compute_file_lists,
    format_file_operations,
    serialize_conversation,
    serialize_messages,
)
from pimem.summarizers.base import SummaryRequest, SummaryResponse
from pimem.tokens import (
    ContextUsageEstimate,
    TokenCache,
    _projected_estimate,
    calculate_context_tokens,
    estimate_tokens,
    get_assistant_usage,
)

__all__ = [
    "DEFAULT_COMPACTION_SETTINGS",
    "CompactionSettings",
    "ModelInfo",
    "CutPointResult",
    "CompactionPreparation",
    "CompactionResult",
    "SummarizationError",
    "should_compact",
    "is_cut_point_message",
    "is_turn_start_message",
    "find_valid_cut_points",
    "find_turn_start_index",
    "find_cut_point",
    "find_projected_cut_point",
    "prepare_compaction",
    "extract_file_operations",
    "get_summarization_failure",
    "combine_usage",
    "summarization_max_tokens",
    "summarization_reasoning",
    "build_history_prompt",
    "build_turn_prefix_prompt",
    "generate_summary_with_usage",
    "generate_turn_prefix_summary",
    "compact",
    "uuid7",
    "ContextTracker",
]


@dataclass(frozen=True)
class CompactionSettings:
    """Pi's ``CompactionSettings`` (defaults: enabled, reserve 16384, keep recent 20000)."""

    enabled: Any = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def to_pi(self) -> dict:
        return {
            "enabled": self.enabled,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
        }


DEFAULT_COMPACTION_SETTINGS = CompactionSettings()


@dataclass(frozen=True)
class ModelInfo:
    """What the pipeline needs to know about a model (Pi's ``Model`` fields)."""

    context_window: int = 0
    max_tokens: int = 0
    reasoning: bool = False
    provider: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class CutPointResult:
    """``findCutPoint``'s result."""

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool


@dataclass
class CompactionPreparation:
    """``prepareCompaction``'s result."""

    first_kept_entry_id: str
    messages_to_summarize: list[dict]
    turn_prefix_messages: list[dict]
    is_split_turn: bool
    tokens_before: Any
    previous_summary: Any
    file_ops: FileOperations
    settings: CompactionSettings


@dataclass
class CompactionResult:
    """``compact``'s result (what a CompactionEntry is made of)."""

    summary: str
    first_kept_entry_id: str | None
    tokens_before: Any
    usage: dict | None = None
    details: dict | None = None


class SummarizationError(RuntimeError):
    """A summary request failed (error, length cap or tool call); the message is Pi's."""


def should_compact(context_tokens: float, context_window: float, settings: CompactionSettings) -> bool:
    """``shouldCompact``: enabled and tokens above ``context_window - reserve_tokens``."""
    if not js_truthy(settings.enabled):
        return False
    return context_tokens > context_window - settings.reserve_tokens


# ---------------------------------------------------------------------------
# Cut points
# ---------------------------------------------------------------------------

_CUT_POINT_ROLES = frozenset(("user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"))
_TURN_START_ROLES = frozenset(("user", "bashExecution", "custom", "branchSummary", "compactionSummary"))


def is_cut_point_message(message: dict) -> bool:
    """``isCutPointMessage``: user-like or assistant messages, never tool results."""
    return message.get("role") in _CUT_POINT_ROLES


def is_turn_start_message(message: dict) -> bool:
    """``isTurnStartMessage``: user, bash, custom and summary messages."""
    return message.get("role") in _TURN_START_ROLES


def _is_turn_start_entry(entry: dict) -> bool:
    if entry.get("type") == "compaction":
        return False
    return any(m.get("role") in _TURN_START_ROLES for m in session_entry_to_context_messages(entry))


def find_valid_cut_points(entries: Sequence[dict], start_index: int, end_index: int) -> list[int]:
    """``findValidCutPoints``: indices of context-visible user-like or assistant entries."""
    out = []
    for i in range(start_index, end_index):
        entry = entries[i]
        if entry.get("type") == "compaction":
            continue
        if any(m.get("role") in _CUT_POINT_ROLES for m in session_entry_to_context_messages(entry)):
            out.append(i)
    return out


def find_turn_start_index(entries: Sequence[dict], entry_index: int, start_index: int) -> int:
    """``findTurnStartIndex``: the turn-starting entry at or before ``entry_index`` (or -1)."""
    for i in range(entry_index, start_index - 1, -1):
        if _is_turn_start_entry(entries[i]):
            return i
    return -1


def find_cut_point(
    entries: Sequence[dict], start_index: int, end_index: int, keep_recent_tokens: float
) -> CutPointResult:
    """``findCutPoint`` (entry level, as Pi exports it): keep about ``keep_recent_tokens``."""
    cut_points = find_valid_cut_points(entries, start_index, end_index)
    if not cut_points:
        return CutPointResult(start_index, -1, False)
    accumulated = 0
    cut_index = cut_points[0]
    for i in range(end_index - 1, start_index - 1, -1):
        tokens = 0
        for m in session_entry_to_context_messages(entries[i]):
            tokens += estimate_tokens(m)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            cut_index = next((c for c in cut_points if c >= i), cut_points[-1])
            break
    while cut_index > start_index:
        prev = entries[cut_index - 1]
        if prev.get("type") == "compaction" or len(session_entry_to_context_messages(prev)) > 0:
            break
        cut_index -= 1
    cut_entry = entries[cut_index]
    starts_turn = _is_turn_start_entry(cut_entry)
    turn_start = -1 if starts_turn else find_turn_start_index(entries, cut_index, start_index)
    return CutPointResult(cut_index, turn_start, (not starts_turn) and turn_start != -1)


def find_projected_cut_point(
    entries: Sequence[ProjectedEntry],
    start_index: int,
    end_index: int,
    keep_recent_tokens: float,
    cache: TokenCache | None = None,
) -> CutPointResult:
    """``findProjectedCutPoint``: the cut over projected entries, with Pi's recovery-omission rule."""
    sources = [e.source_entry for e in entries]
    return _cut_point_parts(
        sources, [e.get("type") for e in sources], [e.messages for e in entries],
        start_index, end_index, keep_recent_tokens, cache.estimate if cache is not None else estimate_tokens,
    )


def _is_cut_point_parts(etype: Any, msgs: list[dict]) -> bool:
    if etype == "compaction":
        return False
    for m in msgs:
        if m.get("role") in _CUT_POINT_ROLES:
            return True
    return False


def _is_turn_start_parts(etype: Any, msgs: list[dict]) -> bool:
    if etype == "compaction":
        return False
    for m in msgs:
        if m.get("role") in _TURN_START_ROLES:
            return True
    return False


def _cut_point_parts(
    sources: Sequence[dict],
    types: Sequence[Any],
    per_entry: Sequence[list[dict]],
    start_index: int,
    end_index: int,
    keep_recent_tokens: float,
    est: Callable[[dict], int],
) -> CutPointResult:
    """``findProjectedCutPoint`` on a projection given as parallel lists (sources, types, messages)."""
    is_cut = _is_cut_point_parts
    # cutPoints[0] and cutPoints.find(c >= i) are found by scanning, without the full list.
    first_cut = -1
    for i in range(start_index, end_index):
        if is_cut(types[i], per_entry[i]):
            first_cut = i
            break
    if first_cut < 0:
        return CutPointResult(start_index, -1, False)
    accumulated = 0
    exceeded = False
    cut_index = first_cut
    for i in range(end_index - 1, start_index - 1, -1):
        msgs = per_entry[i]
        if len(msgs) == 1:
            tokens = est(msgs[0])
        else:
            tokens = 0
            for m in msgs:
                tokens += est(m)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            exceeded = True
            found = -1
            for c in range(i, end_index):
                if is_cut(types[c], per_entry[c]):
                    found = c
                    break
            if found < 0:  # the last cut point of the range
                for c in range(end_index - 1, -1, -1):
                    if is_cut(types[c], per_entry[c]):
                        found = c
                        break
            cut_index = found
            break

    cut_index = _settle_cut(sources, types, per_entry, cut_index, start_index, end_index, exceeded)
    starts_turn = _is_turn_start_parts(types[cut_index], per_entry[cut_index])
    turn_start = -1
    if not starts_turn:
        for i in range(cut_index, start_index - 1, -1):
            if _is_turn_start_parts(types[i], per_entry[i]):
                turn_start = i
                break
    return CutPointResult(cut_index, turn_start, (not starts_turn) and turn_start != -1)


def _settle_cut(
    sources: Sequence[dict], types: Sequence[Any], per_entry: Sequence[list[dict]], cut_index: int,
    start: int, end: int, exceeded: bool,
) -> int:
    """The last steps of Pi's projected cut point: step past a closed suffix of omitted recovery
    attempts, then back over adjacent entries that add nothing to context (stopping at a compaction)."""
    if exceeded and cut_index + 1 < end and _is_recovery_omission_suffix(sources, types, per_entry,
                                                                         cut_index + 1, end):
        cut_index += 1
    while cut_index > start:
        if types[cut_index - 1] == "compaction" or len(per_entry[cut_index - 1]) > 0:
            break
        cut_index -= 1
    return cut_index


def _is_recovery_omission_suffix(
    sources: Sequence[dict], types: Sequence[Any], per_entry: Sequence[list[dict]], start: int, end: int
) -> bool:
    """Pi's closed suffix of omitted recovery attempts after the cut (entries ``start:end``).

    Every suffix entry must be no compaction and either invisible by itself or omitted by an
    edit; one omitted entry must be an assistant message; no edit in the suffix may replace an
    entry outside the omitted ones. Stops at the first entry that breaks the rule.
    """
    omitted_ids = set()
    edits = []
    omitted_assistant = False
    for k in range(start, end):
        etype = types[k]
        if etype == "compaction":
            return False
        if etype == "context_edit":
            edits.append(sources[k])
            continue
        source = sources[k]
        # A message entry always has one message of its own; others are checked.
        if etype != "message" and len(session_entry_to_context_messages(source)) == 0:
            continue  # not visible by itself
        if len(per_entry[k]) > 0:
            return False  # visible and not omitted
        omitted_ids.add(source.get("id"))
        if etype == "message" and source["message"].get("role") == "assistant":
            omitted_assistant = True
    if not omitted_assistant:
        return False
    for edit in edits:
        if edit.get("replacement", _MISSING) is not None and edit.get("targetId") not in omitted_ids:
            return False
    return True


# ---------------------------------------------------------------------------
# Preparation
# ---------------------------------------------------------------------------


def extract_file_operations(
    messages: Sequence[dict], entries: Sequence[dict], prev_compaction_index: int
) -> FileOperations:
    """``extractFileOperations``: tool-call paths plus the previous compaction's details."""
    file_ops = _previous_file_ops(entries[prev_compaction_index] if prev_compaction_index >= 0 else None)
    add_file_ops(messages, file_ops)
    return file_ops


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        from pimem.jsonio import js_stringify

        return js_stringify(value)
    return value


def _previous_file_ops(prev: dict | None) -> FileOperations:
    """File operations carried over from the previous compaction's details (unless from a hook)."""
    file_ops = FileOperations()
    if prev is not None:
        details = prev.get("details")
        if not js_truthy(prev.get("fromHook")) and js_truthy(details) and isinstance(details, dict):
            read_files = details.get("readFiles")
            if isinstance(read_files, list):
                file_ops.read.update(_hashable(f) for f in read_files)
            modified = details.get("modifiedFiles")
            if isinstance(modified, list):
                file_ops.edited.update(_hashable(f) for f in modified)
    return file_ops


def _prepare_parts(
    sources: Sequence[dict],
    types: Sequence[Any],
    per_entry: Sequence[list[dict]],
    messages: Sequence[dict],
    path_entries: Sequence[dict],
    settings: CompactionSettings,
    cache: TokenCache | None,
    tokens_before: Any = _MISSING,
) -> CompactionPreparation | None:
    """``prepareCompaction`` after the projection, on parallel lists."""
    count = len(sources)
    # Only the projection's first entry can be a compaction with messages (Pi's findIndex).
    prev_index = 0 if count and types[0] == "compaction" and len(per_entry[0]) > 0 else -1
    previous_summary: Any = None
    boundary_start = 0
    if prev_index >= 0:
        previous_summary = sources[0].get("summary")
        boundary_start = 1
    if tokens_before is _MISSING:
        tokens_before = _projected_estimate(sources, per_entry, messages, path_entries, cache).tokens
    est = cache.estimate if cache is not None else estimate_tokens
    cut = _cut_point_parts(sources, types, per_entry, boundary_start, count, settings.keep_recent_tokens, est)
    first_kept_index = cut.first_kept_entry_index
    if first_kept_index >= count:
        return None
    first_kept_id = sources[first_kept_index].get("id")
    if not js_truthy(first_kept_id):
        return None
    is_split = cut.is_split_turn
    history_end = cut.turn_start_index if is_split else first_kept_index
    # Compaction entries after the first project to no messages, so the messages of
    # entries [a, b) are a slice of the flat message list.
    start_offset = len(per_entry[0]) if boundary_start else 0
    end_offset = len(messages) - sum(map(len, per_entry[history_end:]))
    to_summarize = [m for m in messages[start_offset:end_offset] if m.get("role") != "system"]
    turn_prefix: list[dict] = []
    if is_split:
        prefix_end = len(messages) - sum(map(len, per_entry[first_kept_index:]))
        turn_prefix = [m for m in messages[end_offset:prefix_end] if m.get("role") != "system"]
    if not to_summarize and not turn_prefix:
        return None
    file_ops = _previous_file_ops(sources[0] if prev_index >= 0 else None)
    add_file_ops(to_summarize, file_ops)
    if is_split:
        add_file_ops(turn_prefix, file_ops)
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=turn_prefix,
        is_split_turn=is_split,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        settings=settings,
    )


def prepare_compaction(
    path_entries: Sequence[dict],
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    *,
    cache: TokenCache | None = None,
) -> CompactionPreparation | None:
    """``prepareCompaction``: what to summarize and where to cut, or None if nothing to do.

    ``path_entries`` is the active path (``session.get_branch()``), root first. ``cache``
    (a :class:`~pimem.tokens.TokenCache`) reuses token estimates across calls.
    """
    if path_entries and path_entries[-1].get("type") == "compaction":
        return None
    path = build_session_path(path_entries)
    path_types = [e.get("type") for e in path]
    sources, types = _context_entries_and_types(path, True, path_types)
    types, per_entry, messages = _project_parts(sources, types)
    # Usually the entries given are the path itself: then their types are known already
    # and their truthy ids are distinct.
    same = len(path) == len(path_entries) and all(map(operator.is_, path, path_entries))
    tokens_before = _projected_estimate(
        sources, per_entry, messages, path_entries, cache, path_types if same else None, same
    ).tokens
    return _prepare_parts(sources, types, per_entry, messages, path_entries, settings, cache, tokens_before)


# ---------------------------------------------------------------------------
# Summary requests
# ---------------------------------------------------------------------------


def uuid7() -> str:
    """A fresh RFC 9562 UUIDv7 (time-ordered), as Pi's routing ids are."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = (rand >> 62) & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


def get_summarization_failure(response: SummaryResponse, label: str) -> str | None:
    """``getSummarizationFailure``: Pi's message for an error or length stop, else None."""
    if response.stop_reason == "error":
        return f"{label} failed: {response.error_message or 'Unknown error'}"
    if response.stop_reason == "length":
        return f"{label} failed: generation hit the token cap and the summary is incomplete"
    return None


def combine_usage(first: dict | None, second: dict | None) -> dict | None:
    """``combineUsage``: field-by-field sum of two Pi usage dicts."""
    if first is None:
        return second
    if second is None:
        return first
    out: dict[str, Any] = {
        "input": first.get("input", 0) + second.get("input", 0),
        "output": first.get("output", 0) + second.get("output", 0),
        "cacheRead": first.get("cacheRead", 0) + second.get("cacheRead", 0),
        "cacheWrite": first.get("cacheWrite", 0) + second.get("cacheWrite", 0),
    }
    if first.get("cacheWrite1h") is not None or second.get("cacheWrite1h") is not None:
        out["cacheWrite1h"] = (first.get("cacheWrite1h") or 0) + (second.get("cacheWrite1h") or 0)
    if first.get("reasoning") is not None or second.get("reasoning") is not None:
        out["reasoning"] = (first.get("reasoning") or 0) + (second.get("reasoning") or 0)
    out["totalTokens"] = first.get("totalTokens", 0) + second.get("totalTokens", 0)
    fc, sc = first.get("cost") or {}, second.get("cost") or {}
    out["cost"] = {k: fc.get(k, 0) + sc.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite", "total")}
    return out


def summarization_max_tokens(fraction: float, reserve_tokens: float, model: ModelInfo) -> int | None:
    """``Math.min(Math.floor(fraction * reserveTokens), model.maxTokens > 0 ? … : Infinity)``.

    None stands for Infinity.
    """
    cap = model.max_tokens if (model.max_tokens is not None and model.max_tokens > 0) else math.inf
    scaled = fraction * reserve_tokens
    value = math.floor(scaled) if math.isfinite(scaled) else scaled
    result = min(value, cap)
    return None if math.isinf(result) else int(result)


def summarization_reasoning(model: ModelInfo, thinking_level: str | None) -> str | None:
    """``createSummarizationOptions``: the thinking level for reasoning models, else None."""
    if js_truthy(model.reasoning) and js_truthy(thinking_level) and thinking_level != "off":
        return thinking_level
    return None


def build_history_prompt(
    messages: Sequence[dict], custom_instructions: str | None = None, previous_summary: str | None = None
) -> str:
    """The user-message text of a history summary request (``generateSummaryWithUsage``)."""
    base = UPDATE_SUMMARIZATION_PROMPT if js_truthy(previous_summary) else SUMMARIZATION_PROMPT
    if js_truthy(custom_instructions):
        base = f"{base}\n\nAdditional focus: {custom_instructions}"
    conversation = serialize_conversation(convert_to_llm(messages))
    prompt = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if js_truthy(previous_summary):
        prompt += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return prompt + base


def build_turn_prefix_prompt(messages: Sequence[dict]) -> str:
    """The user-message text of a turn-prefix summary request."""
    conversation = serialize_conversation(convert_to_llm(messages))
    return f"# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"


def _request(kind: str, prompt: str, max_tokens: int | None, reasoning: str | None, model: ModelInfo,
             session_id: str | None) -> SummaryRequest:
    return SummaryRequest(
        kind=kind,  # type: ignore[arg-type]
        system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
        prompt=prompt,
        max_tokens=max_tokens,
        reasoning=reasoning,
        cache_retention="none",
        session_id=session_id if session_id is not None else uuid7(),
        model=model.id or "",
    )


def generate_summary_with_usage(
    messages: Sequence[dict],
    summarizer: Any,
    *,
    model: ModelInfo,
    reserve_tokens: float,
    custom_instructions: str | None = None,
    previous_summary: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
) -> tuple[str, dict | None]:
    """``generateSummaryWithUsage``: one history summary request; raises SummarizationError."""
    request = _request(
        "history",
        build_history_prompt(messages, custom_instructions, previous_summary),
        summarization_max_tokens(0.8, reserve_tokens, model),
        summarization_reasoning(model, thinking_level),
        model,
        session_id,
    )
    return _complete_checked(summarizer, request, "Summarization")


def generate_turn_prefix_summary(
    messages: Sequence[dict],
    summarizer: Any,
    *,
    model: ModelInfo,
    reserve_tokens: float,
    thinking_level: str | None = None,
    session_id: str | None = None,
) -> tuple[str, dict | None]:
    """``generateTurnPrefixSummary``: the split turn's prefix, half the reserve as budget."""
    request = _request(
        "turn_prefix",
        build_turn_prefix_prompt(messages),
        summarization_max_tokens(0.5, reserve_tokens, model),
        summarization_reasoning(model, thinking_level),
        model,
        session_id,
    )
    return _complete_checked(summarizer, request, "Turn prefix summarization")


def _complete_checked(summarizer: Any, request: SummaryRequest, label: str) -> tuple[str, dict | None]:
    """Ask once; an error, a length stop or a tool call is a failure named with Pi's ``label``."""
    response = summarizer.complete(request)
    failure = get_summarization_failure(response, label)
    if failure:
        raise SummarizationError(failure)
    if response.called_tool:
        raise SummarizationError(f"{label} attempted to call a tool")
    return response.text, response.usage


def compact(
    preparation: CompactionPreparation,
    summarizer: Any,
    *,
    model: ModelInfo,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
) -> CompactionResult:
    """``compact``: summarize a preparation (two requests for a split turn) and add file lists."""
    p = preparation
    reserve = p.settings.reserve_tokens
    if p.is_split_turn and p.turn_prefix_messages:
        history_text = p.previous_summary if p.previous_summary is not None else "No prior history."
        history_usage = None
        if p.messages_to_summarize:
            history_text, history_usage = generate_summary_with_usage(
                p.messages_to_summarize, summarizer, model=model, reserve_tokens=reserve,
                custom_instructions=custom_instructions, previous_summary=p.previous_summary,
                thinking_level=thinking_level, session_id=session_id,
            )
        prefix_text, prefix_usage = generate_turn_prefix_summary(
            p.turn_prefix_messages, summarizer, model=model, reserve_tokens=reserve,
            thinking_level=thinking_level, session_id=session_id,
        )
        summary = f"{history_text}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix_text}"
        usage = combine_usage(history_usage, prefix_usage) if history_usage else prefix_usage
    else:
        summary, usage = generate_summary_with_usage(
            p.messages_to_summarize, summarizer, model=model, reserve_tokens=reserve,
            custom_instructions=custom_instructions, previous_summary=p.previous_summary,
            thinking_level=thinking_level, session_id=session_id,
        )
    read_files, modified_files = compute_file_lists(p.file_ops)
    summary += format_file_operations(read_files, modified_files)
    if not js_truthy(p.first_kept_entry_id):
        raise SummarizationError("First kept entry has no UUID - session may need migration")
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=p.first_kept_entry_id,
        tokens_before=p.tokens_before,
        usage=usage,
        details={"readFiles": read_files, "modifiedFiles": modified_files},
    )


# ---------------------------------------------------------------------------
# Incremental projection along a growing path
# ---------------------------------------------------------------------------


class ContextTracker:
    """The projection of a growing path with running token sums, for cheap repeated preparations.

    ``append(entry)`` adds a child of the current last entry in O(messages of the entry)
    (a compaction or ``context_edit`` rebuilds the projection once). ``context_estimate()``
    equals ``estimate_projected_context_tokens(projection, path)`` in O(1); ``prepare()``
    equals ``prepare_compaction(path, settings)`` in O(log n) plus the copies of its result
    lists: per-entry token sums are kept as prefix sums (the cut point is a binary search),
    cut points and turn starts as sorted positions, the messages to summarize as one list
    (a preparation takes a slice) and file operations as a running union.
    ``serialize(messages)`` is ``serialize_conversation(convert_to_llm(messages))`` with
    each message's text cached.

    Entries are Pi's JSON and are never mutated by the pipeline; estimates and texts are
    cached per message object (by identity, holding a reference). An entry or message must
    not be changed after it has been appended; call :meth:`reset` to start over.
    Every message is estimated when appended, so a message Pi could not estimate raises
    here even where a single ``prepare_compaction`` would not have reached it.
    """

    def __init__(
        self,
        path_entries: Sequence[dict] = (),
        *,
        cache: TokenCache | None = None,
        serialization_cache: SerializationCache | None = None,
    ):
        self.cache = cache if cache is not None else TokenCache()
        self.serialization_cache = serialization_cache if serialization_cache is not None else SerializationCache()
        self.path: list[dict] = []
        self.reset(path_entries)

    # -- building ---------------------------------------------------------
    def reset(self, path_entries: Sequence[dict]) -> None:
        """Start over from a root-first path (``session.get_branch()``)."""
        self.path = list(path_entries)
        self._first_index: dict[Any, int] = {}
        self._latest_invalidating = -1
        for i, e in enumerate(self.path):
            self._first_index.setdefault(e.get("id"), i)
            if e.get("type") in ("context_edit", "compaction"):
                self._latest_invalidating = i
        self._rebuild()

    def _rebuild(self) -> None:
        if self.path:
            path = build_session_path(self.path)
            thinking_level, model = get_session_context_settings(path)
            context_entries, types = _context_entries_and_types(path, True)
            sources = list(context_entries)
            types, per_entry, messages = _project_parts(sources, types)
        else:
            thinking_level, model, sources, types, per_entry, messages = "off", None, [], [], [], []
        self.projection = SessionProjection(
            list(map(_projected_entry, zip(sources, per_entry))), messages, thinking_level, model
        )
        self._edits = {s.get("targetId", _MISSING): s for s, t in zip(sources, types) if t == "context_edit"}
        # Parallel lists over projected entries.
        self._sources: list[dict] = sources
        self._types: list[Any] = list(types)
        self._per_entry: list[list[dict]] = per_entry
        self._entry_tokens: list[int] = []
        self._cum: list[int] = [0]  # _cum[k]: tokens of entries [0, k)
        self._ns_messages: list[dict] = []  # non-system messages, in order
        self._ns_off: list[int] = [0]  # _ns_off[k]: non-system messages of entries [0, k)
        self._cut_positions: list[int] = []
        self._turn_positions: list[int] = []
        # Running sums for the context estimate.
        self._total = 0
        self._non_system = 0
        self._system: list[dict] = []
        self._usage: dict | None = None
        self._usage_index: int | None = None
        self._usage_entry_pos = -1
        self._trailing = 0
        self._message_count = 0
        # File operations of entries [_fo_start, _fo_end).
        self._fo_start = -1
        self._fo_end = -1
        self._fo = FileOperations()
        for pos in range(len(sources)):
            self._account(pos)

    def _account(self, pos: int) -> None:
        """Add projected entry ``pos`` (already in the lists) to the sums and positions."""
        est = self.cache.estimate
        etype = self._types[pos]
        messages = self._per_entry[pos]
        offset = self._message_count
        entry_tokens = 0
        for j, m in enumerate(messages):
            t = est(m)
            entry_tokens += t
            role = m.get("role")
            if role == "system":
                self._system.append(m)
            else:
                self._non_system += t
                self._ns_messages.append(m)
            usage = get_assistant_usage(m) if role == "assistant" else None
            if usage is not None:
                self._usage = usage
                self._usage_entry_pos = pos
                self._usage_index = offset + j
                self._trailing = 0
            else:
                self._trailing += t
        self._total += entry_tokens
        self._message_count = offset + len(messages)
        self._entry_tokens.append(entry_tokens)
        self._cum.append(self._cum[-1] + entry_tokens)
        self._ns_off.append(len(self._ns_messages))
        if _is_cut_point_parts(etype, messages):
            self._cut_positions.append(pos)
        if _is_turn_start_parts(etype, messages):
            self._turn_positions.append(pos)

    def append(self, entry: dict) -> None:
        """Add ``entry``, a child of the current last entry of the path."""
        parent = entry.get("parentId")
        if self.path:
            if parent != self.path[-1].get("id"):
                raise ValueError(
                    f"entry {entry.get('id')!r} is not a child of the path's last entry "
                    f"{self.path[-1].get('id')!r}; call reset() with the new path"
                )
        elif js_truthy(parent):
            raise ValueError(f"entry {entry.get('id')!r} has a parent but the path is empty")
        index = len(self.path)
        self.path.append(entry)
        self._first_index.setdefault(entry.get("id"), index)
        etype = entry.get("type")
        if etype in ("compaction", "context_edit"):
            self._latest_invalidating = index
            self._rebuild()
            return
        proj = self.projection
        edit = self._edits.get(entry.get("id", _MISSING))
        messages = project_context_entry(entry, edit) if edit is not None else session_entry_to_context_messages(entry)
        proj.entries.append(ProjectedEntry(entry, messages))
        proj.messages.extend(messages)
        self._sources.append(entry)
        self._types.append(etype)
        self._per_entry.append(messages)
        self._account(len(self._sources) - 1)
        if etype == "thinking_level_change":
            proj.thinking_level = entry.get("thinkingLevel")
        elif etype == "model_change" or etype == "message":
            _, model = get_session_context_settings((entry,))
            if model is not None:
                proj.model = model

    def extend(self, entries: Sequence[dict]) -> None:
        """``append`` each entry in turn."""
        for entry in entries:
            self.append(entry)

    # -- queries ------------------------------------------------------------
    def context_usage_estimate(self) -> ContextUsageEstimate:
        """``estimateContextTokens(projection.messages)``."""
        if self._usage is None:
            return ContextUsageEstimate(self._total, 0, self._total, None)
        usage_tokens = calculate_context_tokens(self._usage)
        return ContextUsageEstimate(usage_tokens + self._trailing, usage_tokens, self._trailing, self._usage_index)

    def context_estimate(self) -> ContextUsageEstimate:
        """``estimateProjectedContextTokens(projection, path)``."""
        estimate = self.context_usage_estimate()
        if estimate.last_usage_index is not None:
            usage_entry_id = self._sources[self._usage_entry_pos].get("id")
            usage_entry_index = self._first_index.get(usage_entry_id, -1) if js_truthy(usage_entry_id) else -1
            if usage_entry_index > self._latest_invalidating:
                return estimate
        system = self.current_system_message()
        tokens = (estimate_tokens(system) if system is not None else 0) + self._non_system
        return ContextUsageEstimate(tokens, 0, tokens, None)

    def current_system_message(self) -> dict | None:
        """``getCurrentSystemMessage(projection.messages)``."""
        return get_current_system_message(self._system) if self._system else None

    def should_compact(self, context_window: float, settings: CompactionSettings) -> bool:
        """``shouldCompact`` on the projected estimate."""
        return should_compact(self.context_estimate().tokens, context_window, settings)

    def _cut_point(self, start: int, end: int, keep: float) -> CutPointResult:
        """``findProjectedCutPoint`` over entries [start, end = all) from the maintained sums."""
        cuts = self._cut_positions
        a = bisect_left(cuts, start)
        if a == len(cuts):
            return CutPointResult(start, -1, False)
        cut_index = cuts[a]
        exceeded = False
        if keep == keep:  # NaN never compares true: the budget is never reached
            cum, tokens = self._cum, self._entry_tokens
            total = cum[end]
            # The newest entry i (with tokens) where tokens of [i, end) reach ``keep``.
            try:
                i = bisect_right(cum, total - keep, start, end) - 1
            except OverflowError:  # pragma: no cover - absurd keep values
                i = end - 1 if keep <= 0 else start - 1
            while i >= start and not total - cum[i] >= keep:
                i -= 1
            while i + 1 < end and total - cum[i + 1] >= keep:
                i += 1
            while i >= start and tokens[i] == 0:
                i -= 1
            if i >= start:
                exceeded = True
                c = bisect_left(cuts, i)
                cut_index = cuts[c] if c < len(cuts) else cuts[-1]
        types, per_entry = self._types, self._per_entry
        cut_index = _settle_cut(self._sources, types, per_entry, cut_index, start, end, exceeded)
        if _is_turn_start_parts(types[cut_index], per_entry[cut_index]):
            return CutPointResult(cut_index, -1, False)
        turns = self._turn_positions
        t = bisect_right(turns, cut_index) - 1
        turn_start = turns[t] if t >= 0 and turns[t] >= start else -1
        return CutPointResult(cut_index, turn_start, turn_start != -1)

    def _file_ops_of_range(self, start: int, end: int) -> FileOperations:
        """File operations of entries [start, end), extending the running union when it can."""
        if start != self._fo_start or end < self._fo_end:
            self._fo_start, self._fo_end, self._fo = start, start, FileOperations()
        per_entry, fo = self._per_entry, self._fo
        for k in range(self._fo_end, end):
            add_file_ops(per_entry[k], fo)
        self._fo_end = max(self._fo_end, end)
        return fo

    def prepare(self, settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS) -> CompactionPreparation | None:
        """``prepareCompaction(path, settings)`` from the maintained projection and sums."""
        if self.path and self.path[-1].get("type") == "compaction":
            return None
        sources, per_entry = self._sources, self._per_entry
        count = len(sources)
        prev_index = 0 if count and self._types[0] == "compaction" and len(per_entry[0]) > 0 else -1
        boundary_start = 1 if prev_index == 0 else 0
        previous_summary = sources[0].get("summary") if prev_index == 0 else None
        tokens_before = self.context_estimate().tokens
        cut = self._cut_point(boundary_start, count, settings.keep_recent_tokens)
        first_kept_index = cut.first_kept_entry_index
        if first_kept_index >= count:
            return None
        first_kept_id = sources[first_kept_index].get("id")
        if not js_truthy(first_kept_id):
            return None
        is_split = cut.is_split_turn
        history_end = cut.turn_start_index if is_split else first_kept_index
        ns, off = self._ns_messages, self._ns_off
        to_summarize = ns[off[boundary_start] : off[history_end]]
        turn_prefix = ns[off[history_end] : off[first_kept_index]] if is_split else []
        if not to_summarize and not turn_prefix:
            return None
        file_ops = _previous_file_ops(sources[0] if prev_index == 0 else None)
        done = self._file_ops_of_range(boundary_start, first_kept_index)
        file_ops.read |= done.read
        file_ops.written |= done.written
        file_ops.edited |= done.edited
        return CompactionPreparation(
            first_kept_entry_id=first_kept_id,
            messages_to_summarize=to_summarize,
            turn_prefix_messages=turn_prefix,
            is_split_turn=is_split,
            tokens_before=tokens_before,
            previous_summary=previous_summary,
            file_ops=file_ops,
            settings=settings,
        )

    def serialize(self, messages: Sequence[dict]) -> str:
        """``serialize_conversation(convert_to_llm(messages))`` with per-message texts cached."""
        return serialize_messages(messages, self.serialization_cache)
