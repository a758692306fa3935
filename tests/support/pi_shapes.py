"""The JSON types Pi 0.87.1's code reads in a session's entries: what an importer must write,
whatever it was given. :func:`shape_errors` lists every field of another type."""

from __future__ import annotations

from typing import Any, Iterator

_USAGE = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53


def _block_errors(block: Any, where: str, allowed: tuple[str, ...]) -> Iterator[str]:
    if not isinstance(block, dict):
        yield f"{where}: a block that is not an object"
        return
    kind = block.get("type")
    if kind not in allowed:
        yield f"{where}: a block of type {kind!r}"
    elif kind == "text" and not isinstance(block.get("text"), str):
        yield f"{where}: text not a string"
    elif kind == "image" and not (isinstance(block.get("data"), str) and isinstance(block.get("mimeType"), str)):
        yield f"{where}: image data or mimeType not a string"
    elif kind == "thinking":
        if not isinstance(block.get("thinking"), str):
            yield f"{where}: thinking not a string"
        if "thinkingSignature" in block and not isinstance(block["thinkingSignature"], str):
            yield f"{where}: thinkingSignature not a string"
    elif kind == "toolCall":
        if not (isinstance(block.get("id"), str) and isinstance(block.get("name"), str)):
            yield f"{where}: tool call id or name not a string"
        if not isinstance(block.get("arguments"), dict):
            yield f"{where}: tool call arguments not an object"


def _content_errors(content: Any, where: str, allowed: tuple[str, ...], text_ok: bool) -> Iterator[str]:
    if isinstance(content, str) and text_ok:
        return
    if not isinstance(content, list):
        yield f"{where}: content neither a list nor a string"
        return
    for i, block in enumerate(content):
        yield from _block_errors(block, f"{where}[{i}]", allowed)


def _message_errors(msg: Any, where: str) -> Iterator[str]:
    if not isinstance(msg, dict):
        yield f"{where}: message not an object"
        return
    role = msg.get("role")
    if role == "user":
        yield from _content_errors(msg.get("content"), where, ("text", "image"), True)
    elif role == "assistant":
        yield from _content_errors(msg.get("content"), where, ("text", "thinking", "toolCall"), False)
        usage = msg.get("usage")
        if not isinstance(usage, dict) or not all(_count(usage.get(k)) for k in _USAGE):
            yield f"{where}: usage fields not token counts: {usage!r}"[:200]
        for key in ("model", "provider", "api", "stopReason"):
            if not isinstance(msg.get(key), str):
                yield f"{where}: {key} not a string"
        if "errorMessage" in msg and not isinstance(msg["errorMessage"], str):
            yield f"{where}: errorMessage not a string"
    elif role == "toolResult":
        yield from _content_errors(msg.get("content"), where, ("text", "image"), False)
        if not (isinstance(msg.get("toolCallId"), str) and isinstance(msg.get("toolName"), str)):
            yield f"{where}: toolCallId or toolName not a string"
        if not isinstance(msg.get("isError"), bool):
            yield f"{where}: isError not a boolean"
    else:
        yield f"{where}: role {role!r}"
    stamp = msg.get("timestamp")
    if stamp is not None and not (isinstance(stamp, (int, float)) and not isinstance(stamp, bool)):
        yield f"{where}: message timestamp not a number"


def shape_errors(entries: list[dict]) -> list[str]:
    """Every field of ``entries`` whose JSON type is not the one Pi's code reads there."""
    errors: list[str] = []
    for entry in entries:
        where = f"entry {entry.get('id')!r}"
        if not isinstance(entry.get("id"), str) or not isinstance(entry.get("timestamp"), str):
            errors.append(f"{where}: id or timestamp not a string")
        parent = entry.get("parentId")
        if parent is not None and not isinstance(parent, str):
            errors.append(f"{where}: parentId neither null nor a string")
        kind = entry.get("type")
        if kind == "message":
            errors.extend(_message_errors(entry.get("message"), where))
        elif kind == "compaction":
            if not isinstance(entry.get("summary"), str) or not isinstance(entry.get("firstKeptEntryId"), str):
                errors.append(f"{where}: summary or firstKeptEntryId not a string")
            if not _count(entry.get("tokensBefore")):
                errors.append(f"{where}: tokensBefore not a token count")
        elif kind == "session_info":
            if not isinstance(entry.get("name"), str):
                errors.append(f"{where}: name not a string")
        elif kind == "custom_message":
            errors.extend(_content_errors(entry.get("content"), where, ("text", "image"), True))
    return errors
