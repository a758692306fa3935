"""Session API: tree queries, appends, writing, rendering (no Node needed)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pimem.base.js import parse_iso_ms
from pimem.core.session_manager import Session, load_session


def msg_entry(eid: str, parent: str | None, role: str = "user", text: str = "x", ts: int = 1) -> dict:
    return {
        "type": "message", "id": eid, "parentId": parent, "timestamp": f"2025-01-01T00:00:{ts:02d}.000Z",
        "message": {"role": role, "content": text, "timestamp": ts},
    }


def small_tree() -> Session:
    #        r - a - b - c
    #                 \- d - e
    s = Session.new("/w", session_id="sid", timestamp="2025-01-01T00:00:00.000Z", rng=random.Random(1))
    for e in [msg_entry("r", None, ts=1), msg_entry("a", "r", "assistant", ts=2), msg_entry("b", "a", ts=3),
              msg_entry("c", "b", "assistant", ts=4), msg_entry("d", "b", "assistant", ts=5),
              msg_entry("e", "d", ts=6)]:
        s.append_entry(e)
    return s


def test_new_session_header() -> None:
    s = Session.new("/w", timestamp="2025-01-01T00:00:00.000Z", parent_session="/p.jsonl", rng=random.Random(2))
    assert list(s.header) == ["type", "version", "id", "timestamp", "cwd", "parentSession"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", s.header["id"])
    assert int(s.header["id"].replace("-", "")[:12], 16) == parse_iso_ms("2025-01-01T00:00:00.000Z")
    assert s.entries == [] and s.leaf_id is None and s.get_branch() == []


def test_tree_queries() -> None:
    s = small_tree()
    assert s.leaf_id == "e"
    assert [e["id"] for e in s.get_branch()] == ["r", "a", "b", "d", "e"]
    assert [e["id"] for e in s.get_branch("c")] == ["r", "a", "b", "c"]
    assert [e["id"] for e in s.get_children("b")] == ["c", "d"]
    assert [e["id"] for e in s.get_children(None)] == ["r"]
    assert [e["id"] for e in s.leaves()] == ["c", "e"]
    assert s.common_ancestor("c", "e") == "b"
    assert s.common_ancestor("a", "e") == "a"
    assert s.common_ancestor("c", None) is None  # None: before the root (Pi's null target)
    s.branch("c")
    assert s.leaf_id == "c" and s.get_branch()[-1]["id"] == "c"
    with pytest.raises(KeyError):
        s.branch("nope")
    with pytest.raises(KeyError):
        s.leaf_id = "nope"
    s.reset_leaf()
    assert s.leaf_id is None and s.get_branch() == []


def test_append_message_chains_and_ids_are_reproducible() -> None:
    def build() -> Session:
        s = Session.new("/w", session_id="sid", timestamp="2025-01-01T00:00:00.000Z", rng=random.Random(9))
        s.append_message({"role": "user", "content": "a"}, timestamp="2025-01-01T00:00:01.000Z")
        s.append_message({"role": "assistant", "content": []}, timestamp=1735689602000)
        return s

    s1, s2 = build(), build()
    assert s1.to_jsonl() == s2.to_jsonl()
    first, second = s1.entries
    assert re.fullmatch(r"[0-9a-f]{8}", first["id"]) and first["id"] != second["id"]
    assert first["parentId"] is None and second["parentId"] == first["id"]
    assert list(first) == ["type", "id", "parentId", "timestamp", "message"]
    assert second["timestamp"] == "2025-01-01T00:00:02.000Z"
    with pytest.raises(ValueError):
        s1.append_entry(dict(first))  # duplicate id


def test_new_id_avoids_taken_ids() -> None:
    s = small_tree()
    rng_state = s.rng.getstate()
    first = "%08x" % s.rng.getrandbits(32)
    s.rng.setstate(rng_state)
    s.append_entry(msg_entry(first, "e"))
    s.rng.setstate(rng_state)
    assert s.new_id() != first


@dataclass
class FakeCompactionResult:
    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    usage: dict | None = None
    details: dict | None = field(default_factory=lambda: {"readFiles": [], "modifiedFiles": ["m.py"]})


@dataclass
class FakeBranchResult:
    summary: str | None
    usage: dict | None = None
    read_files: list[str] | None = None
    modified_files: list[str] | None = None
    error: str | None = None
    aborted: bool = False


def test_append_compaction_by_attributes() -> None:
    s = small_tree()
    entry = s.append_compaction(FakeCompactionResult("S", "d", 42), timestamp="2025-01-01T00:01:00.000Z")
    assert list(entry) == ["type", "id", "parentId", "timestamp", "summary", "firstKeptEntryId",
                           "tokensBefore", "details", "fromHook"]
    assert entry["parentId"] == "e" and entry["fromHook"] is False and s.leaf_id == entry["id"]
    own = s.append_compaction(FakeCompactionResult("S2", None, 1, usage={"input": 1}, details=None),
                              from_hook=True)
    assert own["firstKeptEntryId"] == own["id"]  # Pi: firstKeptEntryId ?? id
    assert list(own) == ["type", "id", "parentId", "timestamp", "summary", "firstKeptEntryId",
                         "tokensBefore", "usage", "fromHook"]


def test_append_compaction_keeps_system_message() -> None:
    s = Session.new("/w", session_id="sid", timestamp="2025-01-01T00:00:00.000Z", rng=random.Random(3))
    s.append_message({"role": "system", "content": "Be brief.", "timestamp": 5}, timestamp="2025-01-01T00:00:01.000Z")
    s.append_message({"role": "user", "content": "hi", "timestamp": 6}, timestamp="2025-01-01T00:00:02.000Z")
    entry = s.append_compaction({"summary": "S", "firstKeptEntryId": None, "tokensBefore": 2},
                                timestamp="2025-01-01T00:00:03.000Z")
    assert entry["systemMessage"]["content"] == "Be brief."
    assert entry["systemMessage"]["timestamp"] == parse_iso_ms("2025-01-01T00:00:03.000Z")
    assert list(entry)[-1] == "systemMessage"


def test_branch_with_summary() -> None:
    s = small_tree()
    entry = s.branch_with_summary("c", FakeBranchResult("went back", read_files=["r.py"]),
                                  timestamp="2025-01-01T00:02:00.000Z")
    assert entry["fromId"] == "e" and entry["parentId"] == "c" and s.leaf_id == entry["id"]
    assert entry["details"] == {"readFiles": ["r.py"], "modifiedFiles": []}
    assert list(entry) == ["type", "id", "parentId", "timestamp", "fromId", "summary", "details", "fromHook"]
    s.reset_leaf()
    root_summary = s.branch_with_summary(None, {"summary": "top"})
    assert root_summary["fromId"] == "root" and root_summary["parentId"] is None
    assert "details" not in root_summary and "usage" not in root_summary
    with pytest.raises(KeyError):
        s.branch_with_summary("missing", {"summary": "x"})


def test_labels_and_name() -> None:
    s = small_tree()
    for i, (target, label) in enumerate([("a", "one"), ("b", "two"), ("a", ""), ("b", "three")]):
        s.append_entry({"type": "label", "id": f"l{i}", "parentId": s.leaf_id,
                        "timestamp": "2025-01-01T00:00:09.000Z", "targetId": target, "label": label})
    assert s.get_label("a") is None and s.get_label("b") == "three"
    assert s.name is None
    s.append_entry({"type": "session_info", "id": "n1", "parentId": s.leaf_id, "timestamp": "t", "name": " Hi \n"})
    assert s.name == "Hi"
    s.append_entry({"type": "session_info", "id": "n2", "parentId": s.leaf_id, "timestamp": "t", "name": "  "})
    assert s.name is None


def test_write_real_v3_byte_identical(real_v3_paths: list[Path], tmp_path: Path) -> None:
    for path in real_v3_paths:
        session = load_session(path)
        out = session.write(tmp_path / path.name)
        assert out.read_bytes() == path.read_bytes()


def test_write_is_atomic_and_refuses_source(tmp_path: Path) -> None:
    s = small_tree()
    target = tmp_path / "out.jsonl"
    s.write(target)
    loaded = load_session(target)
    assert loaded.to_jsonl() == s.to_jsonl() and loaded.warnings == []
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left behind
    with pytest.raises(FileExistsError):
        loaded.write(target)
    loaded.append_message({"role": "user", "content": "more"})
    loaded.write(target, overwrite_source=True)
    assert len(load_session(target).entries) == len(s.entries) + 1
    with pytest.raises(TypeError):
        s.write()  # type: ignore[call-arg]


def test_repr_and_len() -> None:
    s = small_tree()
    assert len(s) == 6 and "entries=6" in repr(s) and "leaf='e'" in repr(s)


def test_context_edit_target_must_be_on_the_active_branch() -> None:
    s = small_tree()  # the leaf is e: r - a - b - d - e
    from pimem.errors import InvalidEntryError

    for target in ("r", "a", "b", "d", "e"):
        assert s.append_context_edit(target, None)["targetId"] == target
    s.branch("c")
    with pytest.raises(InvalidEntryError, match="Entry d is not on the active branch"):
        s.append_context_edit("d", None)
    assert s.append_context_edit("a", {"content": "short"})["replacement"] == {
        "content": [{"type": "text", "text": "short"}]}


def test_context_edit_on_a_parent_cycle_stops_and_records_it() -> None:
    # a and b are each other's parent; c (the leaf) hangs below b; z is a root elsewhere
    s = Session({"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
                [msg_entry("z", None), msg_entry("a", "b"), msg_entry("b", "a"), msg_entry("c", "b")])
    from pimem.errors import InvalidEntryError

    assert s.append_context_edit("a", None)["targetId"] == "a"
    with pytest.raises(InvalidEntryError, match="Entry z is not on the active branch"):
        s.branch("c") or s.append_context_edit("z", None)
    assert any("cycle" in w.reason for w in s.warnings)
