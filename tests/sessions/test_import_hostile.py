"""Hostile values in Claude Code and Codex records: each is kept (as its JSON text), skipped or read
as nothing, with a warning naming the file and the line, and the import is a session Pi can read
(every field of the type Pi's code reads). Also: a byte order mark, blocks nested 900 deep,
thousands of records with one uuid, a tool_use id used again."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pimem.core.session_manager import build_session_context
from pimem.core.session_manager import load_session as load_pi_session
from pimem.sessions.importers import claude_code
from pimem.sessions.load import load_session
from tests.support.pi_shapes import shape_errors

TS = "2026-01-02T03:04:05.000Z"


class Raw:
    """JSON text written as it is (what ``json.dumps`` cannot write: ``1e400``, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _line(value: Any) -> str:
    raws: dict[str, str] = {}

    def swap(v: Any) -> Any:
        if isinstance(v, Raw):
            key = f"@@raw{len(raws)}@@"
            raws[key] = v.text
            return key
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value))
    for key, raw in raws.items():
        text = text.replace(json.dumps(key), raw)
    return text


def _write(path: Path, records: list[Any], bom: bool = False) -> Path:
    path.write_text(("\ufeff" if bom else "") + "".join(_line(r) + "\n" for r in records), encoding="utf-8")
    return path


def _deep(depth: int) -> Raw:
    return Raw('{"type": "deep", "x": ' + "[" * (depth - 1) + "1" + "]" * (depth - 1) + "}")


# --------------------------------------------------------------------------- Claude Code records


def claude_records() -> list[dict]:
    base = {"sessionId": "s-1", "cwd": "/w", "version": "2.0.0", "timestamp": TS}
    return [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None,
         "message": {"role": "user", "content": "read the file"}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1",
         "message": {"id": "m1", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use",
                     "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                                 {"type": "text", "text": "reading"},
                                 {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a.py"}}],
                     "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 2}}},
        {**base, "type": "user", "uuid": "r1", "parentUuid": "a1",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
             {"type": "document", "source": {"type": "text", "data": "notes"}}]}},
        {**base, "type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
         "logicalParentUuid": "r1", "compactMetadata": {"trigger": "auto", "preTokens": 1200}},
        {**base, "type": "user", "uuid": "c1", "parentUuid": "b1", "isCompactSummary": True,
         "message": {"role": "user", "content": [{"type": "text", "text": "## Goal\nread a.py"}]}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "c1",
         "message": {"id": "m2", "role": "assistant", "model": "claude-x", "stop_reason": "end_turn",
                     "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 20, "output_tokens": 3}}},
        {"type": "summary", "summary": "Reading a file", "leafUuid": "a2"},
    ]


def codex_records() -> list[dict]:
    def item(payload: dict, kind: str = "response_item") -> dict:
        return {"timestamp": TS, "type": kind, "payload": payload}

    return [
        {"timestamp": TS, "type": "session_meta", "payload": {"id": "cx-1", "cwd": "/w", "timestamp": TS}},
        item({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}),
        item({"type": "function_call", "name": "shell", "call_id": "c1", "arguments": '{"cmd": "ls"}'}),
        item({"type": "token_count", "info": {"last_token_usage": {"input_tokens": 30, "output_tokens": 4}}},
             "event_msg"),
        item({"type": "function_call_output", "call_id": "c1", "output": "a.py"}),
        item({"type": "compacted", "message": "summary of the work", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}]}]}, "compacted"),
    ]


RECORDS = {"claude-code": claude_records, "codex": codex_records}

# (format, record index, path to the value, the hostile value, what the warning says)
CASES: list[tuple[str, int, tuple, Any, str]] = [
    ("claude-code", 1, ("message", "content"), 5, "assistant content is not a string"),
    ("claude-code", 1, ("message", "content", 1, "text"), 7, "a text block's text is not a string"),
    ("claude-code", 1, ("message", "content", 0, "thinking"), {"a": 1}, "a thinking block's thinking is not a string"),
    ("claude-code", 1, ("message", "content", 0, "signature"), [1], "a thinking block's signature is not a string"),
    ("claude-code", 1, ("message", "content", 2, "name"), 5, "a tool call's name is not a string"),
    ("claude-code", 1, ("message", "content", 2, "id"), {}, "a tool call's id is not a string"),
    ("claude-code", 1, ("message", "usage", "input_tokens"), Raw("1e400"),
     "usage.input_tokens inf is not a token count: read as 0"),
    ("claude-code", 1, ("message", "usage", "output_tokens"), -3, "usage.output_tokens -3 is not a token count"),
    ("claude-code", 1, ("message", "usage", "cache_read_input_tokens"), 2.5,
     "usage.cache_read_input_tokens 2.5 is not a token count"),
    ("claude-code", 1, ("message", "usage", "input_tokens"), Raw("1" + "0" * 400),
     "usage.input_tokens (an integer of 401 digits) is not a token count"),
    ("claude-code", 1, ("message", "usage", "input_tokens"), Raw("NaN"), "malformed JSON line skipped"),
    ("claude-code", 1, ("message", "usage"), "lots", "assistant usage is not an object"),
    ("claude-code", 1, ("message", "model"), 5, "an assistant message's model is not a string"),
    ("claude-code", 1, ("message", "stop_reason"), 5, "stop_reason is not a string"),
    ("claude-code", 1, ("message",), 5, "assistant record's message is not an object"),
    ("claude-code", 1, ("uuid",), 5, "uuid is not a string"),
    ("claude-code", 1, ("timestamp",), 5, "timestamp is not a string"),
    ("claude-code", 0, ("message", "content"), 5, "user content is not a string"),
    ("claude-code", 2, ("message", "content", 0, "content"), 5, "a tool result's content is not a string"),
    ("claude-code", 2, ("message", "content", 0, "tool_use_id"), [], "a tool result's tool_use_id is not a string"),
    ("claude-code", 2, ("message", "content", 1, "source", "media_type"), 5, "image media_type is not a string"),
    ("claude-code", 2, ("message", "content", 2, "source", "data"), 5, "a text document's data is not a string"),
    ("claude-code", 3, ("compactMetadata", "preTokens"), "x", "compactMetadata.preTokens \"x\" is not a token count"),
    ("claude-code", 4, ("message", "content", 0, "text"), 5, "a compaction summary's text is not a string"),
    ("claude-code", 4, ("message", "content"), {"a": 1}, "a compaction summary is not a string"),
    ("claude-code", 6, ("summary",), 5, "a summary record's title is not a string"),
    ("codex", 3, ("payload", "content"), 5, "assistant message content is not a list"),
    ("codex", 3, ("payload", "content", 0, "text"), 5, "a text block's text is not a string"),
    ("codex", 2, ("payload", "summary"), 5, "reasoning summary is not a list"),
    ("codex", 2, ("payload", "summary", 0, "text"), [1], "a reasoning summary's text is not a string"),
    ("codex", 1, ("payload", "content", 1, "image_url"), 5, "an image's image_url is not a string"),
    ("codex", 1, ("payload", "content"), 5, "message content is not a string"),
    ("codex", 5, ("payload", "info", "last_token_usage", "input_tokens"), Raw("1e400"),
     "last_token_usage.input_tokens inf is not a token count"),
    ("codex", 4, ("payload", "name"), 5, "a function call's name is not a string"),
    ("codex", 7, ("payload", "message"), 5, "a compaction's message is not a string"),
    ("codex", 1, ("timestamp",), 5, "timestamp is not a string"),
]


def _set(records: list[dict], index: int, path: tuple, value: Any) -> None:
    target: Any = records[index]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _checked_import(tmp_path: Path, path: Path, fmt: str) -> Any:
    """The import of ``path``, written as a Pi file that loads back without a warning, projects at
    every leaf and has every field of the type Pi's code reads."""
    session = load_session(path)
    assert session.source_format == fmt
    assert shape_errors(session.entries) == []
    report = session.import_report
    assert report.n_records == report.n_imported + report.n_skipped
    back = load_pi_session(session.write(tmp_path / f"{path.stem}.pi.jsonl"))
    assert not back.warnings, [str(w) for w in back.warnings]
    for leaf in back.leaves():
        build_session_context(back, leaf["id"])
    return session


@pytest.mark.parametrize("fmt, index, where, value, warned", CASES,
                         ids=[f"{c[0]}-{c[1]}-{'.'.join(map(str, c[2]))}" for c in CASES])
def test_a_hostile_value_is_kept_or_skipped_with_a_warning(tmp_path: Path, fmt, index, where, value, warned) -> None:
    records = RECORDS[fmt]()
    _set(records, index, where, value)
    path = _write(tmp_path / "t.jsonl", records)
    session = _checked_import(tmp_path, path, fmt)
    found = [w for w in session.warnings if warned in w.reason]
    assert found, [str(w) for w in session.warnings]
    assert found[0].line == index + 1 and found[0].file == str(path)
    assert str(found[0]).startswith(f"{path}:{index + 1}: ")


def test_unharmed_records_import_without_warnings(tmp_path: Path) -> None:
    for fmt, make in RECORDS.items():
        session = _checked_import(tmp_path, _write(tmp_path / f"{fmt}.jsonl", make()), fmt)
        assert [str(w) for w in session.warnings] == [], fmt


def test_a_value_kept_as_text_reads_as_its_json_text(tmp_path: Path) -> None:
    records = claude_records()
    _set(records, 1, ("message", "content", 1, "text"), {"b": [1, 2.0]})
    _set(records, 4, ("message", "content", 0, "text"), 1e21)
    session = load_session(_write(tmp_path / "t.jsonl", records))
    assert session.get_entry("a1")["message"]["content"][1] == {"type": "text", "text": '{"b":[1,2]}'}
    assert session.get_entry("b1")["summary"] == "1e+21"


# --------------------------------------------------------------------------- byte order mark


def test_a_byte_order_mark_loses_no_claude_code_record(tmp_path: Path) -> None:
    plain = load_session(_write(tmp_path / "plain.jsonl", claude_records()))
    marked = load_session(_write(tmp_path / "bom.jsonl", claude_records(), bom=True))
    assert marked.entries == plain.entries  # the first prompt is kept, its child not made a root
    assert marked.get_entry("u1")["message"]["content"] == "read the file"
    assert [(w.line, w.reason) for w in marked.warnings] == [(1, "UTF-8 byte order mark removed")]


def test_a_byte_order_mark_loses_no_codex_session_meta(tmp_path: Path) -> None:
    plain = load_session(_write(tmp_path / "plain.jsonl", codex_records()))
    marked = load_session(_write(tmp_path / "bom.jsonl", codex_records(), bom=True))
    assert marked.id == "cx-1" and marked.header["cwd"] == "/w"
    assert marked.header == plain.header and marked.entries == plain.entries
    assert [(w.line, w.reason) for w in marked.warnings] == [(1, "UTF-8 byte order mark removed")]


# --------------------------------------------------------------------------- nesting


@pytest.mark.parametrize("depth", [900, 3000])  # within orjson's reading depth (1024), and past it
def test_blocks_nested_deeply_are_kept_as_json_text(tmp_path: Path, depth: int) -> None:
    records = claude_records()
    records[1]["message"]["content"].append(_deep(depth))
    session = _checked_import(tmp_path, _write(tmp_path / "cc.jsonl", records), "claude-code")
    text = session.get_entry("a1")["message"]["content"][-1]["text"]
    assert text == '{"type":"deep","x":' + "[" * (depth - 1) + "1" + "]" * (depth - 1) + "}"

    records = codex_records()
    records[1]["payload"]["content"].append(_deep(depth))
    records[4]["payload"]["arguments"] = json.dumps({"a": 1}).replace("1", "[" * depth + "1" + "]" * depth)
    session = _checked_import(tmp_path, _write(tmp_path / "cx.jsonl", records), "codex")
    user = next(e for e in session.entries if e.get("message", {}).get("role") == "user")
    assert user["message"]["content"][-1]["text"].count("[") == depth - 1
    call = next(b for e in session.entries if e.get("message", {}).get("role") == "assistant"
                for b in e["message"]["content"] if b["type"] == "toolCall")
    arguments = call["arguments"]["a"]
    for _ in range(depth - 1):
        arguments = arguments[0]
    assert arguments == [1]


# --------------------------------------------------------------------------- duplicate ids, reused tool ids


class _CountingDict(dict):
    probes = 0

    def __contains__(self, key: object) -> bool:
        _CountingDict.probes += 1
        return super().__contains__(key)


def test_records_sharing_one_uuid_import_in_linear_work(tmp_path: Path, monkeypatch) -> None:
    n = 3000
    base = {"sessionId": "s", "type": "user", "uuid": "same", "parentUuid": None, "timestamp": TS}
    records = [{**base, "message": {"role": "user", "content": f"prompt {i}"}} for i in range(n)]
    path = _write(tmp_path / "dup.jsonl", records)
    start = claude_code._Importer.__init__

    def counting_init(self, *args: Any) -> None:
        start(self, *args)
        self.by_id = _CountingDict()

    monkeypatch.setattr(claude_code._Importer, "__init__", counting_init)
    _CountingDict.probes = 0
    session = load_session(path)
    ids = [e["id"] for e in session.entries]
    assert ids == ["same"] + [f"same#{i}" for i in range(1, n)]
    assert _CountingDict.probes < 4 * n, _CountingDict.probes  # from #1 each time: n²/2 = 4.5 million
    assert any(f"duplicate uuid: later record's entry id gets a #n suffix ({n - 1}×" in w.reason
               for w in session.warnings)


def test_a_tool_use_id_used_again_names_each_result_after_its_own_call(tmp_path: Path) -> None:
    records = claude_records()[:3]
    records[2]["message"]["content"] = records[2]["message"]["content"][:1]
    again = copy.deepcopy(records[1:3])
    again[0].update(uuid="a3", parentUuid="r1")
    again[0]["message"]["id"] = "m3"
    again[0]["message"]["content"][2].update(name="Write", input={"path": "a.py", "content": "x"})
    again[1].update(uuid="r3", parentUuid="a3")
    path = _write(tmp_path / "t.jsonl", records + again)
    session = load_session(path)
    names = [e["message"]["toolName"] for e in session.entries if e["message"]["role"] == "toolResult"]
    assert names == ["Read", "Write"]  # before: both "Write", the last call with the id
    assert any("tool_use id used again by a call of another tool" in w.reason and w.line == 4
               for w in session.warnings)


# --------------------------------------------------------------------------- continued transcripts


@pytest.mark.parametrize("skipped_first", [False, True])
def test_a_transcript_that_continues_another_is_marked_partial(tmp_path: Path, skipped_first: bool) -> None:
    """A transcript whose first record names a parent not in the file starts mid-conversation. When
    that first record is one the importer skips (a hook summary), its child became a root with no
    warning and no mark, so replays fitted the calibration on requests that carried context the file
    lacks; now the root is marked and warned of either way, and the replay names a partial recording."""
    from pimem.replays.tokens import partial_recording

    records = claude_records()
    records[0]["parentUuid"] = "gone"
    if skipped_first:
        hook = {**{k: records[0][k] for k in ("sessionId", "cwd", "version", "timestamp")}, "type": "system",
                "subtype": "stop_hook_summary", "uuid": "h1", "parentUuid": "gone"}
        records[0]["parentUuid"] = "h1"
        records.insert(0, hook)
    session = load_session(_write(tmp_path / "continued.jsonl", records))
    root = session.get_entry("u1")
    assert root["parentId"] is None and root["source"]["parentMissing"] is True
    assert any("parent record not in the file" in w.reason for w in session.warnings)
    assert partial_recording(session.get_branch("a1")) == "its first entry's parent is not in the file"
    whole = load_session(_write(tmp_path / "whole.jsonl", claude_records()))
    assert "parentMissing" not in whole.get_entry("u1")["source"]
    assert partial_recording(whole.get_branch("a1")) is None
