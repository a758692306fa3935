"""Token-source bands and session-level paired bootstrap intervals over sweep frames."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from pimem.errors import ConfigurationError, PimemWarning
from pimem.experiments.uncertainty import (
    PairedDifference,
    bootstrap_ci,
    paired_difference,
    sweep_summary,
    token_source_bands,
)


def _frame(values: dict[tuple[int, str], list[float]], sources=("calibrated",)) -> pd.DataFrame:
    """A sweep-shaped frame: ``values[(reserve, source)]`` = one value per session."""
    rows = []
    for (reserve, source), per_session in values.items():
        for i, v in enumerate(per_session):
            rows.append({"session": f"s{i}.jsonl", "reserve_tokens": reserve, "keep_recent_tokens": 2000,
                         "context_window": 16000, "token_source": source, "compactions": v, "error": None})
    return pd.DataFrame(rows)


def test_pairing_separates_settings_that_overlapping_intervals_hide():
    """Sessions differ a lot, but every session compacts exactly 2 more times at reserve 4096:
    the per-setting intervals overlap, the paired difference is exactly 2."""
    base = [1.0, 4.0, 9.0, 16.0, 30.0, 2.0, 7.0, 12.0]
    df = _frame({(2048, "calibrated"): base, (4096, "calibrated"): [v + 2 for v in base]})
    ci = bootstrap_ci(df, ["compactions"], n_boot=500, seed=1, check_coverage=False)  # the mechanics, 8 sessions
    lo, hi = ci.set_index("reserve_tokens")["compactions_ci_low"], ci.set_index("reserve_tokens")["compactions_ci_high"]
    assert lo[4096] < hi[2048]  # overlapping
    assert list(ci["n_sessions"]) == [8, 8]
    assert ci.set_index("reserve_tokens")["compactions"][2048] == pytest.approx(np.mean(base))
    for r in (2048, 4096):
        mean = ci.set_index("reserve_tokens")["compactions"][r]
        assert lo[r] <= mean <= hi[r]
    diff = paired_difference(df, "compactions", {"reserve_tokens": 2048}, {"reserve_tokens": 4096}, n_boot=500,
                             check_coverage=False)
    assert diff["difference"] == pytest.approx(2) and diff["ci_low"] == pytest.approx(2)
    assert diff["ci_high"] == pytest.approx(2) and diff["n_sessions"] == 8


def test_the_interval_matches_the_spread_of_sessions():
    """For many sessions the 95% percentile interval of the mean is close to mean ± 1.96·sd/√n."""
    rng = np.random.default_rng(3)
    values = list(rng.normal(10, 4, size=200))
    ci = bootstrap_ci(_frame({(2048, "calibrated"): values}), ["compactions"], n_boot=4000, seed=2).iloc[0]
    half = 1.96 * np.std(values, ddof=1) / math.sqrt(len(values))
    assert ci.compactions_ci_low == pytest.approx(np.mean(values) - half, abs=0.15 * half)
    assert ci.compactions_ci_high == pytest.approx(np.mean(values) + half, abs=0.15 * half)


def test_draws_of_one_session_are_not_more_sessions():
    df = _frame({(2048, "calibrated"): [1.0, 3.0]})
    draws = pd.concat([df.assign(sample=0), df.assign(sample=1, compactions=df.compactions + 2)])
    ci = bootstrap_ci(draws, ["compactions"], n_boot=200).iloc[0]
    assert ci.n_sessions == 2 and ci.compactions == pytest.approx(3.0)


def test_no_interval_where_the_coverage_simulation_does_not_support_one():
    """8 sessions: a "95%" percentile interval covers about 90% in simulation, so none is given."""
    base = [1.0, 4.0, 9.0, 16.0, 30.0, 2.0, 7.0, 12.0]
    df = _frame({(2048, "calibrated"): base})
    with pytest.warns(PimemWarning, match=r"8 sessions: no 95% interval \(NaN\).* about \d+%"):
        ci = bootstrap_ci(df, ["compactions"], n_boot=300).iloc[0]
    assert math.isnan(ci.compactions_ci_low) and math.isnan(ci.compactions_ci_high)
    assert ci.compactions == pytest.approx(np.mean(base)) and 0.8 < ci.interval_coverage < 0.95 - 0.03
    many = _frame({(2048, "calibrated"): list(np.random.default_rng(1).normal(10, 3, 40))})
    ci = bootstrap_ci(many, ["compactions"], n_boot=300).iloc[0]
    assert ci.compactions_ci_low < ci.compactions < ci.compactions_ci_high and ci.interval_coverage >= 0.92
    with pytest.warns(PimemWarning, match="no 95% interval"):
        diff = paired_difference(df, "compactions", {"reserve_tokens": 2048}, {"reserve_tokens": 2048})
    assert math.isnan(diff["ci_low"]) and diff["difference"] == 0


def test_one_session_has_no_interval():
    df = _frame({(2048, "calibrated"): [5.0]})
    with pytest.warns(PimemWarning, match="no session-level interval"):
        ci = bootstrap_ci(df, ["compactions"])
    assert math.isnan(ci.compactions_ci_low.iloc[0]) and ci.compactions.iloc[0] == 5.0


def test_bands_span_the_token_sources():
    df = _frame({(2048, "calibrated"): [6.0, 8.0], (2048, "chars"): [1.0, 3.0], (2048, "tiktoken"): [4.0, 4.0],
                 (2048, "estimate"): [133.0, 120.0]})
    bands = token_source_bands(df, ["compactions"]).iloc[0]
    assert (bands.compactions_band_low, bands.compactions_band_high) == (2.0, 7.0)
    assert bands.sources == 3 and "compactions_estimate" not in bands.index  # not a default band source
    everything = token_source_bands(df, ["compactions"], sources=None).iloc[0]
    assert everything.compactions_band_high == pytest.approx(126.5)
    per_session = token_source_bands(df, ["compactions"], per_session=True)
    assert list(per_session.compactions_band_low) == [1.0, 3.0]
    with pytest.raises(ConfigurationError, match="token_source"):
        token_source_bands(df.drop(columns="token_source"), ["compactions"])


def test_sweep_summary_puts_interval_and_band_beside_the_mean():
    df = _frame({(2048, "calibrated"): [6.0, 8.0, 7.0], (2048, "chars"): [1.0, 3.0, 2.0],
                 (4096, "calibrated"): [9.0, 9.0, 9.0], (4096, "chars"): [5.0, 5.0, 8.0]})
    summary = sweep_summary(df, ["compactions"], n_boot=300, check_coverage=False).set_index("reserve_tokens")
    assert summary.loc[2048, "compactions"] == 7.0
    assert summary.loc[2048, "compactions_band_low"] == 2.0 and summary.loc[2048, "compactions_band_high"] == 7.0
    assert summary.loc[4096, "compactions_ci_low"] == summary.loc[4096, "compactions_ci_high"] == 9.0
    with pytest.raises(ConfigurationError, match="reference token source"):
        sweep_summary(df, ["compactions"], reference="tiktoken")
    with pytest.raises(ConfigurationError, match="not a column"):
        sweep_summary(df, ["nonsense"])


def test_a_real_sweep_with_a_token_source_axis(sample_paths):
    from pimem.experiments.sweep import sweep

    grid = {"reserve_tokens": [2048, 4096], "keep_recent_tokens": [2000], "context_window": [16000],
            "token_source": ["calibrated", "chars", "tiktoken"], "sample": [0, 1]}
    df = sweep(sample_paths, grid, workers=1, progress=False)
    assert df["error"].isna().all() and set(df["sample"]) == {0, 1}
    with pytest.warns(PimemWarning, match="no 95% interval"):  # a handful of sample sessions
        summary = sweep_summary(df, ["compactions", "mean_context_tokens"], n_boot=300)
    assert summary["compactions_ci_low"].isna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PimemWarning)
        summary = sweep_summary(df, ["compactions", "mean_context_tokens"], n_boot=300, check_coverage=False)
    assert len(summary) == 2 and (summary["n_sessions"] == len(sample_paths)).all()
    assert (summary["sources"] == 3).all()
    for metric in ("compactions", "mean_context_tokens"):
        assert (summary[f"{metric}_band_low"] <= summary[metric]).all()
        assert (summary[metric] <= summary[f"{metric}_band_high"]).all()
        assert (summary[f"{metric}_ci_low"] <= summary[metric]).all()
        assert (summary[metric] <= summary[f"{metric}_ci_high"]).all()
    assert (summary["mean_context_tokens_band_high"] > summary["mean_context_tokens_band_low"]).all()


def test_strategy_and_summarizer_axes_name_settings():
    df = _frame({(2048, "calibrated"): [1.0, 2.0]})
    both = pd.concat([df.assign(strategy="pi-0.87.1"), df.assign(strategy="other", compactions=df.compactions * 3)])
    ci = bootstrap_ci(both, ["compactions"], n_boot=100).set_index("strategy")
    assert ci.loc["pi-0.87.1", "compactions"] == 1.5 and ci.loc["other", "compactions"] == 4.5


def test_the_difference_has_the_keys_of_its_typeddict():
    every = PairedDifference.__required_keys__ | PairedDifference.__optional_keys__
    many = {(2048, "calibrated"): [float(v) for v in range(40)], (4096, "calibrated"): [v + 1.0 for v in range(40)]}
    diff = paired_difference(_frame(many), "compactions", {"reserve_tokens": 2048}, {"reserve_tokens": 4096},
                             n_boot=200)
    assert set(diff) == every and diff["ci_low"] == pytest.approx(1.0) and diff["n_sessions"] == 40
    one = {(2048, "calibrated"): [1.0], (4096, "calibrated"): [2.0]}
    with pytest.warns(PimemWarning, match="no interval"):
        diff = paired_difference(_frame(one), "compactions", {"reserve_tokens": 2048}, {"reserve_tokens": 4096})
    assert set(diff) == PairedDifference.__required_keys__ and diff["difference"] == 1.0
