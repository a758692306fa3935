"""Cluster-bootstrap intervals and the coverage simulation that decides whether one is shown."""

from __future__ import annotations

import math

import numpy as np

from pimem.drift.intervals import (COVERAGE_TOLERANCE, bootstrap_coverage, cluster_bootstrap, cluster_interval,
                                   interval_supported)


def test_coverage_of_a_95_interval_is_far_below_95_with_few_sessions():
    few = bootstrap_coverage(2)
    many = bootstrap_coverage(30)
    assert few < 0.8  # two sessions: the percentile interval is much too narrow
    assert many >= 0.95 - COVERAGE_TOLERANCE
    assert bootstrap_coverage(4) < many


def test_interval_supported_follows_the_simulation():
    assert interval_supported(1) == (False, 0.0)
    assert interval_supported(3)[0] is False
    supported, coverage = interval_supported(40)
    assert supported and coverage >= 0.92


def test_bootstrap_resamples_whole_sessions():
    # two sessions, one all 0 and one all 1: a resample holds each whole, so the pooled mean is 0, 1/2 or 1
    values = [0.0] * 6 + [1.0] * 6
    groups = ["a"] * 6 + ["b"] * 6
    clusters = ["a1", "a1", "a2", "a2", "a3", "a3", "b1", "b1", "b2", "b2", "b3", "b3"]
    stats = cluster_bootstrap(values, groups, clusters, n_boot=200, seed=1)
    assert set(np.round(stats, 6)) <= {0.0, 0.5, 1.0}
    assert {0.0, 1.0} <= set(np.round(stats, 6))


def test_no_interval_below_the_supported_number_of_sessions():
    ci = cluster_interval([1, 0, 1, 1], ["s1", "s1", "s2", "s2"], ["c1", "c2", "c3", "c4"])
    assert ci.estimate == 0.75 and ci.n == 4 and ci.n_clusters == 4 and ci.n_groups == 2
    assert math.isnan(ci.low) and math.isnan(ci.high)
    assert "2 session" in ci.note and "no 95% interval" in ci.note


def test_interval_with_many_sessions_holds_the_estimate():
    rng = np.random.default_rng(0)
    groups = [f"s{i // 4}" for i in range(160)]
    clusters = [f"c{i // 2}" for i in range(160)]
    values = rng.binomial(1, 0.6, 160).astype(float)
    ci = cluster_interval(values, groups, clusters)
    assert ci.n_groups == 40 and ci.n_clusters == 80
    assert ci.low <= ci.estimate <= ci.high and ci.high - ci.low < 0.4
    macro = cluster_interval([1.0, 1.0, 1.0, 0.0], ["a", "a", "a", "b"], ["x", "x", "x", "y"], macro=True)
    assert macro.estimate == 0.5  # per compaction: (1 + 0) / 2, not 3 / 4
    assert cluster_interval([math.nan], ["a"], ["x"]).note == "nothing to measure"
