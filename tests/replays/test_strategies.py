"""Compaction strategies: the protocol, the registry, the reference strategies, and their measures."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from pimem.base.js import js_stringify
from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings, PromptTemplates, estimate_tokens
from pimem.core.session_manager import build_session_projection, load_session
from pimem.errors import ConfigurationError
from pimem.replays.strategies import CompactionStrategy, Pi0871, get_strategy, register_strategy, strategy_names
from pimem.replays.strategies.reference import DEFAULT_PLACEHOLDER
from tests.support.summarizers import RecordingSummarizer

SETTINGS = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=4000)
WINDOW = 24000


@pytest.fixture(scope="module")
def logslice(samples_dir):
    return load_session(samples_dir / "logslice-since-flag.jsonl")


def _replay(session, strategy=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return replay(session, kw.pop("settings", SETTINGS), context_window=kw.pop("window", WINDOW),
                      strategy=strategy, **kw)


# -- protocol and registry ---------------------------------------------------------------------


def test_default_is_pi_0_87_1_byte_for_byte(sample_paths):
    compactions = 0
    for path in sample_paths:
        s = load_session(path)
        base = _replay(s)
        for spec in ("pi-0.87.1", Pi0871(), {"name": "pi-0.87.1"}):
            other = _replay(s, spec)
            assert other.session.to_jsonl() == base.session.to_jsonl()
            assert other.events.drop(columns="latency_s").equals(base.events.drop(columns="latency_s"))
            assert other.calls.equals(base.calls)
        assert base.strategy == "pi-0.87.1"
        assert base.summary()["context_edits"] == 0
        compactions += len(base.compactions)
    assert compactions > 0


def test_registry_names_and_specs():
    names = strategy_names()
    assert names[0] == "pi-0.87.1"
    assert {"no-split-turn", "from-scratch", "masking", "hybrid"} <= set(names)
    masking = get_strategy("masking:keep_turns=3,placeholder=[gone]")
    assert (masking.keep_turns, masking.placeholder) == (3, "[gone]")
    assert masking.spec() == "masking:keep_turns=3,placeholder=[gone]"
    assert get_strategy(masking.spec()) == masking
    assert get_strategy({"name": "masking", "keep_turns": 4}).keep_turns == 4
    assert get_strategy("masking", keep_turns=6).keep_turns == 6
    assert get_strategy(None) == Pi0871()
    assert masking.identity() == {"strategy": "masking", "keep_turns": 3, "placeholder": "[gone]"}


@pytest.mark.parametrize("spec, words", [
    ("nope", "unknown compaction strategy 'nope'"),
    ("masking:keep_turn=3", "masking"),
    ("masking:keep_turns", "not key=value"),
    ("masking:keep_turns=0", "keep_turns must be a positive integer"),
])
def test_registry_errors_name_the_problem(spec, words):
    with pytest.raises(ConfigurationError, match=words):
        get_strategy(spec)


def test_a_registered_strategy_drives_the_replay(logslice):
    @register_strategy("test-never")
    @dataclasses.dataclass(frozen=True)
    class Never(CompactionStrategy):
        name = "test-never"

        def should_compact(self, point):
            assert point.tracker.path and point.context_window == 200_000
            return False

    try:
        result = _replay(logslice, "test-never", window=200_000)
        assert result.compactions == []
        assert result.strategy == "test-never"
        checks = result.events[result.events["kind"] == "check"]
        assert len(checks) and not checks["should_compact"].any()
        pi = _replay(logslice, window=200_000)
        assert pi.compactions == [] and pi.session.to_jsonl() == result.session.to_jsonl()
        with pytest.raises(ConfigurationError, match="already registered"):
            register_strategy("masking", Never)
    finally:
        from pimem.replays.strategies import base

        base._REGISTRY.pop("test-never", None)


def test_prompt_templates_reach_the_requests(logslice):
    mine = PromptTemplates(system="SYS", initial="INITIAL-X", update="UPDATE-X", turn_prefix="PREFIX-X")
    rec = RecordingSummarizer()
    result = _replay(logslice, Pi0871(prompts=mine), summarizer=rec)
    assert len(result.compactions) >= 2
    kinds = {r.kind for r in rec.requests}
    assert "history" in kinds
    for r in rec.requests:
        assert r.system_prompt == "SYS"
        tail = {"turn_prefix": "PREFIX-X"}.get(r.kind) or ("UPDATE-X" if "<previous-summary>" in r.prompt else "INITIAL-X")
        assert r.prompt.endswith(tail)
    assert any(r.prompt.endswith("UPDATE-X") for r in rec.requests)
    assert "prompts" in Pi0871(prompts=mine).identity() and "prompts" not in Pi0871().identity()


# -- reference strategies -------------------------------------------------------------------------


def test_no_split_turn_never_cuts_inside_a_turn(sample_paths):
    seen = 0
    for path in sample_paths:
        s = load_session(path)
        pi = _replay(s)
        result = _replay(s, "no-split-turn")
        comp = result.events[result.events["kind"] == "compaction"]
        assert not comp["split_turn"].fillna(False).any()
        assert (comp["turn_prefix_messages"].fillna(0) == 0).all()
        seen += len(comp)
        for c in result.compactions:
            kept = result.session.get_entry(c["firstKeptEntryId"])
            role = kept.get("message", {}).get("role") if kept.get("type") == "message" else kept.get("type")
            assert role in ("user", "bashExecution", "custom_message", "branch_summary", "compaction"), role
        if pi.summary()["split_turns"]:
            assert len(result.compactions) >= 1
    assert seen > 0


def test_from_scratch_summarizes_the_raw_history(logslice):
    rec = RecordingSummarizer()
    result = _replay(logslice, "from-scratch", summarizer=rec)
    history = [r for r in rec.requests if r.kind == "history"]
    assert len(result.compactions) >= 2 and len(history) >= 2
    assert all("<previous-summary>" not in r.prompt for r in rec.requests)
    # each summary request starts from the first user request of the session
    first_user = next(e["message"] for e in logslice.get_branch()
                      if e.get("type") == "message" and e["message"]["role"] == "user")
    text = first_user["content"] if isinstance(first_user["content"], str) else first_user["content"][0]["text"]
    assert all(text[:60] in r.prompt for r in history)
    # requests grow: the last one holds at least as much conversation as the first
    assert len(history[-1].prompt) > len(history[0].prompt)
    pi_rec = RecordingSummarizer()
    _replay(logslice, summarizer=pi_rec)
    assert any("<previous-summary>" in r.prompt for r in pi_rec.requests)


def test_from_scratch_history_budget_drops_the_head(logslice):
    rec = RecordingSummarizer()
    _replay(logslice, "from-scratch:max_history_tokens=3000", summarizer=rec)
    full = RecordingSummarizer()
    _replay(logslice, "from-scratch", summarizer=full)
    later = [r for r in rec.requests if r.kind == "history"][1:]
    assert later and all(len(a.prompt) < len(b.prompt) for a, b in
                         zip(later, [r for r in full.requests if r.kind == "history"][1:]))


def _tool_results(projection):
    out = []
    for pe in projection.entries:
        src = pe.source_entry
        if src.get("type") == "message" and src["message"].get("role") == "toolResult" and pe.messages:
            out.append((src["id"], pe.messages[0]))
    return out


def test_masking_replaces_old_tool_outputs_in_the_projected_context(auth):
    result = _replay(auth, "masking:keep_turns=3")
    assert result.compactions == []  # no threshold compaction at this window
    assert result.summary()["context_edits"] == len(result.context_edit_ids) > 0
    session = result.session
    edits = [e for e in session.get_branch() if e.get("type") == "context_edit"]
    assert {e["id"] for e in edits} >= set(result.context_edit_ids)
    for e in edits:
        if e["id"] in result.context_edit_ids:
            target = session.get_entry(e["targetId"])
            assert target["message"]["role"] == "toolResult"
            text = e["replacement"]["content"][0]["text"]
            assert text.startswith("Old tool output omitted (") and text.endswith(" lines).")
    projection = build_session_projection(session)
    results = _tool_results(projection)
    # age of each result: assistant responses after it in the projected context
    roles = [(pe.source_entry.get("id"), pe.source_entry.get("message", {}).get("role"))
             for pe in projection.entries]
    masked_ids = {e["targetId"] for e in edits if e["id"] in result.context_edit_ids}
    for rid, message in results:
        pos = [i for i, (eid, _) in enumerate(roles) if eid == rid][0]
        age = sum(1 for _, role in roles[pos:] if role == "assistant")
        placeholder = isinstance(message["content"], list) and message["content"][0].get("text", "").startswith(
            "Old tool output omitted")
        if rid in masked_ids:
            assert placeholder and age >= 3
        # the last assistant's results are never masked, and a masked one was at least 3 turns old
        # when it was masked (ages only grow)
        if age < 3:
            assert not placeholder
    # the masked context is smaller than the unmasked one at the same leaf
    unmasked = _replay(auth, triggers="none")
    masked_tokens = sum(estimate_tokens(m) for m in projection.messages)
    plain_tokens = sum(estimate_tokens(m) for m in build_session_projection(unmasked.session).messages)
    assert masked_tokens < plain_tokens
    # and the replayed file reads back with the same projection
    again = load_session_from_text(session.to_jsonl(), tmp_name="masked.jsonl")
    assert js_stringify(build_session_projection(again).messages) == js_stringify(projection.messages)


def load_session_from_text(text, tmp_name):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / tmp_name
        p.write_text(text, encoding="utf-8")
        return load_session(p)


def test_masking_shrinks_the_calibrated_requests(auth):
    plain = _replay(auth, triggers="none", window=10**6)  # measured: no request is refused
    masked = _replay(auth, "masking:keep_turns=2")
    assert not plain.summary()["refused_requests"]
    b = masked.accepted_calls().set_index("entry_id")["context_tokens"]
    a = plain.calls.set_index("entry_id")["context_tokens"].loc[b.index]
    assert len(b) > 0.9 * len(plain.calls)
    assert (b <= a + 1e-9).all() and (b < a).sum() > len(a) // 3


def test_masking_never_compacts_at_the_threshold_and_hybrid_does(logslice):
    masking = _replay(logslice, "masking:keep_turns=5")
    reasons = masking.events[masking.events["kind"] == "compaction"]["reason"]
    assert set(reasons) <= {"overflow"}
    thr = masking.events[(masking.events["kind"] == "check") & (masking.events["reason"] == "threshold")]
    assert len(thr) and not thr["should_compact"].any()
    hybrid = _replay(logslice, "hybrid:keep_turns=5")
    assert hybrid.summary()["context_edits"] > 0
    assert (hybrid.events[hybrid.events["kind"] == "compaction"]["reason"] == "threshold").any()
    assert hybrid.summary()["peak_context_tokens"] < masking.summary()["peak_context_tokens"]


def test_masking_only_when_the_placeholder_is_shorter(auth):
    huge = "x" * 1_000_000 + " {lines}"
    result = _replay(auth, get_strategy("masking", keep_turns=1, placeholder=huge))
    assert result.context_edit_ids == []


def test_edits_appear_as_events(auth):
    result = _replay(auth, "masking:keep_turns=2")
    ev = result.events[result.events["kind"] == "context_edit"]
    assert int(ev["context_edits"].sum()) == len(result.context_edit_ids)
    assert (ev["tokens_after"] < ev["tokens_before"]).all()


# -- measures ---------------------------------------------------------------------------------------


def test_run_measures_columns(logslice):
    from pimem.replays.cost import COST_COLUMNS
    from pimem.experiments.run_measures import MEASURE_COLUMNS, run_measures

    pi = run_measures(_replay(logslice))
    assert set(MEASURE_COLUMNS + COST_COLUMNS) <= set(pi)
    assert 0 <= pi["needed_recall"] <= 1 and pi["masked_needed"] == 0
    assert pi["context_needed_recall"] == pytest.approx(pi["needed_recall"], abs=0.2)
    hybrid = run_measures(_replay(logslice, "hybrid:keep_turns=5"))
    assert hybrid["n_needed"] >= 0 and hybrid["cost_total"] > 0


def test_masked_needed_facts_on_a_real_session(large_session):
    from pimem.experiments.run_measures import masked_needed_facts, run_measures

    session = large_session
    masked = _replay(session, "masking", settings=CompactionSettings(), window=100_000)
    facts = masked_needed_facts(masked)
    facts = masked_needed_facts(masked)
    m = run_measures(masked)
    assert m["masked_needed"] == len(facts) > 0
    assert m["context_needed_recall"] < 1
    # a masked needed fact is in the masked output, and not shown by the context after its edit
    from pimem.text.facts import SummaryIndex, extract_facts, fact_present
    from pimem.drift.records import source_text

    path = masked.session.get_branch()
    for row in facts.itertuples():
        target = masked.session.get_entry(row.target_id)
        fact = next(f for f in extract_facts([(row.target_id, target["message"])]) if f.value == row.value)
        pos = [i for i, e in enumerate(path) if e.get("id") == row.edit_id][0]
        ctx = build_session_projection(path[: pos + 1]).messages
        index = SummaryIndex("\n".join(source_text(x) for x in ctx if x.get("role") != "system"))
        assert not fact_present(fact, index)
