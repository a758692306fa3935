"""The recorder: plays a story into a pimem ``Session`` the way Pi would have written it.

Entries get a deterministic clock, ids and usage: the prompt size of each response is the projected
context (chars/4, as Pi estimates it) plus the system prompt, so usage grows as the session does and
drops after a compaction. Tool calls run against the story's in-memory ``Project``; compactions and
``/tree`` summaries go through pimem's reimplementation of Pi's pipeline with ``ScriptSummarizer``.
"""

from __future__ import annotations

import base64
import math
import os
import random
from pathlib import Path
from typing import Any, Iterable

from pimem import (
    CompactionSettings,
    ModelInfo,
    Session,
    build_session_context,
    build_session_projection,
    collect_entries_for_branch_summary,
    compact,
    estimate_projected_context_tokens,
    generate_branch_summary,
    js_stringify,
    prepare_compaction,
    utf16_len,
)
from pimem.base.js import parse_iso_ms, to_iso

from .calls import Call, Step
from .models import MODELS, SYSTEM_PROMPT_TOKENS, calculate_cost
from .project import Project, ToolError
from .summarizer import ScriptSummarizer


class StoryError(RuntimeError):
    """A story asked for something the project or the pipeline cannot do (a script mistake)."""


def uuid7(ms: int, rng: random.Random) -> str:
    """A UUIDv7 string (what Pi uses for session ids) from a timestamp and the rng."""
    rand_a = rng.getrandbits(12)
    rand_b = rng.getrandbits(62)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_start(iso: str) -> int:
    """Epoch milliseconds of an ISO-8601 timestamp."""
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


class Recorder:
    """Builds one session entry by entry with a deterministic clock, ids and usage.

    ``name`` is the session's file name, ``files`` the starting project in ``cwd``, ``start`` the ISO time
    of the header and ``model`` a key of ``MODELS``. The rng is seeded with ``seed`` and ``name``, so each
    story draws its own random sequence. With ``strict_tools``, a file tool that fails stops the story.
    """

    def __init__(self, name: str, cwd: str, files: dict[str, str], seed: int, start: str, model: str,
                 thinking: str = "off", strict_tools: bool = False) -> None:
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
        """Advance the clock by a random ``lo``..``hi`` milliseconds."""
        self.clock += self.rng.randint(lo, hi)
        return self.clock

    def now_iso(self) -> str:
        """The clock as an ISO-8601 timestamp."""
        return to_iso(self.clock)

    def _base(self, type_: str) -> dict[str, Any]:
        return {"type": type_, "id": self.session.new_id(), "parentId": self.session.leaf_id, "timestamp": self.now_iso()}

    def _append(self, entry: dict[str, Any]) -> str:
        self.session.append_entry(entry)
        return entry["id"]

    @property
    def leaf(self) -> str | None:
        """Id of the current leaf entry."""
        return self.session.leaf_id

    # --- plain entries ---------------------------------------------------------------------
    def model_change(self, model: str) -> str:
        """A ``model_change`` entry (``/model``); the following responses use ``model``."""
        self.model = MODELS[model]
        self.cached_prefix = 0
        e = self._base("model_change")
        e["provider"] = self.model.provider
        e["modelId"] = self.model.id
        return self._append(e)

    def thinking_level_change(self, level: str) -> str:
        """A ``thinking_level_change`` entry."""
        self.thinking = level
        e = self._base("thinking_level_change")
        e["thinkingLevel"] = level
        return self._append(e)

    def session_info(self, name: str) -> str:
        """A ``session_info`` entry naming the session."""
        self.tick(2000, 9000)
        e = self._base("session_info")
        e["name"] = name
        return self._append(e)

    def label(self, target_id: str, label: str | None) -> str:
        """A ``label`` entry on ``target_id`` (``None`` clears the label)."""
        self.tick(1500, 6000)
        e = self._base("label")
        e["targetId"] = target_id
        e["label"] = label
        return self._append(e)

    def custom(self, custom_type: str, data: Any) -> str:
        """An extension's ``custom`` entry (state, not sent to the model)."""
        self.tick(5, 40)
        e = {"type": "custom", "customType": custom_type, "data": data, "id": self.session.new_id(),
             "parentId": self.session.leaf_id, "timestamp": self.now_iso()}
        return self._append(e)

    def custom_message(self, custom_type: str, content: Any, display: bool = True, details: Any = None) -> str:
        """An extension's ``custom_message`` entry (sent to the model)."""
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
        """A user prompt, with optional base64 PNG ``images``; ``think`` is the user's pause in ms."""
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
                raise StoryError(f"{self.name}: unintended {c.name} failure: {exc}") from None
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
        """Compact the current branch as Pi would; a negative ``keep_recent_tokens`` picks the smallest
        keep that still holds the previous compaction in the kept range. Returns the compaction entry."""
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
                raise StoryError(f"{self.name}: no cut keeps the previous compaction")
        settings = CompactionSettings(enabled=True, reserve_tokens=reserve_tokens,
                                      keep_recent_tokens=keep_recent_tokens)
        prep = prepare_compaction(path, settings)
        if prep is None:
            if os.environ.get("PIMEM_GEN_DEBUG"):
                proj = build_session_projection(path)
                print("DEBUG tokens", estimate_projected_context_tokens(proj, path).tokens, len(proj.entries))
            raise StoryError(f"{self.name}: nothing to compact at {self.leaf}")
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
        """Write the session to ``out_dir/<name>.jsonl``."""
        path = out_dir / f"{self.name}.jsonl"
        self.session.write(path)
        return path
