"""Short human-readable previews of Pi messages, for tables, trees and widgets."""

from __future__ import annotations

import math
import numbers
from typing import Any


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
    for block in content or []:
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


def format_number(value: Any, digits: int = 3) -> str:
    """A number as a person reads it: integers with thousands separators, other values to
    ``digits`` significant digits (``0.30000000000000004`` → ``0.3``, ``12385.4`` → ``12,385``).

    Whole floats print as integers, NaN and None as ``–``; anything that is not a number is
    returned as ``str(value)``.
    """
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            item = getattr(value, "item", None)
            return format_number(item(), digits) if callable(item) and getattr(value, "ndim", None) == 0 else str(value)
        except (AttributeError, TypeError, ValueError):
            return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    v = float(value)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    if abs(v) >= 10 ** (digits - 1) or v.is_integer():
        return f"{round(v):,}"
    text = f"{v:.{digits}g}"
    if "e" in text:  # very small values: keep the exponent readable
        mantissa, exp = text.split("e")
        return f"{mantissa}e{int(exp)}"
    return text

