"""Pi 0.87.1's ``core/compaction/compaction.js``: token accounting, cut points, preparation, compact.

Token accounting: ``estimate_tokens`` is Pi's chars/4 heuristic, ``ceil(estimate_chars(m) / 4)``,
where ``estimate_chars`` counts JavaScript string lengths (UTF-16 code units),
``JSON.stringify(arguments).length`` for tool calls and 4800 characters per image.
``estimate_context_tokens`` trusts the last valid assistant usage and estimates what follows;
``estimate_projected_context_tokens`` distrusts usage captured before a later ``context_edit``
or compaction.

Cut points, preparation and the summary requests are ports of Pi's functions, each the one home of its
Pi function (``pimem.core.porting``); the LLM call goes through a summarizer
(``complete(SummaryRequest) -> SummaryResponse``). They keep nothing between calls; the incremental engine
(:mod:`pimem.core.incremental`) computes the same along a growing session from these functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from pimem.base.js import UNDEFINED, js_entries, js_prop, js_stringify_length, js_truthy, utf16_len
from pimem.core.compaction.utils import (
    FileOperations,
    compute_file_lists,
    create_file_ops,
    extract_file_ops_from_messages,
    format_file_operations,
    serialize_conversation,
    set_member,
)
from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import get_current_system_message, uuid7
from pimem.core.porting import port
from pimem.core.prompts import (
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
)
from pimem.core.session_manager import (
    EntryMessages,
    ProjectedEntry,
    SessionProjection,
    project_session_path,
    require_message_objects,
    session_entry_to_context_messages,
    session_entry_to_context_messages_of,
    session_path_of,
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
    """JavaScript's ``value.length`` of a string (UTF-16 code units) or an array; a TypeError otherwise."""
    if value.__class__ is str or isinstance(value, str):
        return utf16_len(value)
    if isinstance(value, list):
        return len(value)
    raise JavaScriptTypeError(f"Cannot read properties of {value!r} (reading 'length') in {what}")


@port("compaction/compaction.js", "estimateTextAndImageContentChars")
def estimate_text_and_image_content_chars(content: Any) -> int:
    """``estimateTextAndImageContentChars``: a string's length, or the text blocks' lengths plus 4800 per image.

    Args:
        content: a message's content.
    """
    if content.__class__ is not list:
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


@port("compaction/compaction.js", "estimateTokens", part=True)
def estimate_chars(message: Mapping[str, Any]) -> int:
    """The characters (UTF-16 code units) :func:`estimate_tokens` counts for one message.

    Text and thinking, tool name + ``JSON.stringify(arguments)``, summaries, bash command +
    output, system content, sections and added tools, 4800 per image.
    ``estimate_tokens(m) == ceil(estimate_chars(m) / 4)``; raises ``TypeError`` where Pi's
    function throws. (A string's length is ``len`` where it is ASCII, as nearly all are.)

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
            if btype == "toolCall":
                try:
                    arguments = block["arguments"]
                except KeyError:
                    raise JavaScriptTypeError("toolCall block has no arguments") from None
                name = block.get("name")
                chars += (len(name) if name.__class__ is str and name.isascii() else
                          _js_length(name, "toolCall name")) + js_stringify_length(arguments)
                continue
            if btype == "text":
                value = block.get("text")
            elif btype == "thinking":
                value = block.get("thinking")
            else:
                continue
            chars += len(value) if value.__class__ is str and value.isascii() else _js_length(value, btype + " block")
        return chars
    if role == "toolResult" or role == "user" or role == "custom":
        return estimate_text_and_image_content_chars(message.get("content"))
    if role == "bashExecution":
        return _js_length(message.get("command"), "bash command") + _js_length(
            message.get("output"), "bash output"
        )
    if role == "branchSummary" or role == "compactionSummary":
        return _js_length(message.get("summary"), "summary")
    if role == "system":
        chars = estimate_text_and_image_content_chars(message.get("content"))
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


@port("compaction/compaction.js", "estimateTokens")
def estimate_tokens(message: Mapping[str, Any]) -> int:
    """``estimateTokens``: ceil(chars / 4) with Pi's per-role character counts (:func:`estimate_chars`).

    Args:
        message: one agent message.
    """
    return -(-estimate_chars(message) // 4)


def estimate_messages_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """The sum of :func:`estimate_tokens` over messages.

    Args:
        messages: agent messages.
    """
    return sum(map(estimate_tokens, messages))


@port("compaction/compaction.js", "calculateContextTokens")
def calculate_context_tokens(usage: Any) -> Any:
    """``calculateContextTokens``: ``totalTokens`` or input+output+cacheRead+cacheWrite.

    Args:
        usage: a Pi usage dict (anything else, a string or ``true``, has no fields: NaN, as in JavaScript).
    """
    if usage.__class__ is not dict:
        return float("nan")  # undefined || undefined + undefined + ...
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


@port("compaction/compaction.js", "getAssistantUsage")
def get_assistant_usage(message: Mapping[str, Any]) -> dict | None:
    """``getAssistantUsage``: valid usage of an assistant message (not aborted/error/zero).

    Args:
        message: an agent message.
    """
    if message.get("role") == "assistant" and "usage" in message:
        stop = message.get("stopReason")
        usage = message["usage"]
        if stop != "aborted" and stop != "error" and js_truthy(usage):
            if calculate_context_tokens(usage) > 0:
                return usage
    return None


@port("compaction/compaction.js", "getLastAssistantUsage")
def get_last_assistant_usage(entries: Sequence[dict]) -> dict | None:
    """``getLastAssistantUsage``: the last valid assistant usage among session entries.

    Args:
        entries: session entries.
    """
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


@port("compaction/compaction.js", "getLastAssistantUsageInfo")
def get_last_assistant_usage_info(messages: Sequence[Mapping[str, Any]]) -> tuple[dict, int] | None:
    """``getLastAssistantUsageInfo``: (the last valid assistant usage, its message's index), or None.

    Args:
        messages: agent messages.
    """
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant":
            usage = get_assistant_usage(m)
            if usage is not None:
                return usage, i
    return None


@port("compaction/compaction.js", "estimateContextTokens")
def estimate_context_tokens(messages: Sequence[Mapping[str, Any]]) -> ContextUsageEstimate:
    """``estimateContextTokens``: last valid usage plus estimates of the messages after it.

    Args:
        messages: the context's messages, in order.
    """
    info = get_last_assistant_usage_info(messages)
    if info is None:
        estimated = estimate_messages_tokens(messages)
        return ContextUsageEstimate(estimated, 0, estimated, None)
    usage, index = info
    usage_tokens = calculate_context_tokens(usage)
    trailing = estimate_messages_tokens(messages[index + 1 :])
    return ContextUsageEstimate(usage_tokens + trailing, usage_tokens, trailing, index)


_INVALIDATING = ("context_edit", "compaction")
_SOURCE = itemgetter(0)  # a projected entry's source entry
_MESSAGES = itemgetter(1)  # its messages


@port("compaction/compaction.js", "estimateProjectedContextTokens")
def estimate_projected_context_tokens(
    projection: SessionProjection, branch_entries: Sequence[dict], *, distinct_ids: bool = False
) -> ContextUsageEstimate:
    """``estimateProjectedContextTokens``: the usage estimate only if no later ``context_edit`` or compaction
    invalidates its usage; else the estimate of the current system message and every other message.

    Args:
        projection: the session's projection.
        branch_entries: the entries of the branch, root first.
        distinct_ids: the branch entries' truthy ids are known to be distinct (a walked path): the
            usage's entry is then searched from the end only.
    """
    messages = projection.messages
    estimate = estimate_context_tokens(messages)
    usage_index = estimate.last_usage_index
    if usage_index is not None:
        # The projected entry holding message ``usage_index`` (counted from the end: the usage is
        # normally recent).
        usage_entry_id: Any = None
        end = len(messages)
        entries = projection.entries
        for k in range(len(entries) - 1, -1, -1):
            start = end - len(entries[k][1])
            if start <= usage_index < end:
                usage_entry_id = entries[k][0].get("id")
                break
            end = start
        if js_truthy(usage_entry_id) and _usage_entry_is_current(branch_entries, usage_entry_id, distinct_ids):
            return estimate
    current_system = get_current_system_message(messages)
    tokens = estimate_tokens(current_system) if current_system is not None else 0
    tokens += estimate_messages_tokens([m for m in messages if m.get("role") != "system"])
    return ContextUsageEstimate(tokens, 0, tokens, None)


def _usage_entry_is_current(branch: Sequence[dict], usage_entry_id: Any, distinct_ids: bool) -> bool:
    """``usageEntryIndex > latestInvalidatingEntryIndex``: the first branch entry with the usage's id comes
    after the last ``context_edit`` or compaction."""
    for i in range(len(branch) - 1, -1, -1):
        entry = branch[i]
        if entry.get("type") in _INVALIDATING:
            latest_invalidating = i
            break
        if distinct_ids and entry.get("id") == usage_entry_id:
            return True  # no invalidating entry after it, and no other entry with its id
    else:
        latest_invalidating = -1
    ids = [e.get("id") for e in branch]
    return usage_entry_id in ids and ids.index(usage_entry_id) > latest_invalidating


@port("compaction/compaction.js", "shouldCompact")
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


@port("compaction/compaction.js", "isCutPointMessage")
def is_cut_point_message(message: dict) -> bool:
    """``isCutPointMessage``: user-like or assistant messages, never tool results."""
    return message.get("role") in _CUT_POINT_ROLES


@port("compaction/compaction.js", "isTurnStartMessage")
def is_turn_start_message(message: dict) -> bool:
    """``isTurnStartMessage``: user, bash, custom and summary messages."""
    return message.get("role") in _TURN_START_ROLES


def _any_role(messages: Sequence[dict], roles: frozenset) -> bool:
    """``messages.some((m) => roles has m.role)``."""
    for m in messages:
        if m.get("role") in roles:
            return True
    return False


@port("compaction/compaction.js", "isTurnStartEntry", part=True)
def _starts_turn(etype: Any, messages: Sequence[dict]) -> bool:
    """``isTurnStartEntry`` of an entry of type ``etype`` bringing ``messages``."""
    return etype != "compaction" and _any_role(messages, _TURN_START_ROLES)


@port("compaction/compaction.js", "isTurnStartEntry")
def is_turn_start_entry(entry: dict) -> bool:
    """``isTurnStartEntry``: a user, bash, custom or summary message among the entry's context messages
    (never a compaction)."""
    return _starts_turn(entry.get("type"), session_entry_to_context_messages(entry))


_BLOCK = 32  # the most entries whose messages a search reads at once
_FIRST_BLOCK = 4  # a search's first read (most stop within a few entries); each next one twice as long


def _entry_messages(entries: Sequence[dict], types: Sequence[Any] | None = None
                    ) -> Callable[[int, int], list[list[dict]]]:
    """``(a, b) -> the context messages of entries[a:b]``, each entry's (Pi's ``sessionEntryToContextMessages``;
    ``types``: the entries' types, if known)."""
    if types is None:
        return lambda a, b: session_entry_to_context_messages_of(entries[a:b]).per_entry()
    return lambda a, b: session_entry_to_context_messages_of(entries[a:b], types[a:b]).per_entry()


def _backward(messages_of: Callable[[int, int], list[list[dict]]], start: int, end: int
              ) -> Iterator[tuple[int, list[dict]]]:
    """(i, the messages of entry i) for i from ``end - 1`` down to ``start``, read a block at a time."""
    b = end
    size = _FIRST_BLOCK
    while b > start:
        a = max(start, b - size)
        lists = messages_of(a, b)
        for k in range(b - a - 1, -1, -1):
            yield a + k, lists[k]
        b = a
        size = min(2 * size, _BLOCK)


def _forward(messages_of: Callable[[int, int], list[list[dict]]], start: int, end: int
             ) -> Iterator[tuple[int, list[dict]]]:
    """(i, the messages of entry i) for i from ``start`` up to ``end - 1``, read a block at a time."""
    a = start
    size = _FIRST_BLOCK
    while a < end:
        b = min(end, a + size)
        yield from zip(range(a, b), messages_of(a, b))
        a = b
        size = min(2 * size, _BLOCK)


@port("compaction/compaction.js", "findValidCutPoints")
def find_valid_cut_points(entries: Sequence[dict], start_index: int, end_index: int) -> list[int]:
    """``findValidCutPoints``: indices of context-visible user-like or assistant entries (no compaction).

    Args:
        entries: the entries.
        start_index: the first index.
        end_index: the index after the last.
    """
    return [i for i, messages in _forward(_entry_messages(entries), start_index, end_index)
            if entries[i].get("type") != "compaction" and _any_role(messages, _CUT_POINT_ROLES)]


@port("compaction/compaction.js", "findTurnStartIndex")
def find_turn_start_index(entries: Sequence[dict], entry_index: int, start_index: int, *,
                          read: _ReadBack | None = None) -> int:
    """``findTurnStartIndex``: the turn-starting entry at or before ``entry_index`` (or -1).

    Args:
        entries: the entries searched.
        entry_index: where the search starts, going back.
        start_index: the first index it may return.
        read: the context messages of ``entries`` as a search has read them so far (see :func:`find_cut_point`).
    """
    if read is None:
        scan: Iterable[tuple[int, Sequence[dict]]] = _backward(_entry_messages(entries), start_index, entry_index + 1)
    else:
        scan = zip(range(entry_index, start_index - 1, -1), map(read.messages, range(entry_index, start_index - 1, -1)))
    for i, messages in scan:
        if _starts_turn(entries[i].get("type"), messages):
            return i
    return -1


def _entry_tokens(messages: Sequence[dict]) -> int:
    """The estimated tokens of one entry's context messages (Pi's ``reduce`` of :func:`estimate_tokens`)."""
    return -(-estimate_chars(messages[0]) // 4) if len(messages) == 1 else sum(map(estimate_tokens, messages))


class _ReadBack:
    """The context messages of ``entries[start:end]`` for one cut-point search, read a block of ``_BLOCK`` entries
    at a time counted from the end, as the walk back from the end reaches them, and kept until the search returns:
    the scans after the walk read no entry again (nothing outlives the call).

    Args:
        entries: the entries searched.
        start: the first entry the search may read.
        end: the entry after the last.
        types: the entries' types, if known.
    """

    __slots__ = ("entries", "start", "end", "types", "blocks", "lists")

    def __init__(self, entries: Sequence[dict], start: int, end: int, types: Sequence[Any] | None) -> None:
        self.entries, self.start, self.end, self.types = entries, start, end, types
        self.blocks: dict[int, EntryMessages] = {}
        self.lists: dict[int, list] = {}

    def block(self, k: int) -> EntryMessages:
        """The messages of block ``k`` from the end: entries ``max(start, end - _BLOCK * (k + 1))`` up to
        ``end - _BLOCK * k``."""
        brought = self.blocks.get(k)
        if brought is None:
            b = self.end - _BLOCK * k
            a = max(self.start, b - _BLOCK)
            types = self.types
            brought = self.blocks[k] = session_entry_to_context_messages_of(
                self.entries[a:b], None if types is None else types[a:b])
        return brought

    def per_entry(self, k: int) -> list[Sequence[dict]]:
        """The messages of block ``k`` from the end, each entry's."""
        lists = self.lists.get(k)
        if lists is None:
            lists = self.lists[k] = self.block(k).per_entry(as_tuples=True)
        return lists

    def messages(self, i: int) -> Sequence[dict]:
        """The context messages of entry ``i`` (``start <= i < end``)."""
        end = self.end
        k = (end - 1 - i) // _BLOCK
        own, other = self.blocks.get(k) or self.block(k)
        position = i - max(self.start, end - _BLOCK * (k + 1))
        return (own[position],) if not other else self.per_entry(k)[position]

    def budget_reached_at(self, keep_recent_tokens: float) -> int:
        """The walk back from the end of Pi's ``findCutPoint``: the index at which the entries' estimated tokens,
        added up from the last entry down, reach ``keep_recent_tokens``; -1 if they never do (the estimates stop
        there: nothing before it is read)."""
        accumulated = 0
        start, k = self.start, 0
        b = self.end
        while b > start:
            own, other = self.block(k)
            a = max(start, b - _BLOCK)
            if not other:  # each entry brings its own message (nearly every block)
                for i, message in zip(range(b - 1, a - 1, -1), reversed(own)):
                    chars = estimate_chars(message)
                    if chars:
                        accumulated += -(-chars // 4)  # estimate_tokens
                        if accumulated >= keep_recent_tokens:
                            return i
            else:
                taken = len(own)
                for i in range(b - 1, a - 1, -1):
                    messages = other.get(i - a)
                    if messages is None:  # its own message
                        taken -= 1
                        tokens = -(-estimate_chars(own[taken]) // 4)
                    else:
                        tokens = _entry_tokens(messages) if messages else 0
                    if tokens:
                        accumulated += tokens
                        if accumulated >= keep_recent_tokens:
                            return i
            k += 1
            b = a
        return -1


@port("compaction/compaction.js", "findCutPoint")
def find_cut_point(
    entries: Sequence[dict], start_index: int, end_index: int, keep_recent_tokens: float, *, checked: bool = False,
    types: Sequence[Any] | None = None,
) -> CutPointResult:
    """``findCutPoint`` (entry level, as Pi exports it): keep about ``keep_recent_tokens``.

    Pi lists every valid cut point first (reading every entry's messages, and throwing at a message entry
    without a message); here the same throw comes from one check of the range, the walk back from the end
    comes first and keeps the messages it read, and the cut point it needs (the first at or after the entry
    where the budget is reached, else the last; the first where it is never reached) is found by scanning
    only as far as it is (the same answer; where the walk throws, a range without a cut point still answers as
    Pi's, which returns before it estimates).

    Args:
        entries: the entries to cut.
        start_index: the first entry that may be summarized.
        end_index: the entry after the last.
        keep_recent_tokens: the tokens to keep.
        checked: every message entry of ``entries`` is known to hold a message object.
        types: the entries' types, if known.
    """
    start = start_index
    if end_index > len(entries):  # Pi reads entries[i].type of undefined there
        raise JavaScriptTypeError(f"Cannot read properties of undefined (reading 'type') (end_index {end_index} is "
                                  f"past the {len(entries)} entries)")
    if start < 0 and start < end_index:  # Pi reads entries[start].type of undefined there
        raise JavaScriptTypeError(f"Cannot read properties of undefined (reading 'type') (start_index {start} is "
                                  "before the first entry)")
    if not checked:  # Pi's list of cut points reads every entry of the range
        require_message_objects(entries[start:end_index])
    read = _ReadBack(entries, start, end_index, types)

    def cut_points(indices: range) -> Iterator[int]:
        return (i for i in indices if entries[i].get("type") != "compaction"
                and _any_role(read.messages(i), _CUT_POINT_ROLES))

    try:
        reached = read.budget_reached_at(keep_recent_tokens)
    except Exception:
        if next(cut_points(range(start, end_index)), -1) < 0:
            return CutPointResult(start_index, -1, False)  # Pi returns before it estimates anything
        raise
    if reached >= 0:
        # cutPoints.find((c) => c >= reached) ?? cutPoints.at(-1)
        cut_index = next(cut_points(range(reached, end_index)), -1)
        if cut_index < 0:
            cut_index = next(cut_points(range(end_index - 1, start - 1, -1)), -1)
    else:
        cut_index = next(cut_points(range(start, end_index)), -1)  # cutPoints[0]
    if cut_index < 0:  # no cut point
        return CutPointResult(start_index, -1, False)
    # back over adjacent entries that add nothing to the context, stopping at a compaction
    while cut_index > start_index:
        if entries[cut_index - 1].get("type") == "compaction" or len(read.messages(cut_index - 1)) > 0:
            break
        cut_index -= 1
    cut_type = entries[cut_index].get("type")
    starts_turn = _starts_turn(cut_type, read.messages(cut_index))  # isTurnStartEntry
    turn_start = -1 if starts_turn else find_turn_start_index(entries, cut_index, start_index, read=read)
    return CutPointResult(cut_index, turn_start, (not starts_turn) and turn_start != -1)


@port("compaction/compaction.js", "isProjectedTurnStart")
def is_projected_turn_start(entry: ProjectedEntry) -> bool:
    """``isProjectedTurnStart``: a projected entry (no compaction) whose messages start a turn."""
    return entry[0].get("type") != "compaction" and _any_role(entry[1], _TURN_START_ROLES)


@port("compaction/compaction.js", "findProjectedCutPoint", part=True)
def is_projected_cut_point(entry: ProjectedEntry) -> bool:
    """``findProjectedCutPoint``'s cut points: a projected entry (no compaction) with a cut-point message."""
    return entry[0].get("type") != "compaction" and _any_role(entry[1], _CUT_POINT_ROLES)


@port("compaction/compaction.js", "findProjectedTurnStartIndex")
def find_projected_turn_start_index(entries: Sequence[ProjectedEntry], entry_index: int, start_index: int) -> int:
    """``findProjectedTurnStartIndex``: the turn-starting projected entry at or before ``entry_index`` (or -1)."""
    for i in range(entry_index, start_index - 1, -1):
        if is_projected_turn_start(entries[i]):
            return i
    return -1


def _is_recovery_omission_suffix(suffix: Sequence[ProjectedEntry]) -> bool:
    """Pi's closed suffix of omitted recovery attempts after the cut (``isRecoveryOmissionSuffix`` once the
    budget was exceeded): no compaction; every entry either not visible by itself or omitted by an edit; an
    omitted assistant message among them; no edit replacing an entry outside the omitted ones. Stops at the
    first entry that breaks the rule."""
    omitted_ids = set()
    edits = []
    omitted_assistant = False
    for source, messages in suffix:
        etype = source.get("type")
        if etype == "compaction":
            return False
        if etype == "context_edit":
            edits.append(source)
            continue
        if not session_entry_to_context_messages(source):
            continue  # not visible by itself
        if messages:
            return False  # visible and not omitted
        try:
            omitted_ids.add(source.get("id"))
        except TypeError:  # an id no parsed key can equal
            pass
        if etype == "message" and source["message"].get("role") == "assistant":
            omitted_assistant = True
    if not omitted_assistant:
        return False
    for edit in edits:
        target = edit.get("targetId")
        if edit.get("replacement", UNDEFINED) is not None and (
                target.__class__ in (dict, list) or target not in omitted_ids):
            return False
    return True


@port("compaction/compaction.js", "findProjectedCutPoint", part=True)
def settle_projected_cut(entries: Sequence[ProjectedEntry], cut_index: int, start_index: int, end_index: int,
                         exceeded_budget: bool) -> int:
    """The last steps of ``findProjectedCutPoint`` once a cut is chosen: step past a closed suffix of
    omitted recovery attempts (only where the budget was exceeded), then back over adjacent entries that
    add nothing to the context, stopping at a compaction."""
    if exceeded_budget and _is_recovery_omission_suffix(entries[cut_index + 1 : end_index]):
        cut_index += 1
    while cut_index > start_index:
        previous = entries[cut_index - 1]
        if previous[0].get("type") == "compaction" or len(previous[1]) > 0:
            break
        cut_index -= 1
    return cut_index


@port("compaction/compaction.js", "findProjectedCutPoint")
def find_projected_cut_point(
    entries: Sequence[ProjectedEntry], start_index: int, end_index: int, keep_recent_tokens: float
) -> CutPointResult:
    """``findProjectedCutPoint``: the cut over projected entries, with Pi's recovery-omission rule.

    As in :func:`find_cut_point`, the cut points Pi lists are found by scanning as far as needed.

    Args:
        entries: the projection's entries.
        start_index: the first entry that may be summarized.
        end_index: the entry after the last.
        keep_recent_tokens: the tokens to keep.
    """
    first_cut = next((i for i in range(start_index, end_index) if is_projected_cut_point(entries[i])), -1)
    if first_cut < 0:
        return CutPointResult(start_index, -1, False)
    cut_index = first_cut
    # the walk back from the end: the entry at which the estimated tokens, added up, reach keep_recent_tokens
    reached = -1
    accumulated = 0
    for i in range(end_index - 1, start_index - 1, -1):
        messages = entries[i][1]
        tokens = _entry_tokens(messages) if messages else 0
        if tokens:
            accumulated += tokens
            if accumulated >= keep_recent_tokens:
                reached = i
                break
    exceeded = reached >= 0
    if exceeded:
        cut_index = next((c for c in range(reached, end_index) if is_projected_cut_point(entries[c])), -1)
        if cut_index < 0:
            cut_index = next(c for c in range(end_index - 1, -1, -1) if is_projected_cut_point(entries[c]))
    cut_index = settle_projected_cut(entries, cut_index, start_index, end_index, exceeded)
    starts_turn = is_projected_turn_start(entries[cut_index])
    turn_start = -1 if starts_turn else find_projected_turn_start_index(entries, cut_index, start_index)
    return CutPointResult(cut_index, turn_start, (not starts_turn) and turn_start != -1)


# ---------------------------------------------------------------------------
# Preparation
# ---------------------------------------------------------------------------


@port("compaction/compaction.js", "extractFileOperations", part=True)
def previous_compaction_file_ops(previous: dict | None) -> FileOperations:
    """The file operations ``extractFileOperations`` starts from: the previous compaction's
    ``details.readFiles`` (read) and ``details.modifiedFiles`` (edited), unless it came from a hook."""
    file_ops = create_file_ops()
    if previous is not None:
        details = previous.get("details")
        if not js_truthy(previous.get("fromHook")) and js_truthy(details) and isinstance(details, dict):
            read_files = details.get("readFiles")
            if isinstance(read_files, list):
                file_ops.read.update(set_member(f) for f in read_files)
            modified = details.get("modifiedFiles")
            if isinstance(modified, list):
                file_ops.edited.update(set_member(f) for f in modified)
    return file_ops


@port("compaction/compaction.js", "extractFileOperations")
def extract_file_operations(
    messages: Sequence[dict], entries: Sequence[dict], prev_compaction_index: int
) -> FileOperations:
    """``extractFileOperations``: the previous compaction's file lists plus the tool calls of ``messages``.

    Args:
        messages: the messages summarized.
        entries: the projection's source entries.
        prev_compaction_index: the index of the previous compaction among them (-1: none).
    """
    file_ops = previous_compaction_file_ops(entries[prev_compaction_index] if prev_compaction_index >= 0 else None)
    extract_file_ops_from_messages(messages, file_ops)
    return file_ops


@port("compaction/compaction.js", "getMessagesFromProjectedEntryForCompaction")
def get_messages_from_projected_entries_for_compaction(
    projection: SessionProjection, start: int, end: int
) -> list[dict]:
    """``getMessagesFromProjectedEntryForCompaction`` over the projected entries ``start:end`` (Pi's
    ``flatMap``): their messages but system messages; none from a compaction.

    Args:
        projection: the projection.
        start: the first projected entry.
        end: the projected entry after the last.
    """
    entries = projection.entries
    if start >= end:
        return []
    if entries[start][0].get("type") == "compaction":
        start += 1  # the newest compaction's messages (a later one brings none anyway)
    # The entries' messages are a slice of the projection's messages (counted over the range or past it, the
    # shorter).
    messages = projection.messages
    before = sum(map(len, map(_MESSAGES, entries[:start])))
    if end - start <= len(entries) - end:
        stop = before + sum(map(len, map(_MESSAGES, entries[start:end])))
    else:
        stop = len(messages) - sum(map(len, map(_MESSAGES, entries[end:])))
    return [m for m in messages[before:stop] if m.get("role") != "system"]


@port("compaction/compaction.js", "prepareCompaction", part=True)
def preparation_at_cut(
    projection: SessionProjection, settings: CompactionSettings, boundary_start: int, cut: CutPointResult,
    tokens_before: Any,
) -> CompactionPreparation | None:
    """The rest of ``prepareCompaction`` once the cut is known: the messages to summarize (from
    ``boundary_start``, after the previous compaction) and the split turn's prefix, the file operations;
    None where the first kept entry has no id or nothing is left to summarize.

    Args:
        projection: the path's projection.
        settings: the compaction settings.
        boundary_start: 1 after a previous compaction (first in the projection), else 0.
        cut: the cut point.
        tokens_before: the context's tokens before compacting.
    """
    entries = projection.entries
    first_kept_index = cut.first_kept_entry_index
    first_kept = entries[first_kept_index][0] if 0 <= first_kept_index < len(entries) else None
    first_kept_id: Any = first_kept.get("id") if first_kept is not None else None
    if not js_truthy(first_kept_id):
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else first_kept_index
    to_summarize = get_messages_from_projected_entries_for_compaction(projection, boundary_start, history_end)
    turn_prefix: list[dict] = []
    if cut.is_split_turn:
        turn_prefix = get_messages_from_projected_entries_for_compaction(projection, cut.turn_start_index,
                                                                         first_kept_index)
    if not to_summarize and not turn_prefix:
        return None
    # the source entries up to the previous compaction (the first, if any): the only one read
    file_ops = extract_file_operations(to_summarize, list(map(_SOURCE, entries[:boundary_start])), boundary_start - 1)
    if cut.is_split_turn:
        extract_file_ops_from_messages(turn_prefix, file_ops)
    previous_summary = entries[0][0].get("summary") if boundary_start else None
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=turn_prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        settings=settings,
    )


@port("compaction/compaction.js", "prepareCompaction")
def prepare_compaction(
    path_entries: Sequence[dict],
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
) -> CompactionPreparation | None:
    """``prepareCompaction``: what to summarize and where to cut, or None if nothing to do.

    Args:
        path_entries: the active path (``session.get_branch()``), root first.
        settings: Pi's ``reserveTokens`` / ``keepRecentTokens``.
    """
    if path_entries and path_entries[-1].get("type") == "compaction":
        return None
    path, walked = session_path_of(path_entries)
    projection = project_session_path(path, pairs=True)  # buildSessionProjection(pathEntries)
    return preparation_of_projection(projection, path_entries, settings, walked)


@port("compaction/compaction.js", "prepareCompaction", part=True)
def preparation_of_projection(projection: SessionProjection, path_entries: Sequence[dict],
                              settings: CompactionSettings, walked: bool) -> CompactionPreparation | None:
    """``prepareCompaction`` once ``buildSessionProjection(pathEntries)`` is known: the previous compaction, the
    tokens before, the cut, then :func:`preparation_at_cut`.

    Args:
        projection: the projection of the path, its entries as pairs
            (:func:`~pimem.core.session_manager.project_session_path` with ``pairs=True``).
        path_entries: the path as given (its last entry is no compaction).
        settings: the compaction settings.
        walked: ``path_entries`` is its own walk (its truthy ids are distinct).
    """
    entries = projection.entries
    # Only the first projected entry can be a compaction that brings messages (the newest one).
    boundary_start = 1 if entries and entries[0][0].get("type") == "compaction" and entries[0][1] else 0
    tokens_before = estimate_projected_context_tokens(projection, path_entries, distinct_ids=walked).tokens
    cut = find_projected_cut_point(entries, boundary_start, len(entries), settings.keep_recent_tokens)
    return preparation_at_cut(projection, settings, boundary_start, cut, tokens_before)


# ---------------------------------------------------------------------------
# Summary requests
# ---------------------------------------------------------------------------


@port("compaction/compaction.js", "getSummarizationFailure")
def get_summarization_failure(response: SummaryResponse, label: str) -> str | None:
    """``getSummarizationFailure``: Pi's message for an error or length stop, else None."""
    if response.stop_reason == "error":
        return f"{label} failed: {response.error_message or 'Unknown error'}"
    if response.stop_reason == "length":
        return f"{label} failed: generation hit the token cap and the summary is incomplete"
    return None


@port("compaction/compaction.js", "combineUsage")
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


@port("compaction/compaction.js", "generateSummaryWithUsage", part=True)
def summarization_max_tokens(fraction: float, reserve_tokens: float, model: ModelInfo) -> int | None:
    """``Math.min(Math.floor(fraction * reserveTokens), model.maxTokens > 0 ? … : Infinity)``.

    None stands for Infinity.
    """
    cap = model.max_tokens if (model.max_tokens is not None and model.max_tokens > 0) else math.inf
    scaled = fraction * reserve_tokens
    value = math.floor(scaled) if math.isfinite(scaled) else scaled
    result = min(value, cap)
    return None if math.isinf(result) else int(result)


@port("compaction/compaction.js", "createSummarizationOptions")
def summarization_reasoning(model: ModelInfo, thinking_level: str | None) -> str | None:
    """``createSummarizationOptions``: the thinking level for reasoning models, else None."""
    if js_truthy(model.reasoning) and js_truthy(thinking_level) and thinking_level != "off":
        return thinking_level
    return None


@port("compaction/compaction.js", "generateSummaryWithUsage", part=True)
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


@port("compaction/compaction.js", "generateTurnPrefixSummary", part=True)
def build_turn_prefix_prompt(messages: Sequence[dict], prompts: PromptTemplates = PI_PROMPTS) -> str:
    """The user-message text of a turn-prefix summary request."""
    conversation = serialize_conversation(convert_to_llm(messages))
    return f"# Conversation\n{conversation}\n\n# Instructions\n{prompts.turn_prefix}"


@port("compaction/compaction.js", "buildSummarizationContext")
def summary_request(kind: str, prompt: str, max_tokens: int | None, reasoning: str | None, model: ModelInfo,
                    session_id: str | None, system_prompt: str = SUMMARIZATION_SYSTEM_PROMPT) -> SummaryRequest:
    """The request :func:`complete_checked` sends (Pi's ``buildSummarizationContext`` and summarization
    options): Pi's system prompt, ``prompt`` as the one user message."""
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


@port("compaction/compaction.js", "generateSummaryWithUsage")
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


@port("compaction/compaction.js", "generateSummary")
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


@port("compaction/compaction.js", "generateTurnPrefixSummary")
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


@port("compaction/compaction.js", "completeSummarization")
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


@port("compaction/compaction.js", "compact")
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


