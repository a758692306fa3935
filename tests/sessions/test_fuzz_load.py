"""Corrupted copies of real session files: a clear error or a loaded session, never a crash.

Each example damages a bundled sample the way files get damaged in practice (a crash while
appending, a bad sector, an editor that dropped or duplicated lines, stray bytes) and checks
that loading either raises ``SessionFormatError`` naming the file, or returns a session whose
views (tree, DataFrames, context projection) all work.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem import (
    build_session_context,
    collect_entries_for_branch_summary,
    load_session,
)
from pimem.core.session_manager import SessionFormatError

pytestmark = pytest.mark.fuzz

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "datasets" / "sessions").glob("*.jsonl"))


def _damage(data: bytes, op: str, a: float, b: float, junk: bytes) -> bytes:
    lines = data.split(b"\n")
    n = len(data)
    i, j = int(a * n), int(b * n)
    li, lj = int(a * len(lines)), int(b * len(lines))
    if op == "truncate":
        return data[:i]
    if op == "flip":
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:] if i < n else data
    if op == "splice":
        return data[:i] + junk + data[i:]
    if op == "drop_lines":
        return b"\n".join(lines[:min(li, lj)] + lines[max(li, lj):])
    if op == "duplicate_lines":
        return b"\n".join(lines[:lj] + lines[li:lj] + lines[lj:])
    if op == "swap_lines" and li < len(lines) and lj < len(lines):
        lines[li], lines[lj] = lines[lj], lines[li]
        return b"\n".join(lines)
    if op == "cut_middle":
        return data[:min(i, j)] + data[max(i, j):]
    if op == "reparent":  # point an entry's parent at a later entry: a cycle, or a dangling link
        ids = re.findall(rb'"id":"([0-9a-f]{8})"', data)
        parents = list(re.finditer(rb'"parentId":"([0-9a-f]{8})"', data))
        if ids and parents:
            m = parents[min(int(a * len(parents)), len(parents) - 1)]
            new = ids[min(int(b * len(ids)), len(ids) - 1)]
            return data[:m.start(1)] + new + data[m.end(1):]
    return data


@pytest.mark.skipif(not SAMPLES, reason="no bundled samples")
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    sample=st.integers(min_value=0, max_value=max(len(SAMPLES) - 1, 0)),
    op=st.sampled_from(["truncate", "flip", "splice", "drop_lines", "duplicate_lines", "swap_lines",
                        "cut_middle", "reparent"]),
    a=st.floats(min_value=0, max_value=1),
    b=st.floats(min_value=0, max_value=1),
    junk=st.binary(min_size=1, max_size=64),
)
def test_damaged_files_load_or_fail_clearly(tmp_path_factory, sample, op, a, b, junk) -> None:
    data = _damage(SAMPLES[sample].read_bytes(), op, a, b, junk)
    path = tmp_path_factory.mktemp("fuzz") / "damaged.jsonl"
    path.write_bytes(data)
    try:
        s = load_session(path)
    except SessionFormatError as exc:
        assert str(path) in str(exc)
        return
    assert path.read_bytes() == data  # the source is never written
    for w in s.warnings:
        assert w.reason
    branch = s.get_branch()
    assert len(branch) <= len(s.entries)
    s.render_tree()
    s.entries_df()
    s.tool_calls_df()
    build_session_context(s)
    if s.entries:  # /tree from the leaf to the first entry walks parent links too
        collect_entries_for_branch_summary(s, s.leaf_id, s.entries[0]["id"])


def test_parent_cycle_projects_without_hanging(tmp_path: Path) -> None:
    """Pi would loop forever on a parentId cycle; pimem stops at the first entry seen twice."""
    import json

    ts = "2025-01-01T00:00:00.000Z"

    def msg(eid: str, parent: str, text: str) -> dict:
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts,
                "message": {"role": "user", "content": text, "timestamp": 1}}

    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": ts, "cwd": "/"},
             msg("aaaaaaaa", "cccccccc", "one"), msg("bbbbbbbb", "aaaaaaaa", "two"),
             msg("cccccccc", "bbbbbbbb", "three")]
    path = tmp_path / "cycle.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    s = load_session(path)
    assert any("cycle" in w.reason for w in s.warnings)
    texts = [m["content"] for m in build_session_context(s).messages]
    assert texts == [m["content"] for m in (e["message"] for e in s.get_branch())]
    assert texts == ["one", "two", "three"]
    entries, common = collect_entries_for_branch_summary(s, "cccccccc", "bbbbbbbb")
    assert common == "bbbbbbbb" and [e["id"] for e in entries] == ["cccccccc"]
