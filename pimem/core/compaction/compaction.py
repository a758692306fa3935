"""Pi 0.87.1's ``core/compaction/compaction.js``: token accounting, cut points, preparation, compact.

Token accounting: ``estimate_tokens`` is Pi's chars/4 heuristic, ``ceil(estimate_chars(m) / 4)``,
where ``estimate_chars`` counts JavaScript string lengths (UTF-16 code units),
``JSON.stringify(arguments).length`` for tool calls and 4800 characters per image.
``estimate_context_tokens`` trusts the last valid assistant usage and estimates what follows;
``estimate_projected_context_tokens`` distrusts usage captured before a later ``context_edit``
or compaction. :class:`TokenCache` memoizes per-message estimates by object identity.

Cut points, preparation and the summary requests are ports of Pi's functions; the LLM call
goes through a summarizer (``complete(SummaryRequest) -> SummaryResponse``). These pure
functions are the readable reference, linear in the path length;
:class:`pimem.core.context_tracker.ContextTracker` computes the same along a growing session.
"""

from __future__ import annotations

import math
import operator
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import orjson

from pimem.base.js import UNDEFINED, js_entries, js_prop, js_stringify_length, js_truthy, utf16_len
from pimem.core.compaction.utils import (
    FileOperations,
    add_file_ops,
    compute_file_lists,
    format_file_operations,
    serialize_conversation,
    set_member,
)
from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import get_current_system_message
from pimem.core.prompts import (
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
)
from pimem.core.session_manager import (
    ProjectedEntry,
    SessionProjection,
    build_session_path,
    context_entries_and_types,
    project_parts,
    session_entry_to_context_messages,
)
from pimem.errors import JavaScriptTypeError, SummarizationError

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
    "generate_summary",
    "generate_summary_with_usage",
    "generate_turn_prefix_summary",
    "summary_request",
    "complete_checked",
    "is_turn_start_entry",
    "compact",
    "uuid7",
    "PromptTemplates",
    "PI_PROMPTS",
]


@dataclass(frozen=True)
class CompactionSettings:
    """Pi's ``CompactionSettings`` (defaults: enabled, reserve 16384, keep recent 20000).

    Args:
        enabled: whether the context compacts on its own (read as JavaScript reads it: truthy).
        reserve_tokens: tokens kept free below the window; compaction starts above
            ``context_window - reserve_tokens``.
        keep_recent_tokens: about how many tokens of recent context a compaction keeps.
    """

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
    """What the pipeline needs to know about a model (Pi's ``Model`` fields).

    Args:
        context_window: the model's context window in tokens (0: unknown).
        max_tokens: the most tokens the model writes in one response (0: unknown).
        reasoning: whether the model reasons (summaries are then requested at the session's thinking level).
        provider: the provider's name (with ``id``, selects a model's own compaction settings).
        id: the model's id (sent with each summary request).
    """

    context_window: int = 0
    max_tokens: int = 0
    reasoning: bool = False
    provider: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class CutPointResult:
    """What :func:`find_cut_point` returns.

    Args:
        first_kept_entry_index: the index of the first entry kept.
        turn_start_index: the index of the entry that starts the turn cut in two (-1: no split).
        is_split_turn: whether the cut falls inside a turn.
    """

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool


@dataclass
class CompactionPreparation:
    """What :func:`prepare_compaction` returns.

    Args:
        first_kept_entry_id: the id of the first entry kept after the compaction.
        messages_to_summarize: the messages the history summary covers, oldest first.
        turn_prefix_messages: the first part of a split turn (summarized on its own); empty if none.
        is_split_turn: whether the cut falls inside a turn.
        tokens_before: the context's tokens before compacting (Pi's estimate).
        previous_summary: the summary of the compaction at the start of the path, if any.
        file_ops: the files read and changed in the summarized messages (and the previous summary's).
        settings: the settings the preparation was made with.
    """

    first_kept_entry_id: str
    messages_to_summarize: list[dict]
    turn_prefix_messages: list[dict]
    is_split_turn: bool
    tokens_before: Any
    previous_summary: Any
    file_ops: FileOperations
    settings: CompactionSettings


@dataclass(frozen=True)
class PromptTemplates:
    """The instruction texts of a compaction's summary requests (default: Pi 0.87.1's).

    The conversation framing (``<conversation>`` tags, ``# Conversation`` / ``# Instructions``)
    stays Pi's.

    Args:
        system: the system prompt of every request.
        initial: the history instructions when there is no previous summary.
        update: the history instructions with one (the request then carries ``<previous-summary>``).
        turn_prefix: the instructions for a split turn's prefix.
    """

    system: str = SUMMARIZATION_SYSTEM_PROMPT
    initial: str = SUMMARIZATION_PROMPT
    update: str = UPDATE_SUMMARIZATION_PROMPT
    turn_prefix: str = TURN_PREFIX_SUMMARIZATION_PROMPT


PI_PROMPTS = PromptTemplates()


@dataclass
class CompactionResult:
    """What :func:`compact` returns (what a CompactionEntry is made of).

    Args:
        summary: the summary text, file lists appended.
        first_kept_entry_id: the id of the first entry kept.
        tokens_before: the context's tokens before compacting.
        usage: the summary requests' usage (both added up for a split turn), if reported.
        details: ``{"readFiles": [...], "modifiedFiles": [...]}``.
    """

    summary: str
    first_kept_entry_id: str | None
    tokens_before: Any
    usage: dict | None = None
    details: dict | None = None


# ---------------------------------------------------------------------------
# Token accounting
# ---------------------------------------------------------------------------

ESTIMATED_IMAGE_CHARS = 4800


def _js_length(value: Any, what: str) -> int:
    if isinstance(value, str):
        return len(value) if value.isascii() else utf16_len(value)
    if isinstance(value, list):
        return len(value)
    raise JavaScriptTypeError(f"Cannot read properties of {value!r} (reading 'length') in {what}")


def _text_and_image_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content) if content.isascii() else utf16_len(content)
    if not isinstance(content, list):
        raise JavaScriptTypeError(f"message content is not iterable: {content!r}")
    chars = 0
    for block in content:
        btype = block.get("type") if block.__class__ is dict else js_prop(block, "type")
        if btype == "text":
            text = block.get("text")
            if text.__class__ is str:
                chars += len(text) if text.isascii() else utf16_len(text)
            elif js_truthy(text):
                chars += _js_length(text, "text block")
        elif btype == "image":
            chars += ESTIMATED_IMAGE_CHARS
    return chars


_DIGITS = frozenset("0123456789")


def _arguments_chars(args: Any) -> int:
    """``JSON.stringify(args).length``; for an object of strings under keys not led by a digit (what tool
    calls mostly carry) orjson's text is JavaScript's as it is, so no pass over the values is needed."""
    if args.__class__ is dict:
        for key, value in args.items():
            if value.__class__ is not str or key.__class__ is not str or key[:1] in _DIGITS:
                break
        else:
            try:
                data = orjson.dumps(args)
            except TypeError:  # lone surrogates: the exact way
                return js_stringify_length(args)
            return len(data) if data.isascii() else utf16_len(data.decode("utf-8"))
    return js_stringify_length(args)


def _ceil4(chars: int) -> int:
    return -(-chars // 4)


def estimate_chars(message: Mapping[str, Any]) -> int:
    """The characters (UTF-16 code units) :func:`estimate_tokens` counts for one message.

    Text and thinking, tool name + ``JSON.stringify(arguments)``, summaries, bash command +
    output, system content, sections and added tools, 4800 per image.
    ``estimate_tokens(m) == ceil(estimate_chars(m) / 4)``; raises ``TypeError`` where Pi's
    function throws.

    Args:
        message: one agent message.
    """
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if content.__class__ is not list:
            if isinstance(content, str):
                return 0  # for..of over a string yields characters without a type
            if not isinstance(content, list):
                raise JavaScriptTypeError(f"assistant content is not iterable: {content!r}")
        chars = 0
        for block in content:
            btype = block.get("type") if block.__class__ is dict else js_prop(block, "type")
            if btype == "text":
                value = block.get("text")
            elif btype == "thinking":
                value = block.get("thinking")
            elif btype == "toolCall":
                if "arguments" not in block:
                    raise JavaScriptTypeError("toolCall block has no arguments")
                name = block.get("name")
                if name.__class__ is str and name.isascii():
                    chars += len(name) + _arguments_chars(block["arguments"])
                else:
                    chars += _js_length(name, "toolCall name") + _arguments_chars(block["arguments"])
                continue
            else:
                continue
            if value.__class__ is str and value.isascii():
                chars += len(value)
            else:
                chars += _js_length(value, btype + " block")
        return chars
    if role == "toolResult" or role == "user" or role == "custom":
        content = message.get("content")
        if content.__class__ is list and len(content) == 1:  # mostly one text block
            block = content[0]
            if block.__class__ is dict and block.get("type") == "text":
                text = block.get("text")
                if text.__class__ is str:
                    return len(text) if text.isascii() else utf16_len(text)
        return _text_and_image_chars(content)
    if role == "bashExecution":
        return _js_length(message.get("command"), "bash command") + _js_length(
            message.get("output"), "bash output"
        )
    if role == "branchSummary" or role == "compactionSummary":
        return _js_length(message.get("summary"), "summary")
    if role == "system":
        chars = _text_and_image_chars(message.get("content"))
        sections = message.get("sections")
        if js_truthy(sections):
            for _, section in js_entries(sections):
                if js_truthy(section):
                    chars += _js_length(section, "system section")
        tools = message.get("toolsAdded")
        if js_truthy(tools):
            chars += js_stringify_length(tools)
        return chars
    return 0


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """``estimateTokens``: ceil(chars / 4) with Pi's per-role character counts.

    Args:
        message: one agent message.
    """
    return -(-estimate_chars(message) // 4)


def estimate_messages_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Sum of :func:`estimate_tokens` over messages (Pi's ``estimateMessagesTokens``)."""
    return sum(estimate_tokens(m) for m in messages)


def calculate_context_tokens(usage: dict) -> Any:
    """``calculateContextTokens``: ``totalTokens`` or input+output+cacheRead+cacheWrite.

    Args:
        usage: a Pi usage dict.
    """
    total = usage.get("totalTokens")
    kind = total.__class__
    if (kind is int or kind is float) and total == total and total != 0:
        return total  # a truthy number (the common case, as below)
    if js_truthy(total):
        # A string would make JavaScript concatenate text ("15" + 0 is "150"): read as no number
        # (the loader records a warning for such usage fields).
        return total if type(total) in (int, float) else float("nan")
    parts: list[Any] = [usage.get("input"), usage.get("output"), usage.get("cacheRead"), usage.get("cacheWrite")]
    for p in parts:
        if type(p) not in (int, float):
            return float("nan")  # undefined + number is NaN in JavaScript
    return parts[0] + parts[1] + parts[2] + parts[3]


def get_assistant_usage(message: Mapping[str, Any]) -> dict | None:
    """``getAssistantUsage``: valid usage of an assistant message (not aborted/error/zero)."""
    if message.get("role") == "assistant" and "usage" in message:
        stop = message.get("stopReason")
        usage = message["usage"]
        if stop != "aborted" and stop != "error" and js_truthy(usage):
            if calculate_context_tokens(usage) > 0:
                return usage
    return None


def get_last_assistant_usage(entries: Sequence[dict]) -> dict | None:
    """``getLastAssistantUsage``: the last valid assistant usage among session entries."""
    for entry in reversed(entries):
        if entry.get("type") == "message":
            usage = get_assistant_usage(entry["message"])
            if usage is not None:
                return usage
    return None


@dataclass(frozen=True)
class ContextUsageEstimate:
    """What :func:`estimate_context_tokens` returns.

    Args:
        tokens: the context's tokens: ``usage_tokens + trailing_tokens``.
        usage_tokens: the tokens of the last assistant usage (0 without one).
        trailing_tokens: the estimated tokens of the messages after that usage.
        last_usage_index: the index of the message with that usage (None without one).
    """

    tokens: Any
    usage_tokens: Any
    trailing_tokens: int
    last_usage_index: int | None


def _last_usage_info(messages: Sequence[Mapping[str, Any]]) -> tuple[dict, int] | None:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant":
            usage = get_assistant_usage(m)
            if usage is not None:
                return usage, i
    return None


def estimate_context_tokens(
    messages: Sequence[Mapping[str, Any]], cache: "TokenCache | None" = None
) -> ContextUsageEstimate:
    """``estimateContextTokens``: last valid usage plus estimates of the messages after it.

    Args:
        messages: the context's messages, in order.
        cache: per-message estimates to reuse.
    """
    est = cache.estimate if cache is not None else estimate_tokens
    info = _last_usage_info(messages)
    if info is None:
        estimated = 0
        for m in messages:
            estimated += est(m)
        return ContextUsageEstimate(estimated, 0, estimated, None)
    usage, index = info
    usage_tokens = calculate_context_tokens(usage)
    trailing = 0
    for i in range(index + 1, len(messages)):
        trailing += est(messages[i])
    return ContextUsageEstimate(usage_tokens + trailing, usage_tokens, trailing, index)


def estimate_projected_context_tokens(
    projection: SessionProjection,
    branch_entries: Sequence[dict],
    cache: "TokenCache | None" = None,
) -> ContextUsageEstimate:
    """``estimateProjectedContextTokens``: usage only if no later edit/compaction invalidates it.

    Args:
        projection: the session's projection.
        branch_entries: the entries of the branch, root first.
        cache: per-message estimates to reuse.
    """
    entries = projection.entries
    return projected_estimate_parts(
        [e.source_entry for e in entries], [e.messages for e in entries], projection.messages, branch_entries, cache
    )


def projected_estimate_parts(
    sources: Sequence[dict],
    per_entry: Sequence[Sequence[dict]],
    messages: Sequence[dict],
    branch_entries: Sequence[dict],
    cache: "TokenCache | None",
    branch_types: Sequence[Any] | None = None,
    walked: bool = False,
) -> ContextUsageEstimate:
    """Fast twin of :func:`estimate_projected_context_tokens` on a projection given as parallel lists.

    ``branch_types`` are the branch entries' types if known; ``walked`` says the branch came
    from following parent links (its truthy ids are distinct, so the usage entry is found by
    searching from the end).
    """
    est = cache.estimate if cache is not None else estimate_tokens
    estimate = estimate_context_tokens(messages, cache)
    usage_index = estimate.last_usage_index
    if usage_index is not None:
        # The projected entry holding message ``usage_index`` (searched from the end: the
        # usage is normally recent).
        usage_entry_id: Any = None
        end = len(messages)
        for k in range(len(per_entry) - 1, -1, -1):
            start = end - len(per_entry[k])
            if start <= usage_index < end:
                usage_entry_id = sources[k].get("id")
                break
            end = start
        if js_truthy(usage_entry_id):
            types = [e.get("type") for e in branch_entries] if branch_types is None else branch_types
            backwards = types[::-1]
            latest_invalidating = -1
            for kind in ("context_edit", "compaction"):
                if kind in backwards:
                    latest_invalidating = max(latest_invalidating, len(types) - 1 - backwards.index(kind))
            usage_entry_index = -1
            if walked:
                for i in range(len(branch_entries) - 1, latest_invalidating, -1):
                    if branch_entries[i].get("id") == usage_entry_id:
                        usage_entry_index = i
                        break
            else:
                ids = [e.get("id") for e in branch_entries]
                # The first entry with that id (list.index compares by identity, then ==).
                usage_entry_index = ids.index(usage_entry_id) if usage_entry_id in ids else -1
            if usage_entry_index > latest_invalidating:
                return estimate
    current_system = get_current_system_message(messages)
    tokens = est(current_system) if current_system is not None else 0
    for m in messages:
        if m.get("role") != "system":
            tokens += est(m)
    return ContextUsageEstimate(tokens, 0, tokens, None)


class TokenCache:
    """Per-message :func:`estimate_tokens` memo keyed by object identity.

    Entries are Pi's JSON and are never mutated by the pipeline, so an estimate stays valid
    as long as the message object lives; the cache keeps a reference to each message so
    that an identity is never reused while cached.
    """

    __slots__ = ("_memo", "hits", "misses")

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Mapping[str, Any], int]] = {}
        self.hits = 0
        self.misses = 0

    def estimate(self, message: Mapping[str, Any]) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = estimate_tokens(message)
        self._memo[id(message)] = (message, tokens)
        return tokens

    def clear(self) -> None:
        self._memo.clear()

    def __len__(self) -> int:
        return len(self._memo)


def should_compact(context_tokens: float, context_window: float, settings: CompactionSettings) -> bool:
    """``shouldCompact``: enabled and tokens above ``context_window - reserve_tokens``.

    Args:
        context_tokens: the context's tokens now.
        context_window: the model's window.
        settings: the compaction settings.
    """
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


def is_turn_start_entry(entry: dict) -> bool:
    """Whether ``entry`` starts a turn (a user, bash, custom or summary message; never a compaction)."""
    if entry.get("type") == "compaction":
        return False
    return any(m.get("role") in _TURN_START_ROLES for m in session_entry_to_context_messages(entry))


def find_valid_cut_points(entries: Sequence[dict], start_index: int, end_index: int) -> list[int]:
    """``findValidCutPoints``: indices of context-visible user-like or assistant entries."""
    out: list[int] = []
    add = out.append
    roles = _CUT_POINT_ROLES
    for i in range(start_index, end_index):
        entry = entries[i]
        etype = entry.get("type")
        if etype == "message":
            message = entry.get("message")
            if message.__class__ is dict:  # its one context message has the same role
                if message.get("role") in roles:
                    add(i)
                continue
        elif etype == "compaction":
            continue
        for m in session_entry_to_context_messages(entry):
            if m.get("role") in roles:
                add(i)
                break
    return out


_DICT = frozenset((dict,))


def _next_cut_point(entries: Sequence[dict], start: int, end: int) -> int:
    """The first index of :func:`find_valid_cut_points` ``(entries, start, end)``, or -1."""
    roles = _CUT_POINT_ROLES
    for i in range(start, end):
        entry = entries[i]
        etype = entry.get("type")
        if etype == "message":
            message = entry.get("message")
            if message.__class__ is dict:  # its one context message has the same role
                if message.get("role") in roles:
                    return i
                continue
        elif etype == "compaction":
            continue
        for m in session_entry_to_context_messages(entry):
            if m.get("role") in roles:
                return i
    return -1


def _entry_tokens(entry: dict) -> int:
    """The estimated tokens of an entry's context messages (the sum the cut-point walk adds up)."""
    if entry.get("type") == "message":
        message = entry.get("message")
        if message.__class__ is dict and message.get("content") is not None:
            return estimate_tokens(message)
    tokens = 0
    for m in session_entry_to_context_messages(entry):
        tokens += estimate_tokens(m)
    return tokens


def _has_context_messages(entry: dict) -> bool:
    if entry.get("type") == "message" and entry.get("message").__class__ is dict:
        return True
    return len(session_entry_to_context_messages(entry)) > 0


def find_turn_start_index(entries: Sequence[dict], entry_index: int, start_index: int) -> int:
    """``findTurnStartIndex``: the turn-starting entry at or before ``entry_index`` (or -1).

    Args:
        entries: the entries searched.
        entry_index: where the search starts, going back.
        start_index: the first index it may return.
    """
    for i in range(entry_index, start_index - 1, -1):
        if is_turn_start_entry(entries[i]):
            return i
    return -1


def _kept_from(
    items: Sequence[Any], start_index: int, end_index: int, keep_recent_tokens: float,
    tokens_of: Callable[[Any], int],
) -> int:
    """Pi's walk back from the end of a cut-point search: the index at which the tokens of
    ``items[end_index - 1]``, ``items[end_index - 2]``, … reach ``keep_recent_tokens``, or -1."""
    accumulated = 0
    i = end_index - 1
    while i >= start_index:
        tokens = tokens_of(items[i])
        if tokens != 0:
            accumulated += tokens
            if accumulated >= keep_recent_tokens:
                return i
        i -= 1
    return -1


def find_cut_point(
    entries: Sequence[dict], start_index: int, end_index: int, keep_recent_tokens: float
) -> CutPointResult:
    """``findCutPoint`` (entry level, as Pi exports it): keep about ``keep_recent_tokens``.

    Args:
        entries: the entries to cut.
        start_index: the first entry that may be summarized.
        end_index: the entry after the last one.
        keep_recent_tokens: the tokens to keep.
    """
    # cutPoints[0], cutPoints.find(c >= i) and cutPoints.at(-1) are found by scanning, without the
    # list, where every message entry of the range has a message object (Pi reads each one's role).
    try:
        checked = {e["message"].__class__ for e in entries[start_index:end_index]
                   if e["type"] == "message"} <= _DICT
    except (KeyError, TypeError):  # an entry without a type or a message: the full scan decides
        checked = False
    if not checked:
        find_valid_cut_points(entries, start_index, end_index)  # raises where Pi throws
    first_cut = _next_cut_point(entries, start_index, end_index)
    if first_cut < 0:
        return CutPointResult(start_index, -1, False)
    cut_index = first_cut
    reached = _kept_from(entries, start_index, end_index, keep_recent_tokens, _entry_tokens)
    if reached >= 0:
        cut_index = _next_cut_point(entries, reached, end_index)
        if cut_index < 0:  # the last cut point of the range
            cut_index = next(c for c in range(end_index - 1, start_index - 1, -1)
                             if _next_cut_point(entries, c, c + 1) == c)
    while cut_index > start_index:
        prev = entries[cut_index - 1]
        if prev.get("type") == "compaction" or _has_context_messages(prev):
            break
        cut_index -= 1
    cut_entry = entries[cut_index]
    starts_turn = is_turn_start_entry(cut_entry)
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
    return cut_point_parts(
        sources, [e.get("type") for e in sources], [e.messages for e in entries],
        start_index, end_index, keep_recent_tokens, cache.estimate if cache is not None else estimate_tokens,
    )


def is_cut_point_parts(etype: Any, msgs: list[dict]) -> bool:
    if etype == "compaction":
        return False
    for m in msgs:
        if m.get("role") in _CUT_POINT_ROLES:
            return True
    return False


def is_turn_start_parts(etype: Any, msgs: list[dict]) -> bool:
    if etype == "compaction":
        return False
    for m in msgs:
        if m.get("role") in _TURN_START_ROLES:
            return True
    return False


def cut_point_parts(
    sources: Sequence[dict],
    types: Sequence[Any],
    per_entry: Sequence[list[dict]],
    start_index: int,
    end_index: int,
    keep_recent_tokens: float,
    est: Callable[[dict], int],
) -> CutPointResult:
    """Fast twin of :func:`find_projected_cut_point` on a projection given as parallel lists (sources,
    types, messages)."""
    is_cut = is_cut_point_parts
    # cutPoints[0] and cutPoints.find(c >= i) are found by scanning, without the full list.
    first_cut = -1
    for i in range(start_index, end_index):
        if is_cut(types[i], per_entry[i]):
            first_cut = i
            break
    if first_cut < 0:
        return CutPointResult(start_index, -1, False)
    exceeded = False
    cut_index = first_cut

    def tokens_of(msgs: list[dict]) -> int:
        if len(msgs) == 1:
            return est(msgs[0])
        tokens = 0
        for m in msgs:
            tokens += est(m)
        return tokens

    reached = _kept_from(per_entry, start_index, end_index, keep_recent_tokens, tokens_of)
    if reached >= 0:
        exceeded = True
        found = -1
        for c in range(reached, end_index):
            if is_cut(types[c], per_entry[c]):
                found = c
                break
        if found < 0:  # the last cut point of the range
            for c in range(end_index - 1, -1, -1):
                if is_cut(types[c], per_entry[c]):
                    found = c
                    break
        cut_index = found

    cut_index = settle_cut(sources, types, per_entry, cut_index, start_index, end_index, exceeded)
    starts_turn = is_turn_start_parts(types[cut_index], per_entry[cut_index])
    turn_start = -1
    if not starts_turn:
        for i in range(cut_index, start_index - 1, -1):
            if is_turn_start_parts(types[i], per_entry[i]):
                turn_start = i
                break
    return CutPointResult(cut_index, turn_start, (not starts_turn) and turn_start != -1)


def settle_cut(
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
        if edit.get("replacement", UNDEFINED) is not None and edit.get("targetId") not in omitted_ids:
            return False
    return True


# ---------------------------------------------------------------------------
# Preparation
# ---------------------------------------------------------------------------


def extract_file_operations(
    messages: Sequence[dict], entries: Sequence[dict], prev_compaction_index: int
) -> FileOperations:
    """``extractFileOperations``: tool-call paths plus the previous compaction's details."""
    file_ops = previous_file_ops(entries[prev_compaction_index] if prev_compaction_index >= 0 else None)
    add_file_ops(messages, file_ops)
    return file_ops


def previous_file_ops(prev: dict | None) -> FileOperations:
    """File operations carried over from the previous compaction's details (unless from a hook)."""
    file_ops = FileOperations()
    if prev is not None:
        details = prev.get("details")
        if not js_truthy(prev.get("fromHook")) and js_truthy(details) and isinstance(details, dict):
            read_files = details.get("readFiles")
            if isinstance(read_files, list):
                file_ops.read.update(set_member(f) for f in read_files)
            modified = details.get("modifiedFiles")
            if isinstance(modified, list):
                file_ops.edited.update(set_member(f) for f in modified)
    return file_ops


def prepare_parts(
    sources: Sequence[dict],
    types: Sequence[Any],
    per_entry: Sequence[list[dict]],
    messages: Sequence[dict],
    path_entries: Sequence[dict],
    settings: CompactionSettings,
    cache: TokenCache | None,
    tokens_before: Any = UNDEFINED,
) -> CompactionPreparation | None:
    """Fast twin of :func:`prepare_compaction` after the projection, on parallel lists."""
    count = len(sources)
    # Only the projection's first entry can be a compaction with messages (Pi's findIndex).
    prev_index = 0 if count and types[0] == "compaction" and len(per_entry[0]) > 0 else -1
    previous_summary: Any = None
    boundary_start = 0
    if prev_index >= 0:
        previous_summary = sources[0].get("summary")
        boundary_start = 1
    if tokens_before is UNDEFINED:
        tokens_before = projected_estimate_parts(sources, per_entry, messages, path_entries, cache).tokens
    est = cache.estimate if cache is not None else estimate_tokens
    cut = cut_point_parts(sources, types, per_entry, boundary_start, count, settings.keep_recent_tokens, est)
    first_kept_index = cut.first_kept_entry_index
    if first_kept_index >= count:
        return None
    first_kept_id: Any = sources[first_kept_index].get("id")
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
    file_ops = previous_file_ops(sources[0] if prev_index >= 0 else None)
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


def chain_path(entries: Sequence[dict]) -> list[dict] | None:
    """``build_session_path(entries)`` when the entries are already that path, else None.

    They are when their ids are distinct non-empty strings, each entry's parentId is the id of the
    one before, and the first entry's parentId names none of them: the walk from the last entry
    then visits every entry, in order. Checked in a few passes that run in C.
    """
    chain = chain_ids_and_types(entries)
    return list(entries) if chain is not None else None


def chain_ids_and_types(entries: Sequence[dict]) -> tuple[list[str], list[Any]] | None:
    """(ids, types) of ``entries`` when :func:`chain_path` takes them as the path, else None."""
    try:
        ids = [e["id"] for e in entries]
        parents = [e["parentId"] for e in entries]
        types = [e["type"] for e in entries]
        "".join(ids)  # raises unless every id is a string
    except (KeyError, TypeError):  # a field missing, an id of another type: not recognised as a chain
        return None
    if not ids or parents[1:] != ids[:-1]:
        return None
    id_set = set(ids)
    if len(id_set) != len(ids) or "" in id_set or (parents[0].__class__ is str and parents[0] in id_set):
        return None
    return ids, types


def prepare_compaction(
    path_entries: Sequence[dict],
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    *,
    cache: TokenCache | None = None,
) -> CompactionPreparation | None:
    """``prepareCompaction``: what to summarize and where to cut, or None if nothing to do.

    Args:
        path_entries: the active path (``session.get_branch()``), root first.
        settings: Pi's ``reserveTokens`` / ``keepRecentTokens``.
        cache: a :class:`TokenCache` that reuses token estimates across calls.
    """
    if path_entries and path_entries[-1].get("type") == "compaction":
        return None
    chain = chain_ids_and_types(path_entries)
    if chain is None:
        path = build_session_path(path_entries)
        same = len(path) == len(path_entries) and all(map(operator.is_, path, path_entries))
        path_types = [e.get("type") for e in path]
        path_ids = None
    else:
        path = path_entries if path_entries.__class__ is list else list(path_entries)
        same = True
        path_ids, path_types = chain
    sources, types = context_entries_and_types(path, True, path_types, path_ids)
    types, per_entry, messages = project_parts(sources, types)
    # Usually the entries given are the path itself: then their types are known already
    # and their truthy ids are distinct.
    tokens_before = projected_estimate_parts(
        sources, per_entry, messages, path_entries, cache, path_types if same else None, same
    ).tokens
    return prepare_parts(sources, types, per_entry, messages, path_entries, settings, cache, tokens_before)


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
    messages: Sequence[dict], custom_instructions: str | None = None, previous_summary: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> str:
    """The user-message text of a history summary request (:func:`generate_summary_with_usage`)."""
    base = prompts.update if js_truthy(previous_summary) else prompts.initial
    if js_truthy(custom_instructions):
        base = f"{base}\n\nAdditional focus: {custom_instructions}"
    conversation = serialize_conversation(convert_to_llm(messages))
    prompt = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if js_truthy(previous_summary):
        prompt += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return prompt + base


def build_turn_prefix_prompt(messages: Sequence[dict], prompts: PromptTemplates = PI_PROMPTS) -> str:
    """The user-message text of a turn-prefix summary request."""
    conversation = serialize_conversation(convert_to_llm(messages))
    return f"# Conversation\n{conversation}\n\n# Instructions\n{prompts.turn_prefix}"


def summary_request(kind: str, prompt: str, max_tokens: int | None, reasoning: str | None, model: ModelInfo,
                    session_id: str | None, system_prompt: str = SUMMARIZATION_SYSTEM_PROMPT) -> SummaryRequest:
    """The request :func:`complete_checked` sends: Pi's system prompt, ``prompt`` as the one user message."""
    return SummaryRequest(
        kind=kind,  # type: ignore[arg-type]
        system_prompt=system_prompt,
        prompt=prompt,
        max_tokens=max_tokens,
        reasoning=reasoning,
        cache_retention="none",
        session_id=session_id if session_id is not None else uuid7(),
        model=model.id or "",
    )


def generate_summary_with_usage(
    messages: Sequence[dict],
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    reserve_tokens: float,
    custom_instructions: str | None = None,
    previous_summary: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> tuple[str, dict | None]:
    """``generateSummaryWithUsage``: one history summary request; raises SummarizationError."""
    request = summary_request(
        "history",
        build_history_prompt(messages, custom_instructions, previous_summary, prompts),
        summarization_max_tokens(0.8, reserve_tokens, model),
        summarization_reasoning(model, thinking_level),
        model,
        session_id,
        prompts.system,
    )
    return complete_checked(summarizer, request, "Summarization")


def generate_summary(
    messages: Sequence[dict],
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    reserve_tokens: float,
    custom_instructions: str | None = None,
    previous_summary: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> str:
    """``generateSummary``: the text of :func:`generate_summary_with_usage`."""
    return generate_summary_with_usage(
        messages, summarizer, model=model, reserve_tokens=reserve_tokens, custom_instructions=custom_instructions,
        previous_summary=previous_summary, thinking_level=thinking_level, session_id=session_id, prompts=prompts,
    )[0]


def generate_turn_prefix_summary(
    messages: Sequence[dict],
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    reserve_tokens: float,
    thinking_level: str | None = None,
    session_id: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> tuple[str, dict | None]:
    """``generateTurnPrefixSummary``: the split turn's prefix, half the reserve as budget."""
    request = summary_request(
        "turn_prefix",
        build_turn_prefix_prompt(messages, prompts),
        summarization_max_tokens(0.5, reserve_tokens, model),
        summarization_reasoning(model, thinking_level),
        model,
        session_id,
        prompts.system,
    )
    return complete_checked(summarizer, request, "Turn prefix summarization")


def complete_checked(summarizer: Summarizer, request: SummaryRequest, label: str) -> tuple[str, dict | None]:
    """``completeSummarization``: ask once; an error, a length stop or a tool call is a failure named with
    Pi's ``label``."""
    response = summarizer.complete(request)
    failure = get_summarization_failure(response, label)
    if failure:
        raise SummarizationError(failure)
    if response.called_tool:
        raise SummarizationError(f"{label} attempted to call a tool")
    return response.text, response.usage


def compact(
    preparation: CompactionPreparation,
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> CompactionResult:
    """``compact``: summarize a preparation (two requests for a split turn) and add file lists.

    ``prompts``: the instruction texts (Pi's by default; other templates for strategy studies).

    Args:
        preparation: what to summarize (from :func:`prepare_compaction`).
        summarizer: the model that writes the summary.
        model: the model's limits (the summary's token budget, reasoning).
        custom_instructions: instructions added to the prompt.
        thinking_level: the session's thinking level (a reasoning model summarizes at it).
        session_id: the requests' session id (default: a new one).
        prompts: the instruction texts (Pi's by default).
    """
    p = preparation
    reserve = p.settings.reserve_tokens
    if p.is_split_turn and p.turn_prefix_messages:
        history_text = p.previous_summary if p.previous_summary is not None else "No prior history."
        history_usage = None
        if p.messages_to_summarize:
            history_text, history_usage = generate_summary_with_usage(
                p.messages_to_summarize, summarizer, model=model, reserve_tokens=reserve,
                custom_instructions=custom_instructions, previous_summary=p.previous_summary,
                thinking_level=thinking_level, session_id=session_id, prompts=prompts,
            )
        prefix_text, prefix_usage = generate_turn_prefix_summary(
            p.turn_prefix_messages, summarizer, model=model, reserve_tokens=reserve,
            thinking_level=thinking_level, session_id=session_id, prompts=prompts,
        )
        summary = f"{history_text}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix_text}"
        usage = combine_usage(history_usage, prefix_usage) if history_usage else prefix_usage
    else:
        summary, usage = generate_summary_with_usage(
            p.messages_to_summarize, summarizer, model=model, reserve_tokens=reserve,
            custom_instructions=custom_instructions, previous_summary=p.previous_summary,
            thinking_level=thinking_level, session_id=session_id, prompts=prompts,
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


