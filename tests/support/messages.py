"""Pi messages and session entries for tests, in Pi's JSON shape (one builder each, options for the
variants tests need)."""

from __future__ import annotations

from typing import Any

TS = "2025-01-01T00:00:00.000Z"


def text(t: str) -> dict:
    """A text content block."""
    return {"type": "text", "text": t}


def tool_call(cid: str, name: str, /, **arguments: Any) -> dict:
    """A tool-call content block."""
    return {"type": "toolCall", "id": cid, "name": name, "arguments": arguments}


def user(t: str, *, blocks: bool = False, timestamp: int = 1) -> dict:
    """A user message: ``t`` as a string content, or (``blocks``) as one text block."""
    return {"role": "user", "content": [text(t)] if blocks else t, "timestamp": timestamp}


def assistant(*content: dict | str, timestamp: int = 1, **fields: Any) -> dict:
    """An assistant message of these content blocks (a string is a text block); ``fields`` are
    added as they are (``stopReason``, ``usage``, …)."""
    blocks = [text(c) if isinstance(c, str) else c for c in content]
    return {"role": "assistant", "content": blocks, "timestamp": timestamp, **fields}


def tool_result(t: str, *, call_id: str = "c0", name: str = "bash", is_error: bool = False, timestamp: int = 1) -> dict:
    """A tool result with one text block."""
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": [text(t)], "isError": is_error,
            "timestamp": timestamp}


def message_entry(eid: Any, parent: Any, message: dict, *, timestamp: str = TS, **fields: Any) -> dict:
    """A ``message`` entry holding ``message``."""
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": timestamp, "message": message, **fields}
