"""Differential check: Pi 0.87.1, given the replayed session file, agrees with pimem.

For sample and real sessions under several settings, the replayed session is written and
loaded by the real release: it loads without complaint and unchanged, Pi projects the same
context at its leaf, and at every replayed compaction Pi's own ``prepareCompaction`` (on the
branch that ends where the compaction was made) chooses the same ``firstKeptEntryId`` and
``tokensBefore``; at the final leaf Pi prepares the same next compaction as pimem.
"""

from __future__ import annotations

import pytest

from pimem.base.js import js_stringify
from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings, prepare_compaction
from pimem.core.session_manager import build_session_projection

pytestmark = pytest.mark.oracle

CASES = [
    # (settings, context window, token source)
    (CompactionSettings(reserve_tokens=4000, keep_recent_tokens=6000), 60000, "estimate"),
    (CompactionSettings(reserve_tokens=16384, keep_recent_tokens=20000), 90000, "calibrated"),
    (CompactionSettings(reserve_tokens=8000, keep_recent_tokens=1), 40000, "chars"),
]
SAMPLE_OVERHEAD = 3300  # about what every request of the bundled samples carries (system prompt, tools)


def _settings_json(s):
    return {"enabled": True, "reserveTokens": s.reserve_tokens, "keepRecentTokens": s.keep_recent_tokens}


def _check(oracle, source_path, tmp_path, settings, window, token_source):
    from pimem.core.session_manager import load_session

    session = load_session(source_path)
    result = replay(session, settings, context_window=window, token_source=token_source)
    out = result.write(tmp_path / f"replayed-{source_path.stem}-{token_source}.jsonl")
    loaded = oracle.load(out)
    assert loaded["openError"] is None
    assert loaded["rewritten"] is False
    assert loaded["rawCount"] == len(out.read_text(encoding="utf-8").splitlines())
    opened = loaded["opened"]
    assert opened["leafId"] == result.session.leaf_id
    assert js_stringify(opened["entries"]) == js_stringify(result.session.entries)

    leaf = result.session.leaf_id
    ours = build_session_projection(result.session, leaf)
    theirs = oracle.build_context(out, leaf)
    assert js_stringify(theirs["messages"]) == js_stringify(ours.messages)

    leaves = [c["parentId"] for c in result.compactions] + [leaf]
    prepared = oracle.run("prepare", path=str(out), leaves=leaves, settings=[_settings_json(settings)])
    for compaction, res in zip(result.compactions, prepared):
        prep = res["preparations"][0]
        assert prep is not None
        assert prep["firstKeptEntryId"] == compaction["firstKeptEntryId"]
        assert prep["tokensBefore"] == compaction["tokensBefore"]
    final = prepared[-1]["preparations"][0]
    mine = prepare_compaction(result.session.get_branch(), settings)
    if mine is None:
        assert final is None
    else:
        assert final["firstKeptEntryId"] == mine.first_kept_entry_id
        assert final["tokensBefore"] == mine.tokens_before
        assert final["isSplitTurn"] == mine.is_split_turn
        assert final["counts"] == [len(mine.messages_to_summarize), len(mine.turn_prefix_messages)]
    return len(result.compactions)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_replayed_samples_agree_with_pi(oracle, sample_paths, tmp_path, case):
    settings, window, source = CASES[case]
    window = max(window // 4, 12000)
    if settings.keep_recent_tokens + SAMPLE_OVERHEAD >= window - settings.reserve_tokens:
        # degenerate for the small samples (each compaction keeps the threshold's worth, every turn
        # fails): a window with room for the kept tail above the overhead
        window = settings.reserve_tokens + settings.keep_recent_tokens + 2 * SAMPLE_OVERHEAD
    total = 0
    for path in sample_paths:
        total += _check(oracle, path, tmp_path, settings, window, source)
    assert total > 0  # the comparison covered real compactions


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(CASES)))
def test_replayed_real_sessions_agree_with_pi(oracle, real_v3_paths, tmp_path, case):
    settings, window, source = CASES[case]
    total = sum(_check(oracle, path, tmp_path, settings, window, source) for path in real_v3_paths)
    assert total > 0
