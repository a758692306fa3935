"""The tool calls and assistant steps a story is written in.

``read``/``edit``/``write``/``ls``/``grep`` run against the project when the step is recorded;
``bash`` calls carry their scripted output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    """One tool call of an assistant step: Pi's tool name and arguments."""

    name: str
    args: dict[str, Any]
    # for bash: the scripted outcome
    output: str = ""
    exit_code: int = 0
    truncation: dict[str, Any] | None = None
    full_output_path: str | None = None


def read(path: str, offset: int | None = None, limit: int | None = None) -> Call:
    """``read`` a file, optionally from line ``offset`` (1-based) for ``limit`` lines."""
    args: dict[str, Any] = {"path": path}
    if offset is not None:
        args["offset"] = offset
    if limit is not None:
        args["limit"] = limit
    return Call("read", args)


def edit(path: str, old: str, new: str, *more: tuple[str, str]) -> Call:
    """``edit`` a file: replace ``old`` by ``new`` (each further pair is one more replacement)."""
    edits = [{"oldText": old, "newText": new}] + [{"oldText": o, "newText": n} for o, n in more]
    return Call("edit", {"path": path, "edits": edits})


def write(path: str, content: str) -> Call:
    """``write`` a whole file."""
    return Call("write", {"path": path, "content": content})


def ls(path: str | None = None) -> Call:
    """``ls`` a folder (the project root without ``path``)."""
    return Call("ls", {"path": path} if path else {})


def grep(pattern: str, path: str | None = None, glob: str | None = None, ignore_case: bool = False) -> Call:
    """``grep`` a regular expression in a file or folder, optionally only in files matching ``glob``."""
    args: dict[str, Any] = {"pattern": pattern}
    if path:
        args["path"] = path
    if glob:
        args["glob"] = glob
    if ignore_case:
        args["ignoreCase"] = True
    return Call("grep", args)


def bash(command: str, output: str, exit_code: int = 0, timeout: int | None = None) -> Call:
    """A ``bash`` call with its scripted output (a non-zero ``exit_code`` makes it an error result)."""
    args: dict[str, Any] = {"command": command}
    if timeout is not None:
        args["timeout"] = timeout
    return Call("bash", args, output=output, exit_code=exit_code)


def bash_truncated(command: str, full_output: str, full_output_path: str, keep_lines: int = 60) -> Call:
    """A bash tool call whose output Pi truncated to its tail, with the full log on disk."""
    lines = full_output.split("\n")
    tail = "\n".join(lines[-keep_lines:])
    total_bytes = len(full_output.encode("utf-8"))
    truncation = {
        "content": tail,
        "truncated": True,
        "truncatedBy": "lines",
        "totalLines": len(lines),
        "totalBytes": total_bytes,
        "outputLines": keep_lines,
        "outputBytes": len(tail.encode("utf-8")),
        "lastLinePartial": False,
        "firstLineExceedsLimit": False,
        "maxLines": keep_lines,
        "maxBytes": 51200,
    }
    start = len(lines) - keep_lines + 1
    text = tail + f"\n\n[Showing lines {start}-{len(lines)} of {len(lines)}. Full output: {full_output_path}]"
    return Call("bash", {"command": command}, output=text, truncation=truncation, full_output_path=full_output_path)


@dataclass
class Step:
    """One assistant response: optional thinking and text, then tool calls."""

    text: str | None = None
    thinking: str | None = None
    calls: list[Call] = field(default_factory=list)


def step(text: str | None = None, *calls: Call, thinking: str | None = None) -> Step:
    """An assistant step: ``text``, then ``calls``, with optional ``thinking`` before both."""
    return Step(text=text, thinking=thinking, calls=list(calls))
