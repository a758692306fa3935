"""Conversation serialization and file operations (Pi 0.87.1 core/compaction/utils.js).

``serialize_conversation`` turns LLM messages (``convert_to_llm`` output) into the text a
summarizer reads; tool results are cut to 2000 UTF-16 code units. File operations come from
``read``/``write``/``edit`` tool calls; lists are sorted as JavaScript's ``Array.sort`` does
(by UTF-16 code units, not by code points).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import orjson

from pimem.base.js import (
    UNDEFINED,
    js_entries,
    js_prop,
    js_slice,
    js_sorted,
    js_string,
    js_stringify,
    utf16_len,
)
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import content_text
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.errors import JavaScriptTypeError

__all__ = [
    "SUMMARIZATION_SYSTEM_PROMPT",
    "TOOL_RESULT_MAX_CHARS",
    "FileOperations",
    "create_file_ops",
    "extract_file_ops_from_message",
    "add_file_ops",
    "compute_file_lists",
    "format_file_operations",
    "truncate_for_summary",
    "serialize_conversation",
    "serialize_message",
    "serialize_messages",
    "SerializationCache",
]

TOOL_RESULT_MAX_CHARS = 2000


@dataclass
class FileOperations:
    """Pi's ``FileOperations``: paths read, written and edited (as sets).

    Args:
        read: the paths read.
        written: the paths written.
        edited: the paths edited.
    """

    read: set = field(default_factory=set)
    written: set = field(default_factory=set)
    edited: set = field(default_factory=set)

    def copy(self) -> "FileOperations":
        return FileOperations(set(self.read), set(self.written), set(self.edited))


def set_member(value: Any) -> Any:
    """A value as a member of a Python set standing in for a JavaScript ``Set`` of paths
    (arrays and objects, which Python cannot hash, by their JSON text)."""
    if isinstance(value, (list, dict)):
        return js_stringify(value)
    return value


def create_file_ops() -> FileOperations:
    """``createFileOps``: empty file operations."""
    return FileOperations()


def extract_file_ops_from_message(message: dict, file_ops: FileOperations) -> None:
    """``extractFileOpsFromMessage``: add the ``path`` of read/write/edit tool calls."""
    add_file_ops((message,), file_ops)


def add_file_ops(messages: Sequence[dict], file_ops: FileOperations) -> None:
    """Fast twin of :func:`extract_file_ops_from_message` over many messages, in one loop (the pipeline's hot
    path)."""
    read, written, edited = file_ops.read, file_ops.written, file_ops.edited
    for content in [m.get("content") for m in messages if m.get("role") == "assistant"]:
        if content.__class__ is not list and not isinstance(content, list):
            continue
        for block in content:
            if block.__class__ is not dict and not isinstance(block, dict):
                continue
            if block.get("type") != "toolCall":
                continue
            # Only these names add a path: the other checks matter for them alone.
            name = block.get("name")
            if name == "read":
                target = read
            elif name == "edit":
                target = edited
            elif name == "write":
                target = written
            else:
                continue
            args = block.get("arguments")
            if not isinstance(args, dict):
                continue  # also covers a missing or falsy arguments
            path = args.get("path")
            if isinstance(path, str) and path:
                target.add(path)


def compute_file_lists(file_ops: FileOperations) -> tuple[list, list]:
    """``computeFileLists``: (files only read, files modified), each sorted as JavaScript sorts.

    Args:
        file_ops: the files read, written and edited.
    """
    modified = set(file_ops.edited) | set(file_ops.written)
    read_only = js_sorted(f for f in file_ops.read if f not in modified)
    return read_only, js_sorted(modified)


def format_file_operations(read_files: list, modified_files: list) -> str:
    """``formatFileOperations``: the ``<read-files>`` / ``<modified-files>`` blocks.

    Args:
        read_files: the files only read.
        modified_files: the files modified.
    """
    sections = []
    if len(read_files) > 0:
        sections.append("<read-files>\n" + _join(read_files, "\n") + "\n</read-files>")
    if len(modified_files) > 0:
        sections.append("<modified-files>\n" + _join(modified_files, "\n") + "\n</modified-files>")
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)


def _join(values: list, sep: str) -> str:
    """``Array.prototype.join``: null and undefined become empty strings."""
    return sep.join("" if v is None else js_string(v) for v in values)


def truncate_for_summary(text: str, max_chars: int) -> str:
    """``truncateForSummary``: keep the first ``max_chars`` UTF-16 units and a marker."""
    if len(text) <= max_chars and (text.isascii() or utf16_len(text) <= max_chars):
        return text
    length = utf16_len(text)
    if length <= max_chars:
        return text
    return f"{js_slice(text, 0, max_chars)}\n\n[... {length - max_chars} more characters truncated]"


def _json_value(value: Any) -> str:
    """``JSON.stringify(value)``; strings go straight through orjson (same escapes as JavaScript)."""
    if value.__class__ is str:
        try:
            return orjson.dumps(value).decode("utf-8")
        except TypeError:  # lone surrogates: the exact encoder
            pass
    return js_stringify(value)


_DIGITS = frozenset("0123456789")


def _arguments_text(args: Any) -> str:
    """``Object.entries(args).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")``."""
    if args.__class__ is dict:
        for key in args:
            if key.__class__ is not str or key[:1] in _DIGITS:
                break  # integer-like keys come first in JavaScript: the general path
        else:
            return ", ".join([f"{k}={_json_value(v)}" for k, v in args.items()])
    return ", ".join([f"{k}={js_stringify(v)}" for k, v in js_entries(args)])


def serialize_message(message: Mapping[str, Any]) -> str:
    """The text :func:`serialize_conversation` makes of one LLM message ("" for none).

    ``serialize_conversation(ms) == "\n\n".join(t for t in map(serialize_message, ms) if t)``.
    """
    role = message.get("role")
    if role == "toolResult":
        text = content_text(message.get("content"), "")
        if text:
            return "[Tool result]: " + truncate_for_summary(text, TOOL_RESULT_MAX_CHARS)
        return ""
    if role == "assistant":
        content: Any = message.get("content")
        if isinstance(content, str):
            raise JavaScriptTypeError("msg.content.some is not a function")  # V8's words, as Pi throws
        thinking_parts: list[str] = []
        tool_calls: list[str] = []
        has_text = False
        for block in content:
            btype = block.get("type") if block.__class__ is dict else js_prop(block, "type")
            if btype == "thinking":
                thinking = block.get("thinking", UNDEFINED)
                if thinking.__class__ is not str:
                    thinking = "" if thinking is None or thinking is UNDEFINED else js_string(thinking)
                thinking_parts.append(thinking)
            elif btype == "toolCall":
                name = block.get("name", UNDEFINED)
                if name.__class__ is not str:
                    name = js_string(name)
                tool_calls.append(f"{name}({_arguments_text(block.get('arguments', UNDEFINED))})")
            elif btype == "text":
                has_text = True
        parts = []
        if thinking_parts:
            parts.append("[Assistant thinking]: " + "\n".join(thinking_parts))
        if has_text:
            parts.append("[Assistant]: " + content_text(content, "\n"))
        if tool_calls:
            parts.append("[Assistant tool calls]: " + "; ".join(tool_calls))
        return "\n\n".join(parts)
    if role == "user":
        content = content_text(message.get("content"), "")
        return "[User]: " + content if content else ""
    return ""


def serialize_conversation(messages: Iterable[Mapping[str, Any]]) -> str:
    """``serializeConversation``: LLM messages as ``[User]: …`` / ``[Assistant]: …`` text.

    Args:
        messages: LLM messages, in order.
    """
    texts = [serialize_message(m) for m in messages]
    return "\n\n".join([t for t in texts if t])


class SerializationCache:
    """Serialized text per agent message, keyed by object identity, and the last conversation.

    ``cache.text(m)`` is ``serialize_conversation(convert_to_llm([m]))``. Messages are Pi's
    JSON and the pipeline never mutates them: a cached text stays valid while the message
    object is unchanged. The cache holds a reference to each message, so an identity cannot
    be reused while its text is cached. Do not mutate a message after it has been cached
    (call :meth:`clear` if you must).

    :func:`serialize_messages` also remembers the last sequence it serialized: a sequence
    that starts with the same message objects reuses that text and only serializes and
    appends the new messages (the messages to summarize along a growing session).
    """

    __slots__ = ("_memo", "_last_messages", "_last_text")

    def __init__(self) -> None:
        self._memo: dict[int, tuple[dict, str]] = {}
        self._last_messages: list[dict] = []
        self._last_text = ""

    def text(self, message: dict) -> str:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        llm = convert_to_llm((message,))
        text = serialize_message(llm[0]) if llm else ""
        self._memo[id(message)] = (message, text)
        return text

    def conversation(self, messages: Sequence[dict]) -> str:
        """``serialize_conversation(convert_to_llm(messages))`` from cached parts."""
        if not isinstance(messages, list):
            messages = list(messages)
        last = self._last_messages
        n = len(last)
        text = self.text
        if n and len(messages) >= n and all(map(operator.is_, last, messages)):
            if len(messages) == n:
                return self._last_text
            tail = "\n\n".join([t for t in map(text, messages[n:]) if t])
            head = self._last_text
            result = head + "\n\n" + tail if head and tail else (head or tail)
        else:
            result = "\n\n".join([t for t in map(text, messages) if t])
        self._last_messages = messages[:]
        self._last_text = result
        return result

    def clear(self) -> None:
        self._memo.clear()
        self._last_messages = []
        self._last_text = ""

    def __len__(self) -> int:
        return len(self._memo)


def serialize_messages(messages: Iterable[dict], cache: SerializationCache | None = None) -> str:
    """Fast twin of :func:`serialize_conversation` of ``convert_to_llm(messages)``, reusing ``cache``'s texts if given.

    Args:
        messages: agent messages, in order.
        cache: per-message texts to reuse.
    """
    if cache is None:
        return serialize_conversation(convert_to_llm(messages))
    return cache.conversation(messages if isinstance(messages, list) else list(messages))
