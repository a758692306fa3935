"""The study as data: grids derived from each session, and each session's drift-report run taken from
the sweep's own runs (no second replay)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimem.experiments.study import (DEFAULT_KEEP_SHARES, DEFAULT_RESERVE_SHARES, DEFAULT_WINDOW_SHARES, SessionSize,
                                     design_study, run_study_sweep, session_size, study_grid, unique_names)

@pytest.mark.slow
def test_the_report_run_is_the_sweeps_own_and_a_resumed_study_replays_it(samples_dir, tmp_path):
    paths = [samples_dir / "auth-login-bug.jsonl", samples_dir / "ventas-pipeline-refactor.jsonl"]
    design = design_study(paths, token_sources=("calibrated", "chars"))
    seen = []

    def record(run):
        seen.append((run.name, run.result is not None))

    first = run_study_sweep(design, cache=tmp_path / "c.sqlite", results_path=tmp_path / "runs.jsonl", workers=1,
                            progress=False, on_report=record)
    assert [name for name, _ in seen] == design.names
    by_name = {r.name: r for r in first.reports}
    studied = by_name["auth-login-bug"]
    assert studied.error is None and studied.reused and studied.result is None  # dropped once handed over
    assert ("auth-login-bug", True) in seen
    # the report's setting is one of the grid's compacting reference runs
    runs = first.reference_runs
    row = runs[(runs["session"] == str(paths[0]))
               & (runs["reserve_tokens"] == studied.setting["reserve_tokens"])
               & (runs["keep_recent_tokens"] == studied.setting["keep_recent_tokens"])
               & (runs["context_window"] == studied.setting["context_window"])]
    assert len(row) == 1 and row["compactions"].iloc[0] > 0
    assert "no setting of the grid fits this session" in by_name["ventas-pipeline-refactor"].error
    # started again, every run comes from the log: the report's run is replayed, to the same counts
    again = run_study_sweep(design, cache=tmp_path / "c.sqlite", results_path=tmp_path / "runs.jsonl", workers=1,
                            progress=False)
    assert again.runs["resumed"].all()
    replayed = {r.name: r for r in again.reports}["auth-login-bug"]
    assert not replayed.reused and replayed.setting == studied.setting
    assert replayed.result.summary()["compactions"] == row["compactions"].iloc[0]


def test_study_names_stay_distinct_when_a_stem_looks_like_a_renamed_one():
    names = unique_names([Path("a/s.jsonl"), Path("b/s.jsonl"), Path("c/s-2.jsonl")])
    assert len(set(names)) == 3
    assert names[0] == "s" and names[2] == "s-2"


def test_study_grids_are_derived_from_each_session(samples_dir):
    """Left out, the grid follows the session: windows hold the request overhead plus a fifth and two
    fifths of the conversation; reserve and keep are shares of the room left for it."""
    size = session_size(samples_dir / "logslice-since-flag.jsonl")
    assert size.estimate > 50000 and size.overhead > 0 and size.slope > 0.5 and size.largest_step > 1000
    grid, left_out = study_grid(size)
    assert len(grid) + left_out == 18 and len(grid) >= 12
    windows = sorted({g["context_window"] for g in grid})
    assert len(windows) == len(DEFAULT_WINDOW_SHARES)
    least = size.room_needed(0, 0) / (1 - 0.8 * max(DEFAULT_RESERVE_SHARES) - max(DEFAULT_KEEP_SHARES))
    for w, share in zip(windows, DEFAULT_WINDOW_SHARES):
        room = max(share * size.slope * size.estimate, least * share / min(DEFAULT_WINDOW_SHARES))
        assert w == pytest.approx(size.overhead + room, rel=0.05)
    runs = set()
    for g in grid:
        room = g["context_window"] - size.overhead
        assert g["reserve_tokens"] == pytest.approx(g["reserve_share"] * room, rel=0.05)
        assert g["keep_recent_tokens"] < g["context_window"] - g["reserve_tokens"]
        # no cell is degenerate: the summary, the kept tail and two largest steps fit; the session
        # reaches the threshold; and no two cells are the same setting
        assert room >= 0.8 * g["reserve_tokens"] + g["keep_recent_tokens"] + 2 * size.largest_step
        assert g["context_window"] - g["reserve_tokens"] < size.reach
        runs.add((g["reserve_tokens"], g["keep_recent_tokens"], g["context_window"]))
    assert len(runs) == len(grid)
    # a session whose largest step is most of it has no such setting, and the study says why
    small = session_size(samples_dir / "ventas-pipeline-refactor.jsonl")
    assert small.largest_step > 0.3 * (small.reach - small.overhead)
    assert study_grid(small) == ([], 18)
    # values given are used as they are; settings without room are left out and counted
    grid, left_out = study_grid(SessionSize(10000), reserve=[1000, 9000], window=[8000])
    assert {g["reserve_tokens"] for g in grid} == {1000} and left_out == 3
    assert all(g["window_share"] != g["window_share"] for g in grid)  # NaN: not a share
