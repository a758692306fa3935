#!/usr/bin/env python3
"""Generate pimem's bundled sample sessions (Pi v3 JSONL) deterministically.

    python datasets/generate.py [--out DIR] [--seed N]

Each sample is a scripted coding-agent session played against a small in-memory
project: tool calls really run against that project (``read`` returns the file,
``edit`` applies the replacement or fails like Pi's edit tool, ``grep``/``ls``
search it), usage grows with the projected context, and compactions and branch
summaries are produced by pimem's own reimplementation of Pi's pipeline, so each
entry is what Pi would have written at that point. The same seed gives
byte-identical files.
"""

from __future__ import annotations

import argparse
import base64
import difflib
import math
import random
import re
import struct
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pimem.jsonio import js_stringify, to_iso, utf16_len  # noqa: E402

DEFAULT_SEED = 20260302
DEFAULT_OUT = Path(__file__).resolve().parent / "sessions"

# --------------------------------------------------------------------------------------
# Models (prices and limits as in Pi 0.87.1's model catalog)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    provider: str
    api: str
    id: str
    cost: dict[str, float]
    context_window: int
    max_tokens: int
    reasoning: bool = True


MODELS: dict[str, Model] = {
    "claude-sonnet-4-5": Model(
        "anthropic", "anthropic-messages", "claude-sonnet-4-5",
        {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}, 1000000, 64000,
    ),
    "claude-opus-4-5": Model(
        "anthropic", "anthropic-messages", "claude-opus-4-5",
        {"input": 5, "output": 25, "cacheRead": 0.5, "cacheWrite": 6.25}, 200000, 64000,
    ),
    "claude-haiku-4-5": Model(
        "anthropic", "anthropic-messages", "claude-haiku-4-5",
        {"input": 1, "output": 5, "cacheRead": 0.1, "cacheWrite": 1.25}, 200000, 64000,
    ),
    "gpt-5.1": Model(
        "openai", "openai-responses", "gpt-5.1",
        {"input": 1.25, "output": 10, "cacheRead": 0.125, "cacheWrite": 0}, 400000, 128000,
    ),
}

# Tokens of system prompt + tool definitions sent with every request (not in the session file).
SYSTEM_PROMPT_TOKENS = 3184


def calculate_cost(model: Model, usage: dict[str, Any]) -> None:
    """Fill ``usage['cost']`` exactly as pi-ai's ``calculateCost`` does (no tiers, no 1h writes)."""
    rates = model.cost
    cost = usage["cost"]
    cost["input"] = (rates["input"] / 1000000) * usage["input"]
    cost["output"] = (rates["output"] / 1000000) * usage["output"]
    cost["cacheRead"] = (rates["cacheRead"] / 1000000) * usage["cacheRead"]
    cost["cacheWrite"] = (rates["cacheWrite"] * usage["cacheWrite"] + rates["input"] * 2 * 0) / 1000000
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


def tiny_png(width: int, height: int, pixel: Callable[[int, int], tuple[int, int, int]]) -> str:
    """A valid RGB PNG, base64-encoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode("ascii")


def terminal_screenshot(rng: random.Random, width: int = 48, height: int = 28, accent=(220, 60, 60)) -> str:
    """A small picture of a dark terminal with a few coloured text lines."""
    lines = []
    y = 3
    while y < height - 3:
        lines.append((y, rng.randint(8, width - 4), accent if rng.random() < 0.3 else (200, 200, 200)))
        y += rng.choice((3, 4))

    def pixel(x: int, yy: int) -> tuple[int, int, int]:
        if yy < 2:
            return (60, 60, 70)
        for ly, length, colour in lines:
            if yy == ly and 2 <= x < length and (x * 7 + yy) % 5:
                return colour
        return (24, 26, 33)

    return tiny_png(width, height, pixel)


def uuid7(ms: int, rng: random.Random) -> str:
    """A UUIDv7 string (what Pi uses for session ids) from a timestamp and the rng."""
    rand_a = rng.getrandbits(12)
    rand_b = rng.getrandbits(62)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_start(iso: str) -> int:
    from pimem.jsonio import parse_iso_ms

    ms = parse_iso_ms(iso)
    assert ms is not None
    return int(ms)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return utf16_len(content)
    chars = 0
    for block in content or []:
        if block.get("type") == "text":
            chars += utf16_len(block["text"])
        elif block.get("type") == "image":
            chars += 4800
    return chars


def approx_tokens(message: dict[str, Any]) -> int:
    """Pi's chars/4 estimate of one context message (used to make usage grow realistically)."""
    role = message.get("role")
    if role in ("user", "toolResult", "custom"):
        chars = _content_chars(message.get("content"))
    elif role == "assistant":
        chars = 0
        for block in message["content"]:
            if block["type"] == "text":
                chars += utf16_len(block["text"])
            elif block["type"] == "thinking":
                chars += utf16_len(block["thinking"])
            elif block["type"] == "toolCall":
                chars += utf16_len(block["name"]) + utf16_len(js_stringify(block["arguments"]))
    elif role == "bashExecution":
        chars = 0 if message.get("excludeFromContext") else utf16_len(message["command"]) + utf16_len(message["output"])
    elif role in ("branchSummary", "compactionSummary"):
        chars = utf16_len(message["summary"]) + 120
    else:
        chars = 0
    return math.ceil(chars / 4)


# --------------------------------------------------------------------------------------
# A deterministic summarizer (the offline stand-in for the summarization model)
# --------------------------------------------------------------------------------------

_PATH_RE = re.compile(r"(?<![\w/.-])((?:[\w.\-À-ÿ]+/)+[\w.\-À-ÿ]+\.\w+)")
_CONSTRAINT_RE = re.compile(r"\b(don't|do not|never|always|keep|must|make sure|不要|请)\b", re.IGNORECASE)
_ERROR_RE = re.compile(r"((?:[A-Z]\w*Error|error TS\d+|FAIL|AssertionError|Traceback|exit(?:ed)? (?:with )?code \d+)[^\n]{0,140})")


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?。！？])\s+|\n+", text)
    return [p.strip() for p in parts if p.strip()]


class ScriptSummarizer:
    """Deterministic extractive summaries in Pi's structured template.

    Reads the serialized conversation in the request and pulls out the user's asks,
    constraints, touched files, errors and the assistant's conclusions. Answers are
    pure functions of the request text.
    """

    def complete(self, request):  # -> SummaryResponse
        from pimem.summarizers.base import SummaryResponse

        prompt = request.prompt
        conv = prompt
        m = re.search(r"<conversation>\n?(.*?)\n?</conversation>", prompt, re.S)
        if m:
            conv = m.group(1)
        prev = None
        m = re.search(r"<previous-summary>\n?(.*?)\n?</previous-summary>", prompt, re.S)
        if m:
            prev = m.group(1)
        blocks = re.split(r"\n\n(?=\[(?:User|Assistant|Assistant thinking|Assistant tool calls|Tool result)\]: )", conv)
        users: list[str] = []
        assistants: list[str] = []
        errors: list[str] = []
        files: list[str] = []
        for block in blocks:
            if block.startswith("[User]: "):
                users.append(block[8:].strip())
            elif block.startswith("[Assistant]: "):
                assistants.append(block[13:].strip())
            for e in _ERROR_RE.findall(block):
                e = e.strip()
                if e not in errors:
                    errors.append(e)
            for p in _PATH_RE.findall(block):
                if p not in files and not p.startswith(("http", "www.")):
                    files.append(p)
        constraints: list[str] = []
        for u in users:
            for s in _sentences(u):
                if _CONSTRAINT_RE.search(s) and s not in constraints:
                    constraints.append(s[:200])
        done = [_sentences(a)[0][:180] for a in assistants if _sentences(a)]

        def bullets(items: Iterable[str], empty: str = "(none)", prefix: str = "- ") -> str:
            items = list(items)
            return "\n".join(prefix + i for i in items) if items else f"- {empty}"

        if request.kind == "turn_prefix":
            ask = users[0] if users else "(continuing the previous request)"
            text = (
                "## Original Request\n" + _sentences(ask)[0][:300] if _sentences(ask) else "## Original Request\n(none)"
            )
            text += "\n\n## Early Progress\n" + bullets(done[:6], "(no progress yet)")
            text += "\n\n## Context for Suffix\n" + bullets(files[:8] + errors[:3])
            return SummaryResponse(text=text, usage=None)

        if prev is not None:
            prev_goal = re.search(r"## Goal\n(.*?)\n\n##", prev, re.S)
            prev_cons = re.search(r"## Constraints & Preferences\n(.*?)\n\n##", prev, re.S)
            prev_done = re.search(r"### Done\n(.*?)\n\n###", prev, re.S)
            goal = prev_goal.group(1) if prev_goal else ""
            for u in users[:1]:
                first = _sentences(u)[0][:200] if _sentences(u) else ""
                if first and first not in goal:
                    goal += f"\n- Then: {first}"
            old_cons = [c[2:] for c in (prev_cons.group(1).split("\n") if prev_cons else []) if c.startswith("- ")]
            constraints = [c for c in old_cons if c != "(none)"] + [c for c in constraints if c not in old_cons]
            old_done = [d[6:] for d in (prev_done.group(1).split("\n") if prev_done else []) if d.startswith("- [x] ")]
            done = old_done + [d for d in done if d not in old_done]
        else:
            goal = "\n".join(f"- {_sentences(u)[0][:240]}" for u in users[:3] if _sentences(u)) or "- (unknown)"
        if request.kind == "branch":
            title = "## Goal\n"
        else:
            title = "## Goal\n"
        in_progress = [_sentences(users[-1])[0][:200]] if users and _sentences(users[-1]) else []
        next_steps = [f"{i + 1}. {s}" for i, s in enumerate((in_progress + ["Run the test suite and report the result"])[:3])]
        text = (
            title
            + goal.strip()
            + "\n\n## Constraints & Preferences\n"
            + bullets(constraints[:8])
            + "\n\n## Progress\n### Done\n"
            + bullets(done[-10:], "(nothing yet)", prefix="- [x] ")
            + "\n\n### In Progress\n"
            + bullets(in_progress, "(none)", prefix="- [ ] ")
            + "\n\n### Blocked\n"
            + bullets(errors[-2:], "(none)")
            + "\n\n## Key Decisions\n"
            + bullets([f"**{a.split(':')[0][:60]}**: {a[:160]}" for a in assistants if "decid" in a.lower() or "instead" in a.lower()][:5])
            + "\n\n## Next Steps\n"
            + "\n".join(next_steps)
            + "\n\n## Critical Context\n"
            + bullets(files[:10] + errors[:4])
        )
        out_tokens = math.ceil(utf16_len(text) / 4)
        in_tokens = math.ceil(utf16_len(request.system_prompt + request.prompt) / 4)
        usage = {
            "input": in_tokens,
            "output": out_tokens,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": in_tokens + out_tokens,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        }
        return SummaryResponse(text=text, usage=usage)


# --------------------------------------------------------------------------------------
# The in-memory project the agent works on, and Pi's tools over it
# --------------------------------------------------------------------------------------


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
        if path.startswith(self.cwd + "/"):
            return path[len(self.cwd) + 1 :]
        return path.lstrip("./") if path.startswith("./") else path

    def read(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
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
        self.files[self.rel(path)] = content
        return f"Successfully wrote to {path}"

    def ls(self, path: str | None = None) -> str:
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


# --------------------------------------------------------------------------------------
# Tool-call specs used by the stories
# --------------------------------------------------------------------------------------


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    # for bash: the scripted outcome
    output: str = ""
    exit_code: int = 0
    truncation: dict[str, Any] | None = None
    full_output_path: str | None = None


def read(path: str, offset: int | None = None, limit: int | None = None) -> Call:
    args: dict[str, Any] = {"path": path}
    if offset is not None:
        args["offset"] = offset
    if limit is not None:
        args["limit"] = limit
    return Call("read", args)


def edit(path: str, old: str, new: str, *more: tuple[str, str]) -> Call:
    edits = [{"oldText": old, "newText": new}] + [{"oldText": o, "newText": n} for o, n in more]
    return Call("edit", {"path": path, "edits": edits})


def write(path: str, content: str) -> Call:
    return Call("write", {"path": path, "content": content})


def ls(path: str | None = None) -> Call:
    return Call("ls", {"path": path} if path else {})


def grep(pattern: str, path: str | None = None, glob: str | None = None, ignore_case: bool = False) -> Call:
    args: dict[str, Any] = {"pattern": pattern}
    if path:
        args["path"] = path
    if glob:
        args["glob"] = glob
    if ignore_case:
        args["ignoreCase"] = True
    return Call("grep", args)


def bash(command: str, output: str, exit_code: int = 0, timeout: int | None = None) -> Call:
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
    return Step(text=text, thinking=thinking, calls=list(calls))


# --------------------------------------------------------------------------------------
# The recorder: plays a story into a pimem Session the way Pi would record it
# --------------------------------------------------------------------------------------


class Recorder:
    """Builds one session entry by entry with a deterministic clock, ids and usage."""

    def __init__(self, name: str, cwd: str, files: dict[str, str], seed: int, start: str, model: str,
                 thinking: str = "off") -> None:
        from pimem.session import Session

        self.name = name
        self.rng = random.Random(f"{seed}:{name}")
        self.clock = parse_start(start)
        self.project = Project(cwd, dict(files))
        self.model = MODELS[model]
        self.thinking = thinking
        self.cached_prefix = 0
        self.last_request_ms = 0
        self.call_seq = 0
        self.compactions: list[dict[str, Any]] = []
        self.session = Session.new(
            cwd, session_id=uuid7(self.clock, self.rng), timestamp=to_iso(self.clock), rng=self.rng
        )
        self.tick(400, 900)
        self.model_change(model)
        self.thinking_level_change(thinking)

    # --- clock and ids -------------------------------------------------------------------
    def tick(self, lo: int, hi: int) -> int:
        self.clock += self.rng.randint(lo, hi)
        return self.clock

    def now_iso(self) -> str:
        return to_iso(self.clock)

    def _base(self, type_: str) -> dict[str, Any]:
        return {"type": type_, "id": self.session.new_id(), "parentId": self.session.leaf_id, "timestamp": self.now_iso()}

    def _append(self, entry: dict[str, Any]) -> str:
        self.session.append_entry(entry)
        return entry["id"]

    @property
    def leaf(self) -> str | None:
        return self.session.leaf_id

    # --- plain entries ---------------------------------------------------------------------
    def model_change(self, model: str) -> str:
        self.model = MODELS[model]
        self.cached_prefix = 0
        e = self._base("model_change")
        e["provider"] = self.model.provider
        e["modelId"] = self.model.id
        return self._append(e)

    def thinking_level_change(self, level: str) -> str:
        self.thinking = level
        e = self._base("thinking_level_change")
        e["thinkingLevel"] = level
        return self._append(e)

    def session_info(self, name: str) -> str:
        self.tick(2000, 9000)
        e = self._base("session_info")
        e["name"] = name
        return self._append(e)

    def label(self, target_id: str, label: str | None) -> str:
        self.tick(1500, 6000)
        e = self._base("label")
        e["targetId"] = target_id
        e["label"] = label
        return self._append(e)

    def custom(self, custom_type: str, data: Any) -> str:
        self.tick(5, 40)
        e = {"type": "custom", "customType": custom_type, "data": data, "id": self.session.new_id(),
             "parentId": self.session.leaf_id, "timestamp": self.now_iso()}
        return self._append(e)

    def custom_message(self, custom_type: str, content: Any, display: bool = True, details: Any = None) -> str:
        self.tick(5, 60)
        e: dict[str, Any] = {"type": "custom_message", "customType": custom_type, "content": content,
                             "display": display}
        if details is not None:
            e["details"] = details
        e.update(id=self.session.new_id(), parentId=self.session.leaf_id, timestamp=self.now_iso())
        return self._append(e)

    def _message(self, message: dict[str, Any]) -> str:
        e = self._base("message")
        e["message"] = message
        return self._append(e)

    # --- conversation ------------------------------------------------------------------
    def user(self, text: str, images: Iterable[str] = (), think: tuple[int, int] = (15000, 140000)) -> str:
        self.tick(*think)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for data in images:
            content.append({"type": "image", "data": data, "mimeType": "image/png"})
        return self._message({"role": "user", "content": content, "timestamp": self.clock - self.rng.randint(1, 15)})

    def user_bash(self, command: str, output: str, exit_code: int | None = 0, *, exclude: bool = False,
                  truncated_path: str | None = None, keep_lines: int = 40, cancelled: bool = False) -> str:
        """A ``!cmd`` (or ``!!cmd`` with ``exclude``) run by the user: a bashExecution message."""
        self.tick(8000, 40000)
        truncated = False
        if truncated_path:
            lines = output.split("\n")
            output = "\n".join(lines[-keep_lines:])
            truncated = True
        msg: dict[str, Any] = {"role": "bashExecution", "command": command, "output": output,
                               "exitCode": exit_code, "cancelled": cancelled, "truncated": truncated}
        if truncated_path:
            msg["fullOutputPath"] = truncated_path
        msg["timestamp"] = self.clock
        if exclude:
            msg["excludeFromContext"] = True
        self.tick(300, 4000)
        return self._message(msg)

    def _context_tokens(self) -> int:
        from pimem.context import build_session_context

        ctx = build_session_context(self.session.entries, self.session.leaf_id)
        return SYSTEM_PROMPT_TOKENS + sum(approx_tokens(m) for m in ctx.messages)

    def _usage(self, prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
        m = self.model
        fresh_cache = self.cached_prefix and (self.clock - self.last_request_ms) < 300000
        cached = min(self.cached_prefix, prompt_tokens) if fresh_cache else 0
        if m.provider == "anthropic":
            inp = self.rng.randint(1, 9)
            cache_write = max(0, prompt_tokens - cached - inp)
            cache_read = cached
        else:
            cache_read = (cached // 128) * 128
            inp = prompt_tokens - cache_read
            cache_write = 0
        usage = {"input": inp, "output": output_tokens, "cacheRead": cache_read, "cacheWrite": cache_write,
                 "totalTokens": inp + output_tokens + cache_read + cache_write,
                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
        calculate_cost(m, usage)
        self.cached_prefix = prompt_tokens
        self.last_request_ms = self.clock
        return usage

    def _tool_call_id(self) -> str:
        self.call_seq += 1
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"
        tail = "".join(self.rng.choice(alphabet) for _ in range(22))
        if self.model.provider == "anthropic":
            return f"toolu_01{tail}"
        return f"call_{tail[:24]}|fc_{''.join(self.rng.choice('0123456789abcdef') for _ in range(40))}"

    def _response_id(self) -> str:
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"
        if self.model.provider == "anthropic":
            return "msg_01" + "".join(self.rng.choice(alphabet) for _ in range(22))
        return "resp_" + "".join(self.rng.choice("0123456789abcdef") for _ in range(48))

    def assistant(self, st: Step, *, stop: str | None = None, error: str | None = None) -> str:
        """Append an assistant response; run its tool calls and append their results."""
        self.tick(600, 2500)
        start = self.clock
        prompt = self._context_tokens()
        content: list[dict[str, Any]] = []
        if st.thinking:
            block: dict[str, Any] = {"type": "thinking", "thinking": st.thinking}
            if self.model.provider == "anthropic":
                block["thinkingSignature"] = base64.b64encode(
                    bytes(self.rng.getrandbits(8) for _ in range(96))).decode("ascii")
            content.append(block)
        if st.text:
            content.append({"type": "text", "text": st.text})
        ids = []
        for c in st.calls:
            cid = self._tool_call_id()
            ids.append(cid)
            content.append({"type": "toolCall", "id": cid, "name": c.name, "arguments": c.args})
        stop_reason = stop or ("toolUse" if st.calls else "stop")
        probe = {"role": "assistant", "content": content}
        out_tokens = max(1, int(approx_tokens(probe) * self.rng.uniform(0.95, 1.25)))
        if stop_reason in ("aborted", "error"):
            usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
            if stop_reason == "aborted" and content:
                usage = self._usage(prompt, out_tokens)
        else:
            usage = self._usage(prompt, out_tokens)
        msg: dict[str, Any] = {"role": "assistant", "content": content, "api": self.model.api,
                               "provider": self.model.provider, "model": self.model.id, "usage": usage,
                               "stopReason": stop_reason, "timestamp": start}
        if stop_reason != "error":
            msg["responseId"] = self._response_id()
        if error:
            msg["errorMessage"] = error
        self.clock = start + 900 + out_tokens * self.rng.randint(12, 30)
        aid = self._message(msg)
        if stop_reason == "toolUse":
            for cid, c in zip(ids, st.calls):
                self._tool_result(cid, c)
        return aid

    def _tool_result(self, call_id: str, c: Call) -> str:
        details: Any = None
        is_error = False
        try:
            if c.name == "read":
                text = self.project.read(c.args["path"], c.args.get("offset"), c.args.get("limit"))
            elif c.name == "edit":
                text, details = self.project.edit(c.args["path"], c.args["edits"])
            elif c.name == "write":
                text = self.project.write(c.args["path"], c.args["content"])
            elif c.name == "ls":
                text = self.project.ls(c.args.get("path"))
            elif c.name == "grep":
                text = self.project.grep(c.args["pattern"], c.args.get("path"), c.args.get("glob"),
                                         c.args.get("ignoreCase", False))
            elif c.name == "bash":
                text = c.output or "(no output)"
                if c.truncation:
                    details = {"truncation": c.truncation, "fullOutputPath": c.full_output_path}
                if c.exit_code != 0:
                    raise ToolError(f"{c.output}\n\nCommand exited with code {c.exit_code}" if c.output
                                    else f"Command exited with code {c.exit_code}")
            else:
                raise ToolError(f"Tool {c.name} not found")
        except ToolError as exc:
            text, details, is_error = str(exc), {}, True
        self.tick(20, 250 if c.name != "bash" else 9000)
        msg: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id, "toolName": c.name,
                               "content": [{"type": "text", "text": text}]}
        if details is not None:
            msg["details"] = details
        msg["isError"] = is_error
        msg["timestamp"] = self.clock
        return self._message(msg)

    def turn(self, prompt: str | None, *steps: Step, images: Iterable[str] = ()) -> str:
        """A user prompt followed by assistant steps; returns the id of the last assistant entry."""
        if prompt is not None:
            self.user(prompt, images=images)
        last = ""
        for st in steps:
            last = self.assistant(st)
        return last

    # --- compaction and branch navigation through pimem's reimplementation of Pi ------------
    def compact(self, keep_recent_tokens: int, reserve_tokens: int = 16384,
                custom_instructions: str | None = None) -> dict[str, Any]:
        from pimem.compaction import CompactionSettings, ModelInfo, compact, prepare_compaction

        path = self.session.get_branch()
        if keep_recent_tokens < 0:
            # keep the previous compaction inside the kept range: the smallest keep that cuts before it
            prev = max(i for i, e in enumerate(path) if e["type"] == "compaction")
            for keep in range(1000, 60000, 250):
                trial = prepare_compaction(path, CompactionSettings(True, reserve_tokens, keep))
                ids = [e["id"] for e in path]
                if trial is not None and ids.index(trial.first_kept_entry_id) < prev:
                    keep_recent_tokens = keep
                    break
            else:
                raise RuntimeError(f"{self.name}: no cut keeps the previous compaction")
        settings = CompactionSettings(enabled=True, reserve_tokens=reserve_tokens,
                                      keep_recent_tokens=keep_recent_tokens)
        prep = prepare_compaction(path, settings)
        if prep is None:
            import os
            if os.environ.get("PIMEM_GEN_DEBUG"):
                from pimem.context import build_session_projection
                from pimem.tokens import estimate_projected_context_tokens
                proj = build_session_projection(path)
                print("DEBUG tokens", estimate_projected_context_tokens(proj, path).tokens, len(proj.entries))
            raise RuntimeError(f"{self.name}: nothing to compact at {self.leaf}")
        m = self.model
        model = ModelInfo(provider=m.provider, id=m.id, context_window=m.context_window,
                          max_tokens=m.max_tokens, reasoning=m.reasoning)
        result = compact(prep, ScriptSummarizer(), model=model, custom_instructions=custom_instructions,
                         thinking_level=self.thinking)
        self.tick(6000, 25000)
        self.session.append_compaction(result, timestamp=self.now_iso())
        self.cached_prefix = 0
        entry = self.session.get_entry(self.session.leaf_id)
        entry_info = {"entry": entry, "split_turn": bool(getattr(prep, "is_split_turn", False))}
        self.compactions.append(entry_info)
        return entry

    def navigate(self, target_id: str, summarize: bool = True, custom_instructions: str | None = None) -> str | None:
        """``/tree`` to ``target_id``; with ``summarize``, a branch_summary of the abandoned path."""
        from pimem.branch import collect_entries_for_branch_summary, generate_branch_summary
        from pimem.compaction import ModelInfo

        self.tick(4000, 20000)
        if not summarize:
            self.session.branch(target_id)
            return None
        old_leaf = self.session.leaf_id
        collected, _common = collect_entries_for_branch_summary(self.session, old_leaf, target_id)
        m = self.model
        model = ModelInfo(provider=m.provider, id=m.id, context_window=m.context_window,
                          max_tokens=m.max_tokens, reasoning=m.reasoning)
        result = generate_branch_summary(collected, ScriptSummarizer(), model=model,
                                         custom_instructions=custom_instructions)
        self.tick(4000, 15000)
        self.cached_prefix = 0
        return self.session.branch_with_summary(target_id, result, timestamp=self.now_iso())

    def save(self, out_dir: Path) -> Path:
        path = out_dir / f"{self.name}.jsonl"
        self.session.write(path)
        return path


# ======================================================================================
# Story 1: a login bug in a TypeScript auth service (long; three compactions)
# ======================================================================================

AUTH_CWD = "/home/mara/src/acme-auth"

AUTH_FILES: dict[str, str] = {
    "package.json": """{
  "name": "@acme/auth-service",
  "version": "2.14.3",
  "private": true,
  "type": "module",
  "scripts": {
    "build": "tsc -p tsconfig.json",
    "dev": "tsx watch src/index.ts",
    "lint": "eslint 'src/**/*.ts' 'test/**/*.ts'",
    "test": "vitest run",
    "test:coverage": "vitest run --coverage"
  },
  "dependencies": {
    "argon2": "^0.41.1",
    "fastify": "^4.28.1",
    "ioredis": "^5.4.1",
    "zod": "^3.23.8"
  },
  "devDependencies": {
    "@types/node": "^22.7.4",
    "@vitest/coverage-v8": "^2.1.2",
    "eslint": "^9.12.0",
    "tsx": "^4.19.1",
    "typescript": "^5.6.2",
    "vitest": "^2.1.2"
  }
}
""",
    "tsconfig.json": """{
  "compilerOptions": {
    "target": "ES2022",
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "strict": true,
    "outDir": "dist",
    "rootDir": ".",
    "declaration": true,
    "skipLibCheck": true
  },
  "include": ["src", "test"]
}
""",
    "README.md": """# @acme/auth-service

Login, sessions and refresh tokens for the Acme web and mobile apps.

## Public API (stable — the mobile app pins these shapes)

| route | body | response |
| --- | --- | --- |
| `POST /v1/login` | `{ email, password }` | `{ sessionId, expiresAt, user: { id, email, displayName } }` |
| `POST /v1/logout` | — | `204` |
| `POST /v1/refresh` | `{ refreshToken }` | `{ sessionId, expiresAt, refreshToken }` |
| `GET /v1/me` | — | `{ id, email, displayName }` |

`expiresAt` is an ISO-8601 timestamp.

## Configuration

| variable | default | meaning |
| --- | --- | --- |
| `SESSION_TTL_SECONDS` | `3600` | lifetime of a session, in **seconds** (shared with the gateway) |
| `REFRESH_TTL_SECONDS` | `2592000` | lifetime of a refresh token |
| `REDIS_URL` | `redis://localhost:6379` | session store |

## Development

    npm install
    npm test
""",
    "src/config.ts": """import { z } from "zod";

const schema = z.object({
\tSESSION_TTL_SECONDS: z.coerce.number().int().positive().default(3600),
\tREFRESH_TTL_SECONDS: z.coerce.number().int().positive().default(2592000),
\tREDIS_URL: z.string().default("redis://localhost:6379"),
\tLOGIN_MAX_ATTEMPTS: z.coerce.number().int().positive().default(5),
\tLOGIN_LOCKOUT_SECONDS: z.coerce.number().int().positive().default(900),
});

export type Config = z.infer<typeof schema>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
\treturn schema.parse(env);
}

/** Session lifetime in seconds. Shared with the API gateway: do not change the unit. */
export const SESSION_TTL = loadConfig().SESSION_TTL_SECONDS;
export const REFRESH_TTL = loadConfig().REFRESH_TTL_SECONDS;
""",
    "src/index.ts": """import Fastify from "fastify";
import { loadConfig } from "./config.js";
import { registerAuthRoutes } from "./routes/auth.js";
import { RedisSessionStore } from "./auth/session-store.js";
import { UserRepository } from "./users/repository.js";

const config = loadConfig();
const app = Fastify({ logger: true });
const sessions = new RedisSessionStore(config.REDIS_URL);
const users = new UserRepository();

registerAuthRoutes(app, { sessions, users });

app.listen({ port: Number(process.env.PORT ?? 8080), host: "0.0.0.0" }).catch((err) => {
\tapp.log.error(err);
\tprocess.exit(1);
});
""",
    "src/auth/session-store.ts": """import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { SESSION_TTL } from "../config.js";

export interface Session {
\tid: string;
\tuserId: string;
\tcreatedAt: number;
\texpiresAt: number;
}

export interface SessionStore {
\tcreate(userId: string): Promise<Session>;
\tget(id: string): Promise<Session | undefined>;
\ttouch(id: string): Promise<void>;
\tdestroy(id: string): Promise<void>;
}

export function newSessionId(): string {
\treturn randomBytes(24).toString("base64url");
}

export class InMemorySessionStore implements SessionStore {
\tprivate sessions = new Map<string, Session>();

\tasync create(userId: string): Promise<Session> {
\t\tconst now = Date.now();
\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL };
\t\tthis.sessions.set(session.id, session);
\t\treturn session;
\t}

\tasync get(id: string): Promise<Session | undefined> {
\t\tconst session = this.sessions.get(id);
\t\tif (!session) return undefined;
\t\tif (session.expiresAt <= Date.now()) {
\t\t\tthis.sessions.delete(id);
\t\t\treturn undefined;
\t\t}
\t\treturn session;
\t}

\tasync touch(id: string): Promise<void> {
\t\tconst session = this.sessions.get(id);
\t\tif (session) session.expiresAt = Date.now() + SESSION_TTL;
\t}

\tasync destroy(id: string): Promise<void> {
\t\tthis.sessions.delete(id);
\t}
}

export class RedisSessionStore implements SessionStore {
\tprivate redis: Redis;

\tconstructor(url: string) {
\t\tthis.redis = new Redis(url, { lazyConnect: true });
\t}

\tasync create(userId: string): Promise<Session> {
\t\tconst now = Date.now();
\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL };
\t\tawait this.redis.set(`session:${session.id}`, JSON.stringify(session), "EX", SESSION_TTL);
\t\treturn session;
\t}

\tasync get(id: string): Promise<Session | undefined> {
\t\tconst raw = await this.redis.get(`session:${id}`);
\t\tif (!raw) return undefined;
\t\tconst session = JSON.parse(raw) as Session;
\t\tif (session.expiresAt <= Date.now()) return undefined;
\t\treturn session;
\t}

\tasync touch(id: string): Promise<void> {
\t\tconst session = await this.get(id);
\t\tif (!session) return;
\t\tsession.expiresAt = Date.now() + SESSION_TTL;
\t\tawait this.redis.set(`session:${id}`, JSON.stringify(session), "EX", SESSION_TTL);
\t}

\tasync destroy(id: string): Promise<void> {
\t\tawait this.redis.del(`session:${id}`);
\t}
}
""",
    "src/auth/password.ts": """import argon2 from "argon2";

export async function hashPassword(plain: string): Promise<string> {
\treturn argon2.hash(plain, { type: argon2.argon2id, memoryCost: 19456, timeCost: 2 });
}

export async function verifyPassword(hash: string, plain: string): Promise<boolean> {
\ttry {
\t\treturn await argon2.verify(hash, plain);
\t} catch {
\t\treturn false;
\t}
}
""",
    "src/auth/login.ts": """import type { SessionStore, Session } from "./session-store.js";
import type { UserRepository, User } from "../users/repository.js";
import { verifyPassword } from "./password.js";
import { LoginThrottle } from "./throttle.js";

export class InvalidCredentialsError extends Error {
\tconstructor() {
\t\tsuper("Invalid email or password");
\t\tthis.name = "InvalidCredentialsError";
\t}
}

export class AccountLockedError extends Error {
\tconstructor(public readonly retryAfterSeconds: number) {
\t\tsuper(`Account locked, retry in ${retryAfterSeconds}s`);
\t\tthis.name = "AccountLockedError";
\t}
}

export interface LoginResult {
\tsession: Session;
\tuser: User;
}

export async function login(
\tdeps: { sessions: SessionStore; users: UserRepository; throttle: LoginThrottle },
\temail: string,
\tpassword: string,
): Promise<LoginResult> {
\tconst locked = deps.throttle.lockedFor(email);
\tif (locked > 0) throw new AccountLockedError(locked);
\tconst user = await deps.users.findByEmail(email);
\tif (!user || !(await verifyPassword(user.passwordHash, password))) {
\t\tdeps.throttle.fail(email);
\t\tthrow new InvalidCredentialsError();
\t}
\tdeps.throttle.reset(email);
\tconst session = await deps.sessions.create(user.id);
\treturn { session, user };
}
""",
    "src/auth/throttle.ts": """import { loadConfig } from "../config.js";

const { LOGIN_MAX_ATTEMPTS, LOGIN_LOCKOUT_SECONDS } = loadConfig();

/** Counts failed logins per email and locks the account for a while after too many. */
export class LoginThrottle {
\tprivate failures = new Map<string, { count: number; lockedUntil: number }>();

\tlockedFor(email: string): number {
\t\tconst state = this.failures.get(email);
\t\tif (!state || state.lockedUntil <= Date.now()) return 0;
\t\treturn Math.ceil((state.lockedUntil - Date.now()) / 1000);
\t}

\tfail(email: string): void {
\t\tconst state = this.failures.get(email) ?? { count: 0, lockedUntil: 0 };
\t\tstate.count += 1;
\t\tif (state.count >= LOGIN_MAX_ATTEMPTS) {
\t\t\tstate.lockedUntil = Date.now() + LOGIN_LOCKOUT_SECONDS * 1000;
\t\t\tstate.count = 0;
\t\t}
\t\tthis.failures.set(email, state);
\t}

\treset(email: string): void {
\t\tthis.failures.delete(email);
\t}
}
""",
    "src/auth/refresh.ts": """import { randomBytes } from "node:crypto";
import { REFRESH_TTL } from "../config.js";
import type { SessionStore, Session } from "./session-store.js";

export interface RefreshToken {
\ttoken: string;
\tuserId: string;
\texpiresAt: number;
}

export class RefreshTokenStore {
\tprivate tokens = new Map<string, RefreshToken>();

\tissue(userId: string): RefreshToken {
\t\tconst token: RefreshToken = {
\t\t\ttoken: randomBytes(32).toString("base64url"),
\t\t\tuserId,
\t\t\texpiresAt: Date.now() + REFRESH_TTL,
\t\t};
\t\tthis.tokens.set(token.token, token);
\t\treturn token;
\t}

\tconsume(token: string): RefreshToken | undefined {
\t\tconst found = this.tokens.get(token);
\t\tthis.tokens.delete(token);
\t\tif (!found || found.expiresAt <= Date.now()) return undefined;
\t\treturn found;
\t}
}

export async function refreshSession(
\tdeps: { sessions: SessionStore; refresh: RefreshTokenStore },
\ttoken: string,
): Promise<{ session: Session; refreshToken: RefreshToken } | undefined> {
\tconst found = deps.refresh.consume(token);
\tif (!found) return undefined;
\tconst session = await deps.sessions.create(found.userId);
\treturn { session, refreshToken: deps.refresh.issue(found.userId) };
}
""",
    "src/users/repository.ts": """export interface User {
\tid: string;
\temail: string;
\tdisplayName: string;
\tpasswordHash: string;
\tcreatedAt: string;
\tlocale: string;
}

/** In-process user table; production swaps in the Postgres implementation with the same interface. */
export class UserRepository {
\tprivate byId = new Map<string, User>();
\tprivate byEmail = new Map<string, User>();

\tasync insert(user: User): Promise<void> {
\t\tif (this.byEmail.has(user.email)) throw new Error(`User ${user.email} already exists`);
\t\tthis.byId.set(user.id, user);
\t\tthis.byEmail.set(user.email, user);
\t}

\tasync findById(id: string): Promise<User | undefined> {
\t\treturn this.byId.get(id);
\t}

\tasync findByEmail(email: string): Promise<User | undefined> {
\t\treturn this.byEmail.get(email.trim().toLowerCase());
\t}

\tasync updateDisplayName(id: string, displayName: string): Promise<void> {
\t\tconst user = this.byId.get(id);
\t\tif (user) user.displayName = displayName;
\t}

\tasync count(): Promise<number> {
\t\treturn this.byId.size;
\t}
}
""",
    "src/users/register.ts": """import { randomUUID } from "node:crypto";
import { hashPassword } from "../auth/password.js";
import type { User, UserRepository } from "./repository.js";

export async function registerUser(
\tusers: UserRepository,
\tinput: { email: string; password: string; displayName: string; locale?: string },
): Promise<User> {
\tconst user: User = {
\t\tid: randomUUID(),
\t\temail: input.email.trim(),
\t\tdisplayName: input.displayName,
\t\tpasswordHash: await hashPassword(input.password),
\t\tcreatedAt: new Date().toISOString(),
\t\tlocale: input.locale ?? "en",
\t};
\tawait users.insert(user);
\treturn user;
}
""",
    "src/routes/auth.ts": """import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { AccountLockedError, InvalidCredentialsError, login } from "../auth/login.js";
import { RefreshTokenStore, refreshSession } from "../auth/refresh.js";
import type { SessionStore } from "../auth/session-store.js";
import { LoginThrottle } from "../auth/throttle.js";
import type { UserRepository } from "../users/repository.js";

const loginBody = z.object({ email: z.string().email(), password: z.string().min(1) });
const refreshBody = z.object({ refreshToken: z.string().min(10) });

// PUBLIC API: the mobile app (acme-ios 5.x, acme-android 5.x) pins these response shapes.
export function registerAuthRoutes(app: FastifyInstance, deps: { sessions: SessionStore; users: UserRepository }) {
\tconst throttle = new LoginThrottle();
\tconst refresh = new RefreshTokenStore();

\tapp.post("/v1/login", async (req, reply) => {
\t\tconst body = loginBody.safeParse(req.body);
\t\tif (!body.success) return reply.code(400).send({ error: "invalid_request" });
\t\ttry {
\t\t\tconst { session, user } = await login({ ...deps, throttle }, body.data.email, body.data.password);
\t\t\treply.setCookie?.("sid", session.id, { httpOnly: true, sameSite: "lax", path: "/" });
\t\t\treturn {
\t\t\t\tsessionId: session.id,
\t\t\t\texpiresAt: new Date(session.expiresAt).toISOString(),
\t\t\t\tuser: { id: user.id, email: user.email, displayName: user.displayName },
\t\t\t};
\t\t} catch (err) {
\t\t\tif (err instanceof AccountLockedError) {
\t\t\t\treturn reply.code(429).header("retry-after", err.retryAfterSeconds).send({ error: "locked" });
\t\t\t}
\t\t\tif (err instanceof InvalidCredentialsError) return reply.code(401).send({ error: "invalid_credentials" });
\t\t\tthrow err;
\t\t}
\t});

\tapp.post("/v1/logout", async (req, reply) => {
\t\tconst sid = req.headers["x-session-id"];
\t\tif (typeof sid === "string") await deps.sessions.destroy(sid);
\t\treturn reply.code(204).send();
\t});

\tapp.post("/v1/refresh", async (req, reply) => {
\t\tconst body = refreshBody.safeParse(req.body);
\t\tif (!body.success) return reply.code(400).send({ error: "invalid_request" });
\t\tconst result = await refreshSession({ sessions: deps.sessions, refresh }, body.data.refreshToken);
\t\tif (!result) return reply.code(401).send({ error: "invalid_refresh_token" });
\t\treturn {
\t\t\tsessionId: result.session.id,
\t\t\texpiresAt: new Date(result.session.expiresAt).toISOString(),
\t\t\trefreshToken: result.refreshToken.token,
\t\t};
\t});

\tapp.get("/v1/me", async (req, reply) => {
\t\tconst sid = req.headers["x-session-id"];
\t\tconst session = typeof sid === "string" ? await deps.sessions.get(sid) : undefined;
\t\tif (!session) return reply.code(401).send({ error: "session_expired" });
\t\tawait deps.sessions.touch(session.id);
\t\tconst user = await deps.users.findById(session.userId);
\t\tif (!user) return reply.code(401).send({ error: "session_expired" });
\t\treturn { id: user.id, email: user.email, displayName: user.displayName };
\t});
}
""",
    "test/session-store.test.ts": """import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { InMemorySessionStore } from "../src/auth/session-store.js";

describe("InMemorySessionStore", () => {
\tbeforeEach(() => vi.useFakeTimers({ now: new Date("2026-01-05T10:00:00Z") }));
\tafterEach(() => vi.useRealTimers());

\tit("creates a session for a user", async () => {
\t\tconst store = new InMemorySessionStore();
\t\tconst session = await store.create("u1");
\t\texpect(session.userId).toBe("u1");
\t\texpect(await store.get(session.id)).toEqual(session);
\t});

\tit("expires a session after the TTL", async () => {
\t\tconst store = new InMemorySessionStore();
\t\tconst session = await store.create("u1");
\t\tvi.advanceTimersByTime(3601);
\t\texpect(await store.get(session.id)).toBeUndefined();
\t});

\tit("touch extends the session", async () => {
\t\tconst store = new InMemorySessionStore();
\t\tconst session = await store.create("u1");
\t\tvi.advanceTimersByTime(3000);
\t\tawait store.touch(session.id);
\t\tvi.advanceTimersByTime(3000);
\t\texpect(await store.get(session.id)).toBeDefined();
\t});

\tit("destroy removes the session", async () => {
\t\tconst store = new InMemorySessionStore();
\t\tconst session = await store.create("u1");
\t\tawait store.destroy(session.id);
\t\texpect(await store.get(session.id)).toBeUndefined();
\t});
});
""",
    "test/login.test.ts": """import { describe, expect, it } from "vitest";
import { InvalidCredentialsError, login } from "../src/auth/login.js";
import { InMemorySessionStore } from "../src/auth/session-store.js";
import { LoginThrottle } from "../src/auth/throttle.js";
import { registerUser } from "../src/users/register.js";
import { UserRepository } from "../src/users/repository.js";

async function setup() {
\tconst users = new UserRepository();
\tconst sessions = new InMemorySessionStore();
\tconst throttle = new LoginThrottle();
\tawait registerUser(users, { email: "bob@example.com", password: "hunter22", displayName: "Bob" });
\treturn { users, sessions, throttle };
}

describe("login", () => {
\tit("returns a session for valid credentials", async () => {
\t\tconst deps = await setup();
\t\tconst { session, user } = await login(deps, "bob@example.com", "hunter22");
\t\texpect(user.displayName).toBe("Bob");
\t\texpect(session.userId).toBe(user.id);
\t});

\tit("rejects a wrong password", async () => {
\t\tconst deps = await setup();
\t\tawait expect(login(deps, "bob@example.com", "nope")).rejects.toBeInstanceOf(InvalidCredentialsError);
\t});

\tit("rejects an unknown email", async () => {
\t\tconst deps = await setup();
\t\tawait expect(login(deps, "eve@example.com", "hunter22")).rejects.toBeInstanceOf(InvalidCredentialsError);
\t});

\tit("locks the account after five failures", async () => {
\t\tconst deps = await setup();
\t\tfor (let i = 0; i < 5; i++) await login(deps, "bob@example.com", "x").catch(() => {});
\t\tawait expect(login(deps, "bob@example.com", "hunter22")).rejects.toThrow(/locked/);
\t});
});
""",
    "test/refresh.test.ts": """import { describe, expect, it } from "vitest";
import { RefreshTokenStore, refreshSession } from "../src/auth/refresh.js";
import { InMemorySessionStore } from "../src/auth/session-store.js";

describe("refreshSession", () => {
\tit("rotates the refresh token", async () => {
\t\tconst refresh = new RefreshTokenStore();
\t\tconst sessions = new InMemorySessionStore();
\t\tconst first = refresh.issue("u1");
\t\tconst result = await refreshSession({ sessions, refresh }, first.token);
\t\texpect(result?.refreshToken.token).not.toBe(first.token);
\t\texpect(await refreshSession({ sessions, refresh }, first.token)).toBeUndefined();
\t});
});
""",
    "docs/architecture.md": """# Architecture

The auth service is a small Fastify app in front of Redis. It owns three things:

1. **Users** (`src/users/`): registration and lookup. Production uses Postgres through the same
   `UserRepository` interface; tests use the in-process map.
2. **Sessions** (`src/auth/session-store.ts`): opaque random ids stored in Redis with a TTL. The
   API gateway validates `x-session-id` against the same Redis and reads `SESSION_TTL_SECONDS`
   from the shared config map, which is why the variable is in seconds.
3. **Refresh tokens** (`src/auth/refresh.ts`): single-use, rotated on every refresh.

## Request flow

    client -> gateway (checks session in Redis) -> auth-service /v1/* -> Redis / Postgres

## Time

All timestamps inside the service are epoch **milliseconds** (`Date.now()`), except the
configuration values, which are in seconds because the gateway and Redis `EX` use seconds.
Convert at the boundary (`seconds * 1000`) and nowhere else.

## Error contract

| status | body | when |
| --- | --- | --- |
| 400 | `{ error: "invalid_request" }` | body fails validation |
| 401 | `{ error: "invalid_credentials" }` | wrong email or password |
| 401 | `{ error: "session_expired" }` | unknown or expired session |
| 429 | `{ error: "locked" }` + `retry-after` | too many failed logins |
""",
}


def _postgres_repository(rng: random.Random) -> str:
    """A long, realistic Postgres repository file (the production twin of UserRepository)."""
    fields = ["email", "display_name", "locale", "created_at", "last_login_at", "failed_logins", "mfa_enabled",
              "avatar_url", "time_zone", "marketing_opt_in", "deleted_at", "plan", "org_id", "role", "phone",
              "phone_verified_at", "email_verified_at", "password_changed_at", "lockout_until", "referrer",
              "signup_source", "country", "tos_version", "sso_provider", "sso_subject", "invited_by"]
    out = ['import type { Pool } from "pg";', 'import type { User } from "./repository.js";', "",
           "/** Postgres-backed users table. Same interface as UserRepository. */",
           "export class PostgresUserRepository {", "\tconstructor(private pool: Pool) {}", ""]
    out += ["\tasync findByEmail(email: string): Promise<User | undefined> {",
            "\t\tconst { rows } = await this.pool.query(\"SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL\", [email]);",
            "\t\treturn rows[0] ? toUser(rows[0]) : undefined;", "\t}", ""]
    for f in fields:
        camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), f)
        cap = camel[0].upper() + camel[1:]
        out += [f"\t/** Find users by {f.replace('_', ' ')}. */",
                f"\tasync findBy{cap}(value: unknown, limit = {rng.choice([50, 100, 200])}): Promise<User[]> {{",
                f"\t\tconst {{ rows }} = await this.pool.query(",
                f"\t\t\t\"SELECT * FROM users WHERE {f} = $1 AND deleted_at IS NULL ORDER BY created_at DESC LIMIT $2\",",
                "\t\t\t[value, limit],", "\t\t);", "\t\treturn rows.map(toUser);", "\t}", "",
                f"\tasync update{cap}(id: string, value: unknown): Promise<void> {{",
                f"\t\tawait this.pool.query(\"UPDATE users SET {f} = $2, updated_at = now() WHERE id = $1\", [id, value]);",
                "\t}", "",
                f"\t/** Count live users grouped by {f.replace('_', ' ')} (admin dashboard). */",
                f"\tasync countBy{cap}(): Promise<Array<{{ value: unknown; count: number }}>> {{",
                "\t\tconst { rows } = await this.pool.query(",
                f"\t\t\t\"SELECT {f} AS value, count(*)::int AS count FROM users WHERE deleted_at IS NULL GROUP BY {f} ORDER BY count DESC\",",
                "\t\t);", "\t\treturn rows as Array<{ value: unknown; count: number }>;", "\t}", ""]
    out += ["}", "", "function toUser(row: Record<string, unknown>): User {", "\treturn {",
            "\t\tid: String(row.id),", "\t\temail: String(row.email),", "\t\tdisplayName: String(row.display_name),",
            "\t\tpasswordHash: String(row.password_hash),", "\t\tcreatedAt: new Date(String(row.created_at)).toISOString(),",
            "\t\tlocale: String(row.locale ?? \"en\"),", "\t};", "}", ""]
    return "\n".join(out)


def _openapi(rng: random.Random) -> str:
    """The service's OpenAPI document (the public contract)."""
    out = ["openapi: 3.1.0", "info:", "  title: Acme auth service", "  version: 2.14.3", "paths:"]
    routes = [("/v1/login", "post", "Log in with email and password"), ("/v1/logout", "post", "End the session"),
              ("/v1/refresh", "post", "Rotate the refresh token"), ("/v1/me", "get", "The current user")]
    for path, method, summary in routes:
        out += [f"  {path}:", f"    {method}:", f"      summary: {summary}", "      responses:"]
        for code, desc in [("200", "OK"), ("400", "invalid_request"), ("401", "invalid_credentials or session_expired"),
                           ("429", "locked"), ("500", "internal error")]:
            out += [f"        \"{code}\":", f"          description: {desc}", "          content:",
                    "            application/json:", "              schema:",
                    f"                $ref: '#/components/schemas/{'Error' if code != '200' else 'Session'}'"]
    out += ["components:", "  schemas:"]
    for name in ["Session", "User", "Error", "RefreshResponse", "LoginRequest", "RefreshRequest"]:
        out += [f"    {name}:", "      type: object", "      properties:"]
        for prop in ["sessionId", "expiresAt", "user", "id", "email", "displayName", "error", "refreshToken"][: rng.randint(3, 8)]:
            out += [f"        {prop}:", "          type: string",
                    f"          description: The {prop} field of {name}; see docs/architecture.md for its semantics."]
    return "\n".join(out) + "\n"


def vitest_report(results: dict[str, list[tuple[str, bool]]], rng: random.Random, failure: str = "",
                  coverage: bool = False) -> str:
    """Text output of ``vitest run`` for the given per-file test outcomes."""
    lines = [" RUN  v2.1.2 /home/mara/src/acme-auth", ""]
    n_pass = n_fail = files_fail = 0
    for file, tests in results.items():
        failed = [t for t, ok in tests if not ok]
        ms = rng.randint(8, 140)
        mark = "❯" if failed else "✓"
        lines.append(f" {mark} {file} ({len(tests)} test{'s' if len(tests) != 1 else ''}"
                     f"{f' | {len(failed)} failed' if failed else ''}) {ms}ms")
        for name, ok in tests:
            if not ok:
                lines.append(f"   × {name} {rng.randint(2, 40)}ms")
                lines.append(f"     → {failure.splitlines()[0] if failure else 'assertion failed'}")
        n_pass += sum(1 for _, ok in tests if ok)
        n_fail += len(failed)
        files_fail += bool(failed)
    if n_fail:
        lines += ["", "⎯⎯⎯⎯⎯⎯⎯ Failed Tests " + str(n_fail) + " ⎯⎯⎯⎯⎯⎯⎯", "", failure, ""]
    lines.append("")
    total_files = len(results)
    lines.append(" Test Files  " + (f"{files_fail} failed | " if files_fail else "") + f"{total_files - files_fail} passed ({total_files})")
    lines.append("      Tests  " + (f"{n_fail} failed | " if n_fail else "") + f"{n_pass} passed ({n_pass + n_fail})")
    lines.append("   Start at  10:" + f"{rng.randint(10, 59)}:{rng.randint(10, 59)}")
    lines.append(f"   Duration  {rng.randint(900, 2400)}ms (transform {rng.randint(80, 300)}ms, setup 0ms, collect {rng.randint(200, 600)}ms, tests {rng.randint(100, 400)}ms)")
    return "\n".join(lines)


def story_auth(seed: int) -> Recorder:
    r = Recorder("auth-login-bug", AUTH_CWD, AUTH_FILES, seed, "2026-03-02T09:14:07.412Z", "claude-sonnet-4-5",
                 thinking="medium")
    rng = r.rng
    r.project.files["src/users/postgres-repository.ts"] = _postgres_repository(rng)
    r.project.files["openapi.yaml"] = _openapi(rng)
    suites = {
        "test/login.test.ts": [("login > returns a session for valid credentials", True),
                               ("login > rejects a wrong password", True),
                               ("login > rejects an unknown email", True),
                               ("login > locks the account after five failures", True)],
        "test/refresh.test.ts": [("refreshSession > rotates the refresh token", True)],
        "test/session-store.test.ts": [("InMemorySessionStore > creates a session for a user", True),
                                       ("InMemorySessionStore > expires a session after the TTL", True),
                                       ("InMemorySessionStore > touch extends the session", True),
                                       ("InMemorySessionStore > destroy removes the session", True)],
    }

    def tests(fail: dict[str, list[str]] | None = None, failure: str = "") -> str:
        res = {f: [(n, not (fail and n in fail.get(f, []))) for n, _ in ts] for f, ts in suites.items()}
        return vitest_report(res, rng, failure)

    # 1. the report and the investigation
    r.turn(
        "Users on staging get logged out immediately after logging in: the first request after POST /v1/login "
        "answers 401 {\"error\":\"session_expired\"}. Can you find out why?\n\n"
        "Two rules for this whole job: don't touch the public API in src/routes/auth.ts (the mobile app pins the "
        "response shapes), and always run the tests (`npm test`) before you tell me something is fixed.",
        step("I'll start by looking at the project layout and the login flow.", ls(), ls("src/auth"),
             thinking="The user reports sessions expiring immediately after login. Likely candidates: the session "
                      "TTL unit, clock skew between gateway and service, or the cookie/header name. Let me look at "
                      "the routes, the session store and the config."),
        step(None, read("src/routes/auth.ts"), read("src/auth/session-store.ts"), read("src/config.ts")),
        step(None, grep("SESSION_TTL", "src"), read("docs/architecture.md"),
             thinking="SESSION_TTL is SESSION_TTL_SECONDS (3600, seconds) but session-store adds it to Date.now(), "
                      "which is in milliseconds. So expiresAt = now + 3600 ms = 3.6 seconds. That matches the "
                      "report. Redis EX uses seconds correctly, so Redis keeps the key, but get() checks "
                      "expiresAt <= Date.now() and returns undefined."),
        step("Let me get a baseline of the test suite before changing anything.",
             bash("npm test", tests())),
        step("Found it. **Root cause: a unit mismatch in `src/auth/session-store.ts`.**\n\n"
             "`SESSION_TTL` comes from `SESSION_TTL_SECONDS` (3600, in **seconds**), but both stores compute\n\n"
             "```ts\nexpiresAt: now + SESSION_TTL   // now is Date.now(), in milliseconds\n```\n\n"
             "so a session expires 3.6 seconds after it is created. Redis still holds the key (the `EX` argument "
             "is correctly in seconds), but `get()` compares `session.expiresAt <= Date.now()` and returns "
             "`undefined`, and `/v1/me` answers `401 session_expired`.\n\n"
             "The existing test `expires a session after the TTL` advances fake timers by 3601 ms, so it encodes "
             "the bug instead of catching it. All 9 tests pass on the current code.\n\n"
             "Proposed fix: convert at the boundary, `SESSION_TTL * 1000`, in `create()` and `touch()` of both "
             "stores, and fix the test to advance by `3601 * 1000`. `src/routes/auth.ts` stays untouched."),
    )
    r.turn(
        "Makes sense. Fix it, but keep SESSION_TTL_SECONDS in seconds in the config — the gateway reads the same "
        "variable.",
        step("I'll add a millisecond constant next to the config value and use it in both stores.",
             edit("src/config.ts",
                  "export const SESSION_TTL = loadConfig().SESSION_TTL_SECONDS;",
                  "export const SESSION_TTL = loadConfig().SESSION_TTL_SECONDS;\n/** Session lifetime in milliseconds, for comparisons with Date.now(). */\nexport const SESSION_TTL_MS = SESSION_TTL * 1000;")),
        step(None, edit("src/auth/session-store.ts",
                        'import { SESSION_TTL } from "../config.js";',
                        'import { SESSION_TTL, SESSION_TTL_MS } from "../config.js";',
                        ("\tasync create(userId: string): Promise<Session> {\n\t\tconst now = Date.now();\n\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL };\n\t\tthis.sessions.set(session.id, session);",
                         "\tasync create(userId: string): Promise<Session> {\n\t\tconst now = Date.now();\n\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL_MS };\n\t\tthis.sessions.set(session.id, session);"))),
        step("The in-memory store is fixed; now `touch()` and the Redis store.",
             edit("src/auth/session-store.ts",
                  "\t\tif (session) session.expiresAt = Date.now() + SESSION_TTL;",
                  "\t\tif (session) session.expiresAt = Date.now() + SESSION_TTL_MS;"),
             edit("src/auth/session-store.ts",
                  "\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL };\n\t\tawait this.redis.set(",
                  "\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL_MS };\n\t\tawait this.redis.set(",
                  ("\t\tsession.expiresAt = Date.now() + SESSION_TTL;\n", "\t\tsession.expiresAt = Date.now() + SESSION_TTL_MS;\n"))),
        step(None, bash("npm test", tests(
            {"test/session-store.test.ts": ["InMemorySessionStore > expires a session after the TTL"]},
            " FAIL  test/session-store.test.ts > InMemorySessionStore > expires a session after the TTL\n"
            "AssertionError: expected { id: 'Xk3…', userId: 'u1', …(2) } to be undefined\n"
            " ❯ test/session-store.test.ts:19:37\n     17|   const session = await store.create(\"u1\");\n"
            "     18|   vi.advanceTimersByTime(3601);\n     19|   expect(await store.get(session.id)).toBeUndefined();\n"
            "       |                                     ^"), exit_code=1)),
        step("As expected, the old test encoded the bug (3601 ms). Updating it to the real TTL:",
             edit("test/session-store.test.ts", "\t\tvi.advanceTimersByTime(3601);",
                  "\t\tvi.advanceTimersByTime(3600 * 1000 + 1);"),
             edit("test/session-store.test.ts",
                  "\t\tvi.advanceTimersByTime(3000);\n\t\tawait store.touch(session.id);\n\t\tvi.advanceTimersByTime(3000);",
                  "\t\tvi.advanceTimersByTime(3000 * 1000);\n\t\tawait store.touch(session.id);\n\t\tvi.advanceTimersByTime(3000 * 1000);")),
        step(None, bash("npm test", tests())),
        step("Fixed and verified: all 9 tests pass.\n\n- `src/config.ts`: new `SESSION_TTL_MS = SESSION_TTL * 1000`; "
             "`SESSION_TTL_SECONDS` stays in seconds.\n- `src/auth/session-store.ts`: both stores use `SESSION_TTL_MS` "
             "for `expiresAt`; Redis `EX` still gets seconds.\n- `test/session-store.test.ts`: the expiry and touch tests "
             "now advance by real TTLs.\n\n`src/routes/auth.ts` was not touched."),
    )
    fix_entry = r.leaf
    r.user_bash("git diff --stat", " src/auth/session-store.ts  | 10 +++++-----\n src/config.ts              |  2 ++\n test/session-store.test.ts |  6 +++---\n 3 files changed, 13 insertions(+), 5 deletions(-)")
    r.label(fix_entry, "ttl-fix")
    r.session_info("Login: session TTL units + email case")

    # 2. second bug: email case
    r.turn(
        "Second report from support: alice@example.com can't log in at all, she registered as Alice@Example.com 🙃 "
        "Please look at that too.",
        step(None, read("src/users/repository.ts"), read("src/users/register.ts"),
             thinking="findByEmail lowercases, but registerUser only trims, and insert keys byEmail by the raw "
                      "email. So 'Alice@Example.com' is stored under that key and the lookup for "
                      "'alice@example.com' misses."),
        step(None, grep("toLowerCase|normalizeEmail", "src")),
        step("`findByEmail` lowercases the lookup, but `registerUser` stores the email as typed, so mixed-case "
             "registrations are unreachable. I'll normalize in one place, in the repository.",
             edit("src/users/repository.ts",
                  "\tasync insert(user: User): Promise<void> {\n\t\tif (this.byEmail.has(user.email)) throw new Error(`User ${user.email} already exists`);",
                  "\tasync insert(user: User): Promise<void> {\n\t\tconst key = normalizeEmail(user.email);\n\t\tif (this.byEmail.has(key)) throw new Error(`User ${user.email} already exists`);")),
        step(None, edit("src/users/repository.ts",
                        "\t\tthis.byEmail.set(user.email, user);",
                        "\t\tthis.byEmail.set(key, user);"),
             edit("src/users/repository.ts",
                  "\t\treturn this.byEmail.get(email.trim().toLowerCase());",
                  "\t\treturn this.byEmail.get(normalizeEmail(email));"),
             edit("src/users/repository.ts",
                  "export interface User {",
                  "export function normalizeEmail(email: string): string {\n\treturn email.trim().toLowerCase();\n}\n\nexport interface User {")),
        step(None, bash("npm test", tests())),
        step("Tests pass. I also want the throttle keyed by the normalized email, otherwise `Bob@x` and `bob@x` "
             "get separate failure counters.",
             edit("src/auth/login.ts",
                  "\tconst locked = deps.throttle.lockedFor(email);",
                  "\tconst key = normalizeEmail(email);\n\tconst locked = deps.throttle.lockedFor(key);")),
        step(None, edit("src/auth/login.ts",
                        "\t\tdeps.throttle.fail(email);",
                        "\t\tdeps.throttle.fail(key);",
                        ("\tdeps.throttle.reset(email);", "\tdeps.throttle.reset(key);"),
                        ('import type { UserRepository, User } from "../users/repository.js";',
                         'import { normalizeEmail, type UserRepository, type User } from "../users/repository.js";'))),
        step(None, bash("npx tsc --noEmit",
                        "src/auth/login.ts(2,10): error TS2305: Module '\"../users/repository.js\"' has no exported member 'normalizeEmail'.",
                        exit_code=2),
             thinking="Hmm, normalizeEmail is exported... unless tsc picked up a stale dist/ declaration. "
                      "Check the file."),
        step(None, read("src/users/repository.ts", 1, 12)),
        step("The export is there; the error came from a stale `dist/` declaration shadowing the source. Rebuilding:",
             bash("rm -rf dist && npx tsc --noEmit", "")),
        step(None, bash("npm test", tests())),
        step("Both fixes are in and the suite is green (9/9):\n\n- `normalizeEmail()` in `src/users/repository.ts` "
             "is now the single place that lowercases; `insert` and `findByEmail` use it.\n- `login()` keys the "
             "throttle by the normalized email.\n\nExisting users stored with mixed case (like Alice@Example.com) "
             "need a one-off migration in Postgres: `UPDATE users SET email = lower(trim(email));` — check for "
             "duplicates first."),
    )
    r.turn(
        "Add regression tests for both bugs in test/login.test.ts, one per bug.",
        step(None, read("test/login.test.ts")),
        step(None, edit("test/login.test.ts",
                        "\tit(\"locks the account after five failures\", async () => {",
                        "\tit(\"finds users registered with mixed-case email\", async () => {\n\t\tconst deps = await setup();\n\t\tawait registerUser(deps.users, { email: \"Alice@Example.com\", password: \"pw-alice-1\", displayName: \"Alice\" });\n\t\tconst { user } = await login(deps, \"alice@example.com\", \"pw-alice-1\");\n\t\texpect(user.displayName).toBe(\"Alice\");\n\t});\n\n\tit(\"keeps the session valid for the configured TTL\", async () => {\n\t\tconst deps = await setup();\n\t\tconst { session } = await login(deps, \"bob@example.com\", \"hunter22\");\n\t\texpect(session.expiresAt - session.createdAt).toBe(3600 * 1000);\n\t});\n\n\tit(\"locks the account after five failures\", async () => {")),
        step(None, bash("npm test", tests())),
    )
    suites["test/login.test.ts"][3:3] = [("login > finds users registered with mixed-case email", True),
                                         ("login > keeps the session valid for the configured TTL", True)]
    r.turn(None, step(None, bash("npm test", tests())),
           step("Added two regression tests; 11/11 pass:\n\n- `finds users registered with mixed-case email`\n"
                "- `keeps the session valid for the configured TTL` (asserts `expiresAt - createdAt === 3600 * 1000`)."))

    # production repository: the same normalization is needed there (large files, many steps)
    r.turn(
        "Production doesn't use the in-memory repository, it uses src/users/postgres-repository.ts. Check that one "
        "too, and the OpenAPI doc for anything that describes the email or expiresAt semantics.",
        step("Reading the Postgres repository and the OpenAPI document.", read("src/users/postgres-repository.ts"),
             read("openapi.yaml"),
             thinking="The Postgres findByEmail compares email = $1 exactly; if rows were stored mixed-case the "
                      "lookup misses. Either normalize in SQL with lower(email) (needs a functional index) or "
                      "normalize on write and on lookup."),
        step(None, grep("email", "src/users/postgres-repository.ts"), grep("expiresAt", ".", "*.yaml")),
        step("`PostgresUserRepository.findByEmail` compares `email = $1` exactly. I'll normalize the argument with "
             "the same `normalizeEmail()` and add a migration that lowercases stored emails and adds a unique index "
             "on `lower(email)`.",
             edit("src/users/postgres-repository.ts",
                  'import type { User } from "./repository.js";',
                  'import { normalizeEmail, type User } from "./repository.js";',
                  ('"SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL", [email]);',
                   '"SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL", [normalizeEmail(email)]);'))),
        step(None, write("db/migrations/0042_lowercase_emails.sql",
                         "-- Lowercase stored emails so lookups by normalizeEmail() find them.\\n"
                         "-- Abort if two accounts would collide; support resolves those by hand.\\n"
                         "DO $$\\nBEGIN\\n  IF EXISTS (SELECT lower(trim(email)) FROM users GROUP BY 1 HAVING count(*) > 1) THEN\\n"
                         "    RAISE EXCEPTION 'duplicate emails after normalization';\\n  END IF;\\nEND $$;\\n\\n"
                         "UPDATE users SET email = lower(trim(email)) WHERE email <> lower(trim(email));\\n"
                         "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS users_email_lower_idx ON users (lower(email));\\n")),
        step(None, read("src/users/postgres-repository.ts", 1, 40), bash("npm test", tests())),
        step("Done: the Postgres repository normalizes lookups, and `db/migrations/0042_lowercase_emails.sql` "
             "lowercases stored emails (aborting on collisions) and adds `users_email_lower_idx`. `openapi.yaml` "
             "only says `expiresAt` is a string; I left it alone since it is part of the public contract. "
             "Tests: 11/11 pass."),
    )

    # user-run commands: lint fails, coverage truncated, a private git log
    lint_out = ("\n/home/mara/src/acme-auth/src/auth/session-store.ts\n  3:10  error  'SESSION_TTL' is defined but never used  @typescript-eslint/no-unused-vars\n\n"
                "✖ 1 problem (1 error, 0 warnings)\n")
    r.user_bash("npm run lint", "> @acme/auth-service@2.14.3 lint\n> eslint 'src/**/*.ts' 'test/**/*.ts'\n" + lint_out, 1)
    r.turn("lint is failing, see above",
           step(None, read("src/auth/session-store.ts", 1, 5),
                thinking="The in-memory store no longer uses SESSION_TTL... but the Redis store does for EX. Let me check."),
           step(None, grep("SESSION_TTL\\b", "src/auth/session-store.ts")),
           step("Redis still uses `SESSION_TTL` for `EX`, so the import is used there... the linter flags the "
                "in-memory module scope. Looking closer, the Redis `EX` calls use `SESSION_TTL` — the lint error is "
                "from an outdated cache. Re-running with `--cache` disabled:",
                bash("npx eslint --no-cache 'src/**/*.ts' 'test/**/*.ts'", "")),
           step("Lint passes with a fresh cache: the error came from a stale `.eslintcache`. Nothing to change in the code."))
    cov_lines = ["> @acme/auth-service@2.14.3 test:coverage", "> vitest run --coverage", ""]
    for i in range(140):
        cov_lines.append(f"stdout | test/login.test.ts > login > case {i}\n[fastify] request completed in {rng.randint(1, 9)}ms reqId=req-{i:04x}")
    cov_lines += ["", " % Coverage report from v8", "-------------------|---------|----------|---------|---------|",
                  "File               | % Stmts | % Branch | % Funcs | % Lines |",
                  "-------------------|---------|----------|---------|---------|",
                  "All files          |   81.42 |    76.19 |   84.61 |   81.42 |",
                  " auth/login.ts     |     100 |      100 |     100 |     100 |",
                  " auth/refresh.ts   |   91.66 |       75 |     100 |   91.66 |",
                  " auth/session-store.ts | 58.33 | 50 | 62.5 | 58.33 |",
                  " auth/throttle.ts  |     100 |    83.33 |     100 |     100 |",
                  " routes/auth.ts    |       0 |        0 |       0 |       0 |",
                  " users/repository.ts |  95.23 |     100 |   85.71 |   95.23 |",
                  "-------------------|---------|----------|---------|---------|"]
    r.user_bash("npm run test:coverage", "\n".join(cov_lines), 0, truncated_path="/tmp/pi-bash-7c1e93a0d2b4f518.log", keep_lines=60)
    r.user_bash("git log --oneline -5", "b41c0de (HEAD -> fix/session-ttl) wip\n9a7f3e1 Bump fastify to 4.28.1\n"
                "5de0c2a Add login throttle\n71b9a44 Refresh token rotation\n0c3f5d7 Initial import", 0, exclude=True)
    r.compact(keep_recent_tokens=6000)

    # 3. follow-up: refresh token TTL has the same bug
    r.turn(
        "Coverage on session-store.ts is low (58%). Before we ship: does the refresh token have the same unit "
        "problem? REFRESH_TTL is in seconds too.",
        step(None, read("src/auth/refresh.ts"), grep("REFRESH_TTL", "src")),
        step("Yes — `RefreshTokenStore.issue()` does `Date.now() + REFRESH_TTL` with `REFRESH_TTL` in seconds, so "
             "refresh tokens live 43 minutes instead of 30 days. Same fix:",
             edit("src/config.ts", "export const REFRESH_TTL = loadConfig().REFRESH_TTL_SECONDS;",
                  "export const REFRESH_TTL = loadConfig().REFRESH_TTL_SECONDS;\nexport const REFRESH_TTL_MS = REFRESH_TTL * 1000;")),
        step(None, edit("src/auth/refresh.ts", 'import { REFRESH_TTL } from "../config.js";',
                        'import { REFRESH_TTL_MS } from "../config.js";',
                        ("\t\t\texpiresAt: Date.now() + REFRESH_TTL,", "\t\t\texpiresAt: Date.now() + REFRESH_TTL_MS,"))),
        step(None, bash("npm test", tests())),
        step("Fixed; 11/11 pass. `refresh.ts` now uses `REFRESH_TTL_MS`."),
    )
    r.compact(keep_recent_tokens=-1)  # keeps the previous compaction inside its kept range

    # 4. long refactor turn: inject a Clock, many small steps (a split turn when compacted)
    r.thinking_level_change("high")
    r.turn(
        "OK. Now make the time handling testable so this can't happen again: introduce a `Clock` interface "
        "(`now(): number` in ms) and inject it into both session stores, the refresh store and the throttle. "
        "Default to the system clock. Still: don't touch the public API, and run the tests after each file.",
        step("Plan: add `src/time/clock.ts`, then thread it through `InMemorySessionStore`, `RedisSessionStore`, "
             "`RefreshTokenStore` and `LoginThrottle` one file at a time, running the suite after each.",
             write("src/time/clock.ts",
                   "/** A source of the current time in epoch milliseconds. */\nexport interface Clock {\n\tnow(): number;\n}\n\n"
                   "export const systemClock: Clock = { now: () => Date.now() };\n\n"
                   "/** A clock that only moves when told to, for tests. */\nexport class ManualClock implements Clock {\n"
                   "\tconstructor(private current = 0) {}\n\tnow(): number {\n\t\treturn this.current;\n\t}\n"
                   "\tadvance(ms: number): void {\n\t\tthis.current += ms;\n\t}\n}\n"),
             thinking="Keep constructor signatures backwards compatible: optional clock parameter defaulting to "
                      "systemClock. RedisSessionStore(url) is constructed in src/index.ts — keep url first."),
    )
    for cls, path, old_ctor, new_ctor in [
        ("InMemorySessionStore", "src/auth/session-store.ts",
         "export class InMemorySessionStore implements SessionStore {\n\tprivate sessions = new Map<string, Session>();\n",
         "export class InMemorySessionStore implements SessionStore {\n\tprivate sessions = new Map<string, Session>();\n\n\tconstructor(private clock: Clock = systemClock) {}\n"),
        ("RedisSessionStore", "src/auth/session-store.ts",
         "\tconstructor(url: string) {\n\t\tthis.redis = new Redis(url, { lazyConnect: true });\n\t}",
         "\tconstructor(url: string, private clock: Clock = systemClock) {\n\t\tthis.redis = new Redis(url, { lazyConnect: true });\n\t}"),
        ("RefreshTokenStore", "src/auth/refresh.ts",
         "export class RefreshTokenStore {\n\tprivate tokens = new Map<string, RefreshToken>();\n",
         "export class RefreshTokenStore {\n\tprivate tokens = new Map<string, RefreshToken>();\n\n\tconstructor(private clock: Clock = systemClock) {}\n"),
        ("LoginThrottle", "src/auth/throttle.ts",
         "export class LoginThrottle {\n\tprivate failures = new Map<string, { count: number; lockedUntil: number }>();\n",
         "export class LoginThrottle {\n\tprivate failures = new Map<string, { count: number; lockedUntil: number }>();\n\n\tconstructor(private clock: Clock = systemClock) {}\n"),
    ]:
        r.assistant(step(f"Next: `{cls}` in `{path}`.", read(path)))
        r.assistant(step(None, edit(path, old_ctor, new_ctor)))
        body = r.project.files[r.project.rel(path)]
        if "import { systemClock" not in body:
            first_line = body.split("\n", 1)[0]
            r.assistant(step(None, edit(path, first_line, first_line + '\nimport { type Clock, systemClock } from "../time/clock.js";')))
        # replace Date.now() uses inside the file one occurrence at a time (the first attempt fails once)
        body = r.project.files[r.project.rel(path)]
        occurrences = [ln for ln in body.split("\n") if "Date.now()" in ln]
        for k, ln in enumerate(dict.fromkeys(occurrences)):
            if body.count(ln) > 1:
                r.assistant(step(None, edit(path, ln, ln.replace("Date.now()", "this.clock.now()"))))
                r.assistant(step("That line occurs twice; I'll include the surrounding method.", read(path)))
                continue
            if k == 0 and cls == "RefreshTokenStore":
                r.assistant(step(None, edit(path, ln.replace("\t", "  "), ln.replace("Date.now()", "this.clock.now()"))))
            r.assistant(step(None, edit(path, ln, ln.replace("Date.now()", "this.clock.now()"))))
            body = r.project.files[r.project.rel(path)]
        body = r.project.files[r.project.rel(path)]
        while "Date.now()" in body:
            idx = body.index("Date.now()")
            start = body.rfind("\n", 0, idx - 80) + 1
            end = body.find("\n", idx) + 1
            chunk = body[start:end]
            r.assistant(step(None, edit(path, chunk, chunk.replace("Date.now()", "this.clock.now()", 1))))
            body = r.project.files[r.project.rel(path)]
        r.assistant(step(None, bash("npm test", tests())))
    r.assistant(step(None, grep("Date\\.now\\(\\)", "src")))
    r.assistant(step("No `Date.now()` left outside `src/time/clock.ts`. Now the tests can use `ManualClock` instead "
                     "of fake timers.", read("test/session-store.test.ts")))
    r.compact(keep_recent_tokens=3000)
    r.assistant(step(None, write("test/session-store.test.ts",
                                 "import { describe, expect, it } from \"vitest\";\nimport { InMemorySessionStore } from \"../src/auth/session-store.js\";\n"
                                 "import { ManualClock } from \"../src/time/clock.js\";\n\nconst HOUR = 3600 * 1000;\n\n"
                                 "describe(\"InMemorySessionStore\", () => {\n\tit(\"creates a session for a user\", async () => {\n"
                                 "\t\tconst store = new InMemorySessionStore(new ManualClock(1_000));\n\t\tconst session = await store.create(\"u1\");\n"
                                 "\t\texpect(session.userId).toBe(\"u1\");\n\t\texpect(await store.get(session.id)).toEqual(session);\n\t});\n\n"
                                 "\tit(\"expires a session after the TTL\", async () => {\n\t\tconst clock = new ManualClock();\n"
                                 "\t\tconst store = new InMemorySessionStore(clock);\n\t\tconst session = await store.create(\"u1\");\n"
                                 "\t\tclock.advance(HOUR - 1);\n\t\texpect(await store.get(session.id)).toBeDefined();\n"
                                 "\t\tclock.advance(1);\n\t\texpect(await store.get(session.id)).toBeUndefined();\n\t});\n\n"
                                 "\tit(\"touch extends the session\", async () => {\n\t\tconst clock = new ManualClock();\n"
                                 "\t\tconst store = new InMemorySessionStore(clock);\n\t\tconst session = await store.create(\"u1\");\n"
                                 "\t\tclock.advance(HOUR - 10);\n\t\tawait store.touch(session.id);\n\t\tclock.advance(HOUR - 10);\n"
                                 "\t\texpect(await store.get(session.id)).toBeDefined();\n\t});\n\n"
                                 "\tit(\"destroy removes the session\", async () => {\n\t\tconst store = new InMemorySessionStore();\n"
                                 "\t\tconst session = await store.create(\"u1\");\n\t\tawait store.destroy(session.id);\n"
                                 "\t\texpect(await store.get(session.id)).toBeUndefined();\n\t});\n});\n")))
    r.assistant(step(None, bash("npm test", tests())))
    r.assistant(step("Done. `Clock` is injected everywhere time is read:\n\n- `src/time/clock.ts`: `Clock`, `systemClock`, "
                     "`ManualClock`.\n- `InMemorySessionStore`, `RedisSessionStore`, `RefreshTokenStore`, `LoginThrottle` "
                     "take an optional `clock` (default `systemClock`), so `src/index.ts` and `src/routes/auth.ts` are "
                     "unchanged.\n- `test/session-store.test.ts` uses `ManualClock` and checks the boundary "
                     "(`HOUR - 1` valid, `HOUR` expired).\n\n11/11 tests pass."))

    # 5. an overloaded API error and a retry, then wrap-up
    r.user("Great. Can you write a short CHANGELOG entry and a PR description? Mention the migration for "
           "mixed-case emails.")
    r.assistant(step(None), stop="error",
                error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    r.user("retry")
    r.assistant(step(None, read("README.md")))
    r.assistant(step(None, write("CHANGELOG.md",
                                 "# Changelog\n\n## 2.14.4\n\n### Fixed\n- Sessions expired 3.6 s after login: `SESSION_TTL_SECONDS` was "
                                 "added to `Date.now()` without converting to milliseconds. Same bug for refresh tokens.\n"
                                 "- Users registered with a mixed-case email (e.g. `Alice@Example.com`) could not log in.\n\n"
                                 "### Changed\n- Time is read through an injectable `Clock` (`src/time/clock.ts`).\n\n"
                                 "### Migration\n- Run `UPDATE users SET email = lower(trim(email));` after checking for duplicates.\n")))
    r.assistant(step("**CHANGELOG.md** is written. PR description:\n\n> **Fix immediate logout after login and "
                     "mixed-case email logins**\n>\n> - Convert `SESSION_TTL_SECONDS`/`REFRESH_TTL_SECONDS` to ms at the "
                     "boundary (`SESSION_TTL_MS`, `REFRESH_TTL_MS`).\n> - Normalize emails in `UserRepository` "
                     "(`normalizeEmail`).\n> - Inject a `Clock`; tests use `ManualClock`.\n> - No change to the public "
                     "API (`src/routes/auth.ts`).\n> - Migration: lowercase existing emails (see CHANGELOG).\n\nAll 11 tests pass."))

    # 6. a final audit across the code base (long tool outputs: the context keeps growing)
    r.turn(
        "Before I open the PR: audit the whole code base for any other place that mixes seconds and milliseconds "
        "(Redis EX, cookies, retry-after, SQL intervals). Read everything relevant; I'd rather you over-read.",
        step("Starting with a listing and a search for time-related names.", ls("src"), ls("src/auth"), ls("src/users"),
             grep("TTL|_SECONDS|EX\\b|retry-after|interval|expires", "src", ignore_case=True)),
        step(None, read("src/auth/session-store.ts"), read("src/auth/refresh.ts"), read("src/auth/throttle.ts")),
        step(None, read("src/routes/auth.ts"), read("src/config.ts"), read("docs/architecture.md")),
        step("The Postgres repository is long; reading it in two parts.", read("src/users/postgres-repository.ts", 1, 200)),
        step(None, read("src/users/postgres-repository.ts", 201)),
        step(None, read("openapi.yaml")),
        step(None, bash("npx vitest run --reporter=verbose", tests())),
        step("Audit result — every remaining time value is consistent:\\n\\n| place | unit | verdict |\\n| --- | --- | --- |\\n"
             "| `RedisSessionStore` `EX` | seconds (`SESSION_TTL`) | ✅ correct |\\n| `expiresAt` fields | ms (`*_TTL_MS`) | ✅ |\\n"
             "| `LoginThrottle` `retry-after` | seconds (`Math.ceil(ms / 1000)`) | ✅ |\\n"
             "| `LOGIN_LOCKOUT_SECONDS * 1000` | ms | ✅ |\\n| SQL | no intervals | — |\\n\\n"
             "Nothing else mixes units. `src/routes/auth.ts` and `openapi.yaml` are untouched, and all 11 tests pass."),
    )
    r.turn(
        "One more: the gateway team asks whether `expiresAt` in the /v1/login response changed format. Check the "
        "route and the README and answer precisely.",
        step(None, read("src/routes/auth.ts"), read("README.md"), grep("toISOString", "src")),
        step("No format change. `/v1/login` still returns `expiresAt: new Date(session.expiresAt).toISOString()` "
             "(ISO-8601, as the README documents). Only the **value** changed: it is now one hour after login "
             "instead of 3.6 seconds, which is what the gateway expected all along."),
    )
    r.label(fix_entry, None)
    r.label(r.leaf, "ready-for-pr")
    return r


# ======================================================================================
# Story 2: a data-pipeline refactor with a dead-end branch (branches, /tree summary, labels,
# custom entries, images, model and thinking changes, an aborted response, non-ASCII)
# ======================================================================================

PIPE_CWD = "/home/lucía/proyectos/ventas-pipeline"

PIPE_FILES: dict[str, str] = {
    "pyproject.toml": "[project]\nname = \"ventas-pipeline\"\nversion = \"0.9.0\"\nrequires-python = \">=3.11\"\n"
                      "dependencies = [\"pandas>=2.2\", \"pyarrow>=15\", \"click>=8.1\"]\n\n[project.optional-dependencies]\n"
                      "dev = [\"pytest>=8\"]\n\n[project.scripts]\nventas = \"ventas.cli:main\"\n",
    "ventas/__init__.py": "\"\"\"Daily sales pipeline: ingest CSV exports, clean, aggregate, publish Parquet.\"\"\"\n",
    "ventas/ingest.py": "import pandas as pd\n\nCOLUMNS = {\"fecha\": \"date\", \"tienda\": \"store\", \"producto\": \"sku\", "
                        "\"unidades\": \"units\", \"importe\": \"amount_eur\"}\n\n\ndef read_export(path: str) -> pd.DataFrame:\n"
                        "    \"\"\"Read one store export (semicolon-separated, decimal comma, Latin-1).\"\"\"\n"
                        "    df = pd.read_csv(path, sep=\";\", decimal=\",\", encoding=\"latin-1\")\n"
                        "    df = df.rename(columns=COLUMNS)\n    df[\"date\"] = pd.to_datetime(df[\"date\"], format=\"%d/%m/%Y\")\n"
                        "    return df\n",
    "ventas/transform.py": "import pandas as pd\n\n\ndef clean(df: pd.DataFrame) -> pd.DataFrame:\n"
                           "    df = df.dropna(subset=[\"sku\", \"units\"])\n    df = df[df[\"units\"] > 0]\n"
                           "    df[\"sku\"] = df[\"sku\"].str.strip().str.upper()\n    return df\n\n\n"
                           "def daily_totals(df: pd.DataFrame) -> pd.DataFrame:\n"
                           "    return df.groupby([\"date\", \"store\"], as_index=False)[[\"units\", \"amount_eur\"]].sum()\n",
    "ventas/pipeline.py": "import glob\n\nimport pandas as pd\n\nfrom .ingest import read_export\nfrom .transform import clean, daily_totals\n\n\n"
                          "def run(input_glob: str, output: str) -> int:\n    frames = [read_export(p) for p in sorted(glob.glob(input_glob))]\n"
                          "    df = pd.concat(frames, ignore_index=True)\n    totals = daily_totals(clean(df))\n"
                          "    totals.to_parquet(output, index=False)\n    return len(totals)\n",
    "ventas/cli.py": "import click\n\nfrom .pipeline import run\n\n\n@click.command()\n@click.argument(\"input_glob\")\n"
                     "@click.option(\"--output\", \"-o\", default=\"salida/totales.parquet\")\ndef main(input_glob: str, output: str) -> None:\n"
                     "    n = run(input_glob, output)\n    click.echo(f\"{n} filas escritas en {output}\")\n",
    "tests/test_transform.py": "import pandas as pd\n\nfrom ventas.transform import clean, daily_totals\n\n\n"
                               "def test_clean_drops_returns():\n    df = pd.DataFrame({\"sku\": [\" a1 \", \"B2\"], \"units\": [2, -1], \"amount_eur\": [3.0, -1.5]})\n"
                               "    assert list(clean(df)[\"sku\"]) == [\"A1\"]\n",
    "docs/diseño.md": "# Diseño del pipeline\n\n1. `ingest.read_export`: un CSV por tienda y día (≈ 40 000 filas).\n"
                      "2. `transform.clean` + `daily_totals`.\n3. Parquet en `salida/`.\n\nRestricción: la máquina de "
                      "producción tiene **4 GB de RAM**; el histórico completo (3 años, ~900 ficheros) no cabe en memoria.\n",
}


def story_pipeline(seed: int) -> Recorder:
    r = Recorder("ventas-pipeline-refactor", PIPE_CWD, PIPE_FILES, seed, "2026-03-04T15:02:44.118Z", "gpt-5.1",
                 thinking="low")
    rng = r.rng
    oom = ("Traceback (most recent call last):\n  File \"/home/lucía/proyectos/ventas-pipeline/ventas/pipeline.py\", line 11, in run\n"
           "    df = pd.concat(frames, ignore_index=True)\nnumpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.41 GiB "
           "for an array with shape (457000000,) and data type float64")
    r.custom("plan-mode", {"enabled": True, "steps": []})
    start = r.user(
        "The nightly job `ventas datos/*.csv` dies with a MemoryError on the production box (4 GB RAM) since we "
        "loaded the full 3-year history. Screenshot of the cron mail attached. Refactor the pipeline so it runs in "
        "bounded memory. Keep the CLI exactly as it is — the cron entry must not change.",
        images=[terminal_screenshot(rng)])
    r.assistant(step("I'll read the pipeline and the design notes first.", read("ventas/pipeline.py"),
                     read("ventas/transform.py"), read("docs/diseño.md"),
                     thinking="pd.concat of ~900 files at once. Two options: process file by file and aggregate "
                              "incrementally (daily_totals is a sum, so it is decomposable), or use dask."))
    r.custom_message("plan-mode", "Plan mode is on: propose a plan and wait for approval before editing files.",
                     display=True, details={"source": "extension:plan-mode"})
    r.assistant(step("**Plan** (waiting for approval):\n1. Try `dask.dataframe` to read the exports lazily.\n"
                     "2. Keep `ventas/cli.py` unchanged.\n3. Add a test with two small exports."))
    r.user("ok, try dask")
    r.custom("plan-mode", {"enabled": False, "steps": ["dask read", "keep CLI", "test"]})
    r.assistant(step(None, bash("pip install 'dask[dataframe]'", "Successfully installed dask-2024.12.0 toolz-1.0.0 partd-1.4.2 locket-1.0.0 cloudpickle-3.1.0")))
    r.assistant(step(None, edit("ventas/pipeline.py",
                                "    frames = [read_export(p) for p in sorted(glob.glob(input_glob))]\n    df = pd.concat(frames, ignore_index=True)\n",
                                "    import dask.dataframe as dd\n\n    df = dd.read_csv(input_glob, sep=\";\", decimal=\",\", encoding=\"latin-1\").compute()\n")))
    r.assistant(step(None, bash("ventas 'datos/2025-*.csv' -o /tmp/t.parquet",
                                "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xf1 in position 18: invalid continuation byte\n"
                                "(dask ignored encoding for the header sample; tienda 'Logroño')", exit_code=1)))
    dead_leaf = r.assistant(step("dask's CSV reader trips on the Latin-1 header (`Logroño`), and `.compute()` would "
                                 "materialize everything again anyway, so it doesn't bound memory. I'd rather "
                                 "aggregate per file instead."))
    r.label(dead_leaf, "dask-dead-end")
    # abandon the dask branch: /tree back to the first assistant answer, summarizing the dead end
    r.navigate(start)
    r.model_change("claude-opus-4-5")
    r.thinking_level_change("high")
    r.user("Forget dask. Aggregate per file: daily_totals is a sum, so partial totals can be summed again. "
           "No new dependencies. Y por favor, mensajes de log en español.")
    r.assistant(step("Per-file aggregation it is; memory then scales with one export plus the running totals.",
                     read("ventas/pipeline.py"), read("ventas/ingest.py"),
                     thinking="Combine partial daily_totals with concat + groupby-sum at the end; totals are small "
                              "(days × stores). Log in Spanish."))
    r.assistant(step(None, edit("ventas/pipeline.py",
                                "    frames = [read_export(p) for p in sorted(glob.glob(input_glob))]\n    df = pd.concat(frames, ignore_index=True)\n    totals = daily_totals(clean(df))\n",
                                "    partials = []\n    for path in sorted(glob.glob(input_glob)):\n"
                                "        partials.append(daily_totals(clean(read_export(path))))\n"
                                "        log.info(\"procesado %s\", path)\n"
                                "    totals = daily_totals(pd.concat(partials, ignore_index=True))\n")))
    r.assistant(step(None, edit("ventas/pipeline.py", "import glob\n", "import glob\nimport logging\n",
                                ("from .transform import clean, daily_totals\n",
                                 "from .transform import clean, daily_totals\n\nlog = logging.getLogger(\"ventas\")\n"))))
    r.assistant(step(None, write("tests/test_pipeline.py",
                                 "from ventas.pipeline import run\n\n\ndef test_run_sums_across_files(tmp_path):\n"
                                 "    for day, units in [(\"01\", 2), (\"02\", 3)]:\n"
                                 "        (tmp_path / f\"t{day}.csv\").write_text(\n"
                                 "            f\"fecha;tienda;producto;unidades;importe\\n{day}/03/2026;Logroño;a1;{units};1,5\\n\", encoding=\"latin-1\")\n"
                                 "    out = tmp_path / \"out.parquet\"\n    assert run(str(tmp_path / \"*.csv\"), str(out)) == 2\n")))
    r.user("wait, stop — use pyarrow for the output, not to_parquet defaults")
    r.assistant(step("Understood, I'll switch the writer to an explicit `pyarrow` table with"), stop="aborted",
                error="Request was aborted.")
    r.user("actually never mind, to_parquet uses pyarrow already. Run the tests.")
    r.assistant(step(None, bash("python -m pytest -q", "..                                                                       [100%]\n2 passed in 0.84s")))
    r.user_bash("/usr/bin/time -v ventas 'datos/*.csv' -o /tmp/totales.parquet 2>&1 | grep -E 'Maximum resident|filas'",
                "2191 filas escritas en /tmp/totales.parquet\n\tMaximum resident set size (kbytes): 412880")
    r.assistant(step("Peak memory on the full history is now about 403 MB (was > 4 GB), and the CLI is unchanged: "
                     "`ventas datos/*.csv` still writes `salida/totales.parquet`. ✅"))
    r.label(dead_leaf, None)
    good = r.leaf
    r.label(good, "per-file ✔")
    r.session_info("Pipeline: memoria acotada (agregación por fichero) 📉")
    # a side question on another branch, left as a separate leaf without a summary
    r.navigate(good, summarize=False)
    r.user("¿Cuánto tardaría con 10 años de histórico? Solo una estimación.")
    r.assistant(step("Roughly linear in the number of files: ~900 files take about 6 minutes now, so 10 years "
                     "(~3 000 files) would take ~20 minutes, with the same ~400 MB peak."))
    r.model_change("claude-haiku-4-5")
    r.user("谢谢！顺便问一下：日志里的“procesado”以后要不要翻译成中文？先不用。gracias 🙏")
    r.assistant(step("De nada. 👍"))
    return r


STORIES: list[Callable[[int], Recorder]] = [story_auth, story_pipeline]


def generate(out_dir: Path, seed: int = DEFAULT_SEED) -> list[Path]:
    """Write every sample session into ``out_dir``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [story(seed).save(out_dir) for story in STORIES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: datasets/sessions)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in generate(args.out, args.seed):
        print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
