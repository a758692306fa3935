"""Hooks around compaction and /tree navigation, with Pi's event semantics."""

from __future__ import annotations

import random

import pytest

from pimem.core.agent_session import (
    CANCEL,
    Hooks,
    TreeHookResult,
    run_compaction,
    run_tree_navigation,
)
from pimem.core.compaction.compaction import (
    CompactionResult,
    CompactionSettings,
    ModelInfo,
)
from pimem.core.session_manager import Session
from tests.support.summarizers import FixedSummarizer

MODEL = ModelInfo(10000, 1000, False, "p", "m")
SETTINGS = CompactionSettings(keep_recent_tokens=150)


def session() -> Session:
    s = Session.new("/tmp/p")
    for i in range(4):
        s.append_message({"role": "user", "content": "u" * 400, "timestamp": i})
        s.append_message({"role": "assistant", "content": [{"type": "text", "text": "a" * 400}],
                          "stopReason": "stop", "timestamp": i})
    return s


def test_compaction_appends_entry_and_hook_sees_preparation():
    s, seen = session(), []
    out = run_compaction(s, SETTINGS, FixedSummarizer(), model=MODEL, reason="threshold",
                         hooks=Hooks(before_compact=[seen.append]))
    assert out.ok and out.entry["type"] == "compaction" and out.entry["fromHook"] is False
    assert s.leaf_id == out.entry["id"] and out.entry["summary"] == "SUMMARY"
    ev = seen[0]
    assert ev.reason == "threshold" and ev.preparation.first_kept_entry_id == out.entry["firstKeptEntryId"]
    assert ev.branch_entries[-1]["id"] == out.entry["parentId"]


def test_hook_supplied_result_is_marked_from_hook_and_skips_summarizer():
    s = session()
    summarizer = FixedSummarizer()
    supplied = lambda ev: CompactionResult("MINE", ev.preparation.first_kept_entry_id, 1, None, {"readFiles": ["/x"]})
    out = run_compaction(s, SETTINGS, summarizer, model=MODEL, reason="manual", hooks=Hooks(before_compact=[supplied]))
    assert out.entry["fromHook"] is True and out.entry["summary"] == "MINE" and summarizer.requests == []
    assert out.from_extension


def test_cancel_and_failures_fire_compact_failed():
    failed = []
    hooks = Hooks(before_compact=[lambda ev: None, lambda ev: CANCEL, lambda ev: pytest.fail("not reached")],
                  compact_failed=[failed.append])
    out = run_compaction(session(), SETTINGS, FixedSummarizer(), model=MODEL, reason="threshold", hooks=hooks)
    assert out.status == "cancelled" and failed[-1].aborted and failed[-1].error_message is None
    out = run_compaction(session(), SETTINGS, FixedSummarizer(stop_reason="error", error_message="529"), model=MODEL,
                         reason="overflow", will_retry=True, hooks=Hooks(compact_failed=[failed.append]))
    assert out.status == "failed"
    assert failed[-1].error_message == "Context overflow recovery failed: Summarization failed: 529"
    assert failed[-1].will_retry is False
    out = run_compaction(session(), SETTINGS, FixedSummarizer(stop_reason="length"), model=MODEL, reason="threshold",
                         hooks=Hooks(compact_failed=[failed.append]))
    assert out.error_message.startswith("Auto-compaction failed: Summarization failed: generation hit")
    tiny = Session.new("/tmp/p")
    n = len(failed)
    assert run_compaction(tiny, SETTINGS, FixedSummarizer(), model=MODEL, reason="threshold",
                          hooks=Hooks(compact_failed=[failed.append])).status == "skipped"
    assert len(failed) == n  # automatic: nothing to compact fires nothing
    out = run_compaction(tiny, SETTINGS, FixedSummarizer(), model=MODEL, reason="manual",
                         hooks=Hooks(compact_failed=[failed.append]))
    assert out.error_message == "Compaction failed: Nothing to compact (session too small)" and len(failed) == n + 1


def test_hook_exceptions_are_recorded_not_raised():
    def broken(ev):
        raise RuntimeError("bug")

    hooks = Hooks(before_compact=[broken])
    with pytest.warns(UserWarning, match="bug"):
        out = run_compaction(session(), SETTINGS, FixedSummarizer(), model=MODEL, reason="threshold", hooks=hooks)
    assert out.ok and hooks.errors[0][0] == "before_compact"


def test_tree_navigation_with_summary_and_hooks():
    s = session()
    first_user = s.entries[0]["id"]
    target = s.entries[1]["id"]
    seen = []
    out = run_tree_navigation(s, target, FixedSummarizer(), model=MODEL, summarize=True,
                              hooks=Hooks(before_tree=[seen.append]))
    assert seen[0].user_wants_summary and seen[0].common_ancestor_id == target and len(seen[0].entries_to_summarize) == 6
    entry = out.summary_entry
    assert entry["type"] == "branch_summary" and entry["parentId"] == target and entry["fromHook"] is False
    assert s.leaf_id == entry["id"]
    # a hook-supplied summary, navigating to a user message: leaf = its parent, editor text returned
    s2 = session()
    out = run_tree_navigation(s2, s2.entries[2]["id"], FixedSummarizer(), model=MODEL, summarize=True,
                              hooks=Hooks(before_tree=[lambda ev: TreeHookResult(summary="HOOKED", label="here")]))
    assert out.summary_entry["summary"] == "HOOKED" and out.summary_entry["fromHook"] is True
    assert out.editor_text == "u" * 400 and out.summary_entry["parentId"] == s2.entries[1]["id"]
    assert s2.get_label(out.summary_entry["id"]) == "here"
    # cancel
    s3 = session()
    leaf, first_user = s3.leaf_id, s3.entries[0]["id"]
    assert run_tree_navigation(s3, first_user, hooks=Hooks(before_tree=[lambda ev: CANCEL])).cancelled
    assert s3.leaf_id == leaf
    # no summary, to the root user message: the leaf is reset
    run_tree_navigation(s3, first_user)
    assert s3.leaf_id is None


def test_compaction_with_known_branch_preparation_and_system_message_writes_the_same_entry():
    from pimem.core.incremental.tracker import ContextTracker

    def with_system() -> Session:
        s = Session.new("/tmp/p", session_id="s", timestamp="2026-01-01T00:00:00.000Z", rng=random.Random(7))
        for i in range(4):
            s.append_message({"role": "user", "content": "u" * 400, "timestamp": i})
            s.append_message({"role": "assistant", "content": [{"type": "text", "text": "a" * 400}],
                              "stopReason": "stop", "timestamp": i})
        s.append_message({"role": "system", "content": "be brief", "timestamp": 9})
        s.append_message({"role": "user", "content": "u" * 400, "timestamp": 10})
        return s

    computed, known = with_system(), with_system()
    plain = run_compaction(computed, SETTINGS, FixedSummarizer(), model=MODEL, reason="threshold", timestamp=100)
    tracker = ContextTracker(known.get_branch())
    given = run_compaction(known, SETTINGS, FixedSummarizer(), model=MODEL, reason="threshold", timestamp=100,
                           preparation=tracker.prepare(SETTINGS), path_entries=tracker.path,
                           system_message=tracker.current_system_message())
    assert plain.entry["systemMessage"]["content"] == "be brief"
    assert given.entry == plain.entry  # both sessions' ids come from equally seeded generators
    assert given.preparation == plain.preparation
