"""Intervals a reader can trust: cluster bootstrap over sessions and compactions, shown only where they cover.

Facts of one compaction are not independent draws, and neither are compactions of one session. A
measure pooled over facts (micro) or averaged over compactions (macro) is therefore resampled in two
stages: sessions with replacement, then compactions with replacement within each drawn session
(:func:`cluster_bootstrap`), and the percentile interval of the resampled statistic is taken.

A percentile bootstrap over few clusters is too narrow: its real coverage falls far below its stated
level (:func:`bootstrap_coverage` simulates it on data with session and compaction effects; with 2
sessions a "95%" interval covers the truth about half of the time). :func:`interval_supported` runs that
simulation for the number of sessions at hand (cheap: vectorised, cached) and an interval is shown only
when its simulated coverage, and that with one session fewer, are within :data:`COVERAGE_TOLERANCE` of
the level; otherwise the interval is
NaN and :class:`Interval` ``.note`` says why. The simulation is one model of the data (beta-distributed
session and compaction rates, binary outcomes, 3 compactions per session, 20 items per compaction): a
check that the interval is not absurd, not a proof that it covers on every data set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pimem.errors import ConfigurationError

__all__ = ["Interval", "cluster_bootstrap", "cluster_interval", "bootstrap_coverage", "interval_supported",
           "COVERAGE_TOLERANCE", "MIN_COMPACTION_FACTS", "cohen_kappa"]

COVERAGE_TOLERANCE = 0.03
MIN_COMPACTION_FACTS = 5  # a compaction with fewer needed facts is flagged: its own recall is noise


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval (NaN where not supported), the counts behind it and a note."""

    estimate: float
    low: float
    high: float
    level: float
    n: int
    n_clusters: int
    n_groups: int
    note: str

    def __str__(self) -> str:
        if math.isnan(self.estimate):
            return f"– (n={self.n})"
        if math.isnan(self.low):
            return f"{self.estimate:.2f} (n={self.n}, {self.n_clusters} compactions, {self.n_groups} sessions; {self.note})"
        return (f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}] (n={self.n}, {self.n_clusters} compactions, "
                f"{self.n_groups} sessions)")


def _codes(labels: Sequence[object]) -> np.ndarray:
    seen: dict[object, int] = {}
    return np.array([seen.setdefault(v, len(seen)) for v in labels], dtype=int)


def cluster_bootstrap(values: Sequence[float], groups: Sequence[object], clusters: Sequence[object], *,
                      n_boot: int = 2000, seed: int = 0, macro: bool = False,
                      weights: Sequence[float] | None = None) -> np.ndarray:
    """``n_boot`` resampled statistics: groups (sessions) with replacement, then clusters (compactions)
    with replacement within each drawn group; the statistic is the pooled (``weights``-weighted) mean of
    the values (micro) or, with ``macro``, the mean of the cluster means. NaN values are left out."""
    v = np.asarray(values, dtype=float)
    w = np.ones(len(v)) if weights is None else np.asarray(weights, dtype=float)
    g, c = _codes(groups), _codes(clusters)
    ok = ~np.isnan(v) & ~np.isnan(w)
    v, w, g, c = v[ok], w[ok], g[ok], c[ok]
    if not len(v):
        return np.full(n_boot, np.nan)
    n_c = c.max() + 1
    sums = np.bincount(c, weights=v * w, minlength=n_c)
    counts = np.bincount(c, weights=w, minlength=n_c)
    cluster_group = np.zeros(n_c, dtype=int)
    cluster_group[c] = g
    members = [np.flatnonzero(cluster_group == k) for k in range(g.max() + 1)]
    members = [m for m in members if len(m)]
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    for b in range(n_boot):
        drawn = [m[rng.integers(0, len(m), len(m))] for m in (members[i] for i in rng.integers(0, len(members), len(members)))]
        idx = np.concatenate(drawn)
        if macro:
            out[b] = float(np.mean(sums[idx] / counts[idx]))
        else:
            out[b] = float(sums[idx].sum() / counts[idx].sum())
    return out


@lru_cache(maxsize=64)
def bootstrap_coverage(n_groups: int, *, level: float = 0.95, per_group: int = 3, per_cluster: int = 20,
                       n_sim: int = 800, n_boot: int = 300, seed: int = 0) -> float:
    """Simulated coverage of the two-stage percentile interval at ``level`` with ``n_groups`` sessions
    (see module docs): the share of simulated studies whose interval holds the true mean."""
    rng = np.random.default_rng(seed)
    alpha = (1 - level) / 2
    mu, kappa_s, kappa_c = 0.6, 3.0, 10.0
    hits = 0
    for _ in range(n_sim):
        p_s = rng.beta(mu * kappa_s, (1 - mu) * kappa_s, n_groups)
        p_c = rng.beta(p_s[:, None] * kappa_c + 1e-9, (1 - p_s[:, None]) * kappa_c + 1e-9, (n_groups, per_group))
        successes = rng.binomial(per_cluster, p_c).astype(float)  # groups × clusters
        gi = rng.integers(0, n_groups, (n_boot, n_groups))
        ci = rng.integers(0, per_group, (n_boot, n_groups, per_group))
        drawn = successes[gi[:, :, None], ci]
        stats = drawn.sum(axis=(1, 2)) / (n_groups * per_group * per_cluster)
        low, high = np.quantile(stats, [alpha, 1 - alpha])
        hits += int(low <= mu <= high)
    return hits / n_sim


def interval_supported(n_groups: int, level: float = 0.95) -> tuple[bool, float]:
    """(whether a two-stage bootstrap interval over ``n_groups`` sessions reaches ``level`` within
    :data:`COVERAGE_TOLERANCE` in the simulation, the simulated coverage)."""
    if n_groups < 2:
        return False, 0.0
    n = min(n_groups, 60)
    coverage = bootstrap_coverage(n, level=level)
    # one session fewer must pass too: a lucky draw of the simulation does not make an interval
    below = bootstrap_coverage(n - 1, level=level) if n > 2 else 0.0
    return bool(min(coverage, below) >= level - COVERAGE_TOLERANCE), float(coverage)


def cluster_interval(values: Sequence[float], groups: Sequence[object], clusters: Sequence[object], *,
                     level: float = 0.95, n_boot: int = 2000, seed: int = 0, macro: bool = False,
                     weights: Sequence[float] | None = None) -> Interval:
    """The pooled (``weights``-weighted; or, with ``macro``, per-cluster) mean with its two-stage bootstrap
    interval, NaN and a note where :func:`interval_supported` does not support ``level``."""
    v = np.asarray(values, dtype=float)
    w = np.ones(len(v)) if weights is None else np.asarray(weights, dtype=float)
    ok = ~np.isnan(v) & ~np.isnan(w)
    n = int(ok.sum())
    grp = [x for x, keep in zip(groups, ok) if keep]
    cl = [x for x, keep in zip(clusters, ok) if keep]
    n_groups, n_clusters = len(set(grp)), len(set(cl))
    if not n:
        return Interval(math.nan, math.nan, math.nan, level, 0, 0, 0, "nothing to measure")
    if macro:
        sums: dict[object, list[float]] = {}
        for x, k in zip(v[ok], cl):
            sums.setdefault(k, []).append(float(x))
        estimate = float(np.mean([np.mean(xs) for xs in sums.values()]))
    else:
        estimate = float((v[ok] * w[ok]).sum() / w[ok].sum()) if w[ok].sum() else math.nan
    supported, coverage = interval_supported(n_groups, level)
    if not supported:
        note = (f"no {level:.0%} interval: with {n_groups} session(s) a bootstrap interval covers about "
                f"{coverage:.0%} in simulation")
        return Interval(estimate, math.nan, math.nan, level, n, n_clusters, n_groups, note)
    stats = cluster_bootstrap(v[ok].tolist(), grp, cl, n_boot=n_boot, seed=seed, macro=macro, weights=w[ok].tolist())
    alpha = (1 - level) / 2
    low, high = np.nanquantile(stats, [alpha, 1 - alpha])
    return Interval(estimate, float(low), float(high), level, n, n_clusters, n_groups,
                    f"{level:.0%} two-stage bootstrap (simulated coverage {coverage:.0%})")


def cohen_kappa(first: Sequence[object], second: Sequence[object]) -> float:
    """Cohen's kappa of two labellings of the same items: (observed − chance agreement) / (1 − chance);
    NaN when chance agreement is 1 (both passes gave every item one and the same label)."""
    if len(first) != len(second) or not first:
        raise ConfigurationError(f"two labellings of the same items expected, got {len(first)} and {len(second)}")
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second)) / n
    chance = sum(list(first).count(c) * list(second).count(c) for c in set(first) | set(second)) / (n * n)
    return (observed - chance) / (1 - chance) if chance < 1 else math.nan
