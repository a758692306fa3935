"""Conversation serialization and file operations (Pi 0.87.1 core/compaction/utils.js).

``serialize_conversation`` turns LLM messages (``convert_to_llm`` output) into the text a
summarizer reads; tool results are cut to 2000 UTF-16 code units. File operations come from
``read``/``write``/``edit`` tool calls; lists are sorted as JavaScript's ``Array.sort`` does
(by UTF-16 code units, not by code points).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

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
from pimem.core.pi_ai import content_text
from pimem.core.porting import port
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.errors import JavaScriptTypeError

__all__ = [
    "SUMMARIZATION_SYSTEM_PROMPT",
    "TOOL_RESULT_MAX_CHARS",
    "FileOperations",
    "create_file_ops",
    "extract_file_ops_from_message",
    "extract_file_ops_from_messages",
    "compute_file_lists",
    "format_file_operations",
    "truncate_for_summary",
    "serialize_conversation",
    "serialize_message",
    "join_message_texts",
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


@port("compaction/utils.js", "createFileOps")
def create_file_ops() -> FileOperations:
    """``createFileOps``: empty file operations."""
    return FileOperations()


@port("compaction/utils.js", "extractFileOpsFromMessage")
def extract_file_ops_from_messages(messages: Iterable[dict], file_ops: FileOperations) -> None:
    """``extractFileOpsFromMessage`` of each message, in one loop: the ``path`` argument of every ``read``,
    ``write`` and ``edit`` tool call of an assistant message goes to ``file_ops``.

    Args:
        messages: agent messages.
        file_ops: the file operations to add to.
    """
    read, written, edited = file_ops.read, file_ops.written, file_ops.edited
    for content in [m.get("content") for m in messages if m.get("role") == "assistant"]:
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "toolCall":
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


@port("compaction/utils.js", "extractFileOpsFromMessage", part=True)
def extract_file_ops_from_message(message: dict, file_ops: FileOperations) -> None:
    """``extractFileOpsFromMessage`` of one message (:func:`extract_file_ops_from_messages`).

    Args:
        message: an agent message.
        file_ops: the file operations to add to.
    """
    extract_file_ops_from_messages((message,), file_ops)


@port("compaction/utils.js", "computeFileLists")
def compute_file_lists(file_ops: FileOperations) -> tuple[list, list]:
    """``computeFileLists``: (files only read, files modified), each sorted as JavaScript sorts.

    Args:
        file_ops: the files read, written and edited.
    """
    modified = set(file_ops.edited) | set(file_ops.written)
    read_only = js_sorted(f for f in file_ops.read if f not in modified)
    return read_only, js_sorted(modified)


@port("compaction/utils.js", "formatFileOperations")
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


@port("compaction/utils.js", "truncateForSummary")
def truncate_for_summary(text: str, max_chars: int) -> str:
    """``truncateForSummary``: keep the first ``max_chars`` UTF-16 units and a marker."""
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


@port("compaction/utils.js", "serializeConversation", part=True)
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


@port("compaction/utils.js", "serializeConversation")
def serialize_conversation(messages: Iterable[Mapping[str, Any]]) -> str:
    """``serializeConversation``: LLM messages as ``[User]: …`` / ``[Assistant]: …`` text.

    Args:
        messages: LLM messages, in order.
    """
    return join_message_texts(map(serialize_message, messages))


@port("compaction/utils.js", "serializeConversation", part=True)
def join_message_texts(texts: Iterable[str]) -> str:
    """How ``serializeConversation`` joins its parts: the non-empty texts, a blank line between two.

    Args:
        texts: the messages' texts (:func:`serialize_message`), in order.
    """
    return "\n\n".join([t for t in texts if t])
