"""A small, valid Pi session written on the fly: quick to replay, compacts at a small window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TS = "2026-03-01T09:00:00.000Z"


def tiny_session_lines(turns: int = 12, text: str = "work on the parser", *, session_id: str = "tiny") -> list[dict]:
    """Header plus ``turns`` user/assistant pairs whose recorded usage grows by ~400 tokens a turn."""
    lines: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": session_id, "timestamp": TS, "cwd": "/w"}]
    parent = None
    for i in range(turns):
        uid, aid = f"u{i:04d}", f"a{i:04d}"
        lines.append({"type": "message", "id": uid, "parentId": parent, "timestamp": TS,
                      "message": {"role": "user", "content": f"{text} step {i} " + "detail " * 150,
                                  "timestamp": 1_772_355_600_000 + i}})
        usage = {"input": 400 * (i + 1), "output": 50, "cacheRead": 0, "cacheWrite": 0,
                 "totalTokens": 400 * (i + 1) + 50,
                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
        lines.append({"type": "message", "id": aid, "parentId": uid, "timestamp": TS,
                      "message": {"role": "assistant", "content": [{"type": "text", "text": f"done {i} " * 20}],
                                  "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                                  "usage": usage, "stopReason": "stop", "timestamp": 1_772_355_600_500 + i}})
        parent = aid
    return lines


def write_tiny_session(path: Path, turns: int = 12, text: str = "work on the parser", **kw: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x, ensure_ascii=True) + "\n" for x in tiny_session_lines(turns, text, **kw)),
                    encoding="ascii")
    return path
