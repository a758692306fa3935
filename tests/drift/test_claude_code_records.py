"""Compaction records of an imported Claude Code transcript: the files it wrote, the user's own words."""

from __future__ import annotations

import json
from pathlib import Path

import pimem
from pimem.drift.needed import needed_later_facts
from pimem.drift.records import compaction_records
from pimem.text.facts import extract_facts

SID = "11111111-2222-4333-8444-555555555555"


def _line(kind: str, uuid: str, parent: str | None, **fields: object) -> dict:
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/work/demo", "sessionId": SID,
            "version": "2.1.5", "type": kind, "uuid": uuid, "timestamp": f"2026-01-05T10:00:{len(uuid):02d}.000Z",
            **fields}


def _assistant(uuid: str, parent: str, mid: str, content: list) -> dict:
    return _line("assistant", uuid, parent, message={"id": mid, "type": "message", "role": "assistant",
                                                       "model": "claude-opus-4-5", "content": content,
                                                       "stop_reason": "tool_use", "usage": {"input_tokens": 3,
                                                                                            "output_tokens": 9}})


def _transcript(tmp_path: Path, later: str = "Now test src/config.py; never read env vars there.") -> Path:
    lines = [
        _line("user", "u1", None, message={"role": "user", "content": "Write the config loader. Never read env vars."}),
        _line("user", "u2", "u1", isMeta=True, message={"role": "user", "content": (
            "Base directory for this skill: /home/u/.claude/skills/tdd\n\nYou must always write the test first.")}),
        _assistant("a1", "u2", "m1", [{"type": "tool_use", "id": "t1", "name": "Write",
                                       "input": {"file_path": "/work/demo/src/config.py", "content": "def load(): ..."}}]),
        _line("user", "u3", "a1", message={"role": "user", "content": [
            {"tool_use_id": "t1", "type": "tool_result", "content": "File created successfully"}]}),
        _assistant("a2", "u3", "m2", [{"type": "tool_use", "id": "t2", "name": "Read",
                                       "input": {"file_path": "/work/demo/README.md"}}]),
        _line("user", "u4", "a2", message={"role": "user", "content": [
            {"tool_use_id": "t2", "type": "tool_result", "content": "# demo"}]}),
        _line("system", "c1", None, subtype="compact_boundary", content="Conversation compacted", isMeta=False,
              logicalParentUuid="u4", compactMetadata={"trigger": "auto", "preTokens": 50000}),
        _line("user", "s1", "c1", isCompactSummary=True, isVisibleInTranscriptOnly=True,
              message={"role": "user", "content": "Summary:\n1. Wrote src/config.py; never read env vars."}),
        _line("user", "u5", "s1", message={"role": "user", "content": later}),
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_files_written_with_claude_codes_tools_are_modified_files(tmp_path: Path) -> None:
    session = pimem.load_session(_transcript(tmp_path))
    (record,) = compaction_records(session)
    assert record.modified_files == ["/work/demo/src/config.py"]
    assert record.read_files == ["/work/demo/README.md"]
    # so the written file is an artifact the session needed later, not just a name
    classes = {n.fact.value: n.cls for n in needed_later_facts(record)}
    assert classes.get("/work/demo/src/config.py") == "artifact"


def test_an_injected_turn_is_not_the_users(tmp_path: Path) -> None:
    (record,) = compaction_records(pimem.load_session(_transcript(tmp_path)))
    injected = [m for _, m in record.span if m.get("injected")]
    assert len(injected) == 1 and "skill" in str(injected[0]["content"])
    constraints = [f.value for f in extract_facts(record.span) if f.kind == "constraint"]
    assert constraints == ["write the config loader.", "never read env vars."]


def test_a_standing_preference_is_needed_while_the_session_goes_on(tmp_path: Path) -> None:
    (record,) = compaction_records(pimem.load_session(_transcript(tmp_path)))
    needed = {n.fact.value: n for n in needed_later_facts(record)}
    # "Never read env vars." is repeated later, "Write the config loader." is a one-off request done in the span
    assert needed["never read env vars."].how in ("mentioned", "standing")
    assert "write the config loader." not in needed
    (quiet,) = compaction_records(pimem.load_session(_transcript(tmp_path, later="Go on.")))
    standing = {n.fact.value: n.how for n in needed_later_facts(quiet)}
    assert standing == {"never read env vars.": "standing"}  # obeyed silently, it still holds
