"""Conversation serialization and file operations (Pi 0.87.1 core/compaction/utils.js).

``serialize_conversation`` turns LLM messages (``convert_to_llm`` output) into the text a
summarizer reads; tool results are cut to 2000 UTF-16 code units. File operations come from
``read``/``write``/``edit`` tool calls; lists are sorted as JavaScript's ``Array.sort`` does
(by UTF-16 code units, not by code points).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from pimem.context import _MISSING, content_text, js_entries, js_string, js_truthy
from pimem.jsonio import js_slice, js_stringify, utf16_len
from pimem.prompts import SUMMARIZATION_SYSTEM_PROMPT

__all__ = [
    "SUMMARIZATION_SYSTEM_PROMPT",
    "TOOL_RESULT_MAX_CHARS",
    "FileOperations",
    "create_file_ops",
    "extract_file_ops_from_message",
    "compute_file_lists",
    "format_file_operations",
    "truncate_for_summary",
    "serialize_conversation",
    "js_sorted",
]

TOOL_RESULT_MAX_CHARS = 2000


@dataclass
class FileOperations:
    """Pi's ``FileOperations``: paths read, written and edited (as sets)."""

    read: set = field(default_factory=set)
    written: set = field(default_factory=set)
    edited: set = field(default_factory=set)

    def copy(self) -> "FileOperations":
        return FileOperations(set(self.read), set(self.written), set(self.edited))


def create_file_ops() -> FileOperations:
    """``createFileOps``: empty file operations."""
    return FileOperations()


def extract_file_ops_from_message(message: dict, file_ops: FileOperations) -> None:
    """``extractFileOpsFromMessage``: add the ``path`` of read/write/edit tool calls."""
    if message.get("role") != "assistant":
        return
    content = message.get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") != "toolCall":
            continue
        if "arguments" not in block or "name" not in block:
            continue
        args = block["arguments"]
        if not js_truthy(args) or not isinstance(args, dict):
            continue
        path = args.get("path")
        if not isinstance(path, str) or not path:
            continue
        name = block["name"]
        if name == "read":
            file_ops.read.add(path)
        elif name == "write":
            file_ops.written.add(path)
        elif name == "edit":
            file_ops.edited.add(path)


def _utf16_key(value: Any) -> tuple[int, bytes]:
    text = js_string(value)
    return (0, text.encode("utf-16-be", "surrogatepass"))


def js_sorted(values: Iterable[Any]) -> list:
    """``Array.prototype.sort()`` without a comparator: by ``String(v)`` in UTF-16 code units."""
    return sorted(values, key=_utf16_key)


def compute_file_lists(file_ops: FileOperations) -> tuple[list, list]:
    """``computeFileLists``: (files only read, files modified), each sorted as JavaScript sorts."""
    modified = set(file_ops.edited) | set(file_ops.written)
    read_only = js_sorted(f for f in file_ops.read if f not in modified)
    return read_only, js_sorted(modified)


def format_file_operations(read_files: list, modified_files: list) -> str:
    """``formatFileOperations``: the ``<read-files>`` / ``<modified-files>`` blocks."""
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
    length = utf16_len(text)
    if length <= max_chars:
        return text
    return f"{js_slice(text, 0, max_chars)}\n\n[... {length - max_chars} more characters truncated]"


def serialize_conversation(messages: Iterable[dict]) -> str:
    """``serializeConversation``: LLM messages as ``[User]: …`` / ``[Assistant]: …`` text."""
    parts: list[str] = []
    append = parts.append
    for msg in messages:
        role = msg.get("role")
        if role == "user":
            content = content_text(msg.get("content"), "")
            if content:
                append(f"[User]: {content}")
        elif role == "assistant":
            content = msg.get("content")
            thinking_parts: list[str] = []
            tool_calls: list[str] = []
            has_text = False
            if isinstance(content, str):
                raise TypeError("msg.content.some is not a function (assistant content is a string)")
            for block in content:
                btype = block.get("type")
                if btype == "thinking":
                    thinking = block.get("thinking", _MISSING)
                    thinking_parts.append("" if thinking is None or thinking is _MISSING else js_string(thinking))
                elif btype == "toolCall":
                    args_str = ", ".join(
                        f"{k}={js_stringify(v)}" for k, v in js_entries(block.get("arguments", _MISSING))
                    )
                    tool_calls.append(f"{js_string(block.get('name', _MISSING))}({args_str})")
                elif btype == "text":
                    has_text = True
            if thinking_parts:
                append("[Assistant thinking]: " + "\n".join(thinking_parts))
            if has_text:
                append("[Assistant]: " + content_text(content))
            if tool_calls:
                append("[Assistant tool calls]: " + "; ".join(tool_calls))
        elif role == "toolResult":
            content = content_text(msg.get("content"), "")
            if content:
                append("[Tool result]: " + truncate_for_summary(content, TOOL_RESULT_MAX_CHARS))
    return "\n\n".join(parts)
