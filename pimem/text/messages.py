"""The readable text of a Pi message, and one-line previews of it for tables, trees and widgets.

:func:`message_text` is the one reader of a message's text; its options say what a reader
keeps (thinking, tool calls, images, results) and how parts are joined. Pi's own rule for a
content value is :func:`pimem.core.pi_ai.content_text` (what Pi itself does; it throws where
Pi throws); the readers here never throw on odd input.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Mapping

__all__ = ["message_text", "message_preview", "text_blocks", "ToolCallStyle"]

# how a tool call reads: ``brief`` name(path or command), ``json`` name and its arguments as JSON,
# ``strings`` every string value of the arguments (one part each), None left out
ToolCallStyle = Literal["brief", "json", "strings"] | None


def _json_strings(value: Any, out: list[str]) -> None:
    """Every string in a JSON-like value, depth first."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _json_strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _json_strings(v, out)


def _tool_call(block: dict[str, Any], style: ToolCallStyle, parts: list[str]) -> None:
    if style == "brief":
        args = block.get("arguments") or {}
        shown = (args.get("path") or args.get("command") or "") if isinstance(args, dict) else ""
        parts.append(f"{block.get('name')}({shown})")
    elif style == "json":
        try:
            args = json.dumps(block.get("arguments"), ensure_ascii=False)
        except (TypeError, ValueError):
            args = str(block.get("arguments"))
        parts.append(f"{block.get('name')} {args}")
    elif style == "strings":
        _json_strings(block.get("arguments"), parts)


def message_text(message: Mapping[str, Any], *, separator: str = " ", thinking: str | None = "(thinking) ",
                 tool_calls: ToolCallStyle = "brief", images: bool = True, results: bool = True,
                 command_prefix: str = "$ ") -> str:
    """The readable text of a message of any role: text blocks, thinking, tool calls, images,
    summaries, bash commands and output.

    Args:
        message: a Pi message (``role`` and ``content``, or a summary or bash execution).
        separator: what joins the non-empty parts of a content list.
        thinking: the label before a thinking block's text (``""``: the text alone; None: left out).
        tool_calls: how a tool call reads (:data:`ToolCallStyle`).
        images: an image block reads ``[image]`` (else it is left out).
        results: tool results and bash output are read (else a tool result reads ``""`` and a bash
            execution its command alone).
        command_prefix: what stands before a bash command.

    A string content is returned as it is; a bash execution reads its command and output on two
    lines (an empty one left out).
    """
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary") or "")
    if role == "bashExecution":
        command = f"{command_prefix}{message.get('command', '')}"
        output = str(message.get("output", "")) if results else ""
        return "\n".join(p for p in (command, output) if p)
    if role == "toolResult" and not results:
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text") or ""))
        elif kind == "thinking" and thinking is not None:
            parts.append(f"{thinking}{block.get('thinking') or ''}")
        elif kind == "toolCall":
            _tool_call(block, tool_calls, parts)
        elif kind == "image" and images:
            parts.append("[image]")
    return separator.join(p for p in parts if p)


def text_blocks(content: Any) -> str:
    """A content value's text: a string as it is, else its non-empty text blocks joined by newlines
    (anything else gives ``""``; where Pi would throw, this does not)."""
    return message_text({"content": content}, separator="\n", thinking=None, tool_calls=None, images=False)


def message_preview(message: Mapping[str, Any], width: int = 80) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(message_text(message).split())
    if width and len(text) > width:
        return text[: max(width - 1, 0)] + "…"
    return text
