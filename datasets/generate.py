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

from pimem._js import js_stringify, to_iso, utf16_len  # noqa: E402

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
    from pimem._js import parse_iso_ms

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
    elif role == "system":
        chars = sum(utf16_len(v) for v in (message.get("sections") or {}).values() if v)
        if message.get("toolsAdded"):
            chars += utf16_len(js_stringify(message["toolsAdded"]))
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
        from pimem.core.llm import SummaryResponse

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
                 thinking: str = "off", strict_tools: bool = False) -> None:
        from pimem.core.session_manager import Session

        self.name = name
        # with strict_tools, a read/edit/write/ls/grep that fails is a mistake in the story, not a scene
        self.strict_tools = strict_tools
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

    def custom_role_message(self, custom_type: str, content: Any, display: bool = True, details: Any = None) -> str:
        """An extension message stored as a ``message`` entry with role ``custom`` (session format v2's
        ``hookMessage``, as Pi's v2 -> v3 migration leaves it)."""
        self.tick(5, 60)
        msg: dict[str, Any] = {"role": "custom", "customType": custom_type, "content": content, "display": display}
        if details is not None:
            msg["details"] = details
        msg["timestamp"] = self.clock
        return self._message(msg)

    def system_message(self, sections: dict[str, str | None], tools_added: list[dict[str, Any]] | None = None) -> str:
        """A ``system`` message as Pi 0.87.1's agent loop persists it before a prompt: a patch of the
        prompt sections, then ``toolsAdded`` when the tool loadout changed."""
        self.tick(1, 4)
        msg: dict[str, Any] = {"role": "system", "content": "", "sections": sections, "timestamp": self.clock}
        if tools_added:
            msg["toolsAdded"] = tools_added
        return self._message(msg)

    def context_edit(self, target_id: str, replacement: dict[str, Any] | None) -> str:
        """A branch-local edit of an earlier entry (Pi's ``appendContextEdit``; ``None`` omits it)."""
        target = self.session.get_entry(target_id)
        role = target["message"]["role"] if target["type"] == "message" else "custom"
        if replacement is not None and role in ("assistant", "toolResult") and isinstance(replacement["content"], str):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        self.tick(2, 30)
        e = self._base("context_edit")
        e["targetId"] = target_id
        e["replacement"] = replacement
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
        from pimem.core.session_manager import build_session_context

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
            if self.strict_tools and c.name != "bash":
                raise RuntimeError(f"{self.name}: unintended {c.name} failure: {exc}") from None
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
        from pimem.core.compaction.compaction import (
            CompactionSettings,
            ModelInfo,
            compact,
            prepare_compaction,
        )

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
                from pimem.core.compaction.compaction import (
                    estimate_projected_context_tokens,
                )
                from pimem.core.session_manager import build_session_projection
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
        from pimem.core.compaction.branch_summarization import (
            collect_entries_for_branch_summary,
            generate_branch_summary,
        )
        from pimem.core.compaction.compaction import ModelInfo

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
                         "-- Lowercase stored emails so lookups by normalizeEmail() find them.\n"
                         "-- Abort if two accounts would collide; support resolves those by hand.\n"
                         "DO $$\nBEGIN\n  IF EXISTS (SELECT lower(trim(email)) FROM users GROUP BY 1 HAVING count(*) > 1) THEN\n"
                         "    RAISE EXCEPTION 'duplicate emails after normalization';\n  END IF;\nEND $$;\n\n"
                         "UPDATE users SET email = lower(trim(email)) WHERE email <> lower(trim(email));\n"
                         "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS users_email_lower_idx ON users (lower(email));\n")),
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
        step("Audit result — every remaining time value is consistent:\n\n| place | unit | verdict |\n| --- | --- | --- |\n"
             "| `RedisSessionStore` `EX` | seconds (`SESSION_TTL`) | ✅ correct |\n| `expiresAt` fields | ms (`*_TTL_MS`) | ✅ |\n"
             "| `LoginThrottle` `retry-after` | seconds (`Math.ceil(ms / 1000)`) | ✅ |\n"
             "| `LOGIN_LOCKOUT_SECONDS * 1000` | ms | ✅ |\n| SQL | no intervals | — |\n\n"
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
    r.user_bash("git checkout -- ventas/pipeline.py && pip uninstall -y dask",
                "Found existing installation: dask 2024.12.0\nUninstalling dask-2024.12.0:\n  Successfully uninstalled dask-2024.12.0")
    r.project.files["ventas/pipeline.py"] = PIPE_FILES["ventas/pipeline.py"]
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


# ======================================================================================
# Story 3: a CLI flag and a config migration in a Python project (long, tool-heavy;
# big tool results, a dead end abandoned with /tree, a manual /compact with instructions)
# ======================================================================================

LOG_CWD = "/home/kenji/work/logslice"

LOG_FILES: dict[str, str] = {
    "pyproject.toml": """[project]
name = "logslice"
version = "1.6.2"
description = "Slice and filter structured JSON logs from the command line"
readme = "README.md"
requires-python = ">=3.11"
dependencies = []

[project.optional-dependencies]
dev = ["pytest>=8", "pytest-cov>=5"]

[project.scripts]
logslice = "logslice.cli:main"

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "--strict-markers"
""",
    "src/logslice/__init__.py": '''"""logslice: slice and filter structured JSON logs."""

__version__ = "1.6.2"
''',
    "src/logslice/parse.py": '''"""Parsing of log lines: JSON objects, timestamps and levels."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, TextIO

TIMESTAMP_KEYS = ("ts", "time", "timestamp", "@timestamp")
LEVEL_KEYS = ("level", "lvl", "severity")
MESSAGE_KEYS = ("msg", "message", "event")
LEVELS = ["trace", "debug", "info", "warn", "error", "fatal"]
LEVEL_ALIASES = {"warning": "warn", "err": "error", "critical": "fatal", "crit": "fatal", "dbg": "debug"}


class LogParseError(ValueError):
    """A line that is not a JSON object (only raised with ``strict``)."""

    def __init__(self, lineno: int, reason: str) -> None:
        super().__init__(f"line {lineno}: {reason}")
        self.lineno = lineno


@dataclass
class Record:
    """One parsed log line."""

    lineno: int
    ts: datetime | None
    level: str | None
    fields: dict[str, Any] = field(default_factory=dict)
    raw: str = ""

    @property
    def message(self) -> str:
        for key in MESSAGE_KEYS:
            if key in self.fields:
                return str(self.fields[key])
        return ""


def parse_timestamp(value: Any) -> datetime | None:
    """ISO-8601 strings (with or without an offset) and epoch seconds or milliseconds."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 10**11 else value
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def normalize_level(value: Any) -> str | None:
    """Lower-case level name, with common aliases folded (``WARNING`` -> ``warn``)."""
    if value is None:
        return None
    if isinstance(value, int):
        # pino/bunyan numeric levels
        return {10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal"}.get(value)
    text = str(value).strip().lower()
    text = LEVEL_ALIASES.get(text, text)
    return text if text in LEVELS else None


def iter_records(stream: TextIO, *, strict: bool = False) -> Iterator[Record]:
    """Records of a JSON-lines stream; bad lines are skipped unless ``strict``."""
    for lineno, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if strict:
                raise LogParseError(lineno, f"invalid JSON ({exc.msg})") from None
            continue
        if not isinstance(obj, dict):
            if strict:
                raise LogParseError(lineno, "not a JSON object")
            continue
        ts = next((parse_timestamp(obj[k]) for k in TIMESTAMP_KEYS if k in obj), None)
        level = next((normalize_level(obj[k]) for k in LEVEL_KEYS if k in obj), None)
        yield Record(lineno, ts, level, obj, line)
''',
    "src/logslice/filters.py": '''"""Record predicates built from the command line and the config file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterable, Iterator

from .parse import LEVELS, Record

Predicate = Callable[[Record], bool]


@dataclass
class FilterSpec:
    """Everything that decides whether a record is printed."""

    min_level: str | None = None
    after: datetime | None = None
    before: datetime | None = None
    fields: dict[str, str] = field(default_factory=dict)
    grep: str | None = None
    services: list[str] = field(default_factory=list)


def level_at_least(minimum: str) -> Predicate:
    rank = LEVELS.index(minimum)
    return lambda rec: rec.level is not None and LEVELS.index(rec.level) >= rank


def time_between(after: datetime | None, before: datetime | None) -> Predicate:
    """Records with ``after <= ts < before``; records without a timestamp never match."""

    def pred(rec: Record) -> bool:
        if rec.ts is None:
            return False
        if after is not None and rec.ts < after:
            return False
        if before is not None and rec.ts >= before:
            return False
        return True

    return pred


def field_equals(name: str, value: str) -> Predicate:
    return lambda rec: str(rec.fields.get(name, "")) == value


def message_matches(pattern: str) -> Predicate:
    rx = re.compile(pattern)
    return lambda rec: rx.search(rec.message) is not None


def service_in(services: Iterable[str]) -> Predicate:
    wanted = set(services)
    return lambda rec: rec.fields.get("service") in wanted


def build_predicate(spec: FilterSpec) -> Predicate:
    """All of the spec's conditions, and-ed together."""
    preds: list[Predicate] = []
    if spec.min_level:
        preds.append(level_at_least(spec.min_level))
    if spec.after is not None or spec.before is not None:
        preds.append(time_between(spec.after, spec.before))
    for name, value in spec.fields.items():
        preds.append(field_equals(name, value))
    if spec.grep:
        preds.append(message_matches(spec.grep))
    if spec.services:
        preds.append(service_in(spec.services))
    return lambda rec: all(p(rec) for p in preds)


def apply(records: Iterable[Record], spec: FilterSpec) -> Iterator[Record]:
    pred = build_predicate(spec)
    return (rec for rec in records if pred(rec))
''',
    "src/logslice/config.py": '''"""User configuration, format v1: ``~/.config/logslice/logslice.ini``.

    [logslice]
    format = table
    level = info
    color = yes
    fields = ts, level, service, msg

    [aliases]
    checkout = service=checkout-api
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass, field
from pathlib import Path

FORMATS = ("table", "json", "logfmt")


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "logslice"


DEFAULT_PATH = config_dir() / "logslice.ini"


class ConfigError(ValueError):
    """A config file that cannot be used, with the file and the key."""


@dataclass
class Config:
    format: str = "table"
    level: str | None = None
    color: bool = True
    fields: list[str] = field(default_factory=lambda: ["ts", "level", "msg"])
    aliases: dict[str, str] = field(default_factory=dict)
    source: Path | None = None


def _split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def load_config(path: Path | None = None) -> Config:
    """Read the INI config; a missing file gives the defaults."""
    path = path or DEFAULT_PATH
    cfg = Config()
    if not path.exists():
        return cfg
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise ConfigError(f"{path}: {exc}") from None
    section = parser["logslice"] if parser.has_section("logslice") else {}
    fmt = section.get("format", cfg.format)
    if fmt not in FORMATS:
        raise ConfigError(f"{path}: format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    cfg.format = fmt
    cfg.level = section.get("level") or None
    if "color" in section:
        cfg.color = parser.getboolean("logslice", "color")
    if "fields" in section:
        cfg.fields = _split_list(section["fields"])
    if parser.has_section("aliases"):
        cfg.aliases = dict(parser["aliases"])
    cfg.source = path
    return cfg
''',
    "src/logslice/output.py": '''"""Output formats: table (aligned, coloured), json and logfmt."""

from __future__ import annotations

import json
from typing import Iterable, TextIO

from .parse import Record

LEVEL_COLORS = {
    "trace": "\\x1b[90m",
    "debug": "\\x1b[36m",
    "info": "\\x1b[32m",
    "warn": "\\x1b[33m",
    "error": "\\x1b[31m",
    "fatal": "\\x1b[1;31m",
}
RESET = "\\x1b[0m"
MAX_WIDTH = 60


def _cell(rec: Record, name: str) -> str:
    if name == "ts":
        return rec.ts.isoformat(timespec="milliseconds") if rec.ts else "-"
    if name == "level":
        return (rec.level or "-").upper()
    if name == "msg":
        return rec.message
    value = rec.fields.get(name)
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"


def write_table(records: Iterable[Record], fields: list[str], out: TextIO, color: bool = True) -> int:
    rows = [[_cell(rec, f) for f in fields] for rec in records]
    widths = [max([len(f)] + [len(r[i]) for r in rows]) for i, f in enumerate(fields)]
    out.write("  ".join(f.upper().ljust(w) for f, w in zip(fields, widths)).rstrip() + "\\n")
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row, widths)]
        if color and "level" in fields:
            i = fields.index("level")
            level = row[i].lower()
            if level in LEVEL_COLORS:
                cells[i] = LEVEL_COLORS[level] + cells[i] + RESET
        out.write("  ".join(cells).rstrip() + "\\n")
    return len(rows)


def write_json(records: Iterable[Record], out: TextIO) -> int:
    n = 0
    for rec in records:
        out.write(rec.raw + "\\n")
        n += 1
    return n


def _logfmt_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if text == "" or any(ch in text for ch in ' ="'):
        return '"' + text.replace('"', '\\\\"') + '"'
    return text


def write_logfmt(records: Iterable[Record], out: TextIO) -> int:
    n = 0
    for rec in records:
        out.write(" ".join(f"{k}={_logfmt_value(v)}" for k, v in rec.fields.items()) + "\\n")
        n += 1
    return n
''',
    "src/logslice/cli.py": '''"""The ``logslice`` command."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Sequence

from . import __version__
from .config import FORMATS, ConfigError, load_config
from .filters import FilterSpec, apply
from .output import write_json, write_logfmt, write_table
from .parse import LEVELS, LogParseError, iter_records, parse_timestamp


def _timestamp_arg(value: str) -> datetime:
    ts = parse_timestamp(value)
    if ts is None:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 timestamp: {value!r}")
    return ts


def _field_arg(value: str) -> tuple[str, str]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    key, _, val = value.partition("=")
    return key.strip(), val.strip()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="logslice",
        description="Slice and filter structured JSON logs.",
        epilog="Files default to standard input. Config: ~/.config/logslice/logslice.ini",
    )
    p.add_argument("files", nargs="*", type=Path, help="JSON-lines log files (default: stdin)")
    p.add_argument("-l", "--level", choices=LEVELS, help="minimum level to show")
    p.add_argument("--after", type=_timestamp_arg, metavar="TS", help="only records at or after TS (ISO-8601)")
    p.add_argument("--before", type=_timestamp_arg, metavar="TS", help="only records before TS (ISO-8601)")
    p.add_argument("-f", "--field", type=_field_arg, action="append", default=[], metavar="KEY=VALUE",
                   help="only records whose field KEY equals VALUE (repeatable)")
    p.add_argument("-g", "--grep", metavar="REGEX", help="only records whose message matches REGEX")
    p.add_argument("-s", "--service", action="append", default=[], help="only these services (repeatable)")
    p.add_argument("-a", "--alias", action="append", default=[], help="apply a filter alias from the config")
    p.add_argument("-o", "--format", choices=FORMATS, help="output format (default: from config, else table)")
    p.add_argument("--fields", help="comma-separated columns for the table format")
    p.add_argument("-c", "--count", action="store_true", help="print only the number of matching records")
    p.add_argument("-n", "--limit", type=int, metavar="N", help="stop after N records")
    p.add_argument("--strict", action="store_true", help="fail on lines that are not JSON objects")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours in the table format")
    p.add_argument("--config", type=Path, metavar="PATH", help="config file to use")
    p.add_argument("--version", action="version", version=f"logslice {__version__}")
    return p


def _open_inputs(files: list[Path]):
    if not files:
        yield sys.stdin
        return
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as fh:
            yield fh


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"logslice: {exc}", file=sys.stderr)
        return 2
    spec = FilterSpec(
        min_level=args.level or cfg.level,
        after=args.after,
        before=args.before,
        fields=dict(args.field),
        grep=args.grep,
        services=args.service,
    )
    for name in args.alias:
        if name not in cfg.aliases:
            print(f"logslice: unknown alias {name!r} (known: {', '.join(sorted(cfg.aliases)) or 'none'})",
                  file=sys.stderr)
            return 2
        key, val = _field_arg(cfg.aliases[name])
        spec.fields[key] = val
    fmt = args.format or cfg.format
    fields = [f.strip() for f in args.fields.split(",")] if args.fields else cfg.fields
    color = cfg.color and not args.no_color and sys.stdout.isatty()

    def records():
        n = 0
        for stream in _open_inputs(args.files):
            for rec in apply(iter_records(stream, strict=args.strict), spec):
                yield rec
                n += 1
                if args.limit is not None and n >= args.limit:
                    return

    try:
        if args.count:
            print(sum(1 for _ in records()))
        elif fmt == "json":
            write_json(records(), sys.stdout)
        elif fmt == "logfmt":
            write_logfmt(records(), sys.stdout)
        else:
            write_table(records(), fields, sys.stdout, color=color)
    except LogParseError as exc:
        print(f"logslice: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
''',
    "docs/config.md": """# Configuration

logslice reads `~/.config/logslice/logslice.ini` (or `$XDG_CONFIG_HOME/logslice/logslice.ini`,
or the file given with `--config`). Every key is optional.

```ini
[logslice]
format = table          ; table | json | logfmt
level = info            ; minimum level when --level is not given
color = yes             ; ANSI colours in the table format
fields = ts, level, service, msg

[aliases]
; logslice -a checkout  ==  logslice -f service=checkout-api
checkout = service=checkout-api
payments = service=payments
```

## Precedence

Command-line flags win over the config file, which wins over the built-in defaults.

## Format history

| version | file | since |
| --- | --- | --- |
| 1 | `logslice.ini` | 1.0 |
""",
    "CHANGELOG.md": """# Changelog

## 1.6.2
- Fix: `--fields` with spaces around commas.

## 1.6.1
- Numeric pino/bunyan levels (`30` -> `info`).

## 1.6.0
- `--alias` filters from the `[aliases]` config section.
- `--limit N`.
""",
    "tests/conftest.py": '''import io
import json

import pytest


@pytest.fixture
def log_lines():
    def make(*records):
        return io.StringIO("\\n".join(json.dumps(r) for r in records) + "\\n")

    return make


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "logslice").mkdir()
    return tmp_path / "logslice"
''',
}


def _logslice_readme() -> str:
    flags = [
        ("-l, --level LEVEL", "minimum level to show (trace, debug, info, warn, error, fatal)"),
        ("--after TS", "only records at or after TS (ISO-8601, e.g. `2026-03-09T14:00:00Z`)"),
        ("--before TS", "only records before TS (ISO-8601)"),
        ("-f, --field KEY=VALUE", "only records whose field KEY equals VALUE; repeatable"),
        ("-g, --grep REGEX", "only records whose message matches REGEX"),
        ("-s, --service NAME", "only these services; repeatable"),
        ("-a, --alias NAME", "apply a filter alias from the `[aliases]` config section"),
        ("-o, --format FMT", "`table` (default), `json` or `logfmt`"),
        ("--fields A,B,C", "columns of the table format"),
        ("-c, --count", "print only the number of matching records"),
        ("-n, --limit N", "stop after N records"),
        ("--strict", "fail on lines that are not JSON objects"),
        ("--no-color", "no ANSI colours"),
        ("--config PATH", "config file to use instead of `~/.config/logslice/logslice.ini`"),
    ]
    out = ["# logslice", "", "Slice and filter structured (JSON-lines) logs from the command line. Pure standard",
           "library, Python 3.11+.", "", "```console",
           "$ logslice --level warn --after 2026-03-09T14:00:00Z -s checkout-api logs/*.jsonl",
           "TS                             LEVEL  SERVICE       MSG",
           "2026-03-09T14:02:11.482+00:00  WARN   checkout-api  payment provider slow (1840 ms)",
           "2026-03-09T14:05:37.009+00:00  ERROR  checkout-api  order 88412 failed: card_declined", "```", "",
           "## Install", "", "    pipx install logslice", "", "## Flags", "", "| flag | meaning |", "| --- | --- |"]
    out += [f"| `{f}` | {m} |" for f, m in flags]
    out += ["", "## Timestamps", "",
            "Records are matched on the first of `ts`, `time`, `timestamp`, `@timestamp`. ISO-8601 strings",
            "and epoch seconds or milliseconds are understood. Timestamps without an offset are taken as",
            "they are written (the `billing` service logs local time without an offset; see",
            "`samples/billing.log.jsonl`).", "",
            "## Levels", "", "Level keys: `level`, `lvl`, `severity`. Aliases: `warning` → `warn`, `err` → `error`,",
            "`critical`/`crit` → `fatal`; numeric pino levels 10–60.", "",
            "## Runbooks", "", "The on-call runbooks (`ops/runbooks/*.md` in the infra repo) call",
            "`logslice --after <ts>`; keep that flag working.", "",
            "## Development", "", "    python -m venv .venv && .venv/bin/pip install -e '.[dev]'", "    pytest -q", ""]
    return "\n".join(out)


def _logslice_sample(rng: random.Random, service: str, n: int, naive: bool) -> str:
    """A JSON-lines log of one service (ISO timestamps; ``naive`` ones carry no offset)."""
    import json as _json

    msgs = {
        "checkout-api": [("info", "order {o} created", {"order": 0}), ("info", "GET /v2/cart 200", {"duration_ms": 0}),
                         ("warn", "payment provider slow ({d} ms)", {"duration_ms": 0}),
                         ("error", "order {o} failed: card_declined", {"order": 0}),
                         ("debug", "cache hit cart:{o}", {}), ("info", "POST /v2/checkout 201", {"duration_ms": 0})],
        "billing": [("info", "invoice {o} issued", {"invoice": 0}), ("info", "nightly sync batch {b} done", {"batch": 0}),
                    ("warning", "retrying ledger write ({b}/5)", {"attempt": 0}),
                    ("err", "ledger write failed: deadlock detected", {"sqlstate": "40P01"}),
                    ("debug", "fx rate EUR/JPY {r}", {})],
    }[service]
    t = 1773064800.0 + rng.randint(0, 600)  # 2026-03-09T14:00:00Z
    lines = []
    for i in range(n):
        t += rng.uniform(0.2, 9.0)
        level, template, extra = rng.choice(msgs)
        o, d, b = rng.randint(80000, 99999), rng.randint(40, 2400), rng.randint(1, 5)
        msg = template.format(o=o, d=d, b=b, r=round(rng.uniform(160, 170), 2))
        ms = int(t * 1000)
        if naive:
            stamp = to_iso(ms + 3600000 * 9)[:-1]  # Asia/Tokyo wall clock, no offset
        else:
            stamp = to_iso(ms)
        rec = {"ts": stamp, "level": level, "service": service, "msg": msg}
        for k in extra:
            rec[k] = {"order": o, "duration_ms": d, "invoice": f"INV-{o}", "batch": b, "attempt": b}.get(k, extra[k])
        rec["trace_id"] = "".join(rng.choice("0123456789abcdef") for _ in range(16))
        lines.append(_json.dumps(rec, ensure_ascii=False))
    return "\n".join(lines) + "\n"


# the test suite of the project, by file: (test id, passes)
LOG_TESTS: dict[str, list[str]] = {
    "tests/test_parse.py": (
        [f"test_parse_timestamp_iso[{c}]" for c in ("utc-z", "offset-plus", "offset-minus", "no-offset", "date-only",
                                                   "fraction-ms", "fraction-us")]
        + [f"test_parse_timestamp_epoch[{c}]" for c in ("seconds", "millis", "float")]
        + ["test_parse_timestamp_rejects_garbage", "test_parse_timestamp_bool_is_none"]
        + [f"test_normalize_level[{c}]" for c in ("INFO", "warning", "err", "crit", "30", "dbg", "nonsense")]
        + ["test_iter_records_skips_bad_lines", "test_iter_records_strict_raises_with_line_number",
           "test_iter_records_picks_first_timestamp_key", "test_record_message_keys"]
    ),
    "tests/test_filters.py": (
        [f"test_level_at_least[{c}]" for c in ("info-info", "info-warn", "warn-info", "none")]
        + ["test_time_between_after_inclusive", "test_time_between_before_exclusive", "test_time_between_no_ts",
           "test_field_equals_stringifies", "test_message_matches_regex", "test_service_in",
           "test_build_predicate_ands_everything", "test_apply_is_lazy"]
    ),
    "tests/test_output.py": (
        ["test_table_aligns_columns", "test_table_truncates_long_values", "test_table_colours_levels",
         "test_table_no_colour", "test_json_passes_raw_lines", "test_logfmt_quotes_spaces",
         "test_logfmt_escapes_quotes", "test_logfmt_empty_value"]
    ),
    "tests/test_config.py": (
        ["test_missing_config_gives_defaults", "test_reads_format_and_level", "test_color_boolean_words",
         "test_fields_list", "test_aliases_section", "test_bad_format_names_file", "test_xdg_config_home"]
    ),
    "tests/test_cli.py": (
        ["test_version", "test_level_filter", "test_after_filter", "test_before_filter", "test_field_filter",
         "test_alias_from_config", "test_unknown_alias_lists_known", "test_count", "test_limit",
         "test_strict_reports_line", "test_format_from_config", "test_flag_beats_config", "test_stdin_default"]
    ),
}


def pytest_report(suites: dict[str, list[str]], rng: random.Random, *, verbose: bool = False,
                  failures: dict[str, str] | None = None, cov: bool = False) -> str:
    """Text of a pytest run over ``suites`` (``failures``: test id -> its failure section)."""
    failures = failures or {}
    ids = [(f, t) for f, ts in suites.items() for t in ts]
    total = len(ids)
    lines: list[str] = []
    if verbose:
        lines += ["============================= test session starts ==============================",
                  "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0 -- /home/kenji/work/logslice/.venv/bin/python",
                  "cachedir: .pytest_cache", "rootdir: /home/kenji/work/logslice", "configfile: pyproject.toml",
                  "testpaths: tests"]
        if cov:
            lines.append("plugins: cov-5.0.0")
        lines += [f"collected {total} items", ""]
        for k, (f, t) in enumerate(ids, 1):
            status = "FAILED" if t in failures else "PASSED"
            left = f"{f}::{t} {status}"
            pct = f"[{round(100 * k / total):3d}%]"
            lines.append(left.ljust(80 - len(pct)) + pct if len(left) < 79 - len(pct) else f"{left} {pct}")
    else:
        dots = "".join("F" if t in failures else "." for _, t in ids)
        for i in range(0, len(dots), 70):
            chunk = dots[i : i + 70]
            end = i + 70 >= len(dots)
            pct = f"[{round(100 * min(i + 70, total) / total):3d}%]"
            lines.append(chunk.ljust(74) + pct if end else chunk + " " * 4 + pct)
    if failures:
        lines += ["", "=================================== FAILURES ==================================="]
        for t, text in failures.items():
            lines += [f"_{' ' + t + ' '}".center(80, "_"), "", text, ""]
    if cov:
        lines += ["", "---------- coverage: platform linux, python 3.12.3-final-0 -----------",
                  "Name                         Stmts   Miss  Cover", "------------------------------------------------"]
        for mod in ("__init__", "cli", "config", "filters", "migrate", "output", "parse"):
            st = rng.randint(8, 160)
            miss = rng.randint(0, max(1, st // 9))
            lines.append(f"src/logslice/{mod}.py".ljust(29) + f"{st:5d}  {miss:5d}  {round(100 * (st - miss) / st):4d}%")
        lines.append("------------------------------------------------")
    if failures:
        lines += ["=========================== short test summary info ============================"]
        for f, t in ids:
            if t in failures:
                last = [ln for ln in failures[t].split("\n") if ln.startswith("E ")]
                lines.append(f"FAILED {f}::{t} - {last[0][2:].strip() if last else 'AssertionError'}")
    secs = f"{rng.uniform(0.3, 1.4):.2f}s"
    summary = (f"{len(failures)} failed, " if failures else "") + f"{total - len(failures)} passed in {secs}"
    lines.append(f" {summary} ".center(80, "=") if verbose or failures else summary)
    return "\n".join(lines)


LOG_FILES.update({
    "tests/test_parse.py": '''import io
from datetime import datetime, timedelta, timezone

import pytest

from logslice.parse import LogParseError, Record, iter_records, normalize_level, parse_timestamp

UTC = timezone.utc


@pytest.mark.parametrize("text, expected", [
    ("2026-03-09T14:02:11Z", datetime(2026, 3, 9, 14, 2, 11, tzinfo=UTC)),
    ("2026-03-09T15:02:11+01:00", datetime(2026, 3, 9, 14, 2, 11, tzinfo=UTC)),
    ("2026-03-09T09:02:11-05:00", datetime(2026, 3, 9, 14, 2, 11, tzinfo=UTC)),
    ("2026-03-09T23:02:11", datetime(2026, 3, 9, 23, 2, 11)),
    ("2026-03-09", datetime(2026, 3, 9)),
    ("2026-03-09T14:02:11.482Z", datetime(2026, 3, 9, 14, 2, 11, 482000, tzinfo=UTC)),
    ("2026-03-09T14:02:11.482913Z", datetime(2026, 3, 9, 14, 2, 11, 482913, tzinfo=UTC)),
], ids=["utc-z", "offset-plus", "offset-minus", "no-offset", "date-only", "fraction-ms", "fraction-us"])
def test_parse_timestamp_iso(text, expected):
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize("value", [1773064931, 1773064931000, 1773064931.0], ids=["seconds", "millis", "float"])
def test_parse_timestamp_epoch(value):
    assert parse_timestamp(value) == datetime(2026, 3, 9, 14, 2, 11, tzinfo=UTC)


def test_parse_timestamp_rejects_garbage():
    assert parse_timestamp("yesterday") is None


def test_parse_timestamp_bool_is_none():
    assert parse_timestamp(True) is None


@pytest.mark.parametrize("value, expected", [("INFO", "info"), ("warning", "warn"), ("err", "error"),
                                             ("crit", "fatal"), (30, "info"), ("dbg", "debug"), ("nonsense", None)],
                         ids=["INFO", "warning", "err", "crit", "30", "dbg", "nonsense"])
def test_normalize_level(value, expected):
    assert normalize_level(value) == expected


def test_iter_records_skips_bad_lines():
    recs = list(iter_records(io.StringIO('{"msg": "a"}\\nnot json\\n[1, 2]\\n{"msg": "b"}\\n')))
    assert [r.lineno for r in recs] == [1, 4]


def test_iter_records_strict_raises_with_line_number():
    with pytest.raises(LogParseError, match="line 2: invalid JSON"):
        list(iter_records(io.StringIO('{"msg": "a"}\\n{oops\\n'), strict=True))


def test_iter_records_picks_first_timestamp_key():
    (rec,) = iter_records(io.StringIO('{"time": "2026-03-09T14:00:00Z", "ts": "2026-03-09T15:00:00Z"}\\n'))
    assert rec.ts.hour == 15


def test_record_message_keys():
    assert Record(1, None, None, {"event": "boot"}).message == "boot"
''',
    "tests/test_filters.py": '''from datetime import datetime, timezone

import pytest

from logslice.filters import (FilterSpec, apply, build_predicate, field_equals, level_at_least, message_matches,
                              service_in, time_between)
from logslice.parse import Record

UTC = timezone.utc


def rec(ts=None, level="info", **fields):
    return Record(1, ts, level, fields)


@pytest.mark.parametrize("minimum, level, ok", [("info", "info", True), ("info", "warn", True),
                                                ("warn", "info", False), ("info", None, False)],
                         ids=["info-info", "info-warn", "warn-info", "none"])
def test_level_at_least(minimum, level, ok):
    assert level_at_least(minimum)(rec(level=level)) is ok


def test_time_between_after_inclusive():
    t = datetime(2026, 3, 9, 14, tzinfo=UTC)
    assert time_between(t, None)(rec(ts=t))


def test_time_between_before_exclusive():
    t = datetime(2026, 3, 9, 14, tzinfo=UTC)
    assert not time_between(None, t)(rec(ts=t))


def test_time_between_no_ts():
    assert not time_between(datetime(2026, 3, 9, tzinfo=UTC), None)(rec())


def test_field_equals_stringifies():
    assert field_equals("order", "88412")(rec(order=88412))


def test_message_matches_regex():
    assert message_matches(r"card_\\w+")(rec(msg="order 88412 failed: card_declined"))


def test_service_in():
    assert service_in(["billing"])(rec(service="billing"))
    assert not service_in(["billing"])(rec(service="checkout-api"))


def test_build_predicate_ands_everything():
    pred = build_predicate(FilterSpec(min_level="warn", services=["checkout-api"]))
    assert pred(rec(level="error", service="checkout-api"))
    assert not pred(rec(level="error", service="billing"))


def test_apply_is_lazy():
    out = apply(iter([rec()]), FilterSpec())
    assert not isinstance(out, list)
''',
    "tests/test_output.py": '''import io

from logslice.output import write_json, write_logfmt, write_table
from logslice.parse import Record


def rec(**fields):
    return Record(1, None, fields.pop("level", "info"), fields, raw="{}")


def test_table_aligns_columns():
    out = io.StringIO()
    write_table([rec(msg="a"), rec(msg="bbbb")], ["level", "msg"], out, color=False)
    assert out.getvalue().splitlines()[0] == "LEVEL  MSG"


def test_table_truncates_long_values():
    out = io.StringIO()
    write_table([rec(note="x" * 100)], ["note"], out, color=False)
    assert out.getvalue().splitlines()[1].endswith("…")


def test_table_colours_levels():
    out = io.StringIO()
    write_table([rec(level="error", msg="boom")], ["level", "msg"], out)
    assert "\\x1b[31m" in out.getvalue()


def test_table_no_colour():
    out = io.StringIO()
    write_table([rec(level="error", msg="boom")], ["level", "msg"], out, color=False)
    assert "\\x1b[" not in out.getvalue()


def test_json_passes_raw_lines():
    out = io.StringIO()
    write_json([rec()], out)
    assert out.getvalue() == "{}\\n"


def test_logfmt_quotes_spaces():
    out = io.StringIO()
    write_logfmt([rec(msg="two words")], out)
    assert 'msg="two words"' in out.getvalue()


def test_logfmt_escapes_quotes():
    out = io.StringIO()
    write_logfmt([rec(msg='say "hi"')], out)
    assert 'msg="say \\\\"hi\\\\""' in out.getvalue()


def test_logfmt_empty_value():
    out = io.StringIO()
    write_logfmt([rec(msg="")], out)
    assert 'msg=""' in out.getvalue()
''',
    "tests/test_config.py": '''from logslice.config import Config, ConfigError, load_config

import pytest


def write(config_home, text):
    path = config_home / "logslice.ini"
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_config_gives_defaults(tmp_path):
    assert load_config(tmp_path / "nope.ini") == Config()


def test_reads_format_and_level(config_home):
    cfg = load_config(write(config_home, "[logslice]\\nformat = json\\nlevel = warn\\n"))
    assert (cfg.format, cfg.level) == ("json", "warn")


def test_color_boolean_words(config_home):
    assert load_config(write(config_home, "[logslice]\\ncolor = off\\n")).color is False


def test_fields_list(config_home):
    cfg = load_config(write(config_home, "[logslice]\\nfields = ts , level,msg\\n"))
    assert cfg.fields == ["ts", "level", "msg"]


def test_aliases_section(config_home):
    cfg = load_config(write(config_home, "[aliases]\\ncheckout = service=checkout-api\\n"))
    assert cfg.aliases == {"checkout": "service=checkout-api"}


def test_bad_format_names_file(config_home):
    path = write(config_home, "[logslice]\\nformat = yaml\\n")
    with pytest.raises(ConfigError, match="logslice.ini: format must be one of table, json, logfmt"):
        load_config(path)


def test_xdg_config_home(config_home, monkeypatch):
    import importlib

    import logslice.config as config

    importlib.reload(config)
    assert config.DEFAULT_PATH == config_home / "logslice.ini"
''',
    "tests/test_cli.py": '''import json

import pytest

from logslice import __version__
from logslice.cli import main

LOG = [
    {"ts": "2026-03-09T14:00:00Z", "level": "info", "service": "checkout-api", "msg": "order 88410 created"},
    {"ts": "2026-03-09T14:02:11.482Z", "level": "warn", "service": "checkout-api", "msg": "payment provider slow (1840 ms)"},
    {"ts": "2026-03-09T14:05:37.009Z", "level": "error", "service": "checkout-api", "msg": "order 88412 failed: card_declined"},
    {"ts": "2026-03-09T14:06:00Z", "level": "info", "service": "billing", "msg": "invoice INV-88412 issued"},
]


@pytest.fixture
def logfile(tmp_path):
    path = tmp_path / "app.log.jsonl"
    path.write_text("".join(json.dumps(r) + "\\n" for r in LOG), encoding="utf-8")
    return path


def run(capsys, *argv):
    code = main(["--config", "/nonexistent/logslice.ini", "-o", "json", *argv])
    out, err = capsys.readouterr()
    return code, [json.loads(line)["msg"] for line in out.splitlines()], err


def test_version(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert __version__ in capsys.readouterr().out


def test_level_filter(capsys, logfile):
    assert run(capsys, "-l", "warn", str(logfile))[1] == [LOG[1]["msg"], LOG[2]["msg"]]


def test_after_filter(capsys, logfile):
    assert run(capsys, "--after", "2026-03-09T14:05:00Z", str(logfile))[1] == [LOG[2]["msg"], LOG[3]["msg"]]


def test_before_filter(capsys, logfile):
    assert run(capsys, "--before", "2026-03-09T14:02:11.482Z", str(logfile))[1] == [LOG[0]["msg"]]


def test_field_filter(capsys, logfile):
    assert run(capsys, "-f", "service=billing", str(logfile))[1] == [LOG[3]["msg"]]


def test_alias_from_config(capsys, logfile, config_home):
    (config_home / "logslice.ini").write_text("[aliases]\\nbilling = service=billing\\n")
    code = main(["--config", str(config_home / "logslice.ini"), "-o", "json", "-a", "billing", str(logfile)])
    assert code == 0 and "INV-88412" in capsys.readouterr().out


def test_unknown_alias_lists_known(capsys, logfile):
    code, _, err = run(capsys, "-a", "nope", str(logfile))
    assert code == 2 and "unknown alias 'nope' (known: none)" in err


def test_count(capsys, logfile):
    main(["--config", "/nonexistent/logslice.ini", "-c", str(logfile)])
    assert capsys.readouterr().out.strip() == "4"


def test_limit(capsys, logfile):
    assert len(run(capsys, "-n", "2", str(logfile))[1]) == 2


def test_strict_reports_line(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"msg": "ok"}\\nnope\\n')
    code, _, err = run(capsys, "--strict", str(bad))
    assert code == 1 and "line 2: invalid JSON" in err


def test_format_from_config(capsys, logfile, config_home):
    (config_home / "logslice.ini").write_text("[logslice]\\nformat = logfmt\\n")
    main(["--config", str(config_home / "logslice.ini"), str(logfile)])
    assert capsys.readouterr().out.startswith("ts=2026-03-09T14:00:00Z")


def test_flag_beats_config(capsys, logfile, config_home):
    (config_home / "logslice.ini").write_text("[logslice]\\nlevel = error\\n")
    main(["--config", str(config_home / "logslice.ini"), "-o", "json", "-l", "warn", str(logfile)])
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_stdin_default(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(LOG[0]) + "\\n"))
    assert run(capsys)[1] == [LOG[0]["msg"]]
''',
})


def story_logslice(seed: int) -> Recorder:
    r = Recorder("logslice-since-flag", LOG_CWD, LOG_FILES, seed, "2026-03-10T01:12:40.551Z", "claude-opus-4-5",
                 thinking="medium", strict_tools=True)
    rng = r.rng
    r.project.files["README.md"] = _logslice_readme()
    r.project.files["samples/checkout.log.jsonl"] = _logslice_sample(rng, "checkout-api", 420, naive=False)
    r.project.files["samples/billing.log.jsonl"] = _logslice_sample(rng, "billing", 260, naive=True)
    suites = {f: list(ts) for f, ts in LOG_TESTS.items()}

    def tests(verbose: bool = False, failures: dict[str, str] | None = None, cov: bool = False) -> str:
        return pytest_report(suites, rng, verbose=verbose, failures=failures, cov=cov)

    def add_tests(path: str, names: list[str]) -> None:
        suites.setdefault(path, []).extend(names)

    since_help = ("only records newer than WHEN: a duration back from now (15m, 2h, 3d, 1w) or an "
                  "ISO-8601 timestamp")
    since_error = "invalid --since value: {v!r} (use 15m, 2h, 3d, 1w or an ISO-8601 timestamp)"

    # 1. the request, and reading the code base
    r.turn(
        "I want a `--since` flag for logslice: `logslice --since 2h app.log.jsonl` should keep only records from "
        "the last two hours. It must accept relative durations (`15m`, `2h`, `3d`, `1w`) and absolute ISO-8601 "
        "timestamps.\n\nGround rules for the whole job: standard library only — no new dependencies, logslice "
        "ships as a single pipx package. Keep `--after` working exactly as it does now, the on-call runbooks use "
        "it. And run `pytest -q` before you tell me anything is done.",
        step("I'll look at the layout, the README and the code paths that handle time first.", ls(),
             ls("src/logslice"), ls("tests"),
             thinking="A --since flag: parse a duration or a timestamp, turn it into an absolute lower bound and "
                      "reuse the existing time_between filter that --after uses. Need to see how --after is parsed "
                      "and what parse_timestamp does with naive timestamps."),
        step(None, read("README.md"), read("src/logslice/cli.py")),
        step(None, read("src/logslice/parse.py"), read("src/logslice/filters.py")),
        step(None, grep("after|before|parse_timestamp", "src"), grep("--after", "tests")),
        step("Baseline test run before changing anything:", bash("pytest -v", tests(verbose=True))),
        step(None, read("samples/billing.log.jsonl", 1, 40),
             thinking="The billing samples have timestamps without an offset (2026-03-09T23:02:11.482 style). "
                      "parse_timestamp returns naive datetimes for those. --since computed from "
                      "datetime.now(timezone.utc) is aware; comparing naive < aware raises TypeError. --after "
                      "with a Z timestamp would hit the same thing on billing logs, so it is a latent bug."),
        step("Here is how I'd do it:\n\n"
             "- `parse.py`: add `parse_duration()` (`15m`, `2h`, `3d`, `1w`) and `resolve_since(value, now)`, which "
             "returns `now - duration` or falls back to `parse_timestamp()`.\n"
             "- `cli.py`: a `--since WHEN` option whose type is `resolve_since`; it feeds the same "
             "`FilterSpec.after` that `--after` fills, so the filtering code is shared and `--after` is unchanged.\n"
             "- Tests in `tests/test_parse.py` and `tests/test_cli.py`.\n\n"
             "One thing to decide: `samples/billing.log.jsonl` has timestamps **without an offset** "
             "(`2026-03-09T23:02:11.482`). `parse_timestamp()` returns naive datetimes for those, and comparing a "
             "naive datetime with the aware one `--since` produces raises `TypeError: can't compare offset-naive "
             "and offset-aware datetimes`. How should naive timestamps be read — UTC, or local time?"),
    )
    r.turn(
        "Naive timestamps are local time of the box that wrote them (billing runs in Tokyo, same as the machines "
        "we run logslice on). Don't guess UTC. Go ahead, and put the duration parsing in parse.py next to "
        "parse_timestamp.",
        step("Adding `parse_duration()` and `resolve_since()` to `src/logslice/parse.py`.",
             edit("src/logslice/parse.py", "import json\n", "import json\nimport re\n",
                  ("from datetime import datetime, timezone\n", "from datetime import datetime, timedelta, timezone\n"))),
        step(None, edit("src/logslice/parse.py",
                        "def normalize_level(value: Any) -> str | None:",
                        "_DURATION_RE = re.compile(r\"^(\\d+)([mhdw])$\")\n"
                        "_UNIT_SECONDS = {\"m\": 60, \"h\": 3600, \"d\": 86400, \"w\": 604800}\n\n\n"
                        "def parse_duration(text: str) -> timedelta | None:\n"
                        "    \"\"\"``15m``, ``2h``, ``3d``, ``1w`` as a timedelta; anything else is None.\"\"\"\n"
                        "    m = _DURATION_RE.match(text.strip().lower())\n    if not m:\n        return None\n"
                        "    return timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[m.group(2)])\n\n\n"
                        "def resolve_since(value: str, now: datetime | None = None) -> datetime | None:\n"
                        "    \"\"\"A ``--since`` value: a duration back from ``now`` or an ISO-8601 timestamp.\"\"\"\n"
                        "    delta = parse_duration(value)\n    if delta is not None:\n"
                        "        return (now or datetime.now(timezone.utc)) - delta\n"
                        "    return parse_timestamp(value)\n\n\n"
                        "def normalize_level(value: Any) -> str | None:")),
        step("Now the naive-timestamp rule in `src/logslice/filters.py`: naive means local time of the machine.",
             edit("src/logslice/filters.py",
                  "def time_between(after: datetime | None, before: datetime | None) -> Predicate:\n"
                  "    \"\"\"Records with ``after <= ts < before``; records without a timestamp never match.\"\"\"\n\n"
                  "    def pred(rec: Record) -> bool:\n        if rec.ts is None:\n            return False\n"
                  "        if after is not None and rec.ts < after:\n            return False\n"
                  "        if before is not None and rec.ts >= before:\n            return False\n        return True\n",
                  "def _aware(ts: datetime) -> datetime:\n"
                  "    \"\"\"Naive timestamps are local time of the machine that wrote them (never assumed UTC).\"\"\"\n"
                  "    return ts if ts.tzinfo is not None else ts.astimezone()\n\n\n"
                  "def time_between(after: datetime | None, before: datetime | None) -> Predicate:\n"
                  "    \"\"\"Records with ``after <= ts < before``; records without a timestamp never match.\"\"\"\n"
                  "    after = _aware(after) if after is not None else None\n"
                  "    before = _aware(before) if before is not None else None\n\n"
                  "    def pred(rec: Record) -> bool:\n        if rec.ts is None:\n            return False\n"
                  "        ts = _aware(rec.ts)\n"
                  "        if after is not None and ts < after:\n            return False\n"
                  "        if before is not None and ts >= before:\n            return False\n        return True\n")),
        step("And the option itself in `src/logslice/cli.py`; `--after` keeps its parser and help text.",
             edit("src/logslice/cli.py",
                  "from .parse import LEVELS, LogParseError, iter_records, parse_timestamp\n",
                  "from .parse import LEVELS, LogParseError, iter_records, parse_timestamp, resolve_since\n",
                  ("def _field_arg(value: str) -> tuple[str, str]:",
                   "def _since_arg(value: str) -> datetime:\n    ts = resolve_since(value)\n    if ts is None:\n"
                   "        raise argparse.ArgumentTypeError(\n"
                   f"            f\"{since_error.replace('{v!r}', '{value!r}')}\")\n    return ts\n\n\n"
                   "def _field_arg(value: str) -> tuple[str, str]:"),
                  ("    p.add_argument(\"--before\", type=_timestamp_arg,",
                   "    p.add_argument(\"--since\", type=_since_arg, metavar=\"WHEN\",\n"
                   f"                   help=\"{since_help}\")\n"
                   "    p.add_argument(\"--before\", type=_timestamp_arg,"))),
        step(None, read("src/logslice/cli.py", 70, 40),
             thinking="main() builds FilterSpec(after=args.after ...). --since should fill the same field. If both "
                      "are given, better to refuse than silently pick one."),
        step("If both `--since` and `--after` are given I'll refuse with exit code 2 rather than silently pick one.",
             edit("src/logslice/cli.py",
                  "    spec = FilterSpec(\n        min_level=args.level or cfg.level,\n        after=args.after,\n",
                  "    if args.since is not None and args.after is not None:\n"
                  "        print(\"logslice: --since and --after are the same filter; give only one\", file=sys.stderr)\n"
                  "        return 2\n"
                  "    spec = FilterSpec(\n        min_level=args.level or cfg.level,\n"
                  "        after=args.since if args.since is not None else args.after,\n")),
        step("Tests for the parser:", read("tests/test_parse.py")),
        step(None, edit("tests/test_parse.py",
                        "from logslice.parse import LogParseError, Record, iter_records, normalize_level, parse_timestamp\n",
                        "from logslice.parse import (LogParseError, Record, iter_records, normalize_level, parse_duration,\n"
                        "                            parse_timestamp, resolve_since)\n",
                        ("def test_record_message_keys():",
                         "NOW = datetime(2026, 3, 10, 1, 0, tzinfo=UTC)\n\n\n"
                         "@pytest.mark.parametrize(\"text, minutes\", [(\"15m\", 15), (\"2h\", 120), (\"3d\", 4320), (\"1w\", 10080),\n"
                         "                                           (\" 2H \", 120)], ids=[\"15m\", \"2h\", \"3d\", \"1w\", \"spaces-upper\"])\n"
                         "def test_parse_duration(text, minutes):\n    assert parse_duration(text) == timedelta(minutes=minutes)\n\n\n"
                         "@pytest.mark.parametrize(\"text\", [\"\", \"2\", \"h\", \"-2h\", \"2 hours\", \"1.5h\"])\n"
                         "def test_parse_duration_rejects(text):\n    assert parse_duration(text) is None\n\n\n"
                         "def test_resolve_since_relative():\n    assert resolve_since(\"2h\", now=NOW) == datetime(2026, 3, 9, 23, 0, tzinfo=UTC)\n\n\n"
                         "def test_resolve_since_absolute():\n    assert resolve_since(\"2026-03-09T14:00:00Z\", now=NOW) == datetime(2026, 3, 9, 14, tzinfo=UTC)\n\n\n"
                         "def test_resolve_since_garbage():\n    assert resolve_since(\"last friday\", now=NOW) is None\n\n\n"
                         "def test_record_message_keys():"))),
    )
    add_tests("tests/test_parse.py", [f"test_parse_duration[{c}]" for c in ("15m", "2h", "3d", "1w", "spaces-upper")]
              + [f"test_parse_duration_rejects[{c}]" for c in ("", "2", "h", "-2h", "2 hours", "1.5h")]
              + ["test_resolve_since_relative", "test_resolve_since_absolute", "test_resolve_since_garbage"])
    r.assistant(step("And for the filter with naive timestamps:", read("tests/test_filters.py")))
    r.assistant(step(None, edit("tests/test_filters.py", "def test_field_equals_stringifies():",
                                "def test_time_between_naive_record_is_local_time():\n"
                                "    local = datetime(2026, 3, 9, 23, 30)  # naive: local wall clock\n"
                                "    after = local.astimezone() - timedelta(minutes=5)\n"
                                "    assert time_between(after.astimezone(UTC), None)(rec(ts=local))\n\n\n"
                                "def test_time_between_naive_bound_is_local_time():\n"
                                "    bound = datetime(2026, 3, 9, 23, 30)\n"
                                "    assert not time_between(bound, None)(rec(ts=bound.astimezone() - timedelta(seconds=1)))\n\n\n"
                                "def test_field_equals_stringifies():")))
    naive_fail = ("    def test_time_between_naive_record_is_local_time():\n"
                  "        local = datetime(2026, 3, 9, 23, 30)  # naive: local wall clock\n"
                  ">       after = local.astimezone() - timedelta(minutes=5)\n"
                  "E       NameError: name 'timedelta' is not defined\n\ntests/test_filters.py:38: NameError")
    add_tests("tests/test_filters.py", ["test_time_between_naive_record_is_local_time",
                                        "test_time_between_naive_bound_is_local_time"])
    r.assistant(step(None, bash("pytest -q", tests(failures={
        "test_time_between_naive_record_is_local_time": naive_fail,
        "test_time_between_naive_bound_is_local_time": naive_fail.replace("local = datetime(2026, 3, 9, 23, 30)  # naive: local wall clock\n>       after = local.astimezone() - timedelta(minutes=5)",
                                                                          "bound = datetime(2026, 3, 9, 23, 30)\n>       assert not time_between(bound, None)(rec(ts=bound.astimezone() - timedelta(seconds=1)))").replace(":38:", ":44:"),
    }), exit_code=1)))
    r.assistant(step("Missing import in the test module.", edit("tests/test_filters.py", "from datetime import datetime, timezone\n",
                                                                  "from datetime import datetime, timedelta, timezone\n")))
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step("Now CLI tests: `--since` relative (with a fixed clock), absolute, the error text, and the "
                     "`--since` + `--after` conflict.", read("tests/test_cli.py")))
    r.assistant(step(None, edit("tests/test_cli.py", "def test_before_filter(capsys, logfile):",
                                "def test_since_absolute(capsys, logfile):\n"
                                "    assert run(capsys, \"--since\", \"2026-03-09T14:05:00Z\", str(logfile))[1] == [LOG[2][\"msg\"], LOG[3][\"msg\"]]\n\n\n"
                                "def test_since_relative(capsys, logfile, monkeypatch):\n"
                                "    import logslice.parse as parse\n\n"
                                "    fixed = parse.datetime(2026, 3, 9, 14, 10, tzinfo=parse.timezone.utc)\n"
                                "    monkeypatch.setattr(parse, \"datetime\", type(\"FixedNow\", (parse.datetime,), {\"now\": classmethod(lambda cls, tz=None: fixed)}))\n"
                                "    assert run(capsys, \"--since\", \"5m\", str(logfile))[1] == [LOG[3][\"msg\"]]\n\n\n"
                                "def test_since_rejects_garbage(capsys, logfile):\n"
                                "    with pytest.raises(SystemExit):\n        main([\"--since\", \"yesterday\", str(logfile)])\n"
                                "    assert \"invalid --since value: 'yesterday'\" in capsys.readouterr().err\n\n\n"
                                "def test_since_and_after_conflict(capsys, logfile):\n"
                                "    code, _, err = run(capsys, \"--since\", \"2h\", \"--after\", \"2026-03-09T14:00:00Z\", str(logfile))\n"
                                "    assert code == 2 and \"give only one\" in err\n\n\n"
                                "def test_before_filter(capsys, logfile):")))
    add_tests("tests/test_cli.py", ["test_since_absolute", "test_since_relative", "test_since_rejects_garbage",
                                    "test_since_and_after_conflict"])
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step(None, bash("logslice --since 2026-03-09T14:30:00Z -l warn samples/checkout.log.jsonl samples/billing.log.jsonl | head -20",
                                _logslice_table(r, ["samples/checkout.log.jsonl", "samples/billing.log.jsonl"], "warn", 19,
                                                since="2026-03-09T14:30:00Z"))))
    done_since = r.assistant(step(
        "`--since` works and all tests pass.\n\n- `src/logslice/parse.py`: `parse_duration()` (`15m`, `2h`, `3d`, `1w`) "
        "and `resolve_since()`.\n- `src/logslice/filters.py`: naive timestamps are compared as **local time** of the "
        "machine (`_aware()`), for records and for bounds, so `samples/billing.log.jsonl` no longer raises "
        "`TypeError: can't compare offset-naive and offset-aware datetimes`.\n- `src/logslice/cli.py`: `--since WHEN`; "
        "`--after` is unchanged; giving both exits with code 2.\n- Tests: durations, rejects, relative/absolute "
        "`--since`, naive timestamps, the conflict."))
    r.label(done_since, "since-flag")

    # 2. a dead end: natural-language dates through a new dependency (abandoned with /tree)
    r.turn("Could --since also take things like 'yesterday 18:00' or 'last friday'? On-call people type those.",
           step("The robust way is the `dateparser` package, which understands those phrases in many languages.",
                bash("pip install dateparser", "Collecting dateparser\n  Downloading dateparser-1.2.1-py3-none-any.whl (295 kB)\n"
                     "Collecting regex!=2019.02.19,!=2021.8.27,>=2015.06.24\n  Downloading regex-2024.11.6-cp312-cp312-manylinux_2_17_x86_64.whl (796 kB)\n"
                     "Collecting tzlocal>=0.2\n  Downloading tzlocal-5.2-py3-none-any.whl (17 kB)\n"
                     "Installing collected packages: tzlocal, regex, dateparser\nSuccessfully installed dateparser-1.2.1 regex-2024.11.6 tzlocal-5.2")),
           step(None, edit("src/logslice/parse.py",
                           "    delta = parse_duration(value)\n    if delta is not None:\n"
                           "        return (now or datetime.now(timezone.utc)) - delta\n    return parse_timestamp(value)\n",
                           "    delta = parse_duration(value)\n    if delta is not None:\n"
                           "        return (now or datetime.now(timezone.utc)) - delta\n    ts = parse_timestamp(value)\n"
                           "    if ts is None:\n        import dateparser\n\n"
                           "        ts = dateparser.parse(value, settings={\"RELATIVE_BASE\": now, \"RETURN_AS_TIMEZONE_AWARE\": True})\n"
                           "    return ts\n"),
                edit("pyproject.toml", "dependencies = []", "dependencies = [\"dateparser>=1.2\"]")),
           step(None, bash("pytest -q", tests(failures={"test_resolve_since_garbage": (
               "    def test_resolve_since_garbage():\n>       assert resolve_since(\"last friday\", now=NOW) is None\n"
               "E       AssertionError: assert datetime.datetime(2026, 3, 6, 1, 0, tzinfo=<StaticTzInfo 'UTC'>) is None\n"
               "E        +  where datetime.datetime(2026, 3, 6, 1, 0, tzinfo=<StaticTzInfo 'UTC'>) = resolve_since('last friday', now=datetime.datetime(2026, 3, 10, 1, 0, tzinfo=datetime.timezone.utc))\n\n"
               "tests/test_parse.py:77: AssertionError")}), exit_code=1)),
           step("That failure is expected: `last friday` now resolves. I'd change that test to assert the date. "
                "Note this adds `dateparser` (plus `regex` and `tzlocal`) as a dependency."))
    r.user("No — stdlib only, I said that at the start. Undo all of that, we won't do natural-language dates.")
    r.assistant(step("Understood: no `dateparser`. Reverting both edits and uninstalling it.",
                     edit("src/logslice/parse.py",
                          "    ts = parse_timestamp(value)\n    if ts is None:\n        import dateparser\n\n"
                          "        ts = dateparser.parse(value, settings={\"RELATIVE_BASE\": now, \"RETURN_AS_TIMEZONE_AWARE\": True})\n"
                          "    return ts\n",
                          "    return parse_timestamp(value)\n"),
                     edit("pyproject.toml", "dependencies = [\"dateparser>=1.2\"]", "dependencies = []"),
                     bash("pip uninstall -y dateparser regex tzlocal",
                          "Found existing installation: dateparser 1.2.1\nUninstalling dateparser-1.2.1:\n  Successfully uninstalled dateparser-1.2.1\n"
                          "Found existing installation: regex 2024.11.6\nUninstalling regex-2024.11.6:\n  Successfully uninstalled regex-2024.11.6\n"
                          "Found existing installation: tzlocal 5.2\nUninstalling tzlocal-5.2:\n  Successfully uninstalled tzlocal-5.2")))
    r.assistant(step("Reverted: `src/logslice/parse.py` and `pyproject.toml` are back to the stdlib-only `--since`, "
                     "and `dateparser` is uninstalled. Natural-language dates are out of scope."))
    r.label(r.leaf, "dateparser-dead-end")
    r.navigate(done_since, custom_instructions="Record that natural-language dates were rejected: stdlib only.")

    # 3. the config migration: INI (v1) -> TOML (v2) with a migrate subcommand
    r.turn(
        "Next job. The config moves from `~/.config/logslice/logslice.ini` to `logslice.toml` with "
        "`schema_version = 2`, read with `tomllib`. Add `logslice config migrate` which converts the INI. Rules: "
        "the migration must be idempotent (running it twice changes nothing), keep a backup at "
        "`logslice.ini.bak`, and never overwrite an existing `logslice.toml`. Old INI files must keep loading for "
        "one more release, with a DeprecationWarning. Still stdlib only, so we write the TOML ourselves (no tomli-w).",
        step("Reading the config code, its docs and tests.", read("src/logslice/config.py"), read("docs/config.md"),
             read("tests/test_config.py"),
             thinking="tomllib can read but not write. Our schema is tiny: strings, a bool, a list of strings, a "
                      "table of string aliases. A small writer with proper string escaping is enough. Plan: "
                      "config.py loads toml first (schema_version check), falls back to ini with "
                      "DeprecationWarning; migrate.py does ini -> toml with backup and no-overwrite."),
        step(None, grep("load_config|DEFAULT_PATH|config_dir", "src"), grep("config", "tests", ignore_case=True)),
        step("Plan:\n\n1. `src/logslice/migrate.py`: `ini_to_toml(cfg)` renders a `Config` as TOML; `migrate(dir)` "
             "writes `logslice.toml`, copies the INI to `logslice.ini.bak`, refuses to overwrite, and is a no-op "
             "when already migrated.\n2. `config.py`: `load_config()` prefers `logslice.toml` (requires "
             "`schema_version = 2`), falls back to the INI with a `DeprecationWarning`.\n3. `cli.py`: a `config "
             "migrate` subcommand.\n\nStarting with the writer.",
             write("src/logslice/migrate.py",
                   "\"\"\"Config format migration: ``logslice.ini`` (v1) to ``logslice.toml`` (v2).\"\"\"\n\n"
                   "from __future__ import annotations\n\nimport shutil\nfrom pathlib import Path\n\n"
                   "from .config import Config, load_ini\n\nSCHEMA_VERSION = 2\n\n\n"
                   "def _toml_str(value: str) -> str:\n    return '\"' + value.replace('\\\\', '\\\\\\\\').replace('\"', '\\\\\"') + '\"'\n\n\n"
                   "def ini_to_toml(cfg: Config) -> str:\n    \"\"\"A v2 TOML document for ``cfg``.\"\"\"\n"
                   "    lines = [f\"schema_version = {SCHEMA_VERSION}\", \"\", \"[defaults]\"]\n"
                   "    lines.append(f\"format = {_toml_str(cfg.format)}\")\n"
                   "    if cfg.level:\n        lines.append(f\"level = {_toml_str(cfg.level)}\")\n"
                   "    lines.append(f\"color = {'true' if cfg.color else 'false'}\")\n"
                   "    lines.append(f\"fields = {', '.join(cfg.fields)}\")\n"
                   "    if cfg.aliases:\n        lines += [\"\", \"[aliases]\"]\n"
                   "        lines += [f\"{name} = {_toml_str(value)}\" for name, value in sorted(cfg.aliases.items())]\n"
                   "    return \"\\n\".join(lines) + \"\\n\"\n\n\n"
                   "class MigrationError(RuntimeError):\n    \"\"\"The migration refused to run (the message says why).\"\"\"\n\n\n"
                   "def migrate(config_dir: Path) -> str:\n    \"\"\"Convert ``logslice.ini`` in ``config_dir``; returns what was done.\"\"\"\n"
                   "    ini, toml, bak = (config_dir / n for n in (\"logslice.ini\", \"logslice.toml\", \"logslice.ini.bak\"))\n"
                   "    if not ini.exists():\n        return \"nothing to migrate: no logslice.ini\"\n"
                   "    text = ini_to_toml(load_ini(ini))\n"
                   "    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n        fh.write(text)\n"
                   "    shutil.copy2(ini, bak)\n    return f\"wrote {toml.name}, backup {bak.name}\"\n")),
    )
    r.assistant(step("`migrate.py` imports `load_ini`; splitting `load_config()` accordingly in `src/logslice/config.py`.",
                     edit("src/logslice/config.py",
                          "def load_config(path: Path | None = None) -> Config:\n    \"\"\"Read the INI config; a missing file gives the defaults.\"\"\"\n"
                          "    path = path or DEFAULT_PATH\n    cfg = Config()\n    if not path.exists():\n        return cfg\n",
                          "def load_ini(path: Path) -> Config:\n    \"\"\"Read a v1 INI config; a missing file gives the defaults.\"\"\"\n"
                          "    cfg = Config()\n    if not path.exists():\n        return cfg\n")))
    r.assistant(step(None, edit("src/logslice/config.py",
                                "import configparser\nimport os\n",
                                "import configparser\nimport os\nimport tomllib\nimport warnings\n",
                                ("DEFAULT_PATH = config_dir() / \"logslice.ini\"\n",
                                 "DEFAULT_PATH = config_dir() / \"logslice.toml\"\nLEGACY_PATH = config_dir() / \"logslice.ini\"\n"))))
    r.assistant(step("Now the v2 loader and the new `load_config()` that prefers TOML:",
                     edit("src/logslice/config.py", "    cfg.source = path\n    return cfg\n",
                          "    cfg.source = path\n    return cfg\n\n\n"
                          "def load_toml(path: Path) -> Config:\n    \"\"\"Read a v2 TOML config (``schema_version = 2``).\"\"\"\n"
                          "    try:\n        data = tomllib.loads(path.read_text(encoding=\"utf-8\"))\n"
                          "    except tomllib.TOMLDecodeError as exc:\n        raise ConfigError(f\"{path}: {exc}\") from None\n"
                          "    if data.get(\"schema_version\") != 2:\n"
                          "        raise ConfigError(f\"{path}: schema_version must be 2, not {data.get('schema_version')!r}\")\n"
                          "    d = data.get(\"defaults\", {})\n    cfg = Config()\n"
                          "    if d.get(\"format\", cfg.format) not in FORMATS:\n"
                          "        raise ConfigError(f\"{path}: format must be one of {', '.join(FORMATS)}, not {d['format']!r}\")\n"
                          "    cfg.format = d.get(\"format\", cfg.format)\n    cfg.level = d.get(\"level\")\n"
                          "    cfg.color = bool(d.get(\"color\", cfg.color))\n    cfg.fields = list(d.get(\"fields\", cfg.fields))\n"
                          "    cfg.aliases = dict(data.get(\"aliases\", {}))\n    cfg.source = path\n    return cfg\n\n\n"
                          "def load_config(path: Path | None = None) -> Config:\n"
                          "    \"\"\"The config: ``path`` if given, else ``logslice.toml``, else the legacy ``logslice.ini``.\"\"\"\n"
                          "    if path is not None:\n        return load_toml(path) if path.suffix == \".toml\" else load_ini(path)\n"
                          "    if DEFAULT_PATH.exists():\n        return load_toml(DEFAULT_PATH)\n"
                          "    if LEGACY_PATH.exists():\n"
                          "        warnings.warn(f\"{LEGACY_PATH} is deprecated; run `logslice config migrate`\", DeprecationWarning, stacklevel=2)\n"
                          "        return load_ini(LEGACY_PATH)\n    return Config()\n")))
    r.assistant(step(None, read("src/logslice/config.py")))
    r.assistant(step("Tests for the migration, including running it twice and the no-overwrite rule:",
                     write("tests/test_migrate.py",
                           "import tomllib\n\nimport pytest\n\nfrom logslice.config import load_config, load_toml\n"
                           "from logslice.migrate import migrate\n\nINI = \"\"\"[logslice]\nformat = json\nlevel = warn\ncolor = no\n"
                           "fields = ts, level, service, msg\n\n[aliases]\ncheckout = service=checkout-api\n"
                           "payments = service=payments\n\"\"\"\n\n\n"
                           "def test_migrate_writes_toml_and_backup(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n    migrate(config_home)\n"
                           "    data = tomllib.loads((config_home / \"logslice.toml\").read_text())\n"
                           "    assert data[\"schema_version\"] == 2\n    assert data[\"defaults\"][\"fields\"] == [\"ts\", \"level\", \"service\", \"msg\"]\n"
                           "    assert (config_home / \"logslice.ini.bak\").read_text() == INI\n\n\n"
                           "def test_migrated_config_loads_the_same(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n    before = load_config(config_home / \"logslice.ini\")\n"
                           "    migrate(config_home)\n    after = load_toml(config_home / \"logslice.toml\")\n"
                           "    assert (after.format, after.level, after.color, after.fields, after.aliases) == \\\n"
                           "        (before.format, before.level, before.color, before.fields, before.aliases)\n\n\n"
                           "def test_migrate_twice_is_a_no_op(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n    migrate(config_home)\n"
                           "    first = (config_home / \"logslice.toml\").read_bytes()\n    migrate(config_home)\n"
                           "    assert (config_home / \"logslice.toml\").read_bytes() == first\n\n\n"
                           "def test_migrate_never_overwrites_existing_toml(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n"
                           "    (config_home / \"logslice.toml\").write_text(\"schema_version = 2\\n# hand-written\\n\")\n"
                           "    migrate(config_home)\n"
                           "    assert \"hand-written\" in (config_home / \"logslice.toml\").read_text()\n\n\n"
                           "def test_windows_path_alias_survives(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(\"[aliases]\\nwin = path=C:\\\\logs\\\\app\\n\")\n"
                           "    migrate(config_home)\n"
                           "    assert load_toml(config_home / \"logslice.toml\").aliases == {\"win\": \"path=C:\\\\logs\\\\app\"}\n\n\n"
                           "def test_legacy_ini_warns(config_home):\n    (config_home / \"logslice.ini\").write_text(INI)\n"
                           "    import importlib\n\n    import logslice.config as config\n\n    importlib.reload(config)\n"
                           "    with pytest.warns(DeprecationWarning, match=\"logslice config migrate\"):\n"
                           "        assert config.load_config().format == \"json\"\n")))
    add_tests("tests/test_migrate.py", ["test_migrate_writes_toml_and_backup", "test_migrated_config_loads_the_same",
                                        "test_migrate_twice_is_a_no_op", "test_migrate_never_overwrites_existing_toml",
                                        "test_windows_path_alias_survives", "test_legacy_ini_warns"])
    toml_fail = ("    def test_migrate_writes_toml_and_backup(config_home):\n"
                 "        (config_home / \"logslice.ini\").write_text(INI)\n        migrate(config_home)\n"
                 ">       data = tomllib.loads((config_home / \"logslice.toml\").read_text())\n\n"
                 "tests/test_migrate.py:17: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
                 "/usr/lib/python3.12/tomllib/_parser.py:143: in loads\n    pos = key_value_rule(src, pos, out, header, parse_float)\n"
                 "E   tomllib.TOMLDecodeError: Invalid value (at line 6, column 10)")
    exists_fail = ("    def test_migrate_twice_is_a_no_op(config_home):\n        (config_home / \"logslice.ini\").write_text(INI)\n"
                   "        migrate(config_home)\n        first = (config_home / \"logslice.toml\").read_bytes()\n"
                   ">       migrate(config_home)\n\ntests/test_migrate.py:31: \n"
                   "src/logslice/migrate.py:38: in migrate\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n"
                   "E   FileExistsError: [Errno 17] File exists: '/tmp/pytest-of-kenji/pytest-41/test_migrate_twice_is_a_no_op0/logslice/logslice.toml'")
    r.assistant(step(None, bash("pytest -q tests/test_migrate.py tests/test_config.py", pytest_report(
        {"tests/test_migrate.py": suites["tests/test_migrate.py"], "tests/test_config.py": suites["tests/test_config.py"]},
        rng, failures={"test_migrate_writes_toml_and_backup": toml_fail,
                       "test_migrated_config_loads_the_same": toml_fail.replace("test_migrate_writes_toml_and_backup", "test_migrated_config_loads_the_same").replace(":17:", ":24:"),
                       "test_migrate_twice_is_a_no_op": exists_fail,
                       "test_migrate_never_overwrites_existing_toml": exists_fail.replace("test_migrate_twice_is_a_no_op", "test_migrate_never_overwrites_existing_toml").replace(":31:", ":38:"),
                       "test_windows_path_alias_survives": toml_fail.replace("test_migrate_writes_toml_and_backup", "test_windows_path_alias_survives").replace("line 6", "line 5").replace(":17:", ":44:")}),
        exit_code=1),
        thinking="Two bugs. 1) fields written as a bare comma list: TOML needs an array of strings. "
                 "2) open('x') raises when logslice.toml exists; the rules say: already migrated -> no-op, and "
                 "never overwrite. Check existence first and return a message instead of raising."))
    r.assistant(step("Two bugs: `fields` is written as a bare list (TOML needs `[\"ts\", \"level\"]`), and "
                     "`open(\"x\")` raises `FileExistsError` instead of treating an existing `logslice.toml` as "
                     "already migrated. Fixing both:",
                     edit("src/logslice/migrate.py",
                          "    lines.append(f\"fields = {', '.join(cfg.fields)}\")\n",
                          "    lines.append(f\"fields = [{', '.join(_toml_str(f) for f in cfg.fields)}]\")\n",
                          ("    text = ini_to_toml(load_ini(ini))\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n",
                           "    if toml.exists():\n        return f\"already migrated: {toml.name} exists (left untouched)\"\n"
                           "    text = ini_to_toml(load_ini(ini))\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n"))))
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step("Green. Now the `config migrate` subcommand. argparse with an optional positional subcommand "
                     "would clash with the `files` positional, so I'll dispatch on `argv[:2] == ['config', 'migrate']` "
                     "before building the filter parser.", read("src/logslice/cli.py", 80)))
    r.assistant(step(None, edit("src/logslice/cli.py",
                                "def main(argv: Sequence[str] | None = None) -> int:\n    args = build_parser().parse_args(argv)\n",
                                "def config_main(argv: Sequence[str]) -> int:\n"
                                "    \"\"\"``logslice config migrate [--dir DIR]``.\"\"\"\n"
                                "    p = argparse.ArgumentParser(prog=\"logslice config\")\n"
                                "    p.add_argument(\"action\", choices=[\"migrate\"])\n"
                                "    p.add_argument(\"--dir\", type=Path, default=config_dir(), help=\"config folder\")\n"
                                "    args = p.parse_args(argv)\n    print(f\"logslice: {migrate(args.dir)}\")\n    return 0\n\n\n"
                                "def main(argv: Sequence[str] | None = None) -> int:\n"
                                "    argv = list(sys.argv[1:] if argv is None else argv)\n"
                                "    if argv[:1] == [\"config\"]:\n        return config_main(argv[1:])\n"
                                "    args = build_parser().parse_args(argv)\n",
                                ("from .config import FORMATS, ConfigError, load_config\n",
                                 "from .config import FORMATS, ConfigError, config_dir, load_config\n"),
                                ("from .filters import FilterSpec, apply\n",
                                 "from .filters import FilterSpec, apply\nfrom .migrate import migrate\n"))))
    r.assistant(step(None, edit("tests/test_cli.py", "def test_stdin_default(capsys, monkeypatch):",
                                "def test_config_migrate_subcommand(capsys, config_home):\n"
                                "    (config_home / \"logslice.ini\").write_text(\"[logslice]\\nformat = json\\n\")\n"
                                "    assert main([\"config\", \"migrate\", \"--dir\", str(config_home)]) == 0\n"
                                "    assert \"wrote logslice.toml, backup logslice.ini.bak\" in capsys.readouterr().out\n"
                                "    assert main([\"config\", \"migrate\", \"--dir\", str(config_home)]) == 0\n"
                                "    assert \"already migrated\" in capsys.readouterr().out\n\n\n"
                                "def test_stdin_default(capsys, monkeypatch):")))
    add_tests("tests/test_cli.py", ["test_config_migrate_subcommand"])
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step(None, bash("logslice config migrate --dir /tmp/lsmig && cat /tmp/lsmig/logslice.toml",
                                "logslice: wrote logslice.toml, backup logslice.ini.bak\nschema_version = 2\n\n[defaults]\n"
                                "format = \"table\"\nlevel = \"info\"\ncolor = true\nfields = [\"ts\", \"level\", \"service\", \"msg\"]\n\n"
                                "[aliases]\ncheckout = \"service=checkout-api\"\npayments = \"service=payments\"")))
    r.assistant(step("The migration is in place and all tests pass:\n\n- `src/logslice/migrate.py`: `ini_to_toml()` "
                     "(strings escaped, `fields` as a TOML array) and `migrate()`: writes `logslice.toml`, keeps "
                     "`logslice.ini.bak`, never overwrites an existing `logslice.toml`, and a second run is a no-op "
                     "(`already migrated`).\n- `src/logslice/config.py`: `load_config()` prefers `logslice.toml` "
                     "(`schema_version = 2`), falls back to `logslice.ini` with a `DeprecationWarning`.\n"
                     "- `logslice config migrate [--dir DIR]`.\n\nDecided to write TOML by hand instead of adding "
                     "tomli-w, per the stdlib-only rule."))
    r.compact(keep_recent_tokens=9000,
              custom_instructions="Keep the user's rules verbatim (stdlib only; --after unchanged; naive timestamps "
                                  "are local time; migration idempotent, .bak backup, never overwrite logslice.toml).")

    # 4. config defaults for --since, docs, precedence
    r.turn(
        "Good. Two follow-ups: allow `since = \"2h\"` under `[defaults]` in logslice.toml (the CLI flag wins, as "
        "always), and update README.md and docs/config.md — the docs still only describe the INI.",
        step(None, read("src/logslice/config.py", 1, 60), read("src/logslice/cli.py", 95, 40)),
        step("Adding `since` to `Config` and the TOML loader (INI files never had it, so v1 stays as it was).",
             edit("src/logslice/config.py",
                  "    aliases: dict[str, str] = field(default_factory=dict)\n    source: Path | None = None\n",
                  "    aliases: dict[str, str] = field(default_factory=dict)\n    since: str | None = None\n"
                  "    source: Path | None = None\n",
                  ("    cfg.aliases = dict(data.get(\"aliases\", {}))\n    cfg.source = path\n",
                   "    cfg.aliases = dict(data.get(\"aliases\", {}))\n    cfg.since = d.get(\"since\")\n"
                   "    if cfg.since is not None and resolve_since(cfg.since) is None:\n"
                   "        raise ConfigError(f\"{path}: defaults.since: {since_error_text(cfg.since)}\")\n"
                   "    cfg.source = path\n"))),
        step("The loader refers to `since_error_text()`, which I'm adding next to `resolve_since()` in "
             "`parse.py`; `cli.py` will use it too so the message is the same everywhere.",
             edit("src/logslice/parse.py",
                  "def normalize_level(value: Any) -> str | None:",
                  "def since_error_text(value: str) -> str:\n"
                  f"    return f\"{since_error.replace('{v!r}', '{value!r}')}\"\n\n\n"
                  "def normalize_level(value: Any) -> str | None:"),
             edit("src/logslice/config.py", "from pathlib import Path\n",
                  "from pathlib import Path\n\nfrom .parse import resolve_since, since_error_text\n")),
        step(None, edit("src/logslice/cli.py",
                        "        raise argparse.ArgumentTypeError(\n"
                        f"            f\"{since_error.replace('{v!r}', '{value!r}')}\")\n",
                        "        raise argparse.ArgumentTypeError(since_error_text(value))\n",
                        ("from .parse import LEVELS, LogParseError, iter_records, parse_timestamp, resolve_since\n",
                         "from .parse import LEVELS, LogParseError, iter_records, parse_timestamp, resolve_since, since_error_text\n"))),
        step("Precedence in `main()`: `--since` or `--after` from the command line, else `defaults.since`.",
             edit("src/logslice/cli.py",
                  "        after=args.since if args.since is not None else args.after,\n",
                  "        after=(args.since if args.since is not None else args.after if args.after is not None\n"
                  "               else resolve_since(cfg.since) if cfg.since else None),\n")),
        step(None, edit("tests/test_cli.py", "def test_stdin_default(capsys, monkeypatch):",
                        "def test_since_from_config_and_flag_wins(capsys, logfile, config_home):\n"
                        "    toml = config_home / \"logslice.toml\"\n"
                        "    toml.write_text('schema_version = 2\\n[defaults]\\nsince = \"2026-03-09T14:05:00Z\"\\nformat = \"json\"\\n')\n"
                        "    main([\"--config\", str(toml), str(logfile)])\n"
                        "    assert len(capsys.readouterr().out.splitlines()) == 2\n"
                        "    main([\"--config\", str(toml), \"--after\", \"2026-03-09T14:00:00Z\", str(logfile)])\n"
                        "    assert len(capsys.readouterr().out.splitlines()) == 4\n\n\n"
                        "def test_stdin_default(capsys, monkeypatch):"),
             edit("tests/test_migrate.py", "def test_legacy_ini_warns(config_home):",
                  "def test_bad_since_in_toml_names_file(config_home):\n"
                  "    (config_home / \"logslice.toml\").write_text('schema_version = 2\\n[defaults]\\nsince = \"soon\"\\n')\n"
                  "    with pytest.raises(ConfigError, match=\"logslice.toml: defaults.since: invalid --since value: 'soon'\"):\n"
                  "        load_toml(config_home / \"logslice.toml\")\n\n\n"
                  "def test_legacy_ini_warns(config_home):",
                  ("from logslice.config import load_config, load_toml\n",
                   "from logslice.config import ConfigError, load_config, load_toml\n"))),
    )
    add_tests("tests/test_cli.py", ["test_since_from_config_and_flag_wins"])
    add_tests("tests/test_migrate.py", ["test_bad_since_in_toml_names_file"])
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step("Tests pass. Now the docs.", read("docs/config.md"), read("README.md")))
    r.assistant(step(None, write("docs/config.md",
                                 "# Configuration\n\nlogslice reads `~/.config/logslice/logslice.toml` (or "
                                 "`$XDG_CONFIG_HOME/logslice/logslice.toml`, or the file given with `--config`). "
                                 "Every key is optional.\n\n```toml\nschema_version = 2\n\n[defaults]\nformat = \"table\"   "
                                 "# table | json | logfmt\nlevel = \"info\"     # minimum level when --level is not given\n"
                                 "color = true\nfields = [\"ts\", \"level\", \"service\", \"msg\"]\nsince = \"2h\"       "
                                 "# default for --since: 15m, 2h, 3d, 1w or an ISO-8601 timestamp\n\n[aliases]\n"
                                 "# logslice -a checkout  ==  logslice -f service=checkout-api\ncheckout = \"service=checkout-api\"\n"
                                 "payments = \"service=payments\"\n```\n\n## Precedence\n\nCommand-line flags win over the "
                                 "config file, which wins over the built-in defaults. `--since` and `--after` are the same "
                                 "filter (give only one); either replaces `defaults.since`.\n\n## Timestamps without an offset\n\n"
                                 "They are local time of the machine that wrote them, never assumed to be UTC.\n\n"
                                 "## Migrating from logslice.ini (format v1)\n\n    logslice config migrate\n\n"
                                 "writes `logslice.toml`, keeps the old file as `logslice.ini.bak`, never overwrites an "
                                 "existing `logslice.toml`, and does nothing when run again. Until 1.8, a `logslice.ini` "
                                 "without a `logslice.toml` still loads, with a `DeprecationWarning`.\n\n## Format history\n\n"
                                 "| version | file | since |\n| --- | --- | --- |\n| 1 | `logslice.ini` | 1.0 (deprecated in 1.7) |\n"
                                 "| 2 | `logslice.toml` | 1.7 |\n")))
    r.assistant(step(None, edit("README.md",
                                "| `--before TS` | only records before TS (ISO-8601) |",
                                f"| `--since WHEN` | {since_help}; same filter as `--after` |\n"
                                "| `--before TS` | only records before TS (ISO-8601) |",
                                ("| `--config PATH` | config file to use instead of `~/.config/logslice/logslice.ini` |",
                                 "| `--config PATH` | config file to use instead of `~/.config/logslice/logslice.toml` |\n"
                                 "| `config migrate` | convert `logslice.ini` to `logslice.toml` (see docs/config.md) |"),
                                ("they are written (the `billing` service logs local time without an offset; see",
                                 "local time of the machine that wrote them (the `billing` service logs Tokyo time "
                                 "without an offset; see"))))
    r.assistant(step(None, grep("logslice.ini", ".")))
    r.assistant(step("`src/logslice/cli.py` still names the INI in its epilog; fixing that one.",
                     edit("src/logslice/cli.py",
                          "        epilog=\"Files default to standard input. Config: ~/.config/logslice/logslice.ini\",\n",
                          "        epilog=\"Files default to standard input. Config: ~/.config/logslice/logslice.toml\",\n")))

    # 5. end to end on the samples (a long, truncated run), coverage, a user-run command
    r.turn(
        "Run it end to end on both sample logs with --since, table output, and show me the coverage report.",
        step(None, bash_truncated("logslice --since 2026-03-09T14:00:00Z samples/checkout.log.jsonl samples/billing.log.jsonl",
                                  _logslice_table(r, ["samples/checkout.log.jsonl", "samples/billing.log.jsonl"], None, 10000,
                                                  since="2026-03-09T14:00:00Z"),
                                  "/tmp/pi-bash-3f9a61c0be7d2e45.log", keep_lines=120)),
        step(None, bash("pytest -v --cov=logslice --cov-report=term", tests(verbose=True, cov=True))),
        step(None, read("samples/checkout.log.jsonl", 400, 21)),
        step("End to end: both files print in one table, one after the other; billing's offset-less timestamps "
             "are read as local (Tokyo) time, so `--since` cuts both services at the same instant. The full output went to `/tmp/pi-bash-3f9a61c0be7d2e45.log` "
             "(Pi kept the last 120 lines). Coverage is in the report above; every test passes."),
    )
    r.user_bash("git status --short", " M README.md\n M docs/config.md\n M src/logslice/cli.py\n M src/logslice/config.py\n"
                " M src/logslice/filters.py\n M src/logslice/parse.py\n M tests/test_cli.py\n M tests/test_filters.py\n"
                " M tests/test_parse.py\n?? src/logslice/migrate.py\n?? tests/test_migrate.py")
    r.user_bash("logslice --since 90s samples/checkout.log.jsonl",
                "usage: logslice [-h] [-l {trace,debug,info,warn,error,fatal}] [--after TS] [--since WHEN] [--before TS]\n"
                "                [-f KEY=VALUE] [-g REGEX] [-s SERVICE] [-a ALIAS] [-o {table,json,logfmt}]\n"
                "                [--fields FIELDS] [-c] [-n N] [--strict] [--no-color] [--config PATH] [--version]\n"
                "                [files ...]\n"
                f"logslice: error: argument --since: {since_error.format(v='90s')}", 2)

    # 6. seconds: the on-call case above
    r.turn(
        "See above — on-call will type `--since 90s`. Support seconds too. And the error message lists the units, "
        "so keep it accurate.",
        step(None, grep("_DURATION_RE|_UNIT_SECONDS|15m, 2h", ".")),
        step("Adding `s` to the duration units and to every place that lists them.",
             edit("src/logslice/parse.py",
                  "_DURATION_RE = re.compile(r\"^(\\d+)([mhdw])$\")\n_UNIT_SECONDS = {\"m\": 60,",
                  "_DURATION_RE = re.compile(r\"^(\\d+)([smhdw])$\")\n_UNIT_SECONDS = {\"s\": 1, \"m\": 60,",
                  ("    \"\"\"``15m``, ``2h``, ``3d``, ``1w`` as a timedelta; anything else is None.\"\"\"\n",
                   "    \"\"\"``90s``, ``15m``, ``2h``, ``3d``, ``1w`` as a timedelta; anything else is None.\"\"\"\n"))),
        step(None, edit("src/logslice/parse.py", "(use 15m, 2h, 3d, 1w or", "(use 90s, 15m, 2h, 3d, 1w or"),
             edit("src/logslice/cli.py", "a duration back from now (15m, 2h, 3d, 1w)", "a duration back from now (90s, 15m, 2h, 3d, 1w)"),
             edit("README.md", "a duration back from now (15m, 2h, 3d, 1w)", "a duration back from now (90s, 15m, 2h, 3d, 1w)"),
             edit("docs/config.md", "# default for --since: 15m, 2h", "# default for --since: 90s, 15m, 2h")),
        step(None, edit("tests/test_parse.py",
                        "[(\"15m\", 15), (\"2h\", 120),",
                        "[(\"90s\", 1.5), (\"15m\", 15), (\"2h\", 120),",
                        ("ids=[\"15m\", \"2h\", \"3d\", \"1w\", \"spaces-upper\"])", "ids=[\"90s\", \"15m\", \"2h\", \"3d\", \"1w\", \"spaces-upper\"])")),
             edit("tests/test_cli.py", "    assert \"invalid --since value: 'yesterday'\" in capsys.readouterr().err\n",
                  "    err = capsys.readouterr().err\n    assert \"invalid --since value: 'yesterday' (use 90s, 15m, 2h, 3d, 1w\" in err\n")),
    )
    suites["tests/test_parse.py"].insert(suites["tests/test_parse.py"].index("test_parse_duration[15m]"), "test_parse_duration[90s]")
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step(None, bash("logslice --since 90s -c samples/checkout.log.jsonl", "0")))
    r.assistant(step("`--since 90s` works (0 records: the samples are from 2026-03-09, more than 90 s ago). Units are "
                     "now `s m h d w` everywhere: `parse.py`, the `--since` help, the error text, README.md and "
                     "docs/config.md. All tests pass."))

    # 6b. review of the whole diff before committing
    def git_diff() -> str:
        out = []
        for path in sorted(LOG_FILES):
            old, new = LOG_FILES[path], r.project.files.get(path, "")
            if old == new:
                continue
            body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=3))
            idx = f"{rng.getrandbits(28):07x}..{rng.getrandbits(28):07x}"
            out.append(f"diff --git a/{path} b/{path}\nindex {idx} 100644\n{body}")
        return "".join(out).rstrip("\n")

    r.turn(
        "Before I commit: review the whole diff as if you were a strict reviewer. Read every changed file in "
        "full, not just the hunks, and tell me what you would block on.",
        step(None, bash("git diff", git_diff())),
        step(None, read("src/logslice/parse.py"), read("src/logslice/filters.py")),
        step(None, read("src/logslice/config.py"), read("src/logslice/migrate.py")),
        step(None, read("src/logslice/cli.py")),
        step(None, read("tests/test_migrate.py"), read("tests/test_cli.py", 1, 60),
             thinking="Review findings: (1) MigrationError in migrate.py is defined but never raised. (2) --before "
                      "with a naive timestamp goes through _aware too, good. (3) load_config(path) with a .toml "
                      "path works, an .ini path gives no DeprecationWarning: fine since it was explicit. (4) "
                      "migrate() copies the INI after writing the TOML: if copy2 fails, the TOML exists and a "
                      "second run says already migrated without a backup. Order should be backup first."),
        step("Review — two things I would block on, one nit:\n\n"
             "1. **Backup order** in `src/logslice/migrate.py`: `migrate()` writes `logslice.toml` before copying "
             "`logslice.ini.bak`. If the copy fails (full disk, permissions), the next run says *already "
             "migrated* and there is never a backup. Copy first, then write.\n"
             "2. **Dead code**: `MigrationError` is defined and never raised.\n"
             "3. Nit: `tests/test_cli.py::test_since_relative` patches `logslice.parse.datetime`; it works but an "
             "injectable `now` would be cleaner. I'd leave it.\n\n"
             "Everything else matches your rules: stdlib only, `--after` untouched, naive = local time, idempotent "
             "migration that never overwrites `logslice.toml`."),
    )
    add_tests("tests/test_migrate.py", ["test_failed_backup_leaves_no_toml"])
    r.turn("Fix 1 and 2, leave 3.",
           step(None, edit("src/logslice/migrate.py",
                           "    text = ini_to_toml(load_ini(ini))\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n"
                           "        fh.write(text)\n    shutil.copy2(ini, bak)\n",
                           "    text = ini_to_toml(load_ini(ini))\n    shutil.copy2(ini, bak)  # backup first: a failed copy must not look migrated\n"
                           "    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n        fh.write(text)\n",
                           ("class MigrationError(RuntimeError):\n    \"\"\"The migration refused to run (the message says why).\"\"\"\n\n\n", ""))),
           step(None, edit("tests/test_migrate.py", "def test_legacy_ini_warns(config_home):",
                           "def test_failed_backup_leaves_no_toml(config_home, monkeypatch):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n\n    def boom(*_a, **_k):\n"
                           "        raise OSError(28, \"No space left on device\")\n\n"
                           "    monkeypatch.setattr(\"shutil.copy2\", boom)\n    with pytest.raises(OSError):\n"
                           "        migrate(config_home)\n    assert not (config_home / \"logslice.toml\").exists()\n\n\n"
                           "def test_legacy_ini_warns(config_home):")),
           step(None, bash("pytest -v", tests(verbose=True))),
           step("Both fixed: the backup is copied before `logslice.toml` is written (new test "
                "`test_failed_backup_leaves_no_toml`), and `MigrationError` is gone. All tests pass."))

    # 6c. speed: a fast path for --since on large files
    profile = ["         48391907 function calls (48391790 primitive calls) in 41.187 seconds", "",
               "   Ordered by: cumulative time", "   List reduced from 211 to 40 due to restriction <40>", "",
               "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)"]
    rows = [("1", "0.000", "0.000", "41.187", "41.187", "{built-in method builtins.exec}"),
            ("1", "0.000", "0.000", "41.187", "41.187", "cli.py:104(main)"),
            ("1", "1.902", "1.902", "41.160", "41.160", "{built-in method builtins.sum}"),
            ("6912451", "2.311", "0.000", "39.258", "0.000", "cli.py:132(records)"),
            ("6912452", "3.044", "0.000", "36.947", "0.000", "filters.py:93(<genexpr>)"),
            ("6912452", "4.418", "0.000", "31.876", "0.000", "parse.py:96(iter_records)"),
            ("6912451", "1.127", "0.000", "19.554", "0.000", "__init__.py:299(loads)"),
            ("6912451", "2.032", "0.000", "18.427", "0.000", "decoder.py:332(decode)"),
            ("6912451", "14.969", "0.000", "14.969", "0.000", "decoder.py:343(raw_decode)"),
            ("6912451", "2.566", "0.000", "5.873", "0.000", "parse.py:49(parse_timestamp)"),
            ("6912451", "2.189", "0.000", "2.189", "0.000", "{built-in method fromisoformat}"),
            ("6912451", "1.688", "0.000", "3.914", "0.000", "filters.py:84(<lambda>)"),
            ("6912451", "1.230", "0.000", "2.226", "0.000", "filters.py:41(pred)"),
            ("13824902", "1.061", "0.000", "1.061", "0.000", "filters.py:33(_aware)"),
            ("6912451", "0.905", "0.000", "0.905", "0.000", "{method 'strip' of 'str' objects}")]
    for row in rows:
        profile.append(f"{row[0]:>9} {row[1]:>8} {row[2]:>8} {row[3]:>8} {row[4]:>8} {row[5]}")
    for k in range(25):
        profile.append(f"{rng.randint(1, 90000):>9} {rng.uniform(0, .2):8.3f} {0:8.3f} {rng.uniform(0, .3):8.3f} {0:8.3f} "
                       f"{rng.choice(['re', 'enum', 'argparse', 'gettext', 'typing', 'dataclasses'])}.py:{rng.randint(20, 900)}"
                       f"({rng.choice(['_compile', '__call__', 'parse_args', '_get_values', 'translation', 'inner'])})")
    r.turn(
        "On-call complains: `logslice --since 15m` on the 1.8 GB prod checkout log takes about 41 s. Make the "
        "common case fast. Still stdlib only, and the output must stay byte-identical.",
        step(None, bash("python -m cProfile -s cumtime -m logslice.cli --since 15m -c /var/log/checkout/app.log.jsonl 2>&1 | head -45",
                        "0\n" + "\n".join(profile)),
             thinking="json.loads is 19.5 of 41 s, and every one of the 6.9 M lines is parsed even though nearly all "
                      "are older than the bound. Can't binary-search (order not guaranteed, stdin). A textual fast "
                      "path: if a line starts with {\"ts\": \"...\" (top-level first key, unambiguous) parse only "
                      "that timestamp; if older than the bound, skip json.loads. Other lines take the slow path, so "
                      "results stay identical. Careful: --strict must still validate every line."),
        step("`json.loads` on all 6.9 M lines dominates. Checkout writes `ts` as the **first** key, so a line "
             "starting with `{\"ts\": \"…\"` can be judged by its timestamp alone; anything else takes the normal "
             "path. Under `--strict` every line must still be validated, so the fast path is off there.",
             read("src/logslice/parse.py", 85)),
        step(None, edit("src/logslice/parse.py",
                        "def iter_records(stream: TextIO, *, strict: bool = False) -> Iterator[Record]:\n"
                        "    \"\"\"Records of a JSON-lines stream; bad lines are skipped unless ``strict``.\"\"\"\n"
                        "    for lineno, line in enumerate(stream, 1):\n        line = line.strip()\n"
                        "        if not line:\n            continue\n",
                        "_LEADING_TS = re.compile(r'^\\{\\s*\"ts\"\\s*:\\s*\"([^\"]+)\"')\n\n\n"
                        "def iter_records(stream: TextIO, *, strict: bool = False, skip_before: datetime | None = None) -> Iterator[Record]:\n"
                        "    \"\"\"Records of a JSON-lines stream; bad lines are skipped unless ``strict``.\n\n"
                        "    ``skip_before`` (aware) lets lines whose *first* key is an older ``ts`` be dropped without\n"
                        "    decoding them; it is ignored with ``strict``, which must see every line.\n    \"\"\"\n"
                        "    fast = skip_before is not None\n"
                        "    for lineno, line in enumerate(stream, 1):\n        line = line.strip()\n"
                        "        if not line:\n            continue\n"
                        "        if fast:\n            m = _LEADING_TS.match(line)\n            if m:\n"
                        "                ts = parse_timestamp(m.group(1))\n"
                        "                if ts is not None and (ts if ts.tzinfo else ts.astimezone()) < skip_before:\n"
                        "                    continue\n")),
        step(None, edit("src/logslice/cli.py",
                        "            for rec in apply(iter_records(stream, strict=args.strict), spec):\n",
                        "            skip = spec.after.astimezone() if spec.after is not None else None\n"
                        "            for rec in apply(iter_records(stream, strict=args.strict, skip_before=skip), spec):\n")),
        step("A benchmark script so the numbers are reproducible:",
             write("bench/since_bench.py",
                   "\"\"\"Time `logslice --since` on a synthetic log: python bench/since_bench.py [N_LINES].\"\"\"\n\n"
                   "import json\nimport subprocess\nimport sys\nimport tempfile\nimport time\n"
                   "from datetime import datetime, timedelta, timezone\n\n"
                   "n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000\n"
                   "start = datetime(2026, 3, 9, tzinfo=timezone.utc)\n"
                   "with tempfile.NamedTemporaryFile(\"w\", suffix=\".jsonl\", delete=False) as fh:\n"
                   "    for i in range(n):\n"
                   "        ts = (start + timedelta(milliseconds=40 * i)).isoformat().replace(\"+00:00\", \"Z\")\n"
                   "        fh.write(json.dumps({\"ts\": ts, \"level\": \"info\", \"service\": \"checkout-api\", \"msg\": f\"GET /v2/cart 200\", \"i\": i}) + \"\\n\")\n"
                   "since = (start + timedelta(milliseconds=40 * (n - 1000))).isoformat()\n"
                   "t0 = time.perf_counter()\n"
                   "out = subprocess.run([sys.executable, \"-m\", \"logslice.cli\", \"--since\", since, \"-c\", fh.name],\n"
                   "                     capture_output=True, text=True, check=True).stdout.strip()\n"
                   "print(f\"{n} lines, {out} kept, {time.perf_counter() - t0:.2f}s\")\n")),
        step(None, bash("git stash -q && python bench/since_bench.py 2000000; git stash pop -q && python bench/since_bench.py 2000000",
                        "2000000 lines, 1000 kept, 11.84s\n2000000 lines, 1000 kept, 2.71s")),
        step("4.4× faster on 2 M lines (11.84 s → 2.71 s), same count. Tests for the fast path: identical output "
             "with and without it, and `--strict` still sees bad old lines.",
             edit("tests/test_parse.py", "def test_record_message_keys():",
                  "def test_skip_before_gives_the_same_records():\n"
                  "    lines = ['{\"ts\": \"2026-03-09T14:00:00Z\", \"msg\": \"old\"}', '{\"msg\": \"no ts\"}',\n"
                  "             '{\"level\": \"info\", \"ts\": \"2026-03-09T13:00:00Z\"}', '{\"ts\": \"2026-03-09T15:00:00Z\", \"msg\": \"new\"}']\n"
                  "    text = \"\".join(line + \"\\n\" for line in lines)\n"
                  "    bound = datetime(2026, 3, 9, 14, 30, tzinfo=UTC)\n"
                  "    slow = [r.lineno for r in iter_records(io.StringIO(text)) if r.ts is None or r.ts >= bound]\n"
                  "    fast = [r.lineno for r in iter_records(io.StringIO(text), skip_before=bound) if r.ts is None or r.ts >= bound]\n"
                  "    assert fast == slow == [2, 4]\n\n\n"
                  "def test_strict_ignores_skip_before():\n"
                  "    text = '{\"ts\": \"2026-03-09T14:00:00Z\", oops\\n'\n"
                  "    with pytest.raises(LogParseError, match=\"line 1\"):\n"
                  "        list(iter_records(io.StringIO(text), strict=True, skip_before=datetime(2026, 3, 10, tzinfo=UTC)))\n\n\n"
                  "def test_record_message_keys():")),
    )
    add_tests("tests/test_parse.py", ["test_skip_before_gives_the_same_records", "test_strict_ignores_skip_before"])
    strict_fail = ("    def test_strict_ignores_skip_before():\n"
                   "        text = '{\"ts\": \"2026-03-09T14:00:00Z\", oops\\n'\n"
                   "        with pytest.raises(LogParseError, match=\"line 1\"):\n"
                   ">           list(iter_records(io.StringIO(text), strict=True, skip_before=datetime(2026, 3, 10, tzinfo=UTC)))\n"
                   "E           Failed: DID NOT RAISE <class 'logslice.parse.LogParseError'>\n\ntests/test_parse.py:113: Failed")
    r.assistant(step(None, bash("pytest -q tests/test_parse.py", pytest_report({"tests/test_parse.py": suites["tests/test_parse.py"]}, rng,
                                                                               failures={"test_strict_ignores_skip_before": strict_fail}), exit_code=1)))
    r.assistant(step("I meant to switch the fast path off under `--strict` and then left it out of the code: the bad "
                     "old line was skipped unvalidated. Fixing:",
                     edit("src/logslice/parse.py", "    fast = skip_before is not None\n",
                          "    fast = skip_before is not None and not strict\n")))
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step("All green, including `test_skip_before_gives_the_same_records` and "
                     "`test_strict_ignores_skip_before`. Summary of the speed-up:\n\n"
                     "- `iter_records(..., skip_before=...)` in `src/logslice/parse.py`: a line whose first key is "
                     "`ts` and whose timestamp is older than the bound is dropped without `json.loads`; everything "
                     "else takes the old path, so output is identical. Off under `--strict`.\n"
                     "- `bench/since_bench.py`: 2 M lines, 11.84 s → 2.71 s.\n\nStill no dependencies."))

    # 6d. on-call recipes, each one run against the samples
    import json as _json

    def sample_recs(paths: list[str]) -> list[dict[str, Any]]:
        out = []
        for p in paths:
            out += [_json.loads(line) for line in r.project.files[p].splitlines()]
        return out

    checkout = sample_recs(["samples/checkout.log.jsonl"])
    declined = next(rec for rec in checkout if rec["msg"].endswith("card_declined"))
    order = str(declined["order"])
    both = ["samples/checkout.log.jsonl", "samples/billing.log.jsonl"]
    recipes = [
        ("Errors since a given instant, both services",
         "logslice --since 2026-03-09T14:30:00Z -l error samples/*.jsonl",
         _logslice_table(r, both, "error", 10000, since="2026-03-09T14:30:00Z")),
        (f"Everything about one order ({order})",
         f"logslice -g '\\b{order}\\b' samples/checkout.log.jsonl",
         _logslice_table(r, ["samples/checkout.log.jsonl"], None, 10000, grep=order)),
        ("Billing ledger deadlocks since 23:00 Tokyo time (billing logs local time without an offset)",
         "logslice -s billing -g deadlock --since 2026-03-09T23:00:00 samples/billing.log.jsonl",
         _logslice_table(r, ["samples/billing.log.jsonl"], None, 10000, since="2026-03-09T14:00:00Z", grep="deadlock")),
        ("Records per service and level",
         "for s in checkout-api billing; do for l in warn error; do printf '%-13s %-6s ' $s $l; logslice -c -s $s -l $l samples/*.jsonl; done; done",
         "\n".join(f"{s:<13} {lv:<6} {sum(1 for rec in sample_recs(both) if rec['service'] == s and _lvl(rec['level']) >= _lvl(lv))}"
                   for s in ("checkout-api", "billing") for lv in ("warn", "error"))),
        ("Most frequent warnings (JSON output into jq)",
         "logslice -l warn -o json samples/checkout.log.jsonl | jq -r '.msg | gsub(\"[0-9]+\"; \"N\")' | sort | uniq -c | sort -rn",
         _warning_counts(checkout)),
    ]
    r.user("Write docs/oncall.md with copy-paste recipes for on-call: errors since an instant, one order's trail, "
           "billing deadlocks since a Tokyo wall-clock time, counts per service, and jq over JSON output. Run every "
           "recipe against the samples and paste the real output, no invented examples.")
    r.assistant(step("I'll run each recipe first, then write the page from the real outputs.", ls("samples"),
                     grep("card_declined", "samples/checkout.log.jsonl")))
    for title, cmd, output in recipes:
        r.assistant(step(None, bash(cmd, output)))
    page = ["# On-call recipes", "", "Every example below was run against `samples/` with logslice 1.7. Timestamps "
            "without an offset (billing) are local time of the machine that wrote them.", ""]
    for title, cmd, output in recipes:
        lines = output.split("\n")
        shown = "\n".join(lines[:12] + (["…"] if len(lines) > 12 else []))
        page += [f"## {title}", "", "```console", f"$ {cmd}", shown, "```", ""]
    r.assistant(step(None, write("docs/oncall.md", "\n".join(page))))
    r.assistant(step(None, read("docs/oncall.md"), edit("README.md", "## Runbooks\n", "## Runbooks\n\nSee also docs/oncall.md.\n")))
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step(f"`docs/oncall.md` has five recipes, each with the output it really printed on the samples "
                     f"(order {order}'s trail, billing deadlocks after 23:00 Tokyo = 14:00Z, …). README.md links it. "
                     "Tests still pass."))

    # 7. release notes
    r.turn("Write the CHANGELOG entry for 1.7.0 and bump the version.",
           step(None, read("CHANGELOG.md"), grep("1\\.6\\.2", ".")),
           step(None, edit("src/logslice/__init__.py", "__version__ = \"1.6.2\"", "__version__ = \"1.7.0\""),
                edit("pyproject.toml", "version = \"1.6.2\"", "version = \"1.7.0\""),
                edit("CHANGELOG.md", "# Changelog\n\n",
                     "# Changelog\n\n## 1.7.0\n- `--since WHEN`: a duration back from now (`90s`, `15m`, `2h`, `3d`, `1w`) "
                     "or an ISO-8601 timestamp. Same filter as `--after`, which is unchanged.\n"
                     "- Timestamps without an offset are local time of the machine that wrote them (they used to "
                     "crash time filters with `TypeError`).\n- Config moves to `logslice.toml` (`schema_version = 2`); "
                     "`logslice config migrate` converts `logslice.ini` (backup `logslice.ini.bak`, idempotent, never "
                     "overwrites). `logslice.ini` is deprecated and still loads until 1.8.\n"
                     "- `defaults.since` in the config.\n\n")),
           step(None, bash("pytest -q", tests())),
           step(None, read("pyproject.toml"), bash("python -m build 2>&1 | tail -3",
                "adding 'logslice-1.7.0.dist-info/RECORD'\nremoving build/bdist.linux-x86_64/wheel\n"
                "Successfully built logslice-1.7.0.tar.gz and logslice-1.7.0-py3-none-any.whl")),
           step("Version 1.7.0: `src/logslice/__init__.py`, `pyproject.toml` and `CHANGELOG.md` updated; all tests "
                "pass. Still no runtime dependencies (`dependencies = []`)."))
    r.session_info("logslice 1.7: --since and logslice.toml")
    r.label(r.leaf, "release-1.7.0")
    return r


def _warning_counts(records: list[dict[str, Any]]) -> str:
    """``uniq -c | sort -rn`` of the warn-or-worse messages with digits folded to N."""
    counts: dict[str, int] = {}
    for rec in records:
        if _lvl(rec["level"]) >= _lvl("warn"):
            key = re.sub(r"[0-9]+", "N", rec["msg"])
            counts[key] = counts.get(key, 0) + 1
    return "\n".join(f"{n:>7} {m}" for m, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _lvl(level: str) -> int:
    order = ["trace", "debug", "info", "warn", "error", "fatal"]
    return order.index({"warning": "warn", "err": "error"}.get(level, level))


def _logslice_table(r: Recorder, paths: list[str], min_level: str | None, limit: int, since: str | None = None,
                    grep: str | None = None) -> str:
    """What ``logslice`` prints (table, no colour) for the project's sample files, file after file.

    Timestamps without an offset are local time of the machine (Asia/Tokyo, +09:00)."""
    import json as _json

    from pimem._js import parse_iso_ms

    order = ["trace", "debug", "info", "warn", "error", "fatal"]
    alias = {"warning": "warn", "err": "error"}
    rows = []
    for p in paths:
        for line in r.project.files[p].splitlines():
            rec = _json.loads(line)
            level = alias.get(rec["level"], rec["level"])
            if min_level and order.index(level) < order.index(min_level):
                continue
            ts = rec["ts"]
            aware = ts if ts.endswith("Z") else ts + "+09:00"
            if since is not None and parse_iso_ms(aware) < parse_iso_ms(since):
                continue
            if grep is not None and grep not in rec["msg"]:
                continue
            shown = ts.replace("Z", "+00:00")
            rows.append((shown, level.upper(), rec["service"], rec["msg"]))
    rows = rows[:limit]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(["TS", "LEVEL", "SERVICE", "MSG"])]
    out = ["  ".join(h.ljust(w) for h, w in zip(["TS", "LEVEL", "SERVICE", "MSG"], widths)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(out)


# ======================================================================================
# Story 4: a session begun under session format v2 and continued in Pi 0.87.1 (short):
# extension messages with role `custom` (v2's hookMessage), system messages (prompt sections
# and tool declarations), context edits (a redaction and a retry omission), a compaction that
# carries the system message
# ======================================================================================

GPX_CWD = "/home/ana/src/gpxkit"
PI_ROOT = "/home/ana/.local/share/fnm/node-versions/v22.21.1/installation/lib/node_modules/@earendil-works/pi-coding-agent"

GPX_AGENTS_V1 = "# gpxkit\n\n- TypeScript, ESM only. Tests: `npm test` (vitest).\n- Distances in metres, times in epoch ms.\n"
GPX_AGENTS_V2 = GPX_AGENTS_V1 + "- Use pnpm, not npm (`pnpm test`).\n- Never print secrets from .env; refer to keys by name.\n"

GPX_FILES: dict[str, str] = {
    "package.json": """{
  "name": "gpxkit",
  "version": "0.4.1",
  "type": "module",
  "exports": "./dist/index.js",
  "scripts": { "build": "tsc", "test": "vitest run" },
  "devDependencies": { "typescript": "^5.6.2", "vitest": "^2.1.2" }
}
""",
    "AGENTS.md": GPX_AGENTS_V1,
    ".env": "MAPBOX_TOKEN=pk.eyJ1IjoiYW5hLWdweCIsImEiOiJjbTZ4cDJ0a3gwMDFqMmxzOHh2b3ZlbW1xIn0.Qm9ndXNUb2tlbkZvclNhbXBsZXM\nTILE_STYLE=outdoors-v12\n",
    ".env.example": "MAPBOX_TOKEN=\n",
    "src/distance.ts": """const EARTH_RADIUS_M = 6371008.8;

export interface Point {
\tlat: number;
\tlon: number;
\tele?: number;
\ttime?: number;
}

const rad = (deg: number) => (deg * Math.PI) / 180;

/** Distance in metres between two fixes (equirectangular approximation; exact enough for GPS steps). */
export function distance(a: Point, b: Point): number {
\tconst x = rad(b.lon - a.lon) * Math.cos(rad((a.lat + b.lat) / 2));
\tconst y = rad(b.lat - a.lat);
\treturn EARTH_RADIUS_M * Math.sqrt(x * x + y * y);
}

export function trackLength(points: Point[]): number {
\tlet total = 0;
\tfor (let i = 1; i < points.length; i++) total += distance(points[i - 1], points[i]);
\treturn total;
}
""",
    "src/stats.ts": """import { type Point, trackLength } from "./distance.js";

export interface TrackStats {
\tdistanceM: number;
\tdurationMs: number | null;
}

export function stats(points: Point[]): TrackStats {
\tconst first = points[0]?.time;
\tconst last = points[points.length - 1]?.time;
\treturn {
\t\tdistanceM: trackLength(points),
\t\tdurationMs: first !== undefined && last !== undefined ? last - first : null,
\t};
}
""",
    "test/distance.test.ts": """import { describe, expect, it } from "vitest";
import { distance } from "../src/distance.js";

describe("distance", () => {
\tit("is zero for the same point", () => {
\t\texpect(distance({ lat: 48.2, lon: 16.37 }, { lat: 48.2, lon: 16.37 })).toBe(0);
\t});
\tit("Vienna to Bratislava is about 55 km", () => {
\t\texpect(distance({ lat: 48.2082, lon: 16.3738 }, { lat: 48.1486, lon: 17.1077 }) / 1000).toBeCloseTo(54.9, 0);
\t});
});
""",
}


def _gpx_vitest(tests: list[tuple[str, int]], rng: random.Random, failure: str = "") -> str:
    files = "\n".join(f" {'❯' if failure and f == 'test/distance.test.ts' else '✓'} {f} ({n} tests) {rng.randint(3, 30)}ms"
                      for f, n in tests)
    total = sum(n for _, n in tests)
    head = f" RUN  v2.1.2 {GPX_CWD}\n\n{files}\n"
    if failure:
        return (head + f"\n{failure}\n\n Test Files  1 failed | {len(tests) - 1} passed ({len(tests)})\n"
                f"      Tests  1 failed | {total - 1} passed ({total})")
    return head + f"\n Test Files  {len(tests)} passed ({len(tests)})\n      Tests  {total} passed ({total})"


def story_gpx(seed: int) -> Recorder:
    import json as _json

    r = Recorder("gpxkit-antimeridian", GPX_CWD, GPX_FILES, seed, "2026-01-21T16:40:03.220Z", "claude-sonnet-4-5",
                 thinking="low", strict_tools=True)
    rng = r.rng
    prompt = _json.loads((Path(__file__).resolve().parent / "pi-0.87.1-system-prompt.json").read_text("utf-8"))

    def fill(text: str, agents: str) -> str:
        return text.replace("{CWD}", GPX_CWD).replace("{PI_ROOT}", PI_ROOT).replace("AGENTS_PLACEHOLDER", agents.rstrip("\n"))

    # --- the part recorded by an older Pi (session format v2; hookMessage became role `custom`) ---
    r.custom_role_message("todo-reminder", "Open TODOs in gpxkit: 2 (`/todos` lists them)", display=True)
    r.turn("A ride in Fiji shows 38 320 km instead of 12 km — the track crosses the 180° meridian. Fix the "
           "distance in src/distance.ts. Don't change the `Point` interface, other packages import it.",
           step(None, read("src/distance.ts"), read("test/distance.test.ts"),
                thinking="distance() uses the raw longitude difference. From 179.99 to -179.99 that is -359.98 "
                         "degrees instead of 0.02, and the equirectangular x term becomes about 2*pi*cos(lat): "
                         "roughly 38 000 km. The difference has to be wrapped into [-180, 180)."),
           step("Reproducing with the pair from the Fiji track:",
                bash("node -e \"import('./dist/distance.js').then(m => console.log(m.distance({lat:-16.8,lon:179.99},{lat:-16.8,lon:-179.99})))\"",
                     "38319589.61702657")),
           step("Confirmed: `distance()` in `src/distance.ts` uses the raw longitude difference, so 179.99 → "
                "-179.99 counts as -359.98° (38 320 km) instead of 0.02° (2.1 km). The fix is to wrap the difference "
                "into [-180, 180) before projecting."))
    r.custom_role_message("todo-reminder", "Reminder: TODO #2 `stats.ts: elevation gain` is still open.", display=True,
                          details={"todoId": 2})
    r.user("Also, the Garmin exports lon in 0..360 (180.01 instead of -179.99). Make sure that works too.")
    r.assistant(step("Wrapping the difference covers both: `-179.99 → 180.01` is a 360° step, which folds to 0. "
                     "I'll add `normalizeLon()` and leave `Point` untouched.",
                     edit("src/distance.ts", "const rad = (deg: number) => (deg * Math.PI) / 180;\n",
                          "const rad = (deg: number) => (deg * Math.PI) / 180;\n\n"
                          "/** Longitude (or a difference of two) folded into [-180, 180). Garmin exports use 0..360. */\n"
                          "export const normalizeLon = (lon: number) => ((((lon + 180) % 360) + 360) % 360) - 180;\n",
                          ("\tconst x = rad(b.lon - a.lon) * Math.cos(rad((a.lat + b.lat) / 2));\n",
                           "\tconst x = rad(normalizeLon(b.lon - a.lon)) * Math.cos(rad((a.lat + b.lat) / 2));\n"))))
    r.assistant(step(None, edit("test/distance.test.ts", "\t});\n});\n",
                                "\t});\n\tit(\"crosses the antimeridian, also with 0..360 longitudes\", () => {\n"
                                "\t\texpect(distance({ lat: -16.8, lon: 179.99 }, { lat: -16.8, lon: -179.99 }) / 1000).toBeCloseTo(2.13, 1);\n"
                                "\t\texpect(distance({ lat: -16.8, lon: -179.99 }, { lat: -16.8, lon: 180.01 })).toBeCloseTo(0, 3);\n"
                                "\t});\n});\n")))
    r.assistant(step(None, bash("npx vitest run", _gpx_vitest([("test/distance.test.ts", 3)], rng))))
    r.assistant(step("Fixed: `normalizeLon()` wraps the longitude difference into [-180, 180), so tracks across "
                     "the antimeridian measure 2.1 km per 0.02° step instead of 38 320 km, with -180..180 and 0..360 "
                     "longitudes alike; `Point` is unchanged. 3/3 tests pass."))

    # --- seven weeks later, the same session resumed in Pi 0.87.1 ---
    r.clock += 7 * 24 * 3600 * 1000 - 3600 * 1000 * 5
    r.system_message({name: fill(text, GPX_AGENTS_V1) for name, text in prompt["sections"].items()},
                     tools_added=prompt["toolsAdded"])
    r.user("Back to gpxkit. Add elevation gain to `stats()` (TODO #2), and check that .env.example lists every "
           "key the code reads.", think=(2000, 9000))
    r.assistant(step(None, read("src/stats.ts"), bash("cat .env && cat .env.example", GPX_FILES[".env"] + GPX_FILES[".env.example"].rstrip("\n")),
                     grep("process\\.env", "src")))
    leaked = r.session.get_branch()[-2]
    assert leaked["message"]["role"] == "toolResult" and "MAPBOX_TOKEN=pk." in leaked["message"]["content"][0]["text"]
    r.context_edit(leaked["id"], {"content": "MAPBOX_TOKEN=[redacted by redact-secrets]\nTILE_STYLE=outdoors-v12\nMAPBOX_TOKEN="})
    r.assistant(step("`.env.example` lacks `TILE_STYLE`; the code reads neither key directly yet. Adding it, then the "
                     "elevation gain.",
                     edit(".env.example", "MAPBOX_TOKEN=\n", "MAPBOX_TOKEN=\nTILE_STYLE=outdoors-v12\n"),
                     edit("src/stats.ts", "\tdurationMs: number | null;\n}\n",
                          "\tdurationMs: number | null;\n\t/** Sum of positive elevation steps, metres (null without elevation). */\n"
                          "\televationGainM: number | null;\n}\n\n"
                          "function elevationGain(points: Point[]): number | null {\n"
                          "\tif (!points.some((p) => p.ele !== undefined)) return null;\n\tlet gain = 0;\n"
                          "\tfor (let i = 1; i < points.length; i++) {\n\t\tconst a = points[i - 1].ele;\n\t\tconst b = points[i].ele;\n"
                          "\t\tif (a !== undefined && b !== undefined && b > a) gain += b - a;\n\t}\n\treturn gain;\n}\n",
                          ("\t\tdurationMs: first !== undefined && last !== undefined ? last - first : null,\n",
                           "\t\tdurationMs: first !== undefined && last !== undefined ? last - first : null,\n"
                           "\t\televationGainM: elevationGain(points),\n"))))
    r.assistant(step(None), stop="error",
                error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    failed = r.leaf
    r.tick(2000, 2400)
    r.context_edit(failed, None)
    r.assistant(step(None, write("test/stats.test.ts",
                                 "import { describe, expect, it } from \"vitest\";\nimport { stats } from \"../src/stats.js\";\n\n"
                                 "describe(\"stats\", () => {\n\tit(\"sums only climbs\", () => {\n"
                                 "\t\tconst s = stats([{ lat: 0, lon: 0, ele: 100 }, { lat: 0, lon: 0.001, ele: 130 }, { lat: 0, lon: 0.002, ele: 110 }, { lat: 0, lon: 0.003, ele: 125 }]);\n"
                                 "\t\texpect(s.elevationGainM).toBe(45);\n\t});\n\tit(\"is null without elevation\", () => {\n"
                                 "\t\texpect(stats([{ lat: 0, lon: 0 }]).elevationGainM).toBeNull();\n\t});\n});\n")))
    r.assistant(step(None, bash("npx vitest run", _gpx_vitest([("test/distance.test.ts", 3), ("test/stats.test.ts", 2)], rng))))
    r.assistant(step("Done: `stats()` returns `elevationGainM` (climbs only, `null` without elevation data); "
                     "`.env.example` now lists `TILE_STYLE` next to `MAPBOX_TOKEN`. 5/5 tests pass."))

    # the user edits AGENTS.md and runs /reload: the prompt's project context changes
    r.project.files["AGENTS.md"] = GPX_AGENTS_V2
    r.tick(60000, 180000)
    r.system_message({"project_context": fill(prompt["sections"]["project_context"], GPX_AGENTS_V2)})
    r.user("I updated AGENTS.md. Run the tests the way it says now.", think=(2000, 9000))
    r.assistant(step(None, bash("pnpm test", "> gpxkit@0.4.1 test " + GPX_CWD + "\n> vitest run\n\n" +
                                _gpx_vitest([("test/distance.test.ts", 3), ("test/stats.test.ts", 2)], rng))))
    r.assistant(step("With pnpm: 5/5 pass."))
    r.compact(keep_recent_tokens=300)
    r.user("Bump to 0.5.0 and write the changelog line.", think=(5000, 20000))
    r.assistant(step(None, edit("package.json", "\"version\": \"0.4.1\"", "\"version\": \"0.5.0\""),
                     write("CHANGELOG.md", "# Changelog\n\n## 0.5.0\n- `stats()` reports `elevationGainM`.\n"
                                           "- Distances across the antimeridian with 0..360 longitudes (`normalizeLon`).\n")))
    r.assistant(step("0.5.0: `package.json` bumped, `CHANGELOG.md` written."))
    return r


STORIES: list[Callable[[int], Recorder]] = [story_auth, story_pipeline, story_logslice, story_gpx]


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
