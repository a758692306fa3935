"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as Pi v3 sessions.

A rollout is linear: lines ``{"timestamp", "type", "payload"}``. The mapping:

* ``session_meta`` gives the header (id, time, cwd); the whole payload is kept under the header's
  ``source``.
* ``response_item`` records are what the model saw. The items of one model response
  (``reasoning``, assistant ``message``, ``function_call``, ``custom_tool_call``,
  ``tool_search_call``, ``local_shell_call``, ``web_search_call``) merge into one assistant
  message: reasoning summaries as thinking (the encrypted content as its signature), output text,
  tool calls with their arguments (a JSON string is parsed; a custom tool's free-form input is
  kept as ``{"input": …}``). A response ends at the next non-assistant item or ``token_count``
  event, whose ``last_token_usage`` is its usage (``cached_input_tokens`` → ``cacheRead``, the
  rest of the input → ``input``). Call outputs become ``toolResult`` messages (``isError`` when
  the output says ``success: false``); user messages (text, images) user messages; ``developer``
  messages ``custom_message`` entries of type ``codex.developer`` (they reach the model as user
  text in Pi).
* A ``compacted`` record becomes a ``compaction`` entry (``firstKeptEntryId`` = its own id, so
  nothing before it is kept): ``summary`` = ``payload.message`` (a local compaction's summary,
  with Codex's summary prefix), ``tokensBefore`` = the input tokens of the last response before
  it. The items of ``replacement_history`` — what Codex resumed with — follow it as entries
  (the summary's own user message is not repeated; an encrypted ``compaction`` item is kept in
  the entry's ``details``). A *remote* compaction has an empty ``message``: its summary is
  empty and a warning says that no summary text exists.
* ``turn_context`` and ``event_msg`` records (the UI's copies of messages, token counts, task
  events) become ``custom`` entries (``codex.turn_context``, ``codex.event.<type>``) holding the
  payload: in the chain, never in the model's context.

Entry ids are ``cx`` + the line number in hex (``cx1f``; ``cx1f.2`` for the later entries of
one line); each entry carries ``source``: ``{"format": "codex", "line": …}``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pimem.base.js import js_stringify, loads_line
from pimem.core.session_manager import CURRENT_SESSION_VERSION, SessionWarning
from pimem.errors import SessionFormatError
from pimem.sessions.importers.records import (
    ImportReport, Notes, Record, as_object, as_str, first_record_time, imported_session, line_list, read_records,
    timestamp_ms, token_count,
)
from pimem.sessions.session import Session

__all__ = ["import_codex", "looks_like_codex", "FORMAT"]

FORMAT = "codex"

_CODEX_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})
_ASSISTANT_ITEMS = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "tool_search_call", "local_shell_call", "web_search_call"}
)
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
_IMAGE_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.S)


def looks_like_codex(record: dict) -> bool:
    """Whether a rollout line has Codex's shape."""
    return as_str(record.get("type"), None) in _CODEX_TYPES and isinstance(record.get("payload"), dict)


def _usage(last: Any, notes: Notes | None = None, line: int = 0) -> dict:
    """Pi's usage of a ``last_token_usage`` (a count that is none is 0, with a warning in ``notes``)."""
    last = last if isinstance(last, dict) else {}

    def num(key: str) -> int:
        return notes.tokens(last.get(key), f"last_token_usage.{key}", line) if notes is not None else 0

    cached = num("cached_input_tokens")
    usage: dict[str, Any] = {
        "input": max(num("input_tokens") - cached, 0),
        "output": num("output_tokens"),
        "cacheRead": cached,
        "cacheWrite": 0,
    }
    usage["totalTokens"] = sum(usage.values())
    usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return usage


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def _json_text(value: Any) -> str:
    """``JSON.stringify(value)`` as the text of a block (any nesting depth)."""
    return js_stringify(value)


class _Importer:
    def __init__(self, file: str, warnings: list[SessionWarning]) -> None:
        self.file = file
        self.warnings = warnings
        self.report = ImportReport(FORMAT, file)
        self.entries: list[dict] = []
        self.leaf: str | None = None
        self.open_assistant: dict[str, Any] | None = None
        self.open_entry: dict = {}
        self.tool_names: dict[str, str] = {}
        self.model = ""
        self.provider = "openai"
        self.last_input_tokens: int | None = None
        self.notes = Notes()
        self.ids_on_line: dict[int, int] = {}
        self.meta: dict | None = None

    def note(self, reason: str, line: int) -> None:
        self.notes.add(reason, line)

    def items(self, value: Any, what: str, line: int) -> list:
        """``value`` when it is a list; none is an empty one; anything else is read as a list of it,
        with a warning."""
        if isinstance(value, list):
            return value
        if value is None:
            return []
        self.note(f"{what} is not a list: read as a list of it", line)
        return [value]

    def new_id(self, line: int) -> str:
        n = self.ids_on_line.get(line, 0)
        self.ids_on_line[line] = n + 1
        return f"cx{line:x}" + (f".{n}" if n else "")

    def add(self, entry: dict, kind: str) -> dict:
        entry["parentId"] = self.leaf
        self.entries.append(entry)
        self.leaf = entry["id"]
        self.report.entries_out[kind] = self.report.entries_out.get(kind, 0) + 1
        return entry

    def base(self, rec: Record, etype: str, extra_source: dict | None = None) -> dict:
        ts = rec.data.get("timestamp")
        if ts is not None and not isinstance(ts, str):
            self.note("timestamp is not a string: the entry gets the rollout's first time", rec.line)
            ts = None
        src: dict[str, Any] = {"format": FORMAT, "line": rec.line}
        if extra_source:
            src.update(extra_source)
        return {"type": etype, "id": self.new_id(rec.line), "parentId": None, "timestamp": ts, "source": src}

    def message(self, rec: Record, message: dict, kind: str, extra_source: dict | None = None) -> dict:
        entry = self.base(rec, "message", extra_source)
        entry["message"] = message
        return self.add(entry, kind)

    def close_assistant(self) -> None:
        msg = self.open_assistant
        if msg is not None and msg["stopReason"] == "stop" and any(b["type"] == "toolCall" for b in msg["content"]):
            msg["stopReason"] = "toolUse"
        self.open_assistant = None

    # -- items ---------------------------------------------------------------------------

    def assistant_blocks(self, item: dict, line: int) -> list[dict]:
        itype = item.get("type")
        text = self.notes.text
        if itype == "message":
            content = item.get("content")
            if isinstance(content, str):
                return [{"type": "text", "text": content}]
            out = []
            for block in self.items(content, "assistant message content", line):
                if isinstance(block, dict) and block.get("type") in ("output_text", "input_text", "text"):
                    out.append({"type": "text", "text": text(block.get("text"), "a text block's text", line)})
                elif isinstance(block, dict) and block.get("type") == "refusal":
                    out.append({"type": "text", "text": text(block.get("refusal"), "a refusal's text", line)})
                else:
                    self.note("assistant content block of an unknown type kept as JSON text", line)
                    out.append({"type": "text", "text": _json_text(block)})
            return out
        if itype == "reasoning":
            summary = "\n\n".join(
                text(s.get("text"), "a reasoning summary's text", line)
                for s in self.items(item.get("summary"), "reasoning summary", line) if isinstance(s, dict)
            )
            content = _text_of(item.get("content"))
            thinking: dict[str, Any] = {"type": "thinking", "thinking": summary or content}
            if isinstance(item.get("encrypted_content"), str):
                thinking["thinkingSignature"] = item["encrypted_content"]
            if not thinking["thinking"]:
                thinking["redacted"] = True
            return [thinking]
        call_id: str = as_str(item.get("call_id"), "") or as_str(item.get("id"), "")
        if itype == "function_call":
            raw = item.get("arguments")
            args: Any = raw
            if isinstance(raw, str):
                try:
                    args = loads_line(raw)  # as JSON.parse reads it: any nesting depth
                except (ValueError, RecursionError):
                    self.note("function call arguments are not JSON: kept under {\"input\": …}", line)
                    args = {"input": raw}
            if not isinstance(args, dict):
                args = {"input": args}
            name = text(item.get("name"), "a function call's name", line)
            if isinstance(item.get("namespace"), str):
                name = f"{item['namespace']}{name}"
        elif itype == "custom_tool_call":
            args, name = {"input": item.get("input")}, text(item.get("name"), "a custom tool call's name", line)
        elif itype == "tool_search_call":
            raw_args = item.get("arguments")
            args, name = (raw_args if isinstance(raw_args, dict) else {"input": raw_args}), "tool_search"
        elif itype == "local_shell_call":
            args, name = {"action": item.get("action")}, "local_shell"
        else:  # web_search_call
            args, name = {"action": item.get("action")}, "web_search"
        self.tool_names[call_id] = name
        return [{"type": "toolCall", "id": call_id, "name": name, "arguments": args}]

    def assistant_item(self, rec: Record, item: dict) -> None:
        blocks = self.assistant_blocks(item, rec.line)
        if self.open_assistant is None:
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": [],
                "api": "openai-responses",
                "provider": self.provider,
                "model": self.model,
                "usage": _usage(None),
                "stopReason": "stop",
                "timestamp": timestamp_ms(rec.data.get("timestamp")),
            }
            self.open_entry = self.message(rec, msg, "message:assistant", {"lines": [rec.line]})
            self.open_assistant = msg
        else:
            self.open_entry["source"]["lines"].append(rec.line)
        assert self.open_assistant is not None
        self.open_assistant["content"].extend(blocks)

    def user_content(self, content: Any, line: int) -> list[dict]:
        out: list[dict] = []
        for block in content if isinstance(content, list) else []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("input_text", "output_text", "text"):
                out.append({"type": "text", "text": self.notes.text(block.get("text"), "a text block's text", line)})
            elif kind == "input_image":
                url = self.notes.text(block.get("image_url"), "an image's image_url", line)
                match = _IMAGE_URL.match(url)
                if match:
                    out.append({"type": "image", "data": match.group(2), "mimeType": match.group(1)})
                else:
                    self.note("image given by URL, not inline data: kept as a text placeholder", line)
                    out.append({"type": "text", "text": f"[image {url}]"})
            else:
                self.note("user content block of an unknown type kept as JSON text", line)
                out.append({"type": "text", "text": _json_text(block)})
        if isinstance(content, str):
            out.append({"type": "text", "text": content})
        elif content is not None and not isinstance(content, list):
            out.append({"type": "text", "text": self.notes.text(content, "message content", line)})
        return out

    def output_item(self, rec: Record, item: dict, extra: dict | None = None) -> None:
        call_id = as_str(item.get("call_id"), "")
        output = item.get("output")
        is_error = False
        if isinstance(output, dict):
            is_error = output.get("success") is False
            output = output.get("content", output)
        if item.get("type") == "tool_search_output":
            output = _json_text(item.get("tools"))
        if isinstance(output, list):
            content = self.user_content(output, rec.line)
        else:
            content = [{"type": "text", "text": output if isinstance(output, str) else _json_text(output)}]
        name = self.tool_names.get(call_id)
        if name is None:
            self.note("tool output without a matching call in the file: toolName left empty", rec.line)
        msg = {"role": "toolResult", "toolCallId": call_id, "toolName": name or "", "content": content,
               "isError": is_error, "timestamp": timestamp_ms(rec.data.get("timestamp"))}
        self.message(rec, msg, "message:toolResult", extra)

    def item(self, rec: Record, item: dict, extra: dict | None = None) -> bool:
        """Import one response item; False when it has no Pi counterpart."""
        itype = as_str(item.get("type"), None)
        role = as_str(item.get("role"), None)
        if itype in _ASSISTANT_ITEMS or (itype == "message" and role == "assistant"):
            if extra is not None:  # inside a replacement history: one message per item
                self.close_assistant()
            self.assistant_item(rec, item)
            if extra is not None:
                self.open_entry["source"].update(extra)
                self.close_assistant()
            return True
        self.close_assistant()
        ts = timestamp_ms(rec.data.get("timestamp"))
        if itype in _OUTPUT_ITEMS:
            self.output_item(rec, item, extra)
        elif itype == "message" and role == "user":
            self.message(rec, {"role": "user", "content": self.user_content(item.get("content"), rec.line),
                               "timestamp": ts}, "message:user", extra)
        elif itype == "message" and role in ("developer", "system"):
            entry = self.base(rec, "custom_message", extra)
            entry.update({"customType": f"codex.{role}", "content": self.user_content(item.get("content"), rec.line),
                          "display": False})
            self.add(entry, "custom_message")
        else:
            return False
        return True

    # -- records -------------------------------------------------------------------------

    def compacted(self, rec: Record, payload: dict) -> None:
        self.close_assistant()
        summary = self.notes.text(payload.get("message"), "a compaction's message", rec.line)
        entry = self.base(rec, "compaction")
        details: dict[str, Any] = {"remote": not summary}
        for key in ("window_number", "window_id", "previous_window_id", "first_window_id"):
            if key in payload:
                details[key] = payload[key]
        entry.update({
            "summary": summary,
            "firstKeptEntryId": entry["id"],
            "tokensBefore": self.last_input_tokens or 0,
            "details": details,
            "fromHook": False,
        })
        if self.last_input_tokens is None:
            self.note("compaction before any token count: tokensBefore is 0", rec.line)
        self.add(entry, "compaction")
        history = payload.get("replacement_history")
        if not summary:
            self.warnings.append(SessionWarning(
                rec.line,
                "remote compaction: no summary text exists (the summary is empty; what Codex kept, its "
                "replacement_history, follows the compaction entry)",
                entry["id"], self.file))
        elif history is None:
            self.warnings.append(SessionWarning(
                rec.line,
                "local compaction without replacement_history: Codex also kept recent user messages, which "
                "are not repeated after the compaction entry",
                entry["id"], self.file))
        for i, item in enumerate(history if isinstance(history, list) else []):
            if not isinstance(item, dict):
                self.note("replacement_history item is not an object: skipped", rec.line)
                continue
            if item.get("type") == "compaction":
                details.setdefault("encrypted", []).append(
                    {"id": item.get("id"), "encrypted_content": item.get("encrypted_content")})
                continue
            if summary and item.get("type") == "message" and item.get("role") == "user" and (
                _text_of(item.get("content")).strip() == summary.strip()
            ):
                continue
            if not self.item(rec, item, {"replacementHistory": i}):
                self.note(f"replacement_history item of type {item.get('type')!r} has no Pi counterpart: skipped",
                          rec.line)
        self.close_assistant()

    def run(self, records: list[Record]) -> None:
        for rec in records:
            data = rec.data
            rtype = as_str(data.get("type"), None)
            payload = as_object(data.get("payload"))
            kind = f"{rtype}:{payload.get('type')}" if rtype in ("response_item", "event_msg") else str(rtype)
            self.report.count_in(kind)
            imported = True
            if rtype == "session_meta":
                self.meta = payload
                if isinstance(payload.get("model_provider"), str):
                    self.provider = payload["model_provider"]
            elif rtype == "response_item":
                imported = self.item(rec, payload)
            elif rtype == "compacted":
                self.compacted(rec, payload)
            elif rtype == "event_msg" and payload.get("type") == "token_count":
                info = as_object(payload.get("info"))
                last = info.get("last_token_usage")
                if isinstance(last, dict):
                    usage = _usage(last, self.notes, rec.line)  # (a count that is none: a warning)
                    self.last_input_tokens = token_count(last.get("input_tokens")) or 0
                    if self.open_assistant is not None:
                        self.open_assistant["usage"] = usage
                self.close_assistant()
                self.custom(rec, "codex.event.token_count", payload)
            elif rtype in ("turn_context", "event_msg"):
                if rtype == "turn_context" and isinstance(payload.get("model"), str):
                    self.model = payload["model"]
                    if self.open_assistant is not None and not self.open_assistant["model"]:
                        self.open_assistant["model"] = self.model
                name = "codex.turn_context" if rtype == "turn_context" else f"codex.event.{payload.get('type')}"
                self.custom(rec, name, payload, close=rtype == "turn_context")
            else:
                imported = False
            if imported:
                self.report.count_imported(kind)
            else:
                self.report.skip(kind, rec.line)
        self.close_assistant()
        for reason, lines in self.report.skipped.items():
            self.warnings.append(SessionWarning(
                lines[0], f"{len(lines)} {reason} record(s) not imported: no Pi counterpart (lines {line_list(lines)})",
                None, self.file))
        self.warnings.extend(self.notes.warnings(self.file))

    def custom(self, rec: Record, custom_type: str, payload: dict, close: bool = False) -> None:
        # events interleave with a response's items (e.g. agent_message): only a new turn closes it
        if close:
            self.close_assistant()
        entry = self.base(rec, "custom")
        entry.update({"customType": custom_type, "data": payload})
        self.add(entry, "custom")


def import_codex(path: str | os.PathLike[str], *, seed: int | str | None = None) -> Session:
    """Load a Codex rollout (plain or gzip'd) as a :class:`Session` of Pi v3 entries.

    Args:
        path: the rollout file.
        seed: seeds the ids the import makes (default: the rollout's session id).
    """
    file = os.fspath(path)
    warnings: list[SessionWarning] = []
    records = list(read_records(file, warnings))
    if not any(looks_like_codex(r.data) for r in records[:50]):
        raise SessionFormatError(f"{file}:1: not a Codex rollout (no record of its shape in the first lines)")
    importer = _Importer(file, warnings)
    importer.run(records)
    meta = importer.meta or {}
    first_ts = first_record_time(records, file)
    sid = meta.get("id") or meta.get("session_id") or os.path.basename(file).split(".")[0]
    header: dict[str, Any] = {
        "type": "session",
        "version": CURRENT_SESSION_VERSION,
        "id": sid if isinstance(sid, str) else str(sid),
        "timestamp": as_str(meta.get("timestamp"), first_ts),
        "cwd": as_str(meta.get("cwd"), ""),
        "source": {"format": FORMAT, "session_meta": meta},
    }
    return imported_session(file, header, importer.entries, first_time=first_ts, warnings=warnings,
                            report=importer.report, source_format=FORMAT, seed=seed)
