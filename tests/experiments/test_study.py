"""The study as data: grids in tokens per model window, what each session recorded, paired statistics over
sessions (copies once, calibration warnings apart), and each session's drift reports from the sweep's own runs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from pimem.experiments.run_measures import run_measures
from pimem.experiments.study import (STUDY_KEEPS, STUDY_SUMMARY, STUDY_RESERVES, STUDY_WINDOWS, SessionSize, design_study,
                                     paired_block, run_study_sweep, session_size, study_grid, study_summary,
                                     supported_level, unique_names)

REPO = Path(__file__).resolve().parents[2]
REAL_PI = REPO / "datasets" / "real" / "pi"


@pytest.fixture(scope="module")
def history_session() -> Path:
    path = REAL_PI / "history-session.jsonl.gz"
    if not path.exists():
        pytest.skip("no bundled real sessions")
    return path


def test_study_names_stay_distinct_and_lose_their_suffixes():
    names = unique_names([Path("a/s.jsonl"), Path("b/s.jsonl.gz"), Path("c/s-2.jsonl"), Path("d/t.jsonl.gz")])
    assert names == ["s", "s-3", "s-2", "t"]


def test_a_session_says_what_it_recorded(samples_dir, history_session):
    size = session_size(history_session)
    assert size.model == "anthropic/claude-opus-4-5" and size.model_window == 200_000
    assert size.session_id and size.recorded_compactions == 1
    assert 150_000 < size.reach < 250_000
    sample = session_size(samples_dir / "auth-login-bug.jsonl")
    assert sample.model == "anthropic/claude-sonnet-4-5" and sample.model_window == 1_000_000  # Pi's table
    assert sample.recorded_compactions == 3


def test_the_default_grid_is_in_tokens_with_the_recorded_window_first():
    size = SessionSize(100_000, overhead=3_000, model_window=400_000)
    grid, left_out = study_grid(size)
    windows = list(dict.fromkeys(g["context_window"] for g in grid))
    assert windows == [400_000, *STUDY_WINDOWS]
    assert [g["model_window"] for g in grid] == [g["context_window"] == 400_000 for g in grid]
    assert {g["reserve_tokens"] for g in grid} == set(STUDY_RESERVES)
    assert {g["keep_recent_tokens"] for g in grid} == set(STUDY_KEEPS)
    assert len(grid) == len(windows) * 9 and left_out == []
    # a recorded window among the defaults is not repeated
    assert len(study_grid(SessionSize(1, model_window=200_000))[0]) == 3 * 9


def test_only_settings_pi_cannot_work_with_are_left_out_and_each_says_why():
    size = SessionSize(10_000, overhead=2_000)
    grid, left_out = study_grid(size, reserve=[200, 1_000, 9_000], keep=[500, 5_000], window=[8_000])
    kept = {(g["reserve_tokens"], g["keep_recent_tokens"]) for g in grid}
    assert kept == {(1_000, 500)}
    reasons = {(c["reserve_tokens"], c["keep_recent_tokens"]): c["reason"] for c in left_out}
    assert reasons[(9_000, 500)].startswith("reserve ≥ window")
    assert reasons[(1_000, 5_000)].startswith("the overhead every request carries")
    assert "fewer than 256 tokens" in reasons[(200, 500)]
    # a threshold the session never reaches is a result (no compaction), not left out
    grid, left_out = study_grid(SessionSize(1_000), reserve=[16_384], keep=[20_000], window=[1_000_000])
    assert len(grid) == 1 and not left_out


def test_intervals_are_given_at_the_level_their_coverage_supports():
    assert supported_level(2) is None
    levels = [supported_level(n) for n in (6, 10, 20)]
    assert levels[0] == 0.5 and levels[-1] == 0.95
    assert all(a <= b for a, b in zip(levels, levels[1:]))


def test_the_paired_block_has_every_unit_at_every_setting():
    rows = []
    for unit, missing in (("a", set()), ("b", {(1, 1)}), ("c", {(1, 1), (1, 2)})):
        for cell in ((1, 1), (1, 2), (2, 1), (2, 2)):
            rows.append({"unit": unit, "reserve_tokens": cell[0], "keep_recent_tokens": cell[1],
                         "score": math.nan if cell in missing else 0.5})
    units, cells = paired_block(pd.DataFrame(rows), "score")
    # all three units at the two settings they share (6 values) beats a and b at three (6, fewer units)
    assert units == ["a", "b", "c"] and cells == [(2, 1), (2, 2)]


def _runs(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame([{"session": s, "unit": u, "token_source": src, "context_window": 100, "reserve_tokens": r,
                          "keep_recent_tokens": 10, "compactions": c, "score": q, "error": None,
                          "calibration_warning": w} for s, u, src, r, c, q, w in rows])


def test_summary_counts_copies_once_pairs_quality_and_keeps_warned_sessions_apart():
    runs = _runs([
        # unit A: two checkpoint copies (averaged first: compactions 2 and 4 -> 3)
        ("a1", "A", "calibrated", 1, 2, 0.4, None), ("a2", "A", "calibrated", 1, 4, 0.6, None),
        ("a1", "A", "calibrated", 2, 1, 0.2, None), ("a2", "A", "calibrated", 2, 1, 0.2, None),
        # unit B compacts at one setting only: the paired comparison keeps A and B at that setting and
        # leaves the other blank (as many values as A alone at both, and more sessions)
        ("b", "B", "calibrated", 1, 1, 0.9, None), ("b", "B", "calibrated", 2, 0, math.nan, None),
        # unit W's calibration is poor: summarized apart
        ("w", "W", "calibrated", 1, 9, 0.1, "poor token calibration"), ("w", "W", "calibrated", 2, 9, 0.1, None),
        ("a1", "A", "chars", 1, 5, math.nan, None), ("a2", "A", "chars", 1, 5, math.nan, None),
        ("a1", "A", "chars", 2, 5, math.nan, None), ("a2", "A", "chars", 2, 5, math.nan, None),
        ("b", "B", "chars", 1, 5, math.nan, None), ("b", "B", "chars", 2, 5, math.nan, None),
    ])
    s = study_summary(runs, metrics=("compactions", "score"), n_boot=50)
    assert list(s.columns) == STUDY_SUMMARY.names
    main = s[s["group"] == "main"].set_index(["metric", "reserve_tokens"])
    assert main.loc[("compactions", 1), "mean"] == pytest.approx((3 + 1) / 2)
    assert main.loc[("compactions", 1), "n"] == 2  # A once, B
    assert main.loc[("compactions", 1), "band_high"] == pytest.approx(5)  # chars
    # quality on the same sessions at every setting shown
    assert main.loc[("score", 1), "mean"] == pytest.approx((0.5 + 0.9) / 2) and main.loc[("score", 1), "n"] == 2
    assert math.isnan(main.loc[("score", 2), "mean"]) and main.loc[("score", 2), "n"] == 0
    assert "1 of 2 settings blank" in main.loc[("score", 2), "note"]
    assert math.isnan(main.loc[("score", 1), "ci_low"])  # no interval over two sessions
    warned = s[s["group"] == "calibration warned"]
    assert set(warned["n"]) == {1} and warned.loc[warned["metric"] == "compactions", "mean"].tolist() == [9, 9]


def test_run_measures_score_is_the_mean_of_the_compactions_scores(samples_dir):
    from pimem.core.compaction.compaction import CompactionSettings
    from pimem.drift.measures import summary_measures
    from pimem.drift.records import compaction_records
    from pimem.replays.engine import replay

    result = replay(samples_dir / "logslice-since-flag.jsonl", CompactionSettings(reserve_tokens=1300,
                                                                                  keep_recent_tokens=1300),
                    context_window=29000)
    assert len(result.compactions) >= 2
    scores = [summary_measures(r)["score"] for r in compaction_records(result)]
    measured = run_measures(result, score=True, cost=False)
    assert measured["score"] == pytest.approx(sum(scores) / len(scores))
    assert "score" not in run_measures(result, cost=False)


@pytest.mark.slow
def test_each_session_gets_its_reports_from_the_sweeps_own_runs(samples_dir, history_session, tmp_path):
    tiny = samples_dir / "gpxkit-antimeridian.jsonl"
    design = design_study([history_session, tiny], reserve=[16_384], keep=[10_000, 40_000], window=[128_000],
                          token_sources=("calibrated", "chars"))
    seen = []
    first = run_study_sweep(design, cache=tmp_path / "c.sqlite", results_path=tmp_path / "runs.jsonl", workers=2,
                            progress=False, on_report=lambda run: seen.append(run.result is not None), n_boot=50)
    by_name = {r.name: r for r in first.reports}
    studied = by_name["history-session"]
    assert studied.error is None and studied.reused and studied.result is None  # dropped once handed over
    assert studied.compactions >= 2 and studied.report is not None and len(studied.report) == studied.compactions
    assert studied.recorded is not None and len(studied.recorded) == 1  # its one recorded compaction
    assert seen == [True, False]
    # the tiny session has no replay report, and says why; no session failed
    assert by_name["gpxkit-antimeridian"].error is None
    assert "never compacts at any setting of the grid" in by_name["gpxkit-antimeridian"].reason
    # the quality measures ran under the reference source only
    runs = first.runs
    assert runs.loc[runs["token_source"] == "calibrated", "score"].notna().any()
    assert runs.loc[runs["token_source"] == "chars", "score"].isna().all()
    # started again, every run comes from the log: the report's run is replayed, to the same counts
    again = run_study_sweep(design, cache=tmp_path / "c.sqlite", results_path=tmp_path / "runs.jsonl", workers=1,
                            progress=False, n_boot=50)
    assert again.runs["resumed"].all()
    replayed = {r.name: r for r in again.reports}["history-session"]
    assert not replayed.reused and replayed.setting == studied.setting
    assert replayed.compactions == studied.compactions
