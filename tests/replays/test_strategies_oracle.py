"""Differential check: every strategy's replayed file is a Pi 0.87.1 session that the real release
loads unchanged and projects exactly as pimem does (context edits of masking included), and where a
strategy prepares as Pi does (hybrid), Pi's own ``prepareCompaction`` picks the same cut."""

from __future__ import annotations

import warnings

import pytest

from pimem.base.js import js_stringify
from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.session_manager import build_session_projection, load_session

pytestmark = pytest.mark.oracle

SETTINGS = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=4000)


@pytest.mark.parametrize("strategy", ["masking:keep_turns=3", "hybrid:keep_turns=5", "no-split-turn", "from-scratch"])
def test_strategy_replays_open_in_pi(oracle, sample_paths, tmp_path, strategy):
    edits = compactions = 0
    for path in sample_paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = replay(load_session(path), SETTINGS, context_window=24000, strategy=strategy)
        out = result.write(tmp_path / f"{path.stem}.jsonl")
        loaded = oracle.load(out)
        assert loaded["openError"] is None and loaded["rewritten"] is False
        assert js_stringify(loaded["opened"]["entries"]) == js_stringify(result.session.entries)
        leaves = [c["parentId"] for c in result.compactions] + [e for e in result.context_edit_ids[-3:]] + \
            [result.session.leaf_id]
        for leaf in leaves:
            theirs = oracle.build_context(out, leaf)
            assert js_stringify(theirs["messages"]) == js_stringify(build_session_projection(result.session, leaf).messages)
        if strategy.startswith("hybrid") and result.compactions:
            prepared = oracle.run("prepare", path=str(out), leaves=[c["parentId"] for c in result.compactions],
                                  settings=[{"enabled": True, "reserveTokens": SETTINGS.reserve_tokens,
                                             "keepRecentTokens": SETTINGS.keep_recent_tokens}])
            for compaction, res in zip(result.compactions, prepared):
                assert res["preparations"][0]["firstKeptEntryId"] == compaction["firstKeptEntryId"]
                assert res["preparations"][0]["tokensBefore"] == compaction["tokensBefore"]
        edits += len(result.context_edit_ids)
        compactions += len(result.compactions)
    assert edits + compactions > 0
