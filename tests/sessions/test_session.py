"""The session of :mod:`pimem.sessions.session`: its text tree, HTML view and DataFrame views, and
:func:`as_session`."""

from __future__ import annotations

import random
from typing import Any

import pytest

import pimem
from pimem.core import session_manager as core
from pimem.sessions.samples import sample_session_paths
from pimem.sessions.session import Session
from pimem.sessions.load import as_session, load_session, session_or_entries


def test_render_tree_marks_and_collapses() -> None:
    s = Session.new("/w", session_id="sid", timestamp="2025-01-01T00:00:00.000Z", rng=random.Random(4))
    for i in range(30):
        s.append_message({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"},
                         timestamp=f"2025-01-01T00:00:{i:02d}.000Z")
    fork = s.entries[10]["id"]
    s.append_compaction({"summary": "Summary <b>&", "firstKeptEntryId": s.entries[25]["id"], "tokensBefore": 9})
    s.branch_with_summary(fork, {"summary": "side trip"})
    s.append_entry({"type": "label", "id": "lab00001", "parentId": s.leaf_id, "timestamp": "t",
                    "targetId": fork, "label": "fork <here>"})
    text = s.render_tree()
    lines = text.splitlines()
    assert len(lines) < 20  # the 30-entry linear runs are collapsed
    assert any("more entries" in line for line in lines)
    assert any("[C]" in line and "Summary <b>&" in line for line in lines)
    assert any("[B]" in line and line.lstrip().startswith(("|-*", "`-*")) for line in lines)
    assert any(f"{fork}" in line and "{fork <here>}" in line for line in lines)
    assert lines[-1].rstrip().endswith("<- leaf")
    html_text = s._repr_html_()
    assert "Summary &lt;b&gt;&amp;" in html_text and "<b>&" not in html_text
    assert "fork &lt;here&gt;" in html_text


def test_frames_hooks_delegate(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    calls: list[tuple[str, Any, tuple, dict]] = []
    fake = types.ModuleType("pimem.sessions.frames")
    for name in ("entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df"):
        setattr(fake, name, lambda session, *args, _n=name, **kw: calls.append((_n, session, args, kw)) or _n)
    monkeypatch.setitem(sys.modules, "pimem.sessions.frames", fake)
    import pimem.sessions

    monkeypatch.setattr(pimem.sessions, "frames", fake, raising=False)
    s = Session.new("/w", session_id="sid", timestamp="2025-01-01T00:00:00.000Z", rng=random.Random(1))
    s.append_message({"role": "user", "content": "hi"}, timestamp="2025-01-01T00:00:01.000Z")
    assert [s.entries_df(), s.messages_df(), s.tool_calls_df(), s.usage_df(), s.compactions_df()] == [
        "entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df"]
    assert all(session is s for _, session, _, _ in calls)
    assert s.entries_df(["id"], strict=False) == "entries_df" and calls[-1][2:] == ((["id"],), {"strict": False})


def test_the_facade_loads_the_session_with_views() -> None:
    path = sample_session_paths()[0]
    s = pimem.load_session(path)
    assert type(s) is Session and pimem.Session is Session and isinstance(s, core.Session)
    assert len(s.entries_df()) == len(s.entries) and s.render_tree()
    assert type(s.copy()) is Session
    assert core.load_session(path).to_jsonl() == s.to_jsonl()


def test_as_session_takes_a_session_a_result_or_a_path(tmp_path: Any) -> None:
    path = sample_session_paths()[0]
    s = load_session(path)
    assert as_session(s) is s

    class Result:
        session = s

    assert as_session(Result()) is s
    loaded = as_session(path)
    assert isinstance(loaded, Session) and loaded.to_jsonl() == s.to_jsonl()
    assert as_session(str(path)).to_jsonl() == s.to_jsonl()
    with pytest.raises(TypeError, match="got int"):
        as_session(3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        as_session(tmp_path / "missing.jsonl")
    entries = list(s.entries)
    assert session_or_entries(entries) is entries and session_or_entries(s) is s
