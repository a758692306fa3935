"""Replay: Pi's check points, token sources, reproducibility, hooks and failures."""

from __future__ import annotations

import math

import pytest

from pimem.replays.engine import EVENT_COLUMNS, replay
from pimem.core.compaction.compaction import (
    CompactionResult,
    CompactionSettings,
    ModelInfo,
    estimate_tokens,
)
from pimem.core.session_manager import build_session_projection, load_session
from tests.support.summarizers import FixedSummarizer

SMALL = CompactionSettings(reserve_tokens=4000, keep_recent_tokens=6000)


def _path_without_compactions(session):
    return [e for e in session.get_branch() if e.get("type") != "compaction"]


def _written_by_replay(entry):
    """A compaction, or a refused request as Pi records it (the error and the edit omitting it)."""
    if entry.get("type") in ("compaction", "context_edit"):
        return True
    message = entry.get("message") if entry.get("type") == "message" else None
    return bool(message) and message.get("stopReason") == "error" and \
        str(message.get("errorMessage", "")).startswith("prompt is too long")


def _recorded_path(result):
    return [e for e in result.session.get_branch() if not _written_by_replay(e)]


def _kept(result, session):
    """The recorded path without compactions and without the runs that failed in the replay (Pi's
    run ends at a refusal: nothing after it until the next prompt happened)."""
    left_out = set(result.left_out_ids)
    for e in session.get_branch():
        if e["id"] in left_out:
            assert e["message"]["role"] in ("assistant", "toolResult")
    return [e for e in _path_without_compactions(session) if e["id"] not in left_out]


def _unasked_answer(session):
    """The one answer of large-session.jsonl recorded right after a completed answer (step 464): an
    older Pi continued there; Pi 0.87.1 asks for nothing until the next prompt."""
    path = session.get_branch()
    assert [path[i]["message"].get("stopReason") for i in (463, 464)] == ["stop", "stop"]
    return path[464]["id"]


def test_replay_keeps_every_recorded_entry_in_order_with_its_id(large_session):
    """Every recorded entry Pi 0.87.1 reaches, in order, with its id: all but the unasked answer."""
    result = replay(large_session, SMALL, context_window=60000)
    assert result.left_out_ids == [_unasked_answer(large_session)]
    assert any("follow a completed answer" in w for w in result.warnings)
    replayed = [e for e in result.session.get_branch() if e.get("type") != "compaction"]
    recorded = [e for e in _path_without_compactions(large_session) if e["id"] not in result.left_out_ids]
    assert [e["id"] for e in replayed] == [e["id"] for e in recorded]
    for new, old in zip(replayed, recorded):
        assert {k: v for k, v in new.items() if k != "parentId"} == {k: v for k, v in old.items() if k != "parentId"}
    # parentIds form one chain root -> leaf through the replay's compactions
    branch = result.session.get_branch()
    assert branch[0]["parentId"] is None
    assert all(b["parentId"] == a["id"] for a, b in zip(branch, branch[1:]))
    assert list(result.events.columns) == EVENT_COLUMNS


def test_threshold_compactions_fire_where_should_compact_says(large_session):
    window = 60000
    result = replay(large_session, SMALL, context_window=window, token_source="estimate")
    ev = result.events
    checks = ev[(ev.kind == "check") & (ev.reason == "threshold")]
    assert len(result.compactions) > 0
    fired = checks[checks.fired.astype(bool)]
    # every fired check was above the threshold, every check above it fired (or had nothing to do)
    assert (fired.context_tokens > window - SMALL.reserve_tokens).all()
    above = checks[(checks.context_tokens > window - SMALL.reserve_tokens) & checks.note.isna()]
    skipped = ev[(ev.kind == "compact_skipped") & (ev.reason == "threshold")]
    assert len(above) == len(fired) + len(skipped)
    comp = ev[ev.kind == "compaction"]
    assert len(comp) == len(result.compactions)
    assert set(comp.reason) <= {"threshold", "overflow"}
    assert [c["id"] for c in result.compactions] == list(comp.compaction_id)
    for row, entry in zip(comp.itertuples(), result.compactions):
        assert entry["firstKeptEntryId"] == row.first_kept_entry_id
        assert entry["tokensBefore"] == row.tokens_before
        # Pi's estimatedTokensAfter: estimateMessagesTokens of the projection right after it
        after = build_session_projection(result.session, entry["id"]).messages
        assert row.tokens_after == sum(estimate_tokens(m) for m in after)
        assert row.summary_tokens == math.ceil(len(entry["summary"].encode("utf-16-le")) // 2 / 4)


def test_next_turn_checks_read_pis_projected_estimate(large_session):
    """In "estimate" mode a next_turn check reads exactly estimateProjectedContextTokens."""
    from pimem.core.compaction.compaction import estimate_projected_context_tokens

    result = replay(large_session, SMALL, context_window=60000, token_source="estimate")
    ev = result.events
    rows = ev[(ev.kind == "check") & (ev.check == "next_turn")]
    assert len(rows) > 50
    for row in rows.iloc[::7].itertuples():
        branch = result.session.get_branch(row.leaf_id)
        projection = build_session_projection(result.session, row.leaf_id)
        assert row.context_tokens == estimate_projected_context_tokens(projection, branch).tokens


def test_agent_end_checks_read_the_direct_usage(large_session):
    result = replay(large_session, SMALL, context_window=400000, triggers="none", token_source="estimate")
    ev = result.events
    rows = ev[(ev.kind == "check") & (ev.check == "agent_end") & ev.note.isna()]
    assert len(rows) > 10
    from pimem.core.compaction.compaction import calculate_context_tokens

    for row in rows.itertuples():
        msg = result.session.get_entry(row.leaf_id)["message"]
        assert msg["role"] == "assistant"
        if msg.get("stopReason") != "error" and calculate_context_tokens(msg["usage"]) > 0:
            assert row.context_tokens == calculate_context_tokens(msg["usage"])


def test_triggers_none_measures_without_compacting(large_session):
    result = replay(large_session, SMALL, context_window=30000, triggers="none")
    assert result.compactions == []
    assert result.events.should_compact.astype(bool).any()
    assert not result.events.fired.astype(bool).any()
    assert [e["id"] for e in _recorded_path(result)] == [e["id"] for e in _kept(result, large_session)]
    refused = result.calls[result.calls.refused]
    assert set(refused.entry_id) <= set(result.left_out_ids)  # every failed run starts at its refused call
    assert result.summary()["left_out_entries"] == len(result.left_out_ids) >= len(refused) > 0


def test_calibrated_equals_recorded_usage_when_nothing_changed(large_session):
    """Without compactions on either side, simulated usage is the recorded usage, up to the first answer
    the replay leaves out (the unasked one at step 464); after it the replayed context is smaller."""
    cal = replay(large_session, SMALL, context_window=400000, triggers="none", token_source="calibrated")
    est = replay(large_session, SMALL, context_window=400000, triggers="none", token_source="estimate")
    assert cal.left_out_ids == est.left_out_ids == [_unasked_answer(large_session)]
    a = cal.events[cal.events.kind == "check"]
    b = est.events[est.events.kind == "check"]
    assert a.step.tolist() == b.step.tolist()
    before = (a.step <= 464).to_numpy()
    assert before.sum() > 200
    assert a.context_tokens[before].tolist() == b.context_tokens[before].tolist()
    later_cal, later_est = a.context_tokens[~before].to_numpy(), b.context_tokens[~before].to_numpy()
    assert (later_cal <= later_est).all() and (later_cal < later_est).mean() > 0.9


def test_calibrated_shifts_usage_by_what_the_replay_added(before_compaction):
    """The recording compacted twice; a replay that does not compact sends more.

    For each assistant after the first recorded compaction: calibrated − recorded =
    est(replayed context) − est(recorded context), computed here from scratch with Pi's
    projection of both sessions at that point.
    """
    cal = replay(before_compaction, SMALL, context_window=10**7, triggers="none", token_source="calibrated")
    est = replay(before_compaction, SMALL, context_window=10**7, triggers="none", token_source="estimate")
    kc = cal.events[(cal.events.check == "agent_end") & cal.events.note.isna()].set_index("leaf_id")
    ke = est.events[(est.events.check == "agent_end") & est.events.note.isna()].set_index("leaf_id")
    first_compaction = next(e for e in before_compaction.get_branch() if e["type"] == "compaction")
    ids = [e["id"] for e in before_compaction.get_branch()]
    after = [lid for lid in kc.index if ids.index(lid) > ids.index(first_compaction["id"])]
    assert after

    def pure(session, leaf_parent):
        msgs = build_session_projection(session, leaf_parent).messages
        from pimem.core.pi_ai import get_current_system_message

        cur = get_current_system_message(msgs)
        return (estimate_tokens(cur) if cur else 0) + sum(estimate_tokens(m) for m in msgs if m.get("role") != "system")

    assert 1.0 < cal.calibration_slope < 2.0  # chars/4 under-counts Claude's tokens
    checked = 0
    for lid in after[:: max(1, len(after) // 5)]:
        parent = before_compaction.get_entry(lid)["parentId"]
        shift = pure(cal.session, parent) - pure(before_compaction, parent)
        assert shift > 0
        diff = kc.loc[lid, "context_tokens"] - ke.loc[lid, "context_tokens"]
        assert diff == pytest.approx(cal.calibration_slope * shift)
        checked += 1
    assert checked >= 2


def test_replay_is_reproducible_byte_for_byte(large_session, tmp_path):
    a = replay(large_session, SMALL, context_window=60000, seed=7)
    b = replay(large_session, SMALL, context_window=60000, seed=7)
    c = replay(large_session, SMALL, context_window=60000, seed=8)
    pa, pb, pc = a.write(tmp_path / "a.jsonl"), b.write(tmp_path / "b.jsonl"), c.write(tmp_path / "c.jsonl")
    assert pa.read_bytes() == pb.read_bytes()
    assert pa.read_bytes() != pc.read_bytes()  # another header id and compaction ids
    assert [x["id"] for x in a.compactions] != [x["id"] for x in c.compactions]
    # compaction timestamps are the timestamps of the entries they follow
    for entry in a.compactions:
        assert entry["timestamp"] == a.session.get_entry(entry["parentId"])["timestamp"]


def test_context_at_is_the_projection_at_each_step(large_session):
    result = replay(large_session, SMALL, context_window=60000)
    from pimem.core.messages import convert_to_llm

    first = result.compactions[0]
    step_after = int(result.events[result.events.compaction_id == first["id"]].step.iloc[0])
    ctx = result.context_at(step_after)
    assert ctx == convert_to_llm(build_session_projection(result.session, result._leaf_at[step_after]).messages)
    assert any("<summary>" in str(m.get("content")) for m in ctx)
    assert "<summary>" not in str(result.context_at(0))


def test_summary_figures(large_session):
    result = replay(large_session, SMALL, context_window=60000)
    s = result.summary()
    assert s["compactions"] == len(result.compactions) > 0
    assert s["threshold_compactions"] + s["overflow_compactions"] == s["compactions"]
    assert s["summary_calls"] >= s["compactions"]
    assert s["peak_context_tokens"] >= s["mean_context_tokens"] > 0
    assert s["assistant_calls"] == sum(
        1 for e in result.session.entries if e["type"] == "message" and e["message"]["role"] == "assistant")


def _failing() -> FixedSummarizer:
    return FixedSummarizer("", stop_reason="error", error_message="backend down")


def test_failing_summarizer_records_compact_failed_and_continues(large_session):
    summarizer = _failing()
    result = replay(large_session, SMALL, context_window=60000, summarizer=summarizer)
    failed = result.events[result.events.kind == "compact_failed"]
    assert len(failed) >= 2 and len(summarizer.requests) >= 2
    threshold = failed[failed.reason == "threshold"]
    overflow = failed[failed.reason == "overflow"]
    assert len(threshold) > 0
    assert threshold.error.str.startswith("Auto-compaction failed: ").all()
    assert overflow.error.str.startswith("Context overflow recovery failed").all()
    assert "backend down" in failed.error.iloc[0]
    assert result.compactions == []
    assert [e["id"] for e in _recorded_path(result)] == [e["id"] for e in _kept(result, large_session)]
    with pytest.raises(RuntimeError, match="backend down"):
        replay(large_session, SMALL, context_window=60000, summarizer=_failing(), stop_on_error=True)


def test_hooks_cancel_and_custom_summary(large_session):
    from pimem.core.agent_session import Cancel, Hooks

    seen = []
    failures = []

    def before(event):
        seen.append(event)
        if len(seen) == 1:
            return Cancel()
        prep = event.preparation
        return CompactionResult(summary=f"custom {len(seen)}", first_kept_entry_id=prep.first_kept_entry_id,
                                tokens_before=prep.tokens_before, details={"note": "hook"})

    hooks = Hooks(before_compact=[before], compact_failed=[failures.append])
    result = replay(large_session, SMALL, context_window=60000, hooks=hooks)
    ev = result.events
    cancelled = ev[(ev.kind == "compact_failed") & (ev.note == "cancelled")]
    assert len(cancelled) == 1 and len(failures) == 1 and failures[0].aborted
    assert result.compactions and all(c.get("fromHook") is True for c in result.compactions)
    assert result.compactions[0]["summary"] == "custom 2"
    assert result.summary()["summary_calls"] == 0
    assert all(getattr(e, "reason", None) in ("threshold", "overflow") for e in seen)


def _synthetic_session(big_chars: int):
    """user → assistant → user → assistant → a huge pasted prompt → assistant."""
    from pimem.core.session_manager import Session

    s = Session.new("/tmp/project", timestamp="2026-01-01T00:00:00.000Z")
    t = 1767225600000
    usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}

    def add(message):
        nonlocal t
        t += 1000
        message["timestamp"] = t
        s.append_message(message, timestamp=t)

    for i in range(2):
        add({"role": "user", "content": [{"type": "text", "text": f"please do step {i} " + "x" * 4000}]})
        add({"role": "assistant", "content": [{"type": "text", "text": f"done {i} " + "y" * 4000}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "api": "anthropic-messages",
             "usage": dict(usage, input=1000 + i * 2000, output=1000, totalTokens=2000 + i * 2000),
             "stopReason": "stop"})
    add({"role": "user", "content": [{"type": "text", "text": "here is the log " + "z" * big_chars}]})
    add({"role": "assistant", "content": [{"type": "text", "text": "read it"}],
         "provider": "anthropic", "model": "claude-sonnet-4-5", "api": "anthropic-messages",
         "usage": dict(usage, input=9000, output=10, totalTokens=9010), "stopReason": "stop"})
    return s


def test_overflow_before_a_call_compacts_with_retry():
    """A pasted prompt pushes the request past the window with no check in between."""
    session = _synthetic_session(big_chars=24000)  # ~6000 estimated tokens
    settings = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=500)
    result = replay(session, settings, context_window=8000, token_source="chars")
    ev = result.events
    overflow = ev[(ev.kind == "compaction") & (ev.reason == "overflow")]
    assert len(overflow) == 1
    assert overflow.will_retry.astype(bool).all()
    assert overflow.check.iloc[0] == "before_call"
    # the compaction sits right before the response it made room for
    compaction = result.compactions[0]
    children = result.session.get_children(compaction["id"])
    assert [c["message"]["role"] for c in children] == ["assistant"]
    measured = replay(session, settings, context_window=8000, token_source="chars", triggers="none")
    assert measured.compactions == []
    refused = measured.events[(measured.events.kind == "check") & (measured.events.check == "before_call")]
    assert len(refused) == 1
    # without compaction the refused request stays refused: the turn failed, and says why
    failed = measured.events[measured.events.kind == "turn_failed"]
    assert failed.note.tolist() == ["the replay does not compact on its own (triggers=none)"]
    assert measured.calls.refused.sum() == 1 and measured.summary()["failed_turns"] == 1


def test_recorded_triggers_compact_where_the_recording_did(before_compaction):
    """``triggers="recorded"`` on before-compaction.jsonl (recorded by a Pi release of Dec 2025).

    Reproduced exactly: the place of both compactions and their ``tokensBefore`` (175004 and
    185014: the last assistant's usage, which 0.87.1's ``estimateProjectedContextTokens``
    still trusts because no compaction or edit follows it).

    Different, and why: ``firstKeptEntryId``. 0.87.1 walks back from the newest entry until
    the estimated kept tokens reach ``keepRecentTokens`` (20000) and cuts at the nearest valid
    cut point, which here is an assistant message inside a turn — a *split turn*, summarized
    with a second, turn-prefix request. The older release cut only at user messages (turn
    boundaries), and its kept tail is shorter (~15.6K / ~16.6K of 0.87.1's estimated tokens
    instead of ~20K): at the first compaction it kept the first user message after 0.87.1's
    cut, at the second the second one — consistent with an older estimator that counted more
    characters per message (e.g. tool-call arguments or thinking) and so reached 20000 sooner. Because the recording has no turn-prefix summary, the
    ``RecordedSummarizer`` cannot answer that second request, and the compaction fails with a
    ``compact_failed`` event (the replay continues, as Pi does).
    """
    from pimem.summarizers.recorded import RecordedSummarizer

    result = replay(before_compaction, CompactionSettings(), triggers="recorded",
                    summarizer=RecordedSummarizer(before_compaction), token_source="estimate", strategy="pi-0.87.1")
    recorded = [e for e in before_compaction.get_branch() if e["type"] == "compaction"]
    ev = result.events[result.events.kind.isin(["compaction", "compact_failed"])]
    assert len(ev) == len(recorded) == 2
    assert set(ev.reason) == {"manual"}
    assert not (result.events.kind == "check").any() or not result.events.fired.astype(bool).any()
    assert list(ev.leaf_id) == [e["parentId"] for e in recorded]  # same place in the path
    assert list(ev.recorded_tokens_before) == [e["tokensBefore"] for e in recorded]
    assert list(ev.tokens_before) == list(ev.recorded_tokens_before)
    branch = before_compaction.get_branch()
    ids = [e["id"] for e in branch]
    for row, old in zip(ev.itertuples(), recorded):
        assert row.recorded_first_kept_entry_id == old["firstKeptEntryId"]
        assert row.split_turn  # 0.87.1 splits the turn ...
        ours = branch[ids.index(row.first_kept_entry_id)]
        assert ours["message"]["role"] == "assistant"
        # ... the old release kept a user message at or after 0.87.1's cut (a shorter tail)
        theirs = branch[ids.index(old["firstKeptEntryId"])]
        assert theirs["message"]["role"] == "user"
        assert ids.index(theirs["id"]) > ids.index(ours["id"])
        assert "turn_prefix" in row.error


def test_model_defaults_from_the_session(large_session):
    info = ModelInfo(context_window=50000, max_tokens=8000, reasoning=False)
    a = replay(large_session, SMALL, model=info)
    assert a.context_window == 50000
    b = replay(large_session, SMALL, model=info, context_window=70000)
    assert b.context_window == 70000
    assert set(b.events.context_window.dropna()) == {70000}
    assert set(a.events.threshold.dropna()) == {50000 - SMALL.reserve_tokens}


def test_model_limits_come_from_the_model_table():
    """Without ``model``, the window and output cap are the table's for the session's model."""
    from pimem.core.settings_manager import lookup_model
    from pimem.sessions.samples import sample_session_paths

    session = load_session(next(p for p in sample_session_paths() if p.name == "auth-login-bug.jsonl"))
    summarizer = FixedSummarizer("## Goal\nx")
    table = lookup_model("anthropic", "claude-sonnet-4-5")
    settings = CompactionSettings(reserve_tokens=90_000, keep_recent_tokens=2000)
    result = replay(session, settings, summarizer=summarizer, context_window=100_000, token_source="chars")
    assert result.context_window == 100_000
    assert summarizer.requests, "the replay should have compacted"
    assert {r.max_tokens for r in summarizer.requests if r.kind == "history"} == {min(72_000, table.max_tokens)}
    assert table.max_tokens != 32_000  # the fallback model's cap, which would hide a lookup failure


def test_bad_arguments_are_clear_errors(large_session):
    with pytest.raises(ValueError, match="token_source"):
        replay(large_session, SMALL, token_source="bogus")
    with pytest.raises(ValueError, match="triggers"):
        replay(large_session, SMALL, triggers="sometimes")


def test_skipped_compactions_are_where_prepare_finds_nothing(large_session):
    """A check that fires with nothing to compact is skipped exactly where Pi's
    ``prepareCompaction`` on the replayed branch returns None (and every compaction had a
    preparation)."""
    from pimem.core.compaction.compaction import prepare_compaction

    settings = CompactionSettings(reserve_tokens=8192, keep_recent_tokens=40000)
    result = replay(large_session, settings, context_window=64000, token_source="estimate")
    ev = result.events
    skipped = ev[ev.kind == "compact_skipped"]
    compactions = ev[ev.kind == "compaction"]
    assert len(skipped) > 10 and len(compactions) > 10
    for row in skipped.itertuples():
        assert prepare_compaction(result.session.get_branch(row.leaf_id), settings) is None
    for entry in result.compactions:
        prep = prepare_compaction(result.session.get_branch(entry["parentId"]), settings)
        assert prep is not None and prep.first_kept_entry_id == entry["firstKeptEntryId"]


def test_settings_are_checked_against_the_window():
    """No room for context is an error before any work; a keep at or above the threshold (Pi
    accepts it) is a warning, on the result and as a ReplayWarning."""
    import warnings

    from pimem.replays.engine import check_settings
    from pimem.errors import ConfigurationError, ReplayWarning

    session = _synthetic_session(big_chars=400)
    with pytest.raises(ConfigurationError, match="not below the context window 16,000"):
        replay(session, CompactionSettings(), context_window=16000)
    with pytest.raises(ConfigurationError, match="not below the context window"):
        replay(session, CompactionSettings(reserve_tokens=8000), model=ModelInfo(context_window=8000, max_tokens=100))
    with pytest.raises(ConfigurationError, match="keep_recent_tokens must be a non-negative number"):
        check_settings(CompactionSettings(keep_recent_tokens=-1), 16000)
    assert check_settings(CompactionSettings(reserve_tokens=20000), None) == []  # unknown window
    assert check_settings(CompactionSettings(enabled=False, reserve_tokens=20000), 16000) == []
    assert check_settings(CompactionSettings(reserve_tokens=4000, keep_recent_tokens=11999), 16000) == []
    degenerate = CompactionSettings(reserve_tokens=4000, keep_recent_tokens=12000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # "estimate": no calibration (chars would add its warning about this tiny session's fit)
        result = replay(session, degenerate, context_window=16000, token_source="estimate")
    assert [w.category for w in caught] == [ReplayWarning]
    assert "keep_recent_tokens 12,000 is not below the threshold" in result.summary()["warnings"]
