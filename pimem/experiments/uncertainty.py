"""How sure a sweep's numbers are: the spread across token sources and session-level paired bootstrap intervals.

Two kinds of uncertainty sit in every sweep result, and neither shows in a single number:

Token-source sensitivity (:func:`token_source_bands`)
    A replay counts tokens with a model of what the provider would have counted (the token
    source: ``calibrated``, ``chars``, ``tiktoken``, ``estimate``; see :mod:`pimem.replays.tokens`).
    Compactions fire where the count crosses the threshold, so the counts and sizes depend on that
    choice: on ``large-session.jsonl`` at window 100000 (Pi's reserve and keep) a replay compacts
    twice with ``calibrated``, once with ``chars`` and 69 times with ``estimate``. Run the sweep with
    ``token_source`` as a grid axis; the *band* of a setting is the lowest and highest value across
    sources. It says how much the choice of source matters and nothing more: it is **not** a
    prediction interval. On the requests right after real compactions the spread of ``calibrated``,
    ``chars`` and ``tiktoken`` held the recorded size for 14% of Claude Code requests (n=196; 33%
    before ``chars`` and ``tiktoken`` carried the overhead, when it was 12.8× wide;
    :func:`pimem.replays.validation.source_spread_coverage`). A prediction interval of a replay's
    counts comes from the validated request-size errors (:func:`pimem.replays.validation.replay_intervals`,
    with its coverage checked on held-out sessions by :func:`pimem.replays.validation.interval_coverage`).
    ``estimate`` reads recorded usage that describes the recording's context after the replay
    compacted elsewhere (it is Pi's literal arithmetic on the replayed file, kept for differential
    testing), so it is a poor model of the replayed request; the default band sources are
    :data:`BAND_SOURCES` and ``estimate`` joins only when asked.

Sampling of sessions (:func:`bootstrap_ci`, :func:`paired_difference`)
    A mean over a handful of sessions is one draw of the sessions a researcher happens to have.
    The interval resamples *sessions* with replacement (``n_boot`` times) and takes percentiles
    of the mean; the same resampled sessions are used for every setting of a replicate
    (paired), so differences between settings are compared on the same sessions and their
    interval (:func:`paired_difference`) is much narrower than the two intervals suggest. Draws
    (``sample``) and seeds of one session are averaged first: they are not independent sessions.
    With fewer than 2 sessions there is no interval: NaN, and a warning. A percentile interval over few
    sessions covers the truth far less often than its stated level (by simulation, a "95%" interval over
    2 sessions about 60% of the time, over 8 about 90%; :func:`pimem.drift.intervals.bootstrap_coverage`):
    with ``check_coverage`` (default) an interval is given only where the simulated coverage at that
    number of sessions reaches the level (within 3 points); elsewhere it is NaN, ``interval_coverage``
    says what a percentile interval would have covered, and a warning says why.

:func:`sweep_summary` puts both beside each setting's mean: ``<metric>``, ``<metric>_ci_low``,
``<metric>_ci_high`` (reference source) and ``<metric>_band_low``, ``<metric>_band_high`` (the spread
across sources, not an interval). ``n_sessions`` counts the sessions that ran the setting; a metric
that is NaN for a session (an orphan-reference rate without references) is left out of that
session's mean.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence, TypedDict

import numpy as np
import pandas as pd

from pimem.drift.intervals import interval_supported
from pimem.errors import ConfigurationError, PimemWarning

__all__ = ["token_source_bands", "bootstrap_ci", "paired_difference", "sweep_summary", "setting_columns",
           "PairedDifference", "BAND_SOURCES", "DEFAULT_METRICS"]

BAND_SOURCES = ("calibrated", "chars", "tiktoken")
DEFAULT_METRICS = ("compactions", "context_edits", "summarization_request_tokens", "peak_context_tokens",
                   "mean_context_tokens", "cost_total", "needed_recall", "orphan_reference_rate")
# what names a setting in a sweep row (strategy and summarizer when the grid has those axes)
_SETTING_COLUMNS = ("strategy", "summarizer", "reserve_tokens", "keep_recent_tokens", "enabled", "context_window",
                    "triggers", "leaf_id")
_REPLICATE_COLUMNS = ("seed", "sample")


def setting_columns(df: pd.DataFrame, extra: Sequence[str] = ()) -> list[str]:
    """The columns that name a setting in a sweep frame (token source, draws and seeds excluded;
    columns empty in every row left out)."""
    return [c for c in (*_SETTING_COLUMNS, *extra) if c in df.columns and df[c].notna().any()]


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["error"].isna()] if "error" in df.columns else df


def _metrics(df: pd.DataFrame, metrics: Sequence[str] | None) -> list[str]:
    wanted = list(metrics) if metrics is not None else [m for m in DEFAULT_METRICS if m in df.columns]
    missing = [m for m in wanted if m not in df.columns]
    if missing:
        raise ConfigurationError(f"not a column of the sweep results: {', '.join(missing)}")
    return wanted


def _keys(values: Any) -> tuple:
    return values if isinstance(values, tuple) else (values,)


def _per_session(df: pd.DataFrame, keys: list[str], metrics: list[str]) -> pd.DataFrame:
    """One row per (setting, session): draws and seeds averaged."""
    group = keys + ["session"]
    return df.groupby(group, dropna=False, sort=True)[metrics].mean().reset_index()


def token_source_bands(df: pd.DataFrame, metrics: Sequence[str] | None = None, *,
                       sources: Sequence[str] | None = BAND_SOURCES, per_session: bool = False,
                       by: Sequence[str] | None = None) -> pd.DataFrame:
    """Per setting (or per setting and session), each metric under each token source and its band.

    ``df``: a sweep whose grid had ``token_source`` as an axis. Columns: the setting columns,
    ``sources`` (how many sources the band spans), and per metric ``<metric>_<source>`` (mean over
    sessions, or the session's value with ``per_session``), ``<metric>_band_low`` and
    ``<metric>_band_high``. ``sources=None`` uses every source in ``df``. ``by``: the columns that
    name a setting (default :func:`setting_columns`; e.g. shares of each session's size when the
    absolute settings differ per session).

    Args:
        df: the sweep results, ``token_source`` one of the grid's axes.
        metrics: the metrics (default: those of :data:`DEFAULT_METRICS` the sweep has).
        sources: the token sources the band spans (None: every one in ``df``).
        per_session: one row per setting and session, not the mean over sessions.
        by: the columns that name a setting (default: :func:`setting_columns`).
    """
    if "token_source" not in df.columns:
        raise ConfigurationError("the sweep has no token_source column: add a token_source axis to the grid")
    metrics = _metrics(df, metrics)
    ok = _ok(df)
    if sources is not None:
        ok = ok[ok["token_source"].isin(list(sources))]
    setting = list(by) if by is not None else setting_columns(ok)
    keys = setting + (["session"] if per_session else [])
    by_source = (_per_session(ok, setting + ["token_source"], metrics)
                 .groupby(keys + ["token_source"], dropna=False, sort=True)[metrics].mean())
    wide = by_source.unstack("token_source")
    rows = []
    for key, values in wide.iterrows():
        row = dict(zip(keys, _keys(key)))
        present = sorted({src for (_, src) in values.index if pd.notna(values.get((metrics[0], src)))})
        row["sources"] = len(present)
        for metric in metrics:
            per = {src: values.get((metric, src)) for src in present}
            for src, v in per.items():
                row[f"{metric}_{src}"] = v
            finite = [v for v in per.values() if pd.notna(v)]
            row[f"{metric}_band_low"] = min(finite) if finite else float("nan")
            row[f"{metric}_band_high"] = max(finite) if finite else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def _resampled_means(matrix: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot × settings) means over sessions resampled with replacement, the same rows for
    every setting of a replicate."""
    rng = np.random.default_rng(seed)
    n = matrix.shape[0]
    idx = rng.integers(0, n, size=(n_boot, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate of only missing values
        return np.nanmean(matrix[idx], axis=1)


def _coverage_ok(n_sessions: int, confidence: float, check: bool) -> tuple[bool, float]:
    """(whether an interval over ``n_sessions`` is shown, its simulated coverage)."""
    if n_sessions < 2:
        return False, 0.0
    supported, coverage = interval_supported(n_sessions, confidence)
    return (supported or not check), coverage


def bootstrap_ci(df: pd.DataFrame, metrics: Sequence[str] | None = None, *, n_boot: int = 2000,
                 confidence: float = 0.95, seed: int = 0, by: Sequence[str] | None = None,
                 check_coverage: bool = True) -> pd.DataFrame:
    """Per setting, the mean of each metric over sessions and its session-level paired bootstrap
    interval: ``<metric>``, ``<metric>_ci_low``, ``<metric>_ci_high``, and ``n_sessions``.

    ``df`` should hold one token source (filter it first, or see :func:`sweep_summary`). ``by``:
    the columns that name a setting (default :func:`setting_columns`).

    Args:
        df: the sweep results, of one token source.
        metrics: the metrics (default: those of :data:`DEFAULT_METRICS` the sweep has).
        n_boot: bootstrap replicates.
        confidence: the interval's level.
        seed: the resampling seed.
        by: the columns that name a setting (default: :func:`setting_columns`).
        check_coverage: give an interval only where its simulated coverage reaches the level (module docs).
    """
    metrics = _metrics(df, metrics)
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be between 0 and 1, not {confidence!r}")
    if n_boot < 1:
        raise ConfigurationError(f"n_boot must be positive, not {n_boot!r}")
    ok = _ok(df)
    if "token_source" in ok.columns and ok["token_source"].nunique() > 1:
        raise ConfigurationError("bootstrap_ci needs one token source; filter the frame or use sweep_summary")
    keys = list(by) if by is not None else setting_columns(ok)
    per = _per_session(ok, keys, metrics)
    per["_setting"] = per.groupby(keys, dropna=False, sort=True).ngroup() if keys else 0
    settings = per.drop_duplicates("_setting").sort_values("_setting")[keys + ["_setting"]].reset_index(drop=True)
    sessions = sorted(per["session"].unique())
    out = settings[keys].copy()
    counts = per.groupby("_setting")["session"].nunique()
    out["n_sessions"] = counts.reindex(settings["_setting"]).to_numpy()
    alpha = (1 - confidence) / 2
    shown, coverage = _coverage_ok(len(sessions), confidence, check_coverage)
    out["interval_coverage"] = coverage
    few = not shown
    if len(sessions) < 2:
        warnings.warn(f"{len(sessions)} session(s): no session-level interval can be estimated (NaN)",
                      PimemWarning, stacklevel=2)
    elif few:
        warnings.warn(f"{len(sessions)} sessions: no {confidence:.0%} interval (NaN): over so few sessions a "
                      f"bootstrap interval covers the truth about {coverage:.0%} of the time in simulation",
                      PimemWarning, stacklevel=2)
    for metric in metrics:
        matrix = per.pivot(index="session", columns="_setting", values=metric)
        values = matrix.reindex(index=sessions, columns=settings["_setting"]).to_numpy(dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a setting where the metric is NaN everywhere
            out[metric] = np.nanmean(values, axis=0) if len(values) else np.nan
        if few:
            out[f"{metric}_ci_low"] = np.nan
            out[f"{metric}_ci_high"] = np.nan
            continue
        means = _resampled_means(values, n_boot, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[f"{metric}_ci_low"] = np.nanquantile(means, alpha, axis=0)
            out[f"{metric}_ci_high"] = np.nanquantile(means, 1 - alpha, axis=0)
    return out


def _select(per: pd.DataFrame, setting: Mapping[str, Any], metric: str) -> pd.Series:
    mask = pd.Series(True, index=per.index)
    for key, value in setting.items():
        if key not in per.columns:
            raise ConfigurationError(f"{key!r} is not a setting column of the sweep results")
        mask &= per[key].isna() if value is None else per[key] == value
    part = per[mask]
    if not len(part):
        raise ConfigurationError(f"no run matches the setting {dict(setting)}")
    return part.groupby("session")[metric].mean()


class _Difference(TypedDict):
    metric: str
    n_sessions: int
    difference: float
    ci_low: float
    ci_high: float


class PairedDifference(_Difference, total=False):
    """What :func:`paired_difference` returns: the metric, the sessions both settings ran on, the
    mean difference and its interval (NaN where none is given), and the interval's simulated
    coverage when two or more sessions ran both settings."""

    interval_coverage: float


def paired_difference(df: pd.DataFrame, metric: str, a: Mapping[str, Any], b: Mapping[str, Any], *,
                      n_boot: int = 2000, confidence: float = 0.95, seed: int = 0,
                      check_coverage: bool = True) -> PairedDifference:
    """Mean over sessions of ``metric`` at setting ``b`` minus at setting ``a`` (settings given as
    column → value), with its paired bootstrap interval over the sessions both settings ran on.

    Args:
        df: the sweep results, of one token source.
        metric: the metric compared.
        a: the first setting, as column → value.
        b: the second setting, as column → value.
        n_boot: bootstrap replicates.
        confidence: the interval's level.
        seed: the resampling seed.
        check_coverage: give an interval only where its simulated coverage reaches the level (module docs).
    """
    _metrics(df, [metric])
    ok = _ok(df)
    per = _per_session(ok, setting_columns(ok, ("token_source",)), [metric])
    da, db = _select(per, a, metric), _select(per, b, metric)
    both = da.index.intersection(db.index)
    diffs = (db.loc[both] - da.loc[both]).to_numpy(dtype=float)
    result: PairedDifference = {"metric": metric, "n_sessions": int(len(diffs)),
              "difference": float(np.mean(diffs)) if len(diffs) else float("nan"),
              "ci_low": float("nan"), "ci_high": float("nan")}
    if len(diffs) < 2:
        warnings.warn(f"{len(diffs)} session(s) ran both settings: no interval (NaN)", PimemWarning, stacklevel=2)
        return result
    shown, coverage = _coverage_ok(len(diffs), confidence, check_coverage)
    result["interval_coverage"] = coverage
    if not shown:
        warnings.warn(f"{len(diffs)} sessions ran both settings: no {confidence:.0%} interval (NaN): a bootstrap "
                      f"interval covers about {coverage:.0%} in simulation", PimemWarning, stacklevel=2)
        return result
    means = _resampled_means(diffs[:, None], n_boot, seed)[:, 0]
    alpha = (1 - confidence) / 2
    result["ci_low"] = float(np.quantile(means, alpha))
    result["ci_high"] = float(np.quantile(means, 1 - alpha))
    return result


def sweep_summary(df: pd.DataFrame, metrics: Sequence[str] | None = None, *, reference: str = "calibrated",
                  sources: Sequence[str] | None = BAND_SOURCES, n_boot: int = 2000, confidence: float = 0.95,
                  seed: int = 0, by: Sequence[str] | None = None, check_coverage: bool = True) -> pd.DataFrame:
    """Per setting: the mean and bootstrap interval under the ``reference`` token source, and the
    band across token sources when the sweep ran several (the spread, not an interval: module docs). ``by``: the columns
    that name a setting (default :func:`setting_columns`).

    Args:
        df: the sweep results.
        metrics: the metrics (default: those of :data:`DEFAULT_METRICS` the sweep has).
        reference: the token source of the means and intervals.
        sources: the token sources of the band (None: every one in ``df``).
        n_boot: bootstrap replicates.
        confidence: the interval's level.
        seed: the resampling seed.
        by: the columns that name a setting (default: :func:`setting_columns`).
        check_coverage: give an interval only where its simulated coverage reaches the level (module docs).
    """
    metrics = _metrics(df, metrics)
    ok = _ok(df)
    if "token_source" in ok.columns and ok["token_source"].nunique() > 1:
        ref = ok[ok["token_source"] == reference]
        if not len(ref):
            raise ConfigurationError(f"no run with the reference token source {reference!r}")
    else:
        ref = ok
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PimemWarning)  # passed on once below, not once per call
        summary = bootstrap_ci(ref, metrics, n_boot=n_boot, confidence=confidence, seed=seed, by=by,
                               check_coverage=check_coverage)
    for message in dict.fromkeys(str(w.message) for w in caught):
        warnings.warn(message, PimemWarning, stacklevel=2)
    keys = list(by) if by is not None else setting_columns(ref)
    if "token_source" in ok.columns and ok["token_source"].nunique() > 1:
        bands = token_source_bands(ok, metrics, sources=sources, by=keys)
        cols = keys + ["sources"] + [c for m in metrics for c in (f"{m}_band_low", f"{m}_band_high")]
        summary = summary.merge(bands[cols], on=keys, how="left") if keys else pd.concat(
            [summary, bands[cols]], axis=1)
    order = keys + ["n_sessions"] + [c for c in summary.columns if c not in keys and c != "n_sessions"]
    return summary[order]
