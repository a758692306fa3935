"""The readable text of a Pi message, and one-line previews of it for tables, trees and widgets."""

from __future__ import annotations

from typing import Any


def text_blocks(content: Any) -> str:
    """A content value's text: a string as it is, else its non-empty text blocks joined by newlines
    (anything else gives ``""``; where Pi would throw, this does not)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text" and b.get("text")
        )
    return ""


def message_text(message: dict[str, Any]) -> str:
    """The readable text of a message of any role (text blocks, tool calls, summaries, bash)."""
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary") or "")
    if role == "bashExecution":
        return f"$ {message.get('command', '')}\n{message.get('output', '')}"
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
        elif kind == "thinking":
            parts.append(f"(thinking) {block.get('thinking') or ''}")
        elif kind == "toolCall":
            args = block.get("arguments") or {}
            shown = args.get("path") or args.get("command") or ""
            parts.append(f"{block.get('name')}({shown})")
        elif kind == "image":
            parts.append("[image]")
    return " ".join(p for p in parts if p)


def message_preview(message: dict[str, Any], width: int = 80) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(message_text(message).split())
    if width and len(text) > width:
        return text[: max(width - 1, 0)] + "…"
    return text
