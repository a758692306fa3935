"""The calibrated token source: a constrained fit, no impossible counts, continuity with the recording."""

from __future__ import annotations

import math
import warnings

import pytest

from pimem.replays.engine import replay
from pimem.replays.recording import calibrate_recording, input_tokens, shared_recordings, walk_recording
from pimem.replays.calibration import MIN_POINTS, SLOPE_RANGE, Calibration, fit_calibration
from pimem.core.agent_session import Hooks
from pimem.core.compaction.compaction import CompactionResult, CompactionSettings, get_assistant_usage
from pimem.errors import ReplayWarning


# ------------------------------------------------------------------------------------ the fit


def test_a_rate_growing_with_size_gives_no_negative_overhead():
    """Provider tokens per estimated token rising from 1.2 to 1.45 along the session: ordinary least
    squares puts the intercept below zero; the constrained relative fit keeps it at or above zero."""
    xs = [200 + 1000 * i for i in range(120)]
    ys = [1800 + x * (1.2 + 0.25 * i / 119) for i, x in enumerate(xs)]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    ols_slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert my - ols_slope * mx < 0  # the impossible overhead ordinary least squares finds
    cal = fit_calibration(xs, ys)
    assert cal.overhead >= 0
    assert SLOPE_RANGE[0] <= cal.slope <= SLOPE_RANGE[1]
    assert cal.points == n
    # removing almost everything from the biggest request never goes below the overhead
    for x, y in zip(xs, ys):
        value, _ = cal.simulate(y, x, 50)
        assert value >= cal.overhead
    assert cal.simulate(ys[-1], xs[-1], xs[-1]) == (ys[-1], False)  # nothing changed: the recorded value


def test_the_fit_is_the_feasible_minimum():
    """Exact data on a line inside the box is recovered; data whose best line needs a negative
    overhead is fitted with overhead 0 (the constraint is active and reported)."""
    xs = [1000.0 * i for i in range(1, 30)]
    cal = fit_calibration(xs, [2500 + 1.3 * x for x in xs])
    assert cal.overhead == pytest.approx(2500, rel=1e-9)
    assert cal.slope == pytest.approx(1.3, rel=1e-9)
    assert cal.r2 == pytest.approx(1.0) and cal.median_relative_error == pytest.approx(0, abs=1e-12)
    assert cal.warning() is None
    steep = fit_calibration(xs, [1.3 * x - 800 for x in xs])
    assert steep.overhead == 0 and steep.constrained
    assert steep.unconstrained_overhead == pytest.approx(-800, rel=1e-6)
    assert "unconstrained fit was impossible" in steep.warning()


def test_an_outlier_does_not_move_the_line():
    xs = [1000.0 * i for i in range(1, 40)]
    ys = [2000 + 1.3 * x for x in xs]
    ys[20] = ys[20] * 3  # one request recorded with three times its size
    cal = fit_calibration(xs, ys)
    assert cal.outliers == 1
    assert cal.slope == pytest.approx(1.3, rel=1e-6)


def test_too_few_points_fall_back_and_warn():
    cal = fit_calibration([100, 200, 300], [200, 400, 600])
    assert (cal.overhead, cal.slope, cal.points) == (0.0, 1.0, 3)
    assert f"need {MIN_POINTS}" in cal.warning()


def test_a_poor_fit_warns():
    xs = [1000.0 * i for i in range(1, 40)]
    ys = [(1.3 if i % 2 else 2.6) * x for i, x in enumerate(xs)]  # two regimes
    cal = fit_calibration(xs, ys)
    assert "median relative error" in cal.warning()


def test_the_floor_holds_where_a_request_was_cheap():
    """A request recorded well below the fitted line: removing from it stops at the floor."""
    cal = Calibration(overhead=1000, slope=1.4, floor_ratio=1.2)
    value, floored = cal.simulate(recorded=5000, e_rec=10000, e_rep=2000)  # its own rate is 0.4
    assert floored and value == pytest.approx(1000 + 1.2 * 2000)
    value, floored = cal.simulate(recorded=15000, e_rec=10000, e_rep=2000)  # rate 1.4 ≤ its own 1.4
    assert not floored and value == pytest.approx(15000 - 1.4 * 8000)
    value, floored = cal.simulate(recorded=15000, e_rec=10000, e_rep=12000)  # additions at the slope
    assert not floored and value == pytest.approx(15000 + 1.4 * 2000)


# ------------------------------------------------------------------------------------ real sessions


def test_large_session_fit_is_plausible(large_session):
    """``large-session.jsonl``: ordinary least squares gives overhead −8.8k and rate 1.50; the
    relative constrained fit a positive overhead below the first request's recorded size."""
    cal = calibrate_recording(large_session.get_branch())
    first = next(e["message"] for e in large_session.get_branch()
                 if e["type"] == "message" and get_assistant_usage(e["message"]) is not None)
    assert 0 < cal.overhead <= input_tokens(first)
    assert 1.2 < cal.slope < 1.45
    assert cal.r2 > 0.95 and cal.warning() is None


def test_no_negative_token_count_at_a_small_window(large_session):
    """At window 16000, reserve 2048, keep 2000 the old calibration reported 124 of 519 checks
    below zero (minimum −4702) on this session. Now none is, and compaction keeps going to the end."""
    settings = CompactionSettings(reserve_tokens=2048, keep_recent_tokens=2000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReplayWarning)
        result = replay(large_session, settings, context_window=16000)
    assert not [w for w in caught if "replaced by NaN" in str(w.message)]  # no count had to be replaced
    checks = result.events[result.events.kind == "check"]
    assert (checks.context_tokens.dropna() > 0).all()
    assert (result.calls.context_tokens > 0).all()
    s = result.summary()
    assert s["mean_context_tokens"] > 0
    last = int(result.events[result.events.kind == "compaction"].step.max())
    assert last > 0.9 * len(large_session.get_branch())
    assert s["calibration_overhead"] >= 0 and s["calibration_warning"] is None
    assert 0 < s["floored_calls"] < 0.1 * s["assistant_calls"]


def _recorded_compactions(session):
    return [e for e in session.get_branch() if e["type"] == "compaction"]


def _calls_with_usage(result, session):
    valid = {e["id"] for e in session.get_branch()
             if e["type"] == "message" and get_assistant_usage(e["message"]) is not None}
    return result.calls[result.calls.entry_id.isin(valid)]


def test_replaying_the_recorded_compactions_gives_the_recorded_tokens(before_compaction):
    """Continuity: compacting where the recording did with the recording's own summaries and cut
    points (supplied by a hook), the calibrated request size of every response with usage is
    exactly the size the provider recorded, before and after both compactions."""
    supplied = iter(_recorded_compactions(before_compaction))

    def recorded_compaction(event):
        c = next(supplied)
        return CompactionResult(summary=c["summary"], first_kept_entry_id=c["firstKeptEntryId"],
                                tokens_before=c["tokensBefore"], details=c.get("details"))

    result = replay(before_compaction, CompactionSettings(), triggers="recorded",
                    hooks=Hooks(before_compact=[recorded_compaction]))
    assert len(result.compactions) == 2
    calls = _calls_with_usage(result, before_compaction)
    assert len(calls) > 400
    assert (calls.context_tokens == calls.recorded_tokens).all()


def test_recorded_triggers_with_new_summaries_stay_continuous(before_compaction):
    """With the offline summarizer and Pi 0.87.1's own cut points at the recorded places, the
    context drops at both compactions as the recording's did, to within a third of the
    recorded size (0.87.1 keeps a longer tail than the release that recorded it). Before the
    first compaction nothing differs: the sizes are the recorded ones."""
    result = replay(before_compaction, CompactionSettings(), triggers="recorded", strategy="pi-0.87.1")
    ids = [e["id"] for e in before_compaction.get_branch()]
    calls = _calls_with_usage(result, before_compaction)
    recorded = _recorded_compactions(before_compaction)
    first = calls[calls.step < ids.index(recorded[0]["id"])]
    assert len(first) > 100 and (first.context_tokens == first.recorded_tokens).all()
    for compaction in recorded:
        pos = ids.index(compaction["id"])
        before = calls[calls.step < pos].iloc[-1]
        after = calls[calls.step > pos].iloc[:3]
        assert (after.context_tokens < 0.25 * before.context_tokens).all()
        for row in (before, *after.itertuples()):
            assert abs(row.context_tokens / row.recorded_tokens - 1) < 1 / 3


def test_without_compaction_the_context_continues_across_the_recorded_ones(before_compaction):
    """``triggers="none"`` keeps what the recording summarized away: right after each recorded
    compaction the calibrated size continues from the size before it (no drop, no jump)."""
    result = replay(before_compaction, CompactionSettings(), triggers="none", context_window=10**7)
    ids = [e["id"] for e in before_compaction.get_branch()]
    calls = _calls_with_usage(result, before_compaction)
    for compaction in _recorded_compactions(before_compaction):
        pos = ids.index(compaction["id"])
        before = calls[calls.step < pos].iloc[-1].context_tokens
        after = calls[calls.step > pos].iloc[0].context_tokens
        assert 0.97 * before < after < 1.05 * before


def test_the_removal_rule_predicts_the_recordings_own_drop(before_compaction):
    """Backtest of a removal: from the last request before each recorded compaction, predict the
    first request after it from the two estimates alone. Within 10% of what the provider counted
    (+8.5% and −3.1% here)."""
    branch = before_compaction.get_branch()
    estimates, cal = walk_recording(branch)
    points = []  # (index on the path, E_rec, recorded input)
    for i, entry in enumerate(branch):
        if entry["type"] == "message" and get_assistant_usage(entry["message"]) is not None:
            points.append((i, estimates[i], input_tokens(entry["message"])))
    for i, entry in enumerate(branch):
        if entry["type"] != "compaction":
            continue
        _, e_before, y_before = [p for p in points if p[0] < i][-1]
        _, e_after, y_after = next(p for p in points if p[0] > i)
        predicted, floored = cal.simulate(y_before, e_before, e_after)
        assert not floored
        assert abs(predicted / y_after - 1) < 0.10
        assert not math.isclose(predicted, y_after)  # a prediction, not the recorded value


def test_the_walk_of_a_recording_is_shared_by_the_replays_of_its_path(before_compaction):
    """Within ``shared_recordings`` a path of the same entry objects reuses the walk (a sweep replays
    one session many times); a path of other entry objects, even equal ones, is walked again; the
    result is the same."""
    with shared_recordings():
        first = walk_recording(before_compaction.get_branch())
        assert walk_recording(before_compaction.get_branch()) is first
        copied = [dict(e) for e in before_compaction.get_branch()]
        again = walk_recording(copied)
    assert again is not first
    assert again[1] == first[1]
    assert [e for e in again[0] if e == e] == [e for e in first[0] if e == e]


def test_outside_shared_recordings_a_message_edited_in_place_is_estimated_again(before_compaction):
    """A researcher may edit a loaded message and replay again: outside a sweep nothing is kept."""
    path = before_compaction.get_branch()
    first = walk_recording(path)
    assert walk_recording(path) is not first
    step = next(i for i in range(len(path) - 1, 0, -1)
                if path[i]["type"] == "message" and path[i]["message"]["role"] == "assistant")
    user = next(e for e in reversed(path[:step]) if e["type"] == "message" and e["message"]["role"] == "user")
    saved = user["message"]["content"]
    try:
        user["message"]["content"] = [{"type": "text", "text": "x" * 40_000}]
        edited = walk_recording(path)
    finally:
        user["message"]["content"] = saved
    assert edited[0][step] >= first[0][step] + 9_000  # 40,000 characters ≈ 10,000 tokens more


def _tracked_estimates(path: list[dict]) -> list[float]:
    """The recording's usage-free estimate before each assistant step, from a tracker fed entry by entry."""
    from pimem.core.incremental.tracker import ContextTracker

    tracker: ContextTracker | None = None
    out: list[float] = []
    for entry in path:
        is_assistant = entry.get("type") == "message" and entry["message"].get("role") == "assistant"
        out.append(tracker.usage_free_estimate() if is_assistant and tracker is not None
                   else 0 if is_assistant else math.nan)
        if tracker is None:
            tracker = ContextTracker([entry])
        else:
            tracker.append(entry)
    return out


def _same_estimates(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) if x != x else x == y for x, y in zip(a, b))


def test_the_walk_equals_a_tracker_fed_entry_by_entry(sample_paths):
    from pimem.core.session_manager import load_session

    for file in sample_paths:
        path = load_session(file).get_branch()
        assert _same_estimates(walk_recording(path)[0], _tracked_estimates(path)), file.name


def test_the_walk_past_its_plain_start_equals_a_tracker():
    """Entries that end the running sum (a system message, a message without content, a compaction, a
    repeated id) are walked by the tracker from there on, with the same estimates."""
    def msg(i: int, parent: str | None, role: str, **extra: object) -> dict:
        message = {"role": role, "content": [{"type": "text", "text": f"message {i} " * (i + 3)}], "timestamp": i}
        message.update(extra)
        return {"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": f"2026-01-01T00:00:{i:02d}Z",
                "message": message}

    def chain(*specs: tuple) -> list[dict]:
        out: list[dict] = []
        for i, (role, extra) in enumerate(specs):
            out.append(msg(i, out[-1]["id"] if out else None, role, **extra))
        return out

    usage = {"input": 50, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 55,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    done = {"usage": usage, "stopReason": "stop"}
    cases = [
        chain(("user", {}), ("assistant", done), ("system", {}), ("user", {}), ("assistant", done)),
        chain(("user", {}), ("assistant", done), ("user", {"content": None}), ("assistant", done)),
        chain(("user", {}), ("bashExecution", {"content": None, "command": "ls", "output": "a"}),
              ("assistant", done)),
    ]
    compacted = chain(("user", {}), ("assistant", done), ("user", {}), ("assistant", done), ("user", {}),
                      ("assistant", done))
    compaction = {"type": "compaction", "id": "c1", "parentId": compacted[3]["id"], "timestamp": "2026-01-01T00:00:30Z",
                  "summary": "the summary", "firstKeptEntryId": compacted[2]["id"], "tokensBefore": 100}
    compacted[4]["parentId"] = "c1"
    cases.append(compacted[:4] + [compaction] + compacted[4:])
    for path in cases:
        assert _same_estimates(walk_recording(path)[0], _tracked_estimates(path))
