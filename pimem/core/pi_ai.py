"""The parts of ``@earendil-works/pi-ai`` (as shipped with Pi 0.87.1) that the pipeline uses.

``contentText`` (utils/text.js), the system-message helpers ``getSystemMessageText``,
``getCurrentTools``, ``getCurrentSystemMessage`` and ``normalizeContext``
(utils/transcript.js), ``isContextOverflow`` (utils/overflow.js) and ``uuidv7`` (utils/uuid.js).
"""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from typing import Any, Iterable, Mapping, Sequence, cast

from pimem.base.js import UNDEFINED, js_entries, js_prop, js_string, js_truthy
from pimem.base.types import SystemMessage
from pimem.core.porting import port
from pimem.errors import JavaScriptTypeError

__all__ = [
    "content_text",
    "get_system_message_text",
    "get_current_tools",
    "get_current_system_message",
    "normalize_context",
    "is_context_overflow",
    "uuid7",
]


@port("pi-ai: utils/text.js", "contentText")
def content_text(content: Any, separator: str = "\n") -> str:
    """pi-ai ``contentText``: a string as is, else the text blocks joined by ``separator``."""
    if content.__class__ is str:
        return content
    if content is None or content is UNDEFINED:
        raise JavaScriptTypeError("Cannot read properties of null (reading 'filter')")
    parts = []
    for block in content:
        if (block.get("type") if block.__class__ is dict else js_prop(block, "type")) == "text":
            text = block.get("text")
            parts.append(text if text.__class__ is str else ("" if text is None else js_string(text)))
    return separator.join(parts)


@port("pi-ai: utils/transcript.js", "getSystemMessageText")
def get_system_message_text(message: dict) -> str:
    """pi-ai ``getSystemMessageText``: content then sections, non-empty parts joined."""
    parts = [content_text(message.get("content"))]
    sections = message.get("sections") or {}
    for _, text in js_entries(sections) if isinstance(sections, dict) else []:
        if text is not None:
            parts.append(text)
    return "\n\n".join(p for p in parts if len(p) > 0)


@port("pi-ai: utils/transcript.js", "getCurrentTools")
def get_current_tools(messages: Iterable[Mapping[str, Any]]) -> list[dict]:
    """pi-ai ``getCurrentTools``: tools after applying every system message's deltas."""
    tools: dict[Any, Any] = {}
    for message in messages:
        if message.get("role") != "system":
            continue
        for tool in _tool_list(message, "toolsRemoved"):
            tools.pop(_tool_name(tool), None)
        for tool in _tool_list(message, "toolsAdded"):
            tools[_tool_name(tool)] = tool  # Map.set keeps an existing key's position
    return list(tools.values())


def _tool_list(message: Mapping[str, Any], field: str) -> Iterable[Any]:
    """``message[field] ?? []`` as ``for ... of`` walks it: a list, a string's characters; anything else
    throws as in JavaScript."""
    value = message.get(field)
    if value is None or value.__class__ is list or value.__class__ is str:
        return value or []
    raise JavaScriptTypeError(f"message.{field} is not iterable")


def _tool_name(tool: Any) -> Any:
    """``tool.name``: a null tool throws as in Pi (the loader warns about it, with its line and entry)."""
    if tool is None:
        raise JavaScriptTypeError("Cannot read properties of null (reading 'name')")
    name = js_prop(tool, "name")
    try:
        hash(name)
    except TypeError:  # an object or array: a Map key of its own, which nothing else finds
        return object()
    return name


@port("pi-ai: utils/transcript.js", "getCurrentSystemMessage")
def get_current_system_message(messages: Sequence[Mapping[str, Any]]) -> SystemMessage | None:
    """pi-ai ``getCurrentSystemMessage``: every system message replayed into one.

    Args:
        messages: the context's messages, in order.
    """
    content: list[str] = []
    sections: dict[str, Any] = {}
    timestamp: Any = UNDEFINED
    any_system = False
    for message in messages:
        if message.get("role") != "system":
            continue
        any_system = True
        if timestamp is UNDEFINED or timestamp is None:  # ??=
            timestamp = message.get("timestamp", UNDEFINED)
        text = content_text(message.get("content"))
        if len(text) > 0:
            content.append(text)
        raw_sections = message.get("sections")
        if raw_sections is not None and raw_sections is not UNDEFINED:
            for name, value in js_entries(raw_sections):
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
    tools = get_current_tools(messages) if any_system else []
    if timestamp is UNDEFINED and not tools:
        return None
    out: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = tools
    out["timestamp"] = 0 if (timestamp is UNDEFINED or timestamp is None) else timestamp
    return cast(SystemMessage, out)


@port("pi-ai: utils/transcript.js", "normalizeContext")
def normalize_context(
    system_prompt: str | None, messages: list[dict], tools: list[dict] | None = None
) -> list[dict]:
    """pi-ai ``normalizeContext``: a leading system message from the prompt and tools."""
    has_prompt = system_prompt is not None and len(system_prompt) > 0
    has_tools = tools is not None and len(tools) > 0
    if not has_prompt and not has_tools:
        return list(messages)
    initial: dict[str, Any] = {"role": "system", "content": system_prompt or ""}
    if has_tools:
        initial["toolsAdded"] = tools
    initial["timestamp"] = 0
    return [initial, *messages]


# utils/overflow.js: OVERFLOW_PATTERNS and NON_OVERFLOW_PATTERNS
_OVERFLOW_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    r"prompt (?:is )?too long", r"request_too_large", r"input is too long for requested model",
    r"exceeds the context window",
    r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
    r"input token count.*exceeds the maximum", r"maximum prompt length is \d+",
    r"reduce the length of the messages", r"maximum context length is \d+ tokens",
    r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",
    r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
    r"exceeds the limit of \d+", r"exceeds the available context size", r"greater than the context length",
    r"context window exceeds limit", r"exceeded model token limit",
    r"too large for model with \d+ maximum context length",
    r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
    r"model_context_window_exceeded", r"prompt too long; exceeded (?:max )?context length",
    r"range of input length should be", r"context[_ ]length[_ ]exceeded", r"too many tokens",
    r"token limit exceeded",
)]


_NON_OVERFLOW_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    r"^(Throttling error|Service unavailable):", r"rate limit", r"too many requests")]


_CEREBRAS_BODYLESS = re.compile(r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)", re.IGNORECASE)


@port("pi-ai: utils/overflow.js", "isContextOverflow")
def is_context_overflow(message: dict, context_window: int | None = None) -> bool:
    """pi-ai ``isContextOverflow``: an overflow error, or a silent/length-stop overflow."""
    stop = message.get("stopReason")
    err = message.get("errorMessage")
    if stop == "error" and err:
        if not any(p.search(err) for p in _NON_OVERFLOW_PATTERNS):
            if any(p.search(err) for p in _OVERFLOW_PATTERNS):
                return True
            if message.get("provider") == "cerebras" and _CEREBRAS_BODYLESS.search(err):
                return True
    usage = message.get("usage")
    if usage.__class__ is not dict:
        usage = {}  # a string or ``true`` has no fields: NaN input tokens, no overflow
    if context_window and stop == "stop":
        if _input_tokens(usage) > context_window:
            return True
    if context_window and stop == "length" and usage.get("output") == 0:
        if _input_tokens(usage) >= context_window * 0.99:
            return True
    return False


def _input_tokens(usage: dict) -> float:
    """``usage.input + usage.cacheRead``, a missing field as 0; a field that is not a number makes the
    usage unknown (NaN: no overflow), as the loader's warning about such fields says."""
    total = 0.0
    for value in (usage.get("input"), usage.get("cacheRead")):
        if value.__class__ in (int, float):
            total += value
        elif js_truthy(value):
            return math.nan
    return total


@port("pi-ai: utils/uuid.js", "uuidv7")
def uuid7() -> str:
    """pi-ai ``uuidv7``: a fresh RFC 9562 UUIDv7 (time-ordered), as Pi's routing ids are."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = (rand >> 62) & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))
