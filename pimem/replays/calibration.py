"""The ``"calibrated"`` token source: provider tokens of a replayed request from Pi's chars/4 estimates.

Model
-----
For every assistant message ``a`` of the recording with valid usage::

    recorded_input(a) ≈ overhead + r · E_rec(a)

``recorded_input`` is ``input + cacheRead + cacheWrite`` (the request as the provider counted it),
``E_rec(a)`` Pi's usage-free chars/4 estimate of the context the recording sent for ``a``.
``overhead`` is what no estimate sees and every request carries (tool definitions, a system prompt
the session does not record); ``r`` converts estimated tokens to provider tokens.

Fit
---
Least squares on *relative* residuals (weights ``1/recorded_input²``: an error of 1k tokens matters
on a 5k request, not on a 150k one), constrained to ``overhead ≥ 0`` and ``r`` in
:data:`SLOPE_RANGE`. The loss is a convex quadratic, so its minimum over that box is the
unconstrained minimum or lies on an edge; every candidate is evaluated and the feasible one with the
lowest loss is kept. Points whose relative residual is further than 6 robust standard deviations
(median absolute deviation, at least 1%) from the median are dropped once and the fit is repeated: a request
whose usage was recorded oddly (a provider cache anomaly, a retried call) does not move the
line. With fewer than :data:`MIN_POINTS` points there is nothing to fit: ``overhead = 0``, ``r = 1``
and a warning.

An ordinary least-squares fit is not safe here. On ``large-session.jsonl`` (431 requests, 1.9k to
178k tokens) it gives ``overhead = −8.8k`` and ``r = 1.50``: the rate grows with the context, so
the line through the big requests crosses zero far to the right, and removing 120k estimated tokens
at 1.5 removes more than the request held — negative token counts. The relative fit gives
``overhead = 1.5k`` (the first request recorded 1,878 tokens for 58 estimated ones) and ``r = 1.34``.

Simulation
----------
For a replayed request whose estimate is ``E_rep(a)`` (:meth:`Calibration.simulate`)::

    simulated(a) = recorded_input(a) + k · (E_rep(a) − E_rec(a))

with ``k = r`` when the replay's context is the larger one (what it added is converted at the
fitted rate), and ``k = min(r, (recorded_input(a) − overhead) / E_rec(a))`` when it is the smaller
one: what a removal takes away is never converted at more than the recording's own average rate for
that request, because the removed part cannot hold more provider tokens than its share of what the
provider counted. So the result never goes below ``overhead``, and equals the recorded value when
nothing changed.

Floor: the result is never below ``overhead + floor_ratio · E_rep(a)`` (nor raised above the
recorded value by it), where ``floor_ratio`` is the 5th percentile of the recording's own rates
``(recorded_input − overhead) / E_rec`` over requests of at least 1,000 estimated tokens (at most
``r``). The replayed context is made of the same session's messages plus summaries; a request
cheaper per estimated token than 95% of the recording's own requests is not plausible. Calls where
the floor applied are counted (``floored_calls`` in :meth:`ReplayResult.summary`).

Quality
-------
``r2`` (on the token scale), ``median_relative_error`` (median ``|residual| / recorded``), the
number of points and of dropped outliers. :meth:`Calibration.warning` describes a poor fit: fewer
than :data:`MIN_POINTS` points, ``r2`` below :data:`MIN_R2`, a median relative error above
:data:`MAX_MEDIAN_RELATIVE_ERROR`, or an unconstrained fit that was impossible (negative overhead
or a rate outside the range) and had to be constrained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["Calibration", "fit_calibration", "SLOPE_RANGE", "MIN_POINTS", "MIN_R2",
           "MAX_MEDIAN_RELATIVE_ERROR", "MAX_PLAUSIBLE_OVERHEAD"]

SLOPE_RANGE = (0.5, 4.0)
MIN_POINTS = 5
MIN_R2 = 0.9
MAX_MEDIAN_RELATIVE_ERROR = 0.1
# What a request carries that no estimate sees: Pi 2-3k tokens, Claude Code 25-50k on the real
# sessions. A fit that puts it past this read usage of context the file does not hold.
MAX_PLAUSIBLE_OVERHEAD = 100_000
_OUTLIER_MADS = 6.0
_MIN_SCALE = 0.01  # relative residuals within 6% are never outliers, however tight the rest
_FLOOR_MIN_ESTIMATE = 1000
_FLOOR_QUANTILE = 0.05


@dataclass(frozen=True)
class Calibration:
    """A fitted ``recorded_input ≈ overhead + slope · estimate`` (see the module docs).

    Args:
        overhead: the provider tokens every request carries that no estimate sees (≥ 0).
        slope: provider tokens per estimated token (within :data:`SLOPE_RANGE`).
        floor_ratio: the lowest plausible rate: a simulated request is raised to at least
            ``overhead + floor_ratio · estimate`` (never above its recorded size).
        points: the assistant messages with usage (outliers included).
        outliers: the points dropped as outliers before the final fit.
        r2: the fit's R² on the token scale (nan without a fit).
        median_relative_error: the median ``|residual| / recorded`` (nan without a fit).
        unconstrained_overhead: the overhead of the fit without the constraints (nan without a fit).
        unconstrained_slope: the slope of the fit without the constraints (nan without a fit).
        partial: why the recording does not start at its conversation's start (its fit was restricted
            to the requests after its first compaction), or None.
    """

    overhead: float = 0.0
    slope: float = 1.0
    floor_ratio: float = SLOPE_RANGE[0]
    points: int = 0
    outliers: int = 0
    r2: float = float("nan")
    median_relative_error: float = float("nan")
    unconstrained_overhead: float = float("nan")
    unconstrained_slope: float = float("nan")
    partial: str | None = None

    @property
    def constrained(self) -> bool:
        """Whether the unconstrained fit was impossible (negative overhead or slope out of range)."""
        b, r = self.unconstrained_overhead, self.unconstrained_slope
        if math.isnan(b) or math.isnan(r):
            return False
        return b < 0 or not (SLOPE_RANGE[0] <= r <= SLOPE_RANGE[1])

    def warning(self) -> str | None:
        """Why this fit should not be trusted, or None."""
        problems = []
        if self.partial:
            problems.append(f"a partial recording ({self.partial}): fitted only on the {self.points} request(s) after "
                            f"its first compaction, whose context the file holds")
        if self.points < MIN_POINTS:
            problems.append(f"only {self.points} assistant message(s) with usage (need {MIN_POINTS}); "
                            f"using overhead 0 and rate 1")
        else:
            if not (self.r2 >= MIN_R2):
                problems.append(f"R² {self.r2:.2f} < {MIN_R2}")
            if not (self.median_relative_error <= MAX_MEDIAN_RELATIVE_ERROR):
                problems.append(f"median relative error {self.median_relative_error:.0%} > "
                                f"{MAX_MEDIAN_RELATIVE_ERROR:.0%}")
            if self.overhead > MAX_PLAUSIBLE_OVERHEAD:
                problems.append(f"an overhead of {self.overhead:,.0f} tokens per request is implausible (above "
                                f"{MAX_PLAUSIBLE_OVERHEAD:,}): the recorded usage counts context the file does not hold")
            if self.constrained:
                problems.append(f"the unconstrained fit was impossible (overhead "
                                f"{self.unconstrained_overhead:,.0f}, rate {self.unconstrained_slope:.2f}); "
                                f"constrained to overhead {self.overhead:,.0f}, rate {self.slope:.2f}")
        if not problems:
            return None
        return "poor token calibration: " + "; ".join(problems)

    def simulate(self, recorded: float, e_rec: float, e_rep: float) -> tuple[float, bool]:
        """(simulated request tokens, whether the floor applied) for one request (module docs)."""
        delta = e_rep - e_rec
        if delta == 0:
            return float(recorded), False
        if delta > 0:
            value = recorded + self.slope * delta
        else:
            rate = self.slope
            if e_rec > 0:
                rate = min(rate, max(0.0, (recorded - self.overhead) / e_rec))
            value = recorded + rate * delta
        floor = min(float(recorded), self.overhead + self.floor_ratio * max(e_rep, 0.0))
        if value < floor:
            return floor, True
        return float(value), False

    def as_dict(self) -> dict[str, float | int | bool | str | None]:
        """The fit as flat values (for summaries and tables)."""
        return {
            "calibration_overhead": self.overhead,
            "calibration_slope": self.slope,
            "calibration_floor_ratio": self.floor_ratio,
            "calibration_points": self.points,
            "calibration_r2": self.r2,
            "calibration_median_relative_error": self.median_relative_error,
            "calibration_warning": self.warning(),
        }


def _loss(xs: Sequence[float], ys: Sequence[float], ws: Sequence[float], b: float, r: float) -> float:
    return sum(w * (y - b - r * x) ** 2 for x, y, w in zip(xs, ys, ws))


def _weighted_fit(xs: Sequence[float], ys: Sequence[float], ws: Sequence[float]) -> tuple[float, float, float, float]:
    """(overhead, slope) constrained to the box, and the unconstrained (overhead, slope)."""
    lo, hi = SLOPE_RANGE
    sw = sum(ws)
    sx = sum(w * x for w, x in zip(ws, xs))
    sy = sum(w * y for w, y in zip(ws, ys))
    sxx = sum(w * x * x for w, x in zip(ws, xs))
    sxy = sum(w * x * y for w, x, y in zip(ws, xs, ys))
    det = sw * sxx - sx * sx
    candidates: list[tuple[float, float]] = []
    ub = ur = float("nan")
    if det > 0:
        ur = (sw * sxy - sx * sy) / det
        ub = (sy - ur * sx) / sw
        candidates.append((ub, ur))
    if sxx > 0:  # overhead = 0, best slope
        candidates.append((0.0, min(hi, max(lo, sxy / sxx))))
    for r in (lo, hi):  # slope on an edge, best overhead
        candidates.append((max(0.0, (sy - r * sx) / sw), r))
    feasible = [(b, r) for b, r in candidates if b >= 0 and lo <= r <= hi]
    b, r = min(feasible, key=lambda br: _loss(xs, ys, ws, *br))
    return b, r, ub, ur


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if not n:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _quantile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    i = int(math.floor(pos))
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


# No request holds a quadrillion tokens: a recorded usage beyond it (1e308 in a damaged file) is no
# evidence about the context, and its square would overflow the fit.
_MAX_TOKENS = 1e15


def fit_calibration(estimates: Sequence[float], recorded: Sequence[float]) -> Calibration:
    """Fit ``recorded ≈ overhead + slope · estimate`` over the recording's requests (module docs).

    Args:
        estimates: Pi's estimate of each request, in order.
        recorded: each request's recorded input tokens, in the same order.
    """
    pairs = [(float(x), float(y)) for x, y in zip(estimates, recorded)
             if isinstance(x, (int, float)) and isinstance(y, (int, float))
             and math.isfinite(x) and math.isfinite(y) and 0 < x < _MAX_TOKENS and 0 < y < _MAX_TOKENS]
    if len(pairs) < MIN_POINTS:
        return Calibration(points=len(pairs))
    xs = [p[0] for p in pairs]
    ys = [p[1] for p in pairs]
    ws = [1.0 / (y * y) for y in ys]
    b, r, ub, ur = _weighted_fit(xs, ys, ws)
    rel = [(y - b - r * x) / y for x, y in zip(xs, ys)]
    center = _median(rel)
    scale = max(_MIN_SCALE, 1.4826 * _median([abs(e - center) for e in rel]))
    keep = [i for i, e in enumerate(rel) if abs(e - center) <= _OUTLIER_MADS * scale]
    outliers = len(pairs) - len(keep)
    if outliers and len(keep) >= MIN_POINTS:
        xs = [xs[i] for i in keep]
        ys = [ys[i] for i in keep]
        ws = [ws[i] for i in keep]
        b, r, ub, ur = _weighted_fit(xs, ys, ws)
    else:
        outliers = 0
    mean_y = sum(ys) / len(ys)
    ss_tot = sum((y - mean_y) ** 2 for y in ys)
    ss_res = sum((y - b - r * x) ** 2 for x, y in zip(xs, ys))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    mre = _median([abs(y - b - r * x) / y for x, y in zip(xs, ys)])
    rates = [(y - b) / x for x, y in zip(xs, ys) if x >= _FLOOR_MIN_ESTIMATE]
    floor_ratio = _quantile(rates, _FLOOR_QUANTILE) if rates else SLOPE_RANGE[0]
    floor_ratio = min(r, max(SLOPE_RANGE[0], floor_ratio))
    return Calibration(overhead=b, slope=r, floor_ratio=floor_ratio, points=len(xs) + outliers, outliers=outliers,
                       r2=r2, median_relative_error=mre, unconstrained_overhead=ub, unconstrained_slope=ur)
