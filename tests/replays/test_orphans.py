"""The orphan-reference rate: later uses of summarized facts the replayed context does not hold."""

from __future__ import annotations

import math
import random


from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays.orphans import OPEN_LOOP_NOTE, fact_in_context, orphan_rate, orphan_references


def _session(summary: str, after: list[dict]):
    """user asks → assistant reads src/ledger/rounding.py and names ``applyBankersRounding`` →
    compaction (keeps the last user message) → ``after`` → the assistant uses both facts again."""
    from pimem.core.session_manager import Session

    s = Session.new("/p", timestamp="2026-01-01T00:00:00.000Z", rng=random.Random(1))
    t = [1767225600000]

    def add(message):
        t[0] += 1000
        message["timestamp"] = t[0]
        return s.append_message(message, timestamp=t[0])

    add({"role": "user", "content": "The totals are off by a cent. Look at the rounding."})
    add({"role": "assistant", "content": [
        {"type": "text", "text": "The culprit is `applyBankersRounding` in the ledger."},
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/ledger/rounding.py"}}],
        "stopReason": "toolUse"})
    add({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
         "content": [{"type": "text", "text": "def apply_rounding(x):\n    return round(x, 2)\n"}], "isError": False})
    kept = add({"role": "user", "content": "Go on and fix it."})
    s.append_compaction({"summary": summary, "firstKeptEntryId": kept["id"], "tokensBefore": 100},
                        timestamp=t[0] + 1)
    for message in after:
        add(message)
    add({"role": "assistant", "content": [
        {"type": "text", "text": "Now I change `applyBankersRounding`."},
        {"type": "toolCall", "id": "c2", "name": "edit", "arguments": {"path": "src/ledger/rounding.py",
                                                                       "oldText": "a", "newText": "b"}}],
        "stopReason": "toolUse"})
    return s


def test_facts_the_summary_dropped_are_orphans():
    table = orphan_references(_session("## Goal\nFix the cent error.", []))
    assert len(table) == 1
    row = table.iloc[0]
    assert row.references == 2 and row.orphans == 2 and row.orphan_rate == 1.0
    assert "path:src/ledger/rounding.py" in row.orphan_examples
    assert "identifier:applyBankersRounding" in row.orphan_examples


def test_facts_the_summary_kept_are_not():
    table = orphan_references(_session("## Goal\nFix `applyBankersRounding` in src/ledger/rounding.py.", []))
    row = table.iloc[0]
    assert (row.references, row.orphans, row.orphan_rate) == (2, 0, 0.0)


def test_a_fact_seen_again_after_the_compaction_is_not_an_orphan():
    """The agent greps again and the result names the file: that use had it in context."""
    again = [
        {"role": "assistant", "content": [{"type": "toolCall", "id": "g", "name": "grep",
                                           "arguments": {"pattern": "round"}}], "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": "g", "toolName": "grep",
         "content": [{"type": "text", "text": "src/ledger/rounding.py:1: def apply_rounding(x):"}], "isError": False},
    ]
    row = orphan_references(_session("## Goal\nFix the cent error.", again)).iloc[0]
    assert row.references == 2 and row.orphans == 1  # the identifier is still missing
    assert row.orphan_examples == "identifier:applyBankersRounding"


def test_no_reference_is_nan_not_zero():
    from pimem.core.session_manager import Session

    s = Session.new("/p", timestamp="2026-01-01T00:00:00.000Z", rng=random.Random(2))
    first = s.append_message({"role": "user", "content": "hello", "timestamp": 1}, timestamp=1)
    s.append_compaction({"summary": "## Goal\nsay hello", "firstKeptEntryId": first["id"], "tokensBefore": 1})
    table = orphan_references(s)
    assert table.references.tolist() == [0]
    assert math.isnan(table.orphan_rate.iloc[0]) and math.isnan(orphan_rate(table))


def test_fact_in_context_agrees_with_fact_present():
    """The shortcut (skip a message whose folded text lacks the file name / identifier) never
    changes the answer of pimem.drift.fact_present."""
    from pimem.text.facts import extract_facts, fact_present
    from pimem.core.session_manager import load_session
    from pimem.sessions.samples import sample_session_paths

    session = load_session(next(p for p in sample_session_paths() if p.name == "logslice-since-flag.jsonl"))
    messages = [e["message"] for e in session.get_branch() if e.get("type") == "message"][:80]
    facts = extract_facts(messages)[:150]
    assert len(facts) > 50
    from pimem.replays.orphans import _context_text

    found = 0
    for fact in facts:
        for message in messages[::5]:
            expected = fact_present(fact, _context_text(message))
            assert fact_in_context(fact, [message]) == expected
            found += expected
    assert found > 20


def test_the_recordings_own_compactions_are_a_closed_loop(before_compaction):
    """The recorded agent acted on its recorded context: none of its many later uses of
    summarized facts is missing from it (the measure finds no orphan where there is none)."""
    table = orphan_references(before_compaction)
    assert len(table) == 2
    assert (table.references >= 20).all()
    assert (table.orphans == 0).all()


def test_a_replay_reports_its_orphan_rate(before_compaction):
    """At a 50k window the replayed summaries drop facts the recorded agent went on to use."""
    from pimem.replays.engine import replay

    result = replay(before_compaction, CompactionSettings(reserve_tokens=4096, keep_recent_tokens=8000),
                    context_window=50000)
    table = result.orphan_references()
    assert len(table) == len(result.compactions) > 5
    assert table.compaction_id.tolist() == [c["id"] for c in result.compactions]
    s = result.summary()
    assert s["references_checked"] == table.references.sum() > 50
    assert s["orphans"] == table.orphans.sum() and "orphan_references" not in s
    assert 0.05 < s["orphan_reference_rate"] < 0.5
    assert s["orphan_reference_rate"] == table.orphans.sum() / table.references.sum()
    assert "open-loop" in OPEN_LOOP_NOTE


def test_the_per_message_memo_keeps_the_recent_and_lets_the_rest_go():
    """Two generations of ``limit`` entries: what is read again stays, the rest is let go."""
    from pimem.replays.orphans import _Recent

    memo = _Recent(3)
    for k in range(10):
        memo.put(k, str(k))
        assert memo.get(0) == "0"  # read again after every put: it stays
        assert len(memo.new) <= 3 and len(memo.old) <= 3
    assert memo.get(1) is None and memo.get(2) is None  # never read again: let go
    assert [memo.get(k) for k in (8, 9)] == ["8", "9"]


def test_orphans_do_not_depend_on_what_the_memo_still_holds(monkeypatch):
    """With a memo of two messages per generation (let go all the time) the table is the same."""
    from pimem.core.session_manager import load_session
    from pimem.replays import orphans
    from pimem.replays.engine import replay
    from pimem.sessions.samples import sample_session_paths

    session = load_session(next(p for p in sample_session_paths() if p.name == "logslice-since-flag.jsonl"))
    result = replay(session, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), context_window=16000)
    assert len(result.compactions) >= 2
    wide = orphan_references(result)
    monkeypatch.setattr(orphans, "_PER_MESSAGE", orphans._PerMessage(limit=2))
    narrow = orphan_references(result)
    assert wide.references.sum() > 0
    assert narrow.equals(wide)
    assert len(orphans._PER_MESSAGE._shown.new) <= 2 and len(orphans._PER_MESSAGE._facts.old) <= 2
