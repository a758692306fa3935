"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``) as Pi v3 sessions.

The mapping (every source record is imported or named in ``Session.warnings``):

* ``user`` / ``assistant`` records become ``message`` entries. The records of one API response
  (Claude Code writes one record per content block, all with the same ``message.id``) are merged
  into one assistant message; the usage of the last of them is the response's. A response with
  parallel calls is written call, result, call, result… or with its results as siblings: it is one
  assistant message with every call, its results chained after it (what follows any of them
  follows the last), as Pi records parallel calls. A user record's
  ``tool_result`` blocks become one ``toolResult`` message each (``isError`` from ``is_error``),
  its other blocks one user message after them; what the record's ``toolUseResult`` tells of the
  file the call touched goes to the result's ``details`` (:func:`file_facts`). Text, thinking
  (signature kept), redacted thinking, tool calls with their arguments and base64 images map
  block for block. Usage:
  ``cache_read_input_tokens`` → ``cacheRead``, ``cache_creation_input_tokens`` → ``cacheWrite``;
  cost is not recorded by Claude Code and is left at 0.
* The ``parentUuid`` tree is kept: entry ids are the source uuids (a record split into several
  entries gets ``<uuid>:1``, ``<uuid>:2`` … for the later ones); a record's children hang off the
  entry that holds its last block. Rewinds and edits stay branches.
* A ``compact_boundary`` and its ``isCompactSummary`` message become one ``compaction`` entry:
  the summary message's text verbatim as ``summary``, ``tokensBefore`` = ``preTokens``, the
  trigger in ``details``, the boundary's ``logicalParentUuid`` as parent and ``firstKeptEntryId``
  = the compaction's own id, so Pi's ``buildSessionContext`` gives the summary and then only what
  follows it — what Claude Code resumed with.
* Title records (``summary``, ``custom-title``, ``ai-title``) are session names, never
  compactions: each becomes a ``session_info`` entry, in file order, chained after the last entry
  so that Pi still opens at the transcript's last record (Pi's name is the last of them).
* Sidechain records (a subagent's conversation stored in the main file) are not imported into
  the main tree (a warning counts them); a file holding only sidechain records — a subagent
  transcript — imports as a session of its own.
* Records that never reach the model (``progress``, ``file-history-snapshot``, hook and timing
  ``system`` records, ``queue-operation``, ``pr-link``, ``attachment``, mode and agent-name
  records, API-error notices, micro-compaction markers) are not imported; one warning per kind gives the
  count, the reason and the lines.
  Their children are attached to their nearest imported ancestor.

Each entry carries ``source``: ``{"format": "claude-code", "uuid": …, "line": …}`` (``uuids`` /
``lines`` for a merged response), so a reader can go back to the record.
"""

from __future__ import annotations

import os
from typing import Any

from pimem.base.js import js_stringify
from pimem.core.session_manager import CURRENT_SESSION_VERSION, SessionWarning
from pimem.errors import SessionFormatError
from pimem.sessions.importers.records import (
    ImportReport, Notes, Record, as_object, as_str, first_record_time, imported_session, line_list, read_records,
    timestamp_ms,
)
from pimem.sessions.session import Session

__all__ = ["import_claude_code", "looks_like_claude_code", "FORMAT"]

FORMAT = "claude-code"

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}

_SKIP_REASONS = {
    "progress": "UI progress events (tool output streaming, hooks, subagent progress), not sent to the model",
    "file-history-snapshot": "editor file backups for rewinds, not part of the conversation",
    "queue-operation": "input queued while the agent worked; what was sent appears as a user record",
    "pr-link": "pull-request link shown in the UI",
    "system": "UI notices (hook summaries, turn durations, local commands, API retries), not sent to the model",
    "system:microcompact_boundary": (
        "micro-compaction marker: Claude Code cleared old tool results from its context here; "
        "the imported results keep their text"
    ),
    "attachment": (
        "attachments Claude Code adds to its context (file references, tool and instruction deltas); "
        "Pi's projection of the import lacks them"
    ),
    "agent-name": "subagent name shown in the UI",
    "agent-setting": "subagent setting shown in the UI",
    "permission-mode": "permission mode of the UI",
    "mode": "UI mode",
    "last-prompt": "pointer to the latest prompt for the UI",
    "bridge-session": "remote-control bridge bookkeeping",
    "sidechain": "subagent (sidechain) record in the main transcript; load the subagent's file alone to study it",
    "compact_summary_orphan": "compaction summary message without its compact_boundary record",
}

_TITLE_FIELDS = {"summary": "summary", "custom-title": "customTitle", "ai-title": "aiTitle"}
_CC_TYPES = frozenset(
    {"user", "assistant", "system", "progress", "file-history-snapshot", "queue-operation", "pr-link"}
    | set(_TITLE_FIELDS)
)


def looks_like_claude_code(record: dict) -> bool:
    """Whether a transcript record has Claude Code's shape."""
    rtype = as_str(record.get("type"), None)
    if rtype not in _CC_TYPES:
        return False
    if rtype in _TITLE_FIELDS:
        return _TITLE_FIELDS[rtype] in record
    return "sessionId" in record or "uuid" in record or rtype in ("file-history-snapshot", "queue-operation")


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _text_size(text: str) -> dict[str, int]:
    return {"chars": len(text), "lines": text.count("\n") + 1}


def file_facts(result: Any) -> dict[str, Any] | None:
    """What a record's ``toolUseResult`` tells of the file a call touched, the content left out:
    ``{"read": {"startLine", "numLines", "totalLines"}}`` for a ``Read`` of text, ``{"file": {"chars",
    "lines"}}`` (the whole file after the call) for a ``Write`` or ``Edit``, ``{"plan": {"chars",
    "lines"}}`` for an ``ExitPlanMode`` that recorded its plan. ``None`` when it tells none of these
    (malformed values are left out)."""
    if not isinstance(result, dict):
        return None
    read = result.get("file")
    if result.get("type") == "text" and isinstance(read, dict):
        counts = {k: _count(read.get(k)) for k in ("startLine", "numLines", "totalLines")}
        return {"read": counts} if None not in counts.values() else None
    if result.get("type") in ("create", "update") and isinstance(result.get("content"), str):
        return {"file": _text_size(result["content"])}
    original = result.get("originalFile")
    old, new = result.get("oldString"), result.get("newString")
    if isinstance(original, str) and isinstance(old, str) and isinstance(new, str):
        after = original.replace(old, new) if result.get("replaceAll") is True else original.replace(old, new, 1)
        return {"file": _text_size(after)}
    if isinstance(result.get("plan"), str):
        return {"plan": _text_size(result["plan"])}
    return None


def _kind(data: dict) -> str:
    rtype = data.get("type")
    rtype = rtype if isinstance(rtype, str) else "?"
    subtype = data.get("subtype")
    return f"{rtype}:{subtype}" if rtype == "system" and isinstance(subtype, str) else rtype


def _usage(raw: Any, notes: Notes, line: int) -> dict:
    if raw is not None and not isinstance(raw, dict):
        notes.add("assistant usage is not an object: read as none", line)
    raw = raw if isinstance(raw, dict) else {}

    def num(key: str) -> int:
        return notes.tokens(raw.get(key), f"usage.{key}", line)

    usage: dict[str, Any] = {
        "input": num("input_tokens"),
        "output": num("output_tokens"),
        "cacheRead": num("cache_read_input_tokens"),
        "cacheWrite": num("cache_creation_input_tokens"),
    }
    usage["totalTokens"] = sum(usage.values())
    usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return usage


class _Importer:
    def __init__(self, file: str, warnings: list[SessionWarning]) -> None:
        self.file = file
        self.warnings = warnings
        self.report = ImportReport(FORMAT, file)
        self.entries: list[dict] = []
        self.by_id: dict[str, dict] = {}
        self.target: dict[str, str | None] = {}  # source uuid -> entry id its children attach to
        self.cut_off: set[str] = set()  # skipped records whose chain leads to a parent not in the file
        self.has_children: set[str] = set()
        self.tool_names: dict[str, str] = {}  # tool_use id -> name, of every call in the file (the last)
        self.calls_so_far: dict[str, str] = {}  # tool_use id -> name of the latest call read so far
        self.suffixes: dict[str, int] = {}  # uuid -> the last #n suffix given to a later record with it
        self.group_of: dict[str, str] = {}  # assistant entry id -> message.id of its response
        # Claude Code may write the results of parallel calls as siblings (each child of the call's
        # message): they are chained, and what follows any of them follows the last
        self.run_of: dict[str, str] = {}  # assistant entry with calls, or one of its results -> the assistant
        self.tail: dict[str, str] = {}  # assistant entry -> the last of its results so far
        self.last_main: str | None = None
        self.pending_compaction: dict[str, dict] = {}  # boundary uuid -> compaction entry
        self.titles: list[Record] = []
        self.notes = Notes()

    # -- helpers ---------------------------------------------------------------------------

    def warn(self, line: int | None, reason: str, entry_id: str | None = None) -> None:
        self.warnings.append(SessionWarning(line, reason, entry_id, self.file))

    def note(self, reason: str, line: int) -> None:
        """A per-block problem, reported once per reason with its lines."""
        self.notes.add(reason, line)

    def skip(self, reason_key: str, rec: Record) -> None:
        self.report.skip(reason_key, rec.line)
        uuid = rec.data.get("uuid")
        if isinstance(uuid, str):
            self.target[uuid] = self.parent_of(rec, quiet=True)
            if self.parent_missing(rec):
                self.cut_off.add(uuid)

    def parent_missing(self, rec: Record) -> bool:
        """Whether the record names a parent the file does not hold (directly, or through skipped records)."""
        parent = rec.data.get("parentUuid")
        return parent is not None and (not isinstance(parent, str) or parent not in self.target
                                       or parent in self.cut_off)

    def parent_of(self, rec: Record, quiet: bool = False) -> str | None:
        parent = rec.data.get("parentUuid")
        if parent is None:
            return None
        if isinstance(parent, str) and parent in self.target and parent not in self.cut_off:
            return self.attach_point(self.target[parent])
        if not quiet:
            self.note("parent record not in the file: the entry becomes a root", rec.line)
        return None

    def attach_point(self, target: str | None) -> str | None:
        """Where a child of entry ``target`` goes: after the last result of the calls ``target`` made
        or answered (:meth:`extend_run`), else under ``target``."""
        run = self.run_of.get(target) if target is not None else None
        return self.tail.get(run, target) if run is not None else target

    def add(self, entry: dict[str, Any], rec: Record, kind: str) -> dict[str, Any]:
        eid = entry["id"]
        if eid in self.by_id:
            n = self.suffixes.get(eid, 0) + 1  # on from the last one given: linear in the records
            while f"{eid}#{n}" in self.by_id:
                n += 1
            self.suffixes[eid] = n
            self.note("duplicate uuid: later record's entry id gets a #n suffix", rec.line)
            eid = entry["id"] = f"{eid}#{n}"
        parent = entry.get("parentId")
        if isinstance(parent, str):
            self.has_children.add(parent)
        self.entries.append(entry)
        self.by_id[eid] = entry
        self.report.entries_out[kind] = self.report.entries_out.get(kind, 0) + 1
        return entry

    def source(self, rec: Record) -> dict:
        src: dict[str, Any] = {"format": FORMAT, "uuid": rec.data.get("uuid"), "line": rec.line}
        if self.parent_missing(rec):
            src["parentMissing"] = True  # a root made from a record whose parent is not in the file
        if rec.data.get("isMeta"):
            src["isMeta"] = True
        if rec.data.get("isSidechain"):
            src["isSidechain"] = True
        return src

    def timestamp(self, rec: Record) -> str | None:
        """The record's ``timestamp`` string; anything else is none, with a warning (the entry gets the
        transcript's first time)."""
        stamp = rec.data.get("timestamp")
        if stamp is None or isinstance(stamp, str):
            return stamp
        self.note("timestamp is not a string: the entry gets the transcript's first time", rec.line)
        return None

    def message_entry(self, eid: str, parent: str | None, rec: Record, message: dict) -> dict:
        return {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "timestamp": self.timestamp(rec),
            "message": message,
            "source": self.source(rec),
        }

    # -- blocks ----------------------------------------------------------------------------

    def image(self, block: dict, line: int) -> dict:
        src = block.get("source")
        if isinstance(src, dict) and src.get("type") == "base64" and isinstance(src.get("data"), str):
            mime = src.get("media_type")
            if not isinstance(mime, str) or not mime:
                if mime is not None:
                    self.note("image media_type is not a string: image/png assumed", line)
                mime = "image/png"
            return {"type": "image", "data": src["data"], "mimeType": mime}
        self.note("image without base64 data kept as a text placeholder", line)
        return {"type": "text", "text": "[image]"}

    def unknown_block(self, block: Any, line: int) -> dict:
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        self.note(f"content block of type {kind!r} kept as JSON text", line)
        return {"type": "text", "text": js_stringify(block)}

    def assistant_blocks(self, content: Any, line: int) -> list[dict]:
        text = self.notes.text
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return [{"type": "text", "text": text(content, "assistant content", line)}] if content is not None else []
        out: list[dict] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                out.append({"type": "text", "text": text(block.get("text"), "a text block's text", line)})
            elif kind == "thinking":
                b = {"type": "thinking", "thinking": text(block.get("thinking"), "a thinking block's thinking", line)}
                if block.get("signature") is not None:
                    b["thinkingSignature"] = text(block["signature"], "a thinking block's signature", line)
                out.append(b)
            elif kind == "redacted_thinking":
                out.append({"type": "thinking", "thinking": "",
                            "thinkingSignature": text(block.get("data"), "a redacted thinking block's data", line),
                            "redacted": True})
            elif kind in ("tool_use", "server_tool_use"):
                args = block.get("input")
                if not isinstance(args, dict):
                    self.note("tool call input is not an object: kept under {\"input\": …}", line)
                    args = {"input": args}
                call_id = text(block.get("id"), "a tool call's id", line)
                name = text(block.get("name"), "a tool call's name", line)
                if self.calls_so_far.get(call_id, name) != name:
                    self.note("a tool_use id used again by a call of another tool: each result is named after "
                              "the latest call before it", line)
                self.calls_so_far[call_id] = name
                out.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
            else:
                out.append(self.unknown_block(block, line))
        return out

    def user_blocks(self, blocks: list, line: int) -> list[dict]:
        out: list[dict] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                out.append({"type": "text", "text": self.notes.text(block.get("text"), "a text block's text", line)})
            elif kind == "image":
                out.append(self.image(block, line))
            elif kind == "document" and isinstance(block.get("source"), dict) and block["source"].get("type") == "text":
                out.append({"type": "text",
                            "text": self.notes.text(block["source"].get("data"), "a text document's data", line)})
            elif kind == "tool_reference":
                out.append({"type": "text", "text": f"[tool reference: {block.get('tool_name')}]"})
            else:
                out.append(self.unknown_block(block, line))
        return out

    # -- records ---------------------------------------------------------------------------

    def message_of(self, rec: Record) -> dict[str, Any]:
        """The record's ``message`` object; anything else is an empty one, with a warning."""
        raw = rec.data.get("message")
        if not isinstance(raw, dict):
            if raw is not None:
                self.note(f"{rec.data.get('type')} record's message is not an object: read as empty", rec.line)
            return {}
        return raw

    def uuid_of(self, rec: Record) -> str:
        """The record's ``uuid``, else ``line<n>`` (with a warning when it is there but no string)."""
        uuid = rec.data.get("uuid")
        if isinstance(uuid, str):
            return uuid
        if uuid is not None:
            self.note("uuid is not a string: the entry id is line<n>", rec.line)
        return f"line{rec.line}"

    def assistant(self, rec: Record) -> None:
        data = rec.data
        raw = self.message_of(rec)
        uuid = self.uuid_of(rec)
        parent = self.parent_of(rec)
        blocks = self.assistant_blocks(raw.get("content"), rec.line)
        response_id = as_str(raw.get("id"), None)
        stop = raw.get("stop_reason")
        if stop is not None and not isinstance(stop, str):
            self.note("stop_reason is not a string: read as none", rec.line)
            stop = None
        group = self.by_id.get(parent) if parent is not None else None
        after = parent  # the entry the record's children attach to
        # a response with parallel calls is written call, result, call, result...: its later records
        # continue the assistant message, their results follow the earlier ones
        start = self.response_before(parent, response_id) if response_id is not None and parent is not None else None
        if start is not None:
            group, parent = self.by_id[start], start
        if (
            group is not None
            and parent is not None
            and response_id is not None
            and self.group_of.get(parent) == response_id
            and (parent not in self.has_children or after != parent)
        ):
            merged = group["message"]
            merged["content"].extend(blocks)
            if raw.get("usage") is not None:
                merged["usage"] = _usage(raw["usage"], self.notes, rec.line)
            if isinstance(stop, str):
                merged["stopReason"] = _STOP_REASONS.get(stop, "stop")
            src = group["source"]
            if "uuids" not in src:
                src["uuids"], src["lines"] = [src.pop("uuid")], [src.pop("line")]
            src["uuids"].append(data.get("uuid"))
            src["lines"].append(rec.line)
            self.target[uuid] = after
            if any(b.get("type") == "toolCall" for b in blocks):
                self.run_of.setdefault(parent, parent)
            self.report.count_imported("assistant")
            self.fix_stop(merged)
            return
        model = self.notes.text(raw.get("model"), "an assistant message's model", rec.line)
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": blocks,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": model,
            "usage": _usage(raw.get("usage"), self.notes, rec.line),
            "stopReason": _STOP_REASONS.get(stop, "stop") if isinstance(stop, str) else "stop",
            "timestamp": timestamp_ms(data.get("timestamp")),
        }
        if response_id is not None:
            msg["responseId"] = response_id
        if data.get("isApiErrorMessage"):
            msg["stopReason"] = "error"
            msg["errorMessage"] = " ".join(b["text"] for b in blocks if b["type"] == "text") or "error"
        else:
            self.fix_stop(msg)
        entry = self.add(self.message_entry(uuid, parent, rec, msg), rec, "message:assistant")
        if response_id is not None:
            self.group_of[entry["id"]] = response_id
        if any(b.get("type") == "toolCall" for b in blocks):
            self.run_of[entry["id"]] = entry["id"]
        self.target[uuid] = entry["id"]
        self.last_main = entry["id"]
        self.report.count_imported("assistant")

    def extend_run(self, parent: str | None, eid: str, call_id: str) -> None:
        """Chain the result ``eid`` (of call ``call_id``, added under ``parent``) to its call's message."""
        run = self.run_of.get(parent) if parent is not None else None
        if run is None:
            return
        message = self.by_id[run]["message"]
        if any(b.get("type") == "toolCall" and b.get("id") == call_id for b in message["content"]):
            self.run_of[eid] = run
            self.tail[run] = eid

    def response_before(self, last: str, response_id: str) -> str | None:
        """The assistant entry of response ``response_id`` whose results ``last`` is the last of (each
        answering one of its calls, chained by :meth:`extend_run`, nothing after them yet), or None."""
        run = self.run_of.get(last)
        if run is None or run == last or self.tail.get(run) != last or last in self.has_children:
            return None
        return run if self.group_of.get(run) == response_id else None

    @staticmethod
    def fix_stop(msg: dict) -> None:
        """A response still streaming (no stop reason) that called tools stopped for them."""
        if msg["stopReason"] == "stop" and any(b.get("type") == "toolCall" for b in msg["content"]):
            msg["stopReason"] = "toolUse"

    def user(self, rec: Record) -> None:
        data = rec.data
        raw = self.message_of(rec)
        uuid = self.uuid_of(rec)
        parent = self.parent_of(rec)
        if data.get("isCompactSummary"):
            boundary = data.get("parentUuid")
            compaction = self.pending_compaction.pop(boundary, None) if isinstance(boundary, str) else None
            if compaction is None:
                self.skip("compact_summary_orphan", rec)
                return
            content = raw.get("content")
            if isinstance(content, list):
                content = "\n".join(self.notes.text(b.get("text"), "a compaction summary's text", rec.line)
                                    for b in content if isinstance(b, dict) and b.get("type") == "text")
            compaction["summary"] = self.notes.text(content, "a compaction summary", rec.line)
            compaction["source"]["summaryUuid"] = data.get("uuid")
            compaction["source"]["summaryLine"] = rec.line
            self.target[uuid] = compaction["id"]
            self.report.count_imported("user")
            return
        content = raw.get("content")
        ts = timestamp_ms(data.get("timestamp"))
        n = 0
        current = parent

        def next_id() -> str:
            nonlocal n
            n += 1
            return uuid if n == 1 else f"{uuid}:{n - 1}"

        rest: list = []
        if isinstance(content, list):
            # a record's toolUseResult belongs to its tool result when it holds one only
            results = sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
            facts = file_facts(data.get("toolUseResult")) if results == 1 else None
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    result = block.get("content")
                    if isinstance(result, list):
                        parts = self.user_blocks(result, rec.line)
                    elif result is None:
                        parts = []
                    else:
                        parts = [{"type": "text", "text": self.notes.text(result, "a tool result's content", rec.line)}]
                    call_id = self.notes.text(block.get("tool_use_id"), "a tool result's tool_use_id", rec.line)
                    # the call it answers: the latest one before it with its id (an id may be used again)
                    name = self.calls_so_far.get(call_id, self.tool_names.get(call_id))
                    if name is None:
                        self.note("tool result without a matching tool call in the file: toolName left empty",
                                  rec.line)
                        name = ""
                    msg = {
                        "role": "toolResult",
                        "toolCallId": call_id,
                        "toolName": name,
                        "content": parts,
                        "isError": bool(block.get("is_error")),
                        "timestamp": ts,
                    }
                    if facts:
                        msg["details"] = facts
                    entry = self.add(self.message_entry(next_id(), current, rec, msg), rec, "message:toolResult")
                    self.extend_run(current, entry["id"], call_id)
                    current = entry["id"]
                else:
                    rest.append(block)
            if rest:
                msg = {"role": "user", "content": self.user_blocks(rest, rec.line), "timestamp": ts}
                entry = self.add(self.message_entry(next_id(), current, rec, msg), rec, "message:user")
                current = entry["id"]
        elif content is not None:
            text = self.notes.text(content, "user content", rec.line)
            msg = {"role": "user", "content": text, "timestamp": ts}
            entry = self.add(self.message_entry(next_id(), current, rec, msg), rec, "message:user")
            current = entry["id"]
        if n == 0:
            self.note("user record without content: imported as an empty user message", rec.line)
            msg = {"role": "user", "content": "", "timestamp": ts}
            entry = self.add(self.message_entry(next_id(), current, rec, msg), rec, "message:user")
            current = entry["id"]
        self.target[uuid] = current
        self.last_main = current
        self.report.count_imported("user")

    def boundary(self, rec: Record) -> None:
        data = rec.data
        uuid = self.uuid_of(rec)
        logical = data.get("logicalParentUuid")
        if isinstance(logical, str) and logical in self.target:
            parent = self.attach_point(self.target[logical])
        else:
            parent = self.last_main
            self.note(
                "compact_boundary's logicalParentUuid is not in the file: the compaction follows the "
                "previous record in file order",
                rec.line,
            )
        meta = as_object(data.get("compactMetadata"))
        entry: dict[str, Any] = {
            "type": "compaction",
            "id": uuid,
            "parentId": parent,
            "timestamp": self.timestamp(rec),
            "summary": "",
            "firstKeptEntryId": uuid,
            "tokensBefore": self.notes.tokens(meta.get("preTokens"), "compactMetadata.preTokens", rec.line),
            "details": {"trigger": meta.get("trigger")},
            "fromHook": False,
            "source": self.source(rec),
        }
        entry = self.add(entry, rec, "compaction")
        entry["firstKeptEntryId"] = entry["id"]
        self.pending_compaction[uuid] = entry
        self.target[uuid] = entry["id"]
        self.last_main = entry["id"]
        self.report.count_imported(_kind(data))

    # -- whole file --------------------------------------------------------------------------

    def run(self, records: list[Record]) -> None:
        for rec in records:
            self.report.count_in(_kind(rec.data))
            content = as_object(rec.data.get("message")).get("content")
            if rec.data.get("type") == "assistant" and isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                        if isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
                            self.tool_names[block["id"]] = block["name"]
        conversation = [r for r in records if r.data.get("type") in ("user", "assistant")]
        only_sidechain = bool(conversation) and all(r.data.get("isSidechain") for r in conversation)
        for rec in records:
            data = rec.data
            rtype = as_str(data.get("type"), None)
            if data.get("isSidechain") and not only_sidechain and rtype in ("user", "assistant", "system", "progress"):
                self.skip("sidechain", rec)
            elif rtype == "assistant":
                self.assistant(rec)
            elif rtype == "user":
                self.user(rec)
            elif rtype == "system" and data.get("subtype") == "compact_boundary":
                self.boundary(rec)
            elif rtype in _TITLE_FIELDS:
                self.titles.append(rec)
            elif rtype == "system" and data.get("subtype") == "microcompact_boundary":
                self.skip("system:microcompact_boundary", rec)
            elif rtype in _SKIP_REASONS:
                self.skip(_kind(data), rec)
            else:
                self.skip(f"unknown record type {rtype!r}", rec)
        for boundary, compaction in self.pending_compaction.items():
            self.warn(
                compaction["source"]["line"],
                "compact_boundary without its isCompactSummary message: the compaction's summary is empty",
                compaction["id"],
            )
        parent = self.entries[-1]["id"] if self.entries else None
        for rec in self.titles:
            rtype = str(rec.data.get("type"))
            title = self.notes.text(rec.data.get(_TITLE_FIELDS[rtype]), f"a {rtype} record's title", rec.line)
            entry = {
                "type": "session_info",
                "id": f"title:{rec.line}" + (f".{rec.part}" if rec.part else ""),
                "parentId": parent,
                "timestamp": self.entries[-1]["timestamp"] if self.entries else None,
                "name": title,
                "source": {"format": FORMAT, "leafUuid": rec.data.get("leafUuid"), "line": rec.line},
            }
            parent = self.add(entry, rec, "session_info")["id"]
            self.report.count_imported(rtype)
        for reason, lines in self.report.skipped.items():
            why = _SKIP_REASONS.get(reason) or _SKIP_REASONS.get(reason.split(":")[0], "no Pi counterpart")
            self.warn(lines[0], f"{len(lines)} {reason} record(s) not imported: {why} (lines {line_list(lines)})")
        self.warnings.extend(self.notes.warnings(self.file))


def import_claude_code(path: str | os.PathLike[str], *, seed: int | str | None = None) -> Session:
    """Load a Claude Code transcript (plain or gzip'd) as a :class:`Session` of Pi v3 entries.

    The session's ``source_format`` is ``"claude-code"`` and its ``import_report`` counts the
    records read, the entries written and the records skipped by reason.

    Args:
        path: the transcript file.
        seed: seeds the ids the import makes (default: the transcript's session id).
    """
    file = os.fspath(path)
    warnings: list[SessionWarning] = []
    records = list(read_records(file, warnings))
    if not any(looks_like_claude_code(r.data) for r in records[:50]):
        raise SessionFormatError(f"{file}:1: not a Claude Code transcript (no record of its shape in the first lines)")
    importer = _Importer(file, warnings)
    importer.run(records)
    first = next((r.data for r in records if isinstance(r.data.get("sessionId"), str)), {})
    stem = os.path.basename(file).split(".")[0]
    first_ts = first_record_time(records, file)
    cwd = next((r.data["cwd"] for r in records if isinstance(r.data.get("cwd"), str)), "")
    version = next((r.data["version"] for r in records if isinstance(r.data.get("version"), str)), None)
    header: dict[str, Any] = {
        "type": "session",
        "version": CURRENT_SESSION_VERSION,
        "id": first.get("sessionId") or stem,
        "timestamp": first_ts,
        "cwd": cwd,
        "source": {"format": FORMAT, "version": version},
    }
    return imported_session(file, header, importer.entries, first_time=first_ts, warnings=warnings,
                            report=importer.report, source_format=FORMAT, seed=seed)
