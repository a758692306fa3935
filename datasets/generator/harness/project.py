"""The in-memory project a story works on, and Pi's file tools over it.

A story starts from a fixture project: the files under ``fixtures/<story>/``, each stored with an extra
``.txt`` suffix so that no tool (pip, pytest, ruff, npm, TypeScript) takes them for part of this
repository. ``load_fixture`` strips the suffix and returns the files byte for byte.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE_SUFFIX = ".txt"


def load_fixture(story: str) -> dict[str, str]:
    """The files of ``fixtures/<story>/``, keyed by path relative to the project root (``/`` separated)."""
    root = FIXTURES_DIR / story
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*" + FIXTURE_SUFFIX)):
        if path.is_file():
            rel = unicodedata.normalize("NFC", path.relative_to(root).as_posix()[: -len(FIXTURE_SUFFIX)])
            files[rel] = path.read_bytes().decode("utf-8")
    if not files:
        raise FileNotFoundError(f"no fixture files under {root}")
    return files


class ToolError(Exception):
    """A tool failure: becomes a toolResult with isError and Pi's error text."""


def unified_diff_details(path: str, old: str, new: str) -> dict[str, Any]:
    """Edit-tool details in Pi's shape: numbered diff, unified patch, first changed line."""
    old_lines, new_lines = old.split("\n"), new.split("\n")
    width = len(str(max(len(old_lines), len(new_lines))))
    out: list[str] = []
    first: int | None = None
    sm = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if first is None:
            first = j1 + 1
        for k in range(max(0, i1 - 4), i1):
            out.append(f" {str(k + 1).rjust(width)} {old_lines[k]}")
        for k in range(i1, i2):
            out.append(f"-{str(k + 1).rjust(width)} {old_lines[k]}")
        for k in range(j1, j2):
            out.append(f"+{str(k + 1).rjust(width)} {new_lines[k]}")
        for k in range(i2, min(len(old_lines), i2 + 4)):
            out.append(f" {str(k + 1).rjust(width)} {old_lines[k]}")
    patch = "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=f"a/{path}", tofile=f"b/{path}", n=3)
    )
    return {"diff": "\n".join(out), "patch": patch, "firstChangedLine": first}


@dataclass
class Project:
    """Files of the working directory, keyed by path relative to ``cwd``."""

    cwd: str
    files: dict[str, str]

    def rel(self, path: str) -> str:
        """``path`` relative to ``cwd`` (absolute paths under ``cwd`` and ``./`` prefixes accepted)."""
        if path.startswith(self.cwd + "/"):
            return path[len(self.cwd) + 1 :]
        return path.lstrip("./") if path.startswith("./") else path

    def read(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Pi's ``read``: the file text, or a window of it with a continuation hint."""
        rel = self.rel(path)
        if rel not in self.files:
            raise ToolError(f"ENOENT: no such file or directory, access '{self.cwd}/{rel}'")
        lines = self.files[rel].split("\n")
        start = (offset - 1) if offset else 0
        if limit is not None:
            end = min(start + limit, len(lines))
            text = "\n".join(lines[start:end])
            if end < len(lines):
                text += f"\n\n[{len(lines) - end} more lines in file. Use offset={end + 1} to continue.]"
            return text
        return "\n".join(lines[start:])

    def edit(self, path: str, edits: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        """Pi's ``edit``: each ``oldText`` must occur exactly once; returns the message and the diff details."""
        rel = self.rel(path)
        if rel not in self.files:
            raise ToolError(f"Could not edit file: {path}. Error code: ENOENT.")
        base = self.files[rel]
        new = base
        for i, e in enumerate(edits):
            n = base.count(e["oldText"])
            if n == 0:
                if len(edits) == 1:
                    raise ToolError(
                        f"Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                    )
                raise ToolError(
                    f"Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            if n > 1:
                raise ToolError(
                    f"Found {n} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            new = new.replace(e["oldText"], e["newText"], 1)
        self.files[rel] = new
        return f"Successfully replaced {len(edits)} block(s) in {path}.", unified_diff_details(path, base, new)

    def write(self, path: str, content: str) -> str:
        """Pi's ``write``: create or replace the file."""
        self.files[self.rel(path)] = content
        return f"Successfully wrote to {path}"

    def ls(self, path: str | None = None) -> str:
        """Pi's ``ls``: the entries of a folder, folders with a trailing ``/``, sorted case-insensitively."""
        rel = self.rel(path or ".").rstrip("/")
        prefix = "" if rel in ("", ".") else rel + "/"
        names: set[str] = set()
        for f in self.files:
            if f.startswith(prefix):
                rest = f[len(prefix) :]
                names.add(rest.split("/")[0] + ("/" if "/" in rest else ""))
        if not names:
            raise ToolError(f"Path not found: {self.cwd}/{rel}")
        return "\n".join(sorted(names, key=lambda s: s.lower()))

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, ignore_case: bool = False) -> str:
        """Pi's ``grep``: ``path:line: text`` for every matching line, files in sorted order."""
        rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        rel = self.rel(path or ".").rstrip("/")
        prefix = "" if rel in ("", ".") else rel
        suffix = glob.lstrip("*") if glob else ""
        out = []
        for f in sorted(self.files):
            if prefix and not (f == prefix or f.startswith(prefix + "/")):
                continue
            if suffix and not f.endswith(suffix):
                continue
            for n, line in enumerate(self.files[f].split("\n"), 1):
                if rx.search(line):
                    out.append(f"{f}:{n}: {line}")
        return "\n".join(out) if out else "No matches found"
