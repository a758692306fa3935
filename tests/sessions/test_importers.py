"""Importing Claude Code transcripts and Codex rollouts as Pi sessions: the mapping, record by
record, on small synthetic transcripts that exercise every case (always run)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from pimem.base.js import js_stringify
from pimem.core.session_manager import build_session_context, build_session_projection
from pimem.core.session_manager import load_session as load_pi_session
from pimem.errors import SessionFormatError
from pimem.sessions.load import detect_format, load_session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
CLAUDE = FIXTURES / "claude-code-demo.jsonl"
CODEX = FIXTURES / "codex-demo.jsonl"


@pytest.fixture(scope="module")
def claude():
    return load_session(CLAUDE)


@pytest.fixture(scope="module")
def codex():
    return load_session(CODEX)


def _entry(session, eid):
    entry = session.get_entry(eid)
    assert entry is not None, f"no entry {eid}"
    return entry


# --------------------------------------------------------------------------- Claude Code


def test_formats_are_recognised_from_content(tmp_path: Path) -> None:
    assert detect_format(CLAUDE) == "claude-code"
    assert detect_format(CODEX) == "codex"
    pi = tmp_path / "renamed.txt"
    pi.write_text('{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}\n')
    assert detect_format(pi) == "pi"
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(SessionFormatError, match="other.jsonl:1"):
        load_session(other)
    with pytest.raises(ValueError, match="format"):
        load_session(CLAUDE, format="cursor")  # type: ignore[arg-type]


def test_a_format_given_by_hand_must_match_the_file() -> None:
    with pytest.raises(SessionFormatError, match="not a Codex rollout"):
        load_session(CLAUDE, format="codex")
    with pytest.raises(SessionFormatError, match="not a Claude Code transcript"):
        load_session(CODEX, format="claude-code")


def test_every_record_is_imported_or_named_in_a_warning(claude) -> None:
    report = claude.import_report
    assert report.records_in == {
        "summary": 1, "file-history-snapshot": 1, "user": 9, "assistant": 8, "progress": 1,
        "system:turn_duration": 1, "system:compact_boundary": 1, "queue-operation": 1,
    }
    assert report.n_records == report.n_imported + report.n_skipped == 23
    assert report.skipped == {
        "file-history-snapshot": [2], "progress": [7], "system:turn_duration": [11], "sidechain": [18],
        "queue-operation": [21],
    }
    text = "\n".join(str(w) for w in claude.warnings)
    for kind, line in (("file-history-snapshot", 2), ("progress", 7), ("system:turn_duration", 11),
                       ("sidechain", 18), ("queue-operation", 21)):
        assert f"claude-code-demo.jsonl:{line}: 1 {kind} record(s) not imported" in text
    assert claude.source_format == "claude-code"


def test_messy_lines_two_objects_and_a_truncated_tail(claude) -> None:
    reasons = [(w.line, w.reason) for w in claude.warnings]
    assert any(line == 21 and "2 JSON objects on one line" in r for line, r in reasons)
    assert any(line == 23 and "truncated last line" in r for line, r in reasons)
    # both objects of line 21 were read: the assistant's answer and the queued input (skipped)
    assert _entry(claude, "a-0008")["source"]["line"] == 21
    assert claude.import_report.skipped["queue-operation"] == [21]


def test_header_and_source_of_every_entry(claude) -> None:
    assert claude.header["type"] == "session" and claude.header["version"] == 3
    assert claude.id == "11111111-2222-4333-8444-555555555555"
    assert claude.header["cwd"] == "/work/demo"
    for entry in claude.entries:
        assert entry["source"]["format"] == "claude-code"
        assert isinstance(entry["timestamp"], str)


def test_one_response_split_over_records_is_one_assistant_message(claude) -> None:
    entry = _entry(claude, "a-0001")
    assert entry["source"]["uuids"] == ["a-0001", "a-0002", "a-0003"]
    assert entry["source"]["lines"] == [4, 5, 6]
    msg = entry["message"]
    assert [b["type"] for b in msg["content"]] == ["thinking", "text", "toolCall"]
    assert msg["content"][0] == {"type": "thinking", "thinking": "Look at the test first.", "thinkingSignature": "sig-abc"}
    assert msg["content"][2] == {"type": "toolCall", "id": "toolu_01", "name": "Read",
                                 "arguments": {"file_path": "/work/demo/tests/test_parser.py"}}
    assert msg["stopReason"] == "toolUse"
    assert msg["model"] == "claude-opus-4-5-20251101" and msg["provider"] == "anthropic"
    assert msg["api"] == "anthropic-messages"
    # the usage is the last record's (the response's final count), with the cache split kept
    assert msg["usage"]["output"] == 120
    assert msg["usage"]["cacheRead"] == 1000 and msg["usage"]["cacheWrite"] == 200 and msg["usage"]["input"] == 3
    assert msg["usage"]["totalTokens"] == 3 + 120 + 1000 + 200
    assert msg["timestamp"] == 1767607202000


def test_tool_results_with_error_flags_and_names(claude) -> None:
    first, second = _entry(claude, "u-0003"), _entry(claude, "u-0003:1")
    assert first["message"]["role"] == second["message"]["role"] == "toolResult"
    assert (first["message"]["toolCallId"], first["message"]["toolName"], first["message"]["isError"]) == (
        "toolu_02", "Bash", True)
    assert (second["message"]["toolCallId"], second["message"]["isError"]) == ("toolu_03", False)
    assert second["message"]["content"] == [{"type": "text", "text": "REDACTED"}]  # redacted strings kept as is
    assert second["parentId"] == "u-0003"
    # a tool result and the user's interruption in one record: the result, then the user's text
    result, text = _entry(claude, "u-0007"), _entry(claude, "u-0007:1")
    assert result["message"]["role"] == "toolResult" and text["message"]["role"] == "user"
    assert text["message"]["content"] == [{"type": "text", "text": "[Request interrupted by user]"}]
    assert _entry(claude, "a-0008")["parentId"] == "u-0007:1"


def test_images_and_parallel_tool_calls(claude) -> None:
    content = _entry(claude, "u-0004")["message"]["content"]
    assert content[1] == {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    calls = _entry(claude, "a-0004")["message"]["content"]
    assert [c["id"] for c in calls] == ["toolu_02", "toolu_03"]
    assert calls[0]["arguments"] == {"command": "pytest -q tests/test_parser.py", "description": "REDACTED"}


def test_the_parent_tree_with_its_branches(claude) -> None:
    # the skipped progress record is bridged: the tool result hangs off the response that called it
    assert _entry(claude, "u-0002")["parentId"] == "a-0001"
    # the skipped turn_duration record is bridged too
    assert _entry(claude, "a-0006")["parentId"] == "u-0003:1"
    # an edited first prompt is a second root, with its own leaf
    assert _entry(claude, "u-0004")["parentId"] is None
    leaves = {e["id"] for e in claude.leaves()}
    assert leaves == {"a-0005", "title:1"}
    rewind = build_session_context(claude, "a-0005").messages
    assert [m["role"] for m in rewind] == ["user", "assistant"]


def test_compaction_is_what_claude_code_resumed_with(claude) -> None:
    compactions = [e for e in claude.entries if e["type"] == "compaction"]
    assert len(compactions) == 1
    c = compactions[0]
    assert c["id"] == "c-0001" and c["parentId"] == "a-0006"  # the boundary's logicalParentUuid
    assert c["summary"].startswith("This session is being continued from a previous conversation")
    assert "seed the generator" in c["summary"]
    assert c["tokensBefore"] == 52000 and c["details"] == {"trigger": "manual"}
    assert c["firstKeptEntryId"] == "c-0001"
    assert c["source"]["uuid"] == "c-0001" and c["source"]["summaryUuid"] == "u-0005"
    assert claude.get_entry("u-0005") is None  # the summary message is the compaction, not a user message
    context = build_session_context(claude).messages
    assert context[0]["role"] == "compactionSummary" and context[0]["summary"] == c["summary"]
    assert context[0]["tokensBefore"] == 52000
    after = build_session_projection(claude).entries
    lines = [pe.source_entry["source"]["line"] for pe in after[1:] if pe.messages]
    assert lines and min(lines) > c["source"]["line"]  # nothing from before the boundary
    assert [m["role"] for m in context] == ["compactionSummary", "user", "assistant", "toolResult", "user",
                                            "assistant", "user"]


def test_the_compactions_frame_counts_everything_as_summarized(claude) -> None:
    row = claude.compactions_df().iloc[0]
    assert row["id"] == "c-0001" and row["tokens_before"] == 52000
    assert row["entries_summarized"] == 7 and row["entries_kept"] == 0  # the whole path before it
    assert not row["first_kept_found"]  # no entry before it is kept


def test_title_lines_name_the_session_and_are_never_compactions(claude) -> None:
    assert claude.name == "Fix the flaky parser test"
    info = _entry(claude, "title:1")
    assert info["type"] == "session_info" and info["source"]["leafUuid"] == "u-0009"
    # Pi opens at the transcript's last record: the title hangs after it
    assert claude.leaf_id == "title:1" and info["parentId"] == "u-0009"


def test_gzip_files_import_the_same(tmp_path: Path, claude) -> None:
    gz = tmp_path / "demo.jsonl.gz"
    with open(CLAUDE, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    session = load_session(gz)
    assert session.source_format == "claude-code"
    assert [js_stringify(e) for e in session.entries] == [js_stringify(e) for e in claude.entries]


def test_written_import_loads_back_as_a_pi_session(tmp_path: Path, claude) -> None:
    target = claude.write(tmp_path / "out.jsonl")
    back = load_pi_session(target)
    assert not back.warnings, [str(w) for w in back.warnings]
    assert [js_stringify(e) for e in back.entries] == [js_stringify(e) for e in claude.entries]
    assert back.leaf_id == claude.leaf_id and back.name == claude.name
    assert CLAUDE.read_bytes().count(b"\n") == 22  # the source is never written


def test_a_subagent_transcript_alone_imports_as_its_own_session(tmp_path: Path) -> None:
    import json

    lines = [
        {"parentUuid": None, "isSidechain": True, "sessionId": "s1", "type": "user", "uuid": "x1",
         "timestamp": "2026-01-01T00:00:00.000Z", "agentId": "a1",
         "message": {"role": "user", "content": "Find the random calls."}},
        {"parentUuid": "x1", "isSidechain": True, "sessionId": "s1", "type": "assistant", "uuid": "x2",
         "timestamp": "2026-01-01T00:00:01.000Z", "agentId": "a1",
         "message": {"id": "m1", "role": "assistant", "model": "claude-haiku-4-5", "content": [
             {"type": "text", "text": "One call, in tests/test_parser.py."}], "stop_reason": "end_turn",
             "usage": {"input_tokens": 5, "output_tokens": 7}}},
    ]
    path = tmp_path / "agent-a1.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    session = load_session(path)
    assert [e["id"] for e in session.entries] == ["x1", "x2"]
    assert session.import_report.skipped == {}
    assert all(e["source"]["isSidechain"] for e in session.entries)


def test_a_boundary_without_its_logical_parent_follows_the_previous_record(tmp_path: Path) -> None:
    text = CLAUDE.read_text().replace('"logicalParentUuid": "a-0006"', '"logicalParentUuid": "gone"')
    path = tmp_path / "cut.jsonl"
    path.write_text(text)
    session = load_session(path)
    assert _entry(session, "c-0001")["parentId"] == "a-0006"
    assert any("logicalParentUuid is not in the file" in w.reason for w in session.warnings)


def test_a_boundary_without_its_summary_is_warned(tmp_path: Path) -> None:
    lines = [line for line in CLAUDE.read_text().splitlines(keepends=True) if '"isCompactSummary": true' not in line]
    path = tmp_path / "nosummary.jsonl"
    path.write_text("".join(lines))
    session = load_session(path)
    assert _entry(session, "c-0001")["summary"] == ""
    assert any("without its isCompactSummary message" in w.reason for w in session.warnings)


# --------------------------------------------------------------------------- Codex


def test_codex_every_record_is_imported_or_named(codex) -> None:
    report = codex.import_report
    assert report.n_records == report.n_imported + report.n_skipped == 25
    assert report.skipped == {"response_item:ghost_snapshot": [25]}
    assert any("1 response_item:ghost_snapshot record(s) not imported" in w.reason for w in codex.warnings)
    assert codex.source_format == "codex"
    assert codex.id == "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000" and codex.header["cwd"] == "/work/demo"
    assert codex.header["source"]["session_meta"]["cli_version"] == "0.60.0"


def test_codex_one_response_is_one_assistant_message(codex) -> None:
    msg = _entry(codex, "cx6")["message"]
    assert [b["type"] for b in msg["content"]] == ["thinking", "text", "toolCall"]
    assert msg["content"][0]["thinking"] == "**Checking the build log**"
    assert msg["content"][2] == {"type": "toolCall", "id": "call_1", "name": "shell",
                                 "arguments": {"command": ["make", "build"]}}
    assert msg["model"] == "gpt-5.1-codex" and msg["provider"] == "openai" and msg["stopReason"] == "toolUse"
    assert msg["usage"]["input"] == 1000 and msg["usage"]["cacheRead"] == 4000 and msg["usage"]["output"] == 60
    assert _entry(codex, "cx6")["source"]["lines"] == [6, 8, 9]


def test_codex_tool_outputs_errors_images_and_developer_messages(codex) -> None:
    failed = _entry(codex, "cxb")["message"]
    assert failed["role"] == "toolResult" and failed["isError"] is True and failed["toolName"] == "shell"
    patch = _entry(codex, "cxc")["message"]["content"]
    assert patch[0]["name"] == "apply_patch" and patch[0]["arguments"]["input"].startswith("*** Begin Patch")
    assert patch[1]["arguments"] == {"input": "{not json"}
    assert any("not JSON" in w.reason for w in codex.warnings)
    image = _entry(codex, "cx4")["message"]["content"][1]
    assert image == {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    dev = _entry(codex, "cx3")
    assert dev["type"] == "custom_message" and dev["customType"] == "codex.developer"
    event = _entry(codex, "cx5")
    assert event["type"] == "custom" and event["customType"] == "codex.event.user_message"


def test_codex_local_compaction_keeps_the_summary_and_what_codex_kept(codex) -> None:
    c = _entry(codex, "cx11")
    assert c["type"] == "compaction" and c["summary"].endswith("a patch fixed the target.")
    assert c["firstKeptEntryId"] == "cx11" and c["tokensBefore"] == 6000
    kept = _entry(codex, "cx11.1")
    assert kept["parentId"] == "cx11" and kept["source"]["replacementHistory"] == 0
    # the summary's own user message in replacement_history is not repeated
    roles = [m["role"] for m in build_session_context(codex, "cx15").messages]
    assert roles == ["compactionSummary", "user", "user", "assistant"]


def test_codex_remote_compaction_has_no_summary_and_says_so(codex) -> None:
    c = _entry(codex, "cx17")
    assert c["summary"] == "" and c["details"]["remote"] is True
    assert c["details"]["encrypted"] == [{"id": "cmp_1", "encrypted_content": "REDACTED"}]
    assert any(w.line == 23 and "no summary text exists" in w.reason for w in codex.warnings)
    context = build_session_context(codex).messages
    assert [m["role"] for m in context] == ["compactionSummary", "user", "user"]
    assert context[1]["content"] == [{"type": "text", "text": "Run the tests too."}]


def test_what_a_tool_result_tells_of_its_file_goes_to_its_details(tmp_path: Path) -> None:
    import json

    def call(uuid: str, parent: str | None, call_id: str, name: str, args: dict) -> dict:
        return {"parentUuid": parent, "sessionId": "s1", "type": "assistant", "uuid": uuid,
                "timestamp": "2026-01-01T00:00:00.000Z", "message": {
                    "id": f"m-{uuid}", "role": "assistant", "model": "claude-opus-4-5", "stop_reason": "tool_use",
                    "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
                    "usage": {"input_tokens": 5, "output_tokens": 7}}}

    def result(uuid: str, parent: str, call_ids: list[str], tool_use_result: object) -> dict:
        return {"parentUuid": parent, "sessionId": "s1", "type": "user", "uuid": uuid,
                "timestamp": "2026-01-01T00:00:01.000Z", "toolUseResult": tool_use_result,
                "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": c, "content": "shown"} for c in call_ids]}}

    original = "a = 1\nb = 2\nb = 2\n"
    lines = [
        {"parentUuid": None, "sessionId": "s1", "type": "user", "uuid": "u0", "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": "Fix b."}},
        call("a1", "u0", "t1", "Read", {"file_path": "/p/x.py", "offset": 2, "limit": 1}),
        result("r1", "a1", ["t1"], {"type": "text", "file": {"filePath": "/p/x.py", "content": "b = 2",
                                                             "numLines": 1, "startLine": 2, "totalLines": 4}}),
        call("a2", "r1", "t2", "Edit", {"file_path": "/p/x.py", "old_string": "b = 2", "new_string": "b = 22"}),
        result("r2", "a2", ["t2"], {"filePath": "/p/x.py", "oldString": "b = 2", "newString": "b = 22",
                                    "originalFile": original, "replaceAll": True, "structuredPatch": []}),
        call("a3", "r2", "t3", "Write", {"file_path": "/p/y.py", "content": "y\n"}),
        result("r3", "a3", ["t3"], {"type": "create", "filePath": "/p/y.py", "content": "y\n"}),
        call("a4", "r3", "t4", "ExitPlanMode", {}),
        result("r4", "a4", ["t4"], {"plan": "# Plan\n1. fix b", "isAgent": False, "filePath": "/p/plan.md"}),
        call("a5", "r4", "t5", "Read", {"file_path": "/p/z.py"}),
        result("r5", "a5", ["t5"], {"type": "text", "file": {"numLines": "many", "startLine": 1, "totalLines": 9}}),
        call("a6", "r5", "t6", "Read", {"file_path": "/p/z.py"}),
        result("r6", "a6", ["t6", "t5"], {"type": "create", "content": "two results: whose?"}),
    ]
    path = tmp_path / "facts.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    session = load_session(path)
    details = {e["id"]: e["message"].get("details") for e in session.entries
               if e.get("type") == "message" and e["message"]["role"] == "toolResult"}
    assert details["r1"] == {"read": {"startLine": 2, "numLines": 1, "totalLines": 4}}
    assert details["r2"] == {"file": {"chars": len("a = 1\nb = 22\nb = 22\n"), "lines": 4}}  # every b replaced
    assert details["r3"] == {"file": {"chars": 2, "lines": 2}}
    assert details["r4"] == {"plan": {"chars": 15, "lines": 2}}
    assert details["r5"] is None  # a count that is not one: nothing told
    assert details["r6"] is None and details["r6:1"] is None  # a record of two results: nothing told


def _parallel_records(sibling_results: bool) -> list[dict]:
    """One response with two parallel calls, written as Claude Code writes them: a record per call,
    and the results either interleaved (call, result, call, result) or as siblings of the first call."""
    def record(uuid: str, parent: str | None, kind: str, **rest: object) -> dict:
        return {"parentUuid": parent, "sessionId": "s1", "type": kind, "uuid": uuid,
                "timestamp": "2026-01-01T00:00:00.000Z", **rest}

    def call(uuid: str, parent: str, call_id: str, response: str = "m1") -> dict:
        return record(uuid, parent, "assistant", message={
            "id": response, "role": "assistant", "model": "claude-opus-4-5", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": f"/{call_id}"}}],
            "usage": {"input_tokens": 100, "output_tokens": 7}})

    def result(uuid: str, parent: str, call_id: str) -> dict:
        return record(uuid, parent, "user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": f"text of {call_id}"}]})

    first = [record("u0", None, "user", message={"role": "user", "content": "Read both."})]
    if sibling_results:  # calls first, then each result a child of the message it answers
        rest = [call("a1", "u0", "t1"), call("a2", "a1", "t2"), result("r1", "a2", "t1"), result("r2", "a2", "t2"),
                call("a3", "r1", "t3", response="m2")]
    else:
        rest = [call("a1", "u0", "t1"), result("r1", "a1", "t1"), call("a2", "r1", "t2"), result("r2", "a2", "t2"),
                call("a3", "r2", "t3", response="m2")]
    return first + rest


@pytest.mark.parametrize("sibling_results", [False, True])
def test_a_response_with_parallel_calls_is_one_message_and_its_results_follow_it(
        tmp_path: Path, sibling_results: bool) -> None:
    """Claude Code writes one record per call of a response, its results between them or as siblings;
    Pi records one assistant message with every call, then every result. Along the path each result
    is sent, and the response is one request (its usage once)."""
    import json

    path = tmp_path / "parallel.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _parallel_records(sibling_results)))
    session = load_session(path)
    branch = session.get_branch(None)
    shape = [(e["message"]["role"], [b.get("id") for b in e["message"]["content"] if isinstance(b, dict)]
              if e["message"]["role"] == "assistant" else e["message"].get("toolCallId")) for e in branch]
    assert shape == [("user", None), ("assistant", ["t1", "t2"]), ("toolResult", "t1"), ("toolResult", "t2"),
                     ("assistant", ["t3"])]
    assert branch[1]["source"]["uuids"] == ["a1", "a2"]
    assert len(session.entries) == 5 and session.import_report.skipped == {}
