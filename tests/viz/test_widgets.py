"""The explorers driven headless: set control values, check that the outputs follow."""

from __future__ import annotations

import math
import re

import pytest

from pimem.replays.engine import replay
from pimem.core.compaction.compaction import (
    CompactionSettings,
    ModelInfo,
    build_history_prompt,
    build_turn_prefix_prompt,
    estimate_tokens,
    prepare_compaction,
)
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.core.session_manager import Session, build_session_context, load_session
from pimem.viz.widgets import (
    CompactionPlayground,
    ReplayBrowser,
    SessionExplorer,
    format_request,
    summary_requests,
)


def _kv(html_text: str, key: str) -> str:
    m = re.search(r"<b>" + re.escape(key) + r"</b></td><td>(.*?)</td>", html_text)
    assert m, f"{key!r} not in {html_text[:300]}"
    return m.group(1)


# --------------------------------------------------------------------------- summary requests


def test_summary_requests_are_the_pipeline_requests(auth):
    model = ModelInfo(context_window=24000, max_tokens=64000, reasoning=True, provider="anthropic",
                      id="claude-sonnet-4-5")
    prep = prepare_compaction(auth.get_branch(), CompactionSettings(reserve_tokens=4096, keep_recent_tokens=6000))
    assert prep.is_split_turn and prep.messages_to_summarize
    reqs = summary_requests(prep, model=model, thinking_level="high", session_id="fixed")
    assert [r.kind for r in reqs] == ["history", "turn_prefix"]
    assert reqs[0].prompt == build_history_prompt(prep.messages_to_summarize, None, prep.previous_summary)
    assert reqs[1].prompt == build_turn_prefix_prompt(prep.turn_prefix_messages)
    assert [r.max_tokens for r in reqs] == [math.floor(0.8 * 4096), math.floor(0.5 * 4096)]
    assert all(r.system_prompt == SUMMARIZATION_SYSTEM_PROMPT and r.reasoning == "high" for r in reqs)
    assert all(r.session_id == "fixed" and r.model == "claude-sonnet-4-5" for r in reqs)
    assert "<previous-summary>" in reqs[0].prompt  # the path already holds compactions
    text = format_request(reqs[0])
    assert text.startswith("kind: history\nmaxTokens: 3276\nreasoning: high")
    assert text.endswith(reqs[0].prompt)


def test_summary_requests_match_pi(oracle, samples_dir):
    """The requests are Pi's own, byte for byte (Pi's compact() run in Node)."""
    path = samples_dir / "auth-login-bug.jsonl"
    settings = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=6000)
    pi = oracle.compact_requests(path, None, settings, model={"contextWindow": 24000, "maxTokens": 64000,
                                                               "reasoning": True, "provider": "anthropic",
                                                               "id": "claude-sonnet-4-5"}, thinking_level="high")
    s = load_session(path)
    prep = prepare_compaction(s.get_branch(), settings)
    ours = summary_requests(prep, model=ModelInfo(24000, 64000, True, "anthropic", "claude-sonnet-4-5"),
                            thinking_level="high")
    assert [(r.kind, r.system_prompt, r.prompt, r.max_tokens, r.reasoning) for r in ours] == [
        (q["kind"], q["systemPrompt"], q["prompt"], q["maxTokens"], q["reasoning"]) for q in pi["requests"]]


# --------------------------------------------------------------------------- session explorer


def test_session_explorer_follows_the_leaf(ventas):
    ex = SessionExplorer(ventas)
    values = [v for _, v in ex.leaf.options]
    assert values[0] == ventas.leaf_id
    assert {leaf["id"] for leaf in ventas.leaves()} <= set(values)
    first_table, first_breakdown = ex.table.value, ex.breakdown.value
    tokens = sum(estimate_tokens(m) for m in build_session_context(ventas).messages)
    assert _kv(first_breakdown, "estimated tokens in context (chars/4)") == f"{tokens:,}"
    other = next(v for v in values if v != ventas.leaf_id)
    ex.leaf.value = other
    assert ex.table.value != first_table
    other_tokens = sum(estimate_tokens(m) for m in build_session_context(ventas, other).messages)
    assert _kv(ex.breakdown.value, "estimated tokens in context (chars/4)") == f"{other_tokens:,}"
    assert _kv(ex.breakdown.value, "leaf") == other
    rows = ex.table.value.count("<tr>") - 1
    ex.show_all.value = True
    assert ex.table.value.count("<tr>") - 1 > rows


def test_session_explorer_escapes_text():
    s = Session.new("/tmp/x", session_id="esc", timestamp="2026-01-01T00:00:00.000Z")
    s.append_message({"role": "user", "content": "<script>alert('x')</script> & more", "timestamp": 1},
                     timestamp="2026-01-01T00:00:01.000Z")
    ex = SessionExplorer(s)
    assert "<script>" not in ex.table.value
    assert "&lt;script&gt;" in ex.table.value


# --------------------------------------------------------------------------- compaction playground


def test_playground_sliders_change_the_cut_and_the_request(auth):
    play = CompactionPlayground(auth, context_window=32000, reserve_tokens=4096, keep_recent_tokens=4000)
    assert _kv(play.summary.value, "Pi would compact now") == "no"
    first_kept = _kv(play.summary.value, "first kept entry")
    request = play.request.value
    assert play.requests and request.startswith("##### request 1 of")
    assert play.requests[0].prompt in request

    play.keep.value = 9000
    assert _kv(play.summary.value, "first kept entry") != first_kept
    assert play.request.value != request
    n_summarized = int(_kv(play.summary.value, "messages summarized").split()[0])
    assert n_summarized == len(play.preparation.messages_to_summarize)

    before = play.requests[0].max_tokens
    play.reserve.value = 8192
    assert play.requests[0].max_tokens == math.floor(0.8 * 8192) != before
    threshold = _kv(play.summary.value, "threshold = window − reserve")
    assert threshold == f"{32000 - 8192:,}"
    assert _kv(play.summary.value, "Pi would compact now") == "no"

    play.window.value = 20000  # context (~20.9k) now above window − reserve
    assert _kv(play.summary.value, "Pi would compact now") == "yes"
    assert "summarized" in play.entries.value and "kept" in play.entries.value


def test_playground_with_nothing_to_summarize(auth):
    play = CompactionPlayground(auth, context_window=24000, keep_recent_tokens=4000)
    play.keep.value = play.keep.max
    assert play.requests == []
    assert "nothing to summarize" in play.request.value


# --------------------------------------------------------------------------- replay browser


def test_replay_browser_steps_through_the_replay(auth):
    result = replay(auth, CompactionSettings(reserve_tokens=4000, keep_recent_tokens=4000), context_window=16000)
    browser = ReplayBrowser(result)
    assert browser.step.max == len(auth.get_branch()) - 1
    last = browser.context.value
    assert browser.context.value.count("<tr>") - 1 == len(result.context_at(browser.step.value, llm=False))
    browser.step.value = 10
    assert browser.context.value != last
    assert _kv(browser.info.value, "context messages") == str(len(result.context_at(10, llm=False)))
    browser.go_to_next_compaction()
    steps = sorted(result.events.loc[result.events["kind"] == "compaction", "step"])
    assert browser.step.value == steps[0]
    assert "first kept" in browser.info.value
    browser.go_to_next_compaction()
    assert browser.step.value == steps[1]


def test_session_explorer_offers_only_current_labels():
    """A label cleared by a later empty label is not offered as a leaf."""
    s = Session.new("/tmp/x", session_id="lbl", timestamp="2026-01-01T00:00:00.000Z")
    u1 = s.append_message({"role": "user", "content": "one", "timestamp": 1}, timestamp=1000)
    u2 = s.append_message({"role": "user", "content": "two", "timestamp": 2}, timestamp=2000)
    for target, label in ((u1["id"], "start"), (u1["id"], ""), (u2["id"], "kept")):
        s.append_entry({"type": "label", "id": s.new_id(), "parentId": s.leaf_id,
                        "timestamp": "2026-01-01T00:00:03.000Z", "targetId": target, "label": label})
    ex = SessionExplorer(s)
    texts = [text for text, _ in ex.leaf.options]
    assert not any("'start'" in t for t in texts)
    assert any("'kept'" in t for t in texts)


def test_tables_scroll_sideways_and_format_numbers() -> None:
    import pandas as pd

    from pimem.viz.widgets import _table

    text = _table(pd.DataFrame({"tokens": [12345, 7], "ratio": [0.30000000000000004, 1.5], "id": ["a1b2c3d4", None]}))
    assert text.startswith("<div style='max-width:100%;overflow-x:auto'><table")
    assert ">12,345<" in text and ">0.3<" in text and "0.30000000000000004" not in text and ">None<" not in text
