"""The advisor: for a corpus of sessions and a model, which ``reserveTokens`` / ``keepRecentTokens`` to use.

:func:`advise` replays every session at the model's context window over reserve × keep (in tokens;
:data:`pimem.experiments.study.STUDY_RESERVES` × :data:`~pimem.experiments.study.STUDY_KEEPS` by
default), priced at the model, with the summary-quality measures. Per setting it gives the mean cost,
summary ``score`` and refused requests over the same sessions (paired; copies of one session count
once; sessions whose token calibration is poor are left out and named), each with its interval where
one holds and its ``n``, and the settings on the Pareto front of the three (no other setting is as
cheap, as good and refuses as few requests, and better in one).

Its pick is the front's setting that refuses fewest requests, then has the highest ``score``, then
the lowest cost. It is checked out of sample: the sessions are split into ``folds``; each fold in turn
is held out, the front and the pick are found on the others, and the held-out sessions say which
setting is best for them by the same rule. :class:`Advice` reports how often that held-out best is on
the fitted front, and the held-out loss: the held-out best's ``score`` minus the pick's, and the
pick's extra cost, on the held-out sessions.

:meth:`Advice.settings_json` is the Pi ``settings.json`` block for the pick (Pi 0.87.1's
``compaction.modelOverrides["provider/modelId"]``, whose ``reserveTokens`` and ``keepRecentTokens``
win over the ordinary settings for that model alone), ready to paste.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pimem.base.tables import Column, Table
from pimem.core.settings_manager import Settings, lookup_model
from pimem.errors import ConfigurationError, PimemWarning
from pimem.experiments.study import STUDY_KEEPS, STUDY_RESERVES, session_size, session_units
from pimem.experiments.sweep import sweep
from pimem.experiments.uncertainty import bootstrap_ci
from pimem.sessions.discover import dedupe_session_paths

__all__ = ["advise", "Advice", "pareto_front", "settings_block", "ADVICE_METRICS", "OBJECTIVES", "ADVICE",
           "ADVICE_CHECK"]

# what the front trades off, and which way is better
OBJECTIVES: dict[str, str] = {"cost_total": "min", "score": "max", "refused_requests": "min"}
ADVICE_METRICS = ("cost_total", "score", "refused_requests", "needed_recall", "compactions")
_SETTING = ["reserve_tokens", "keep_recent_tokens"]

_METRIC_DOCS = {"cost_total": "the session's cost at the model's prices, US dollars",
                "score": "the headline summary score (faithful needed-later recall × faithfulness)",
                "refused_requests": "requests larger than the window, refused by the provider",
                "needed_recall": "needed-later recall of the summaries", "compactions": "compactions"}
ADVICE = Table("advice", [
    Column("reserve_tokens", description="the setting's reserveTokens"),
    Column("keep_recent_tokens", description="the setting's keepRecentTokens"),
    Column("n", description="sessions compared, each at every setting (copies of one session once)"),
    *(c for m in ADVICE_METRICS for c in (
        Column(m, description=f"mean over the sessions: {_METRIC_DOCS[m]}"),
        Column(f"{m}_ci_low", description=f"the low end of {m}'s interval (NaN where its coverage at n "
               "was not shown)"),
        Column(f"{m}_ci_high", description=f"the high end of {m}'s interval"))),
    Column("on_front", description="on the Pareto front of cost, score and refused requests"),
], "One row per setting the advisor tried (pimem.advise: Advice.table).")
ADVICE_CHECK = Table("advice_check", [
    Column("held_out", description="the sessions held out in this fold"),
    Column("pick", description="the pick fitted on the other sessions (reserve / keep)"),
    Column("best", description="the best setting on the held-out sessions by the same rule"),
    Column("best_on_front", description="1 when that best is on the front fitted without them"),
    Column("score_loss", description="the held-out best's score minus the pick's, on the held-out sessions"),
    Column("cost_loss", description="the pick's cost minus the held-out best's, US dollars"),
], "One row per held-out fold of the advisor's check (Advice.validation).")


def pareto_front(table: pd.DataFrame, objectives: Mapping[str, str] = OBJECTIVES) -> pd.Series:
    """Whether each row is on the Pareto front of ``objectives`` (column → ``"min"`` or ``"max"``):
    no other row is at least as good in every objective and better in one. Objectives whose column is
    missing or NaN in every row are left out; a row with a NaN objective is never on the front."""
    used = [c for c in objectives if c in table.columns and table[c].notna().any()]
    if not used or not len(table):
        return pd.Series(False, index=table.index)
    signed = np.column_stack([table[c].to_numpy(dtype=float) * (1 if objectives[c] == "min" else -1) for c in used])
    complete = ~np.isnan(signed).any(axis=1)
    on = np.zeros(len(table), dtype=bool)
    for i in np.flatnonzero(complete):
        others = signed[complete]
        dominated = ((others <= signed[i]).all(axis=1) & (others < signed[i]).any(axis=1)).any()
        on[i] = not dominated
    return pd.Series(on, index=table.index)


def _pick(table: pd.DataFrame, among: pd.Series | None = None) -> pd.Series | None:
    """The row of the rule: fewest refused requests, then highest score, then lowest cost (None: no row)."""
    rows = table[among] if among is not None else table
    if not len(rows):
        return None
    keys = [("refused_requests", True), ("score", False), ("cost_total", True)]
    keys = [(c, asc) for c, asc in keys if c in rows.columns and rows[c].notna().any()]
    ordered = rows.sort_values([c for c, _ in keys] + _SETTING, ascending=[a for _, a in keys] + [True, True],
                               na_position="last", kind="stable")
    return ordered.iloc[0]


def settings_block(model: str, reserve_tokens: int, keep_recent_tokens: int) -> dict[str, Any]:
    """Pi's ``settings.json`` block that sets reserve and keep for ``model`` (``"provider/modelId"``) alone."""
    return {"compaction": {"modelOverrides": {model: {"reserveTokens": int(reserve_tokens),
                                                      "keepRecentTokens": int(keep_recent_tokens)}}}}


def _fit(runs: pd.DataFrame, units: Sequence[str], n_boot: int, seed: int) -> pd.DataFrame:
    """Per setting, each metric's mean over ``units`` (paired: the units that have every objective at every
    setting), its interval and ``n``, and whether the setting is on the front."""
    part = runs[runs["unit"].isin(list(units))]
    settings = part[_SETTING].drop_duplicates().sort_values(_SETTING).reset_index(drop=True)
    per = part.groupby(["unit", *_SETTING])[[m for m in ADVICE_METRICS if m in part.columns]].mean().reset_index()
    # the units with every objective at every setting: the front compares the same sessions
    needed = [c for c in OBJECTIVES if c in per.columns]
    complete = per.dropna(subset=needed).groupby("unit").size()
    paired = sorted(complete[complete == len(settings)].index)
    if not paired and "score" in needed:  # no unit compacts at every setting: trade off cost and refusals
        needed = [c for c in needed if c != "score"]
        complete = per.dropna(subset=needed).groupby("unit").size()
        paired = sorted(complete[complete == len(settings)].index)
    table = settings.copy()
    table["n"] = len(paired)
    chosen = per[per["unit"].isin(paired)].rename(columns={"unit": "session"})
    for metric in [m for m in ADVICE_METRICS if m in per.columns]:
        if not len(chosen) or (metric == "score" and "score" not in needed):
            table[metric] = math.nan
            table[f"{metric}_ci_low"] = table[f"{metric}_ci_high"] = math.nan
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PimemWarning)  # n is shown; an interval only where it holds
            stats = bootstrap_ci(chosen, [metric], n_boot=n_boot, seed=seed, by=_SETTING)
        table = table.merge(stats[[*_SETTING, metric, f"{metric}_ci_low", f"{metric}_ci_high"]], on=_SETTING,
                            how="left")
    table["on_front"] = pareto_front(table, {k: v for k, v in OBJECTIVES.items() if k in needed})
    return ADVICE.frame(table.to_dict("records"))


@dataclass
class Advice:
    """What :func:`advise` found (module docs).

    Args:
        model: ``"provider/modelId"``.
        context_window: the window replayed at.
        table: per setting: ``n`` (sessions), each of :data:`ADVICE_METRICS` with ``_ci_low`` /
            ``_ci_high``, and ``on_front``.
        pick: the front's setting the rule picks (``reserve_tokens``, ``keep_recent_tokens``).
        validation: per held-out fold: its sessions, the fitted pick, the held-out best, whether that is
            on the fitted front, and the held-out loss in ``score`` and in cost.
        runs: the sweep's rows.
        left_out: sessions left out of the statistics, and why.
    """

    model: str
    context_window: int
    table: pd.DataFrame
    pick: dict[str, int] | None
    validation: pd.DataFrame
    runs: pd.DataFrame = field(repr=False)
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def n_sessions(self) -> int:
        """Sessions the statistics could use (copies of one session once; those left out not counted); the
        table compares the ones among them that have every objective at every setting (its ``n``)."""
        left = set(self.left_out)
        kept = self.runs[~self.runs["session"].isin(left)] if len(self.runs) else self.runs
        return int(kept["unit"].nunique()) if "unit" in kept.columns else 0

    @property
    def front(self) -> pd.DataFrame:
        """The settings on the front."""
        return self.table[self.table["on_front"]]

    @property
    def held_out_hit_rate(self) -> float:
        """Share of the held-out folds whose best setting is on the front fitted without them."""
        v = self.validation.dropna(subset=["best_on_front"]) if len(self.validation) else self.validation
        return float(v["best_on_front"].mean()) if len(v) else math.nan

    def held_out_loss(self) -> dict[str, float]:
        """Mean over the folds of the held-out best's ``score`` minus the pick's, and the pick's extra cost."""
        v = self.validation
        return {"score": float(v["score_loss"].mean()) if len(v) else math.nan,
                "cost_total": float(v["cost_loss"].mean()) if len(v) else math.nan}

    def settings(self) -> dict[str, Any]:
        """The pick as Pi's ``settings.json`` block (:func:`settings_block`)."""
        if self.pick is None:
            raise ConfigurationError("no setting could be picked: no session ran at every setting")
        return settings_block(self.model, self.pick["reserve_tokens"], self.pick["keep_recent_tokens"])

    def settings_json(self) -> str:
        """:meth:`settings`, as the JSON text to paste into ``~/.pi/agent/settings.json`` (or a project's
        ``.pi/settings.json``); checked by reading it back as Pi reads it."""
        block = self.settings()
        provider, _, model_id = self.model.partition("/")
        read = Settings.from_dict(block).compaction_for(provider, model_id)
        pick = self.pick or {}
        if (read.reserve_tokens, read.keep_recent_tokens) != (pick["reserve_tokens"], pick["keep_recent_tokens"]):
            raise ConfigurationError(f"the settings block does not read back as the pick: {block}")  # pragma: no cover
        return json.dumps(block, indent=2)


def _folds(units: Sequence[str], folds: int, seed: int) -> list[list[str]]:
    """``units`` shuffled and dealt into ``folds`` held-out groups (as even as they can be)."""
    order = list(units)
    np.random.default_rng(seed).shuffle(order)
    k = max(1, min(folds, len(order)))
    return [order[i::k] for i in range(k)]


def _validate(runs: pd.DataFrame, units: Sequence[str], folds: int, seed: int) -> pd.DataFrame:
    """The held-out check of the module docs: one row per fold."""
    rows = []
    if len(units) < 2:
        return ADVICE_CHECK.frame([])
    for held in _folds(units, folds, seed):
        fit_units = [u for u in units if u not in held]
        fitted = _fit(runs, fit_units, n_boot=1, seed=seed)
        pick = _pick(fitted, fitted["on_front"])
        test = _fit(runs, held, n_boot=1, seed=seed)
        best = _pick(test)
        row: dict[str, Any] = {"held_out": ", ".join(held), "pick": None, "best": None, "best_on_front": math.nan,
                               "score_loss": math.nan, "cost_loss": math.nan}
        if pick is not None and best is not None:
            key = (int(pick["reserve_tokens"]), int(pick["keep_recent_tokens"]))
            best_key = (int(best["reserve_tokens"]), int(best["keep_recent_tokens"]))
            front = {(int(r.reserve_tokens), int(r.keep_recent_tokens)) for r in fitted[fitted["on_front"]].itertuples()}
            at_pick = test[(test["reserve_tokens"] == key[0]) & (test["keep_recent_tokens"] == key[1])]
            row.update(pick=f"{key[0]} / {key[1]}", best=f"{best_key[0]} / {best_key[1]}",
                       best_on_front=float(best_key in front))
            if len(at_pick):
                row["score_loss"] = float(best["score"] - at_pick["score"].iloc[0]) if "score" in test else math.nan
                row["cost_loss"] = float(at_pick["cost_total"].iloc[0] - best["cost_total"])
        rows.append(row)
    return ADVICE_CHECK.frame(rows)


def advise(
    corpus: Sequence[str | os.PathLike] | str | os.PathLike,
    model: str,
    *,
    reserve: Sequence[int] = STUDY_RESERVES,
    keep: Sequence[int] = STUDY_KEEPS,
    window: int | None = None,
    token_source: str = "calibrated",
    folds: int = 5,
    seed: int = 0,
    n_boot: int = 2000,
    workers: int | None = None,
    cache: str | os.PathLike | None = None,
    results_path: str | os.PathLike | None = None,
    progress: bool = True,
) -> Advice:
    """The settings on the Pareto front of cost, summary quality and refused requests for ``model`` on
    ``corpus``, checked on held-out sessions (module docs).

    Args:
        corpus: session files (or one file).
        model: ``"provider/modelId"`` as Pi names it (e.g. ``"anthropic/claude-opus-4-5"``); its window comes
            from Pi's model table, its prices from :mod:`pimem.replays.prices`.
        reserve: the ``reserveTokens`` values tried.
        keep: the ``keepRecentTokens`` values tried.
        window: the context window (default: the model's in Pi's table; needed for a model not in it).
        token_source: how request tokens are counted (as for :func:`pimem.replay`).
        folds: held-out folds of the check (at most one a session).
        seed: the folds' and the intervals' seed.
        n_boot: bootstrap replicates of the intervals.
        workers: processes to run in (as for :func:`pimem.sweep`).
        cache: a SQLite file for the summaries (a re-run reuses them).
        results_path: the sweep's JSONL log (an interrupted run resumes from it).
        progress: show a progress bar.
    """
    provider, slash, model_id = model.partition("/")
    if not slash or not provider or not model_id:
        raise ConfigurationError(f"model must be 'provider/modelId' as Pi names it, not {model!r}")
    if window is None:
        info = lookup_model(provider, model_id)
        if info is None:
            raise ConfigurationError(f"{model} is not in Pi's model table: give its context window (window=...)")
        window = info.context_window
    paths = [Path(corpus)] if isinstance(corpus, (str, os.PathLike)) else [Path(p) for p in corpus]
    if not paths:
        raise ConfigurationError("no session files given")
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"session file not found: {p}")
    paths = dedupe_session_paths(paths)
    grid = [{"reserve_tokens": int(r), "keep_recent_tokens": int(k), "context_window": int(window),
             "token_source": token_source} for r in sorted(set(reserve)) for k in sorted(set(keep))
            if int(r) < int(window) and int(k) < int(window) - int(r)]
    if not grid:
        raise ConfigurationError(f"no reserve and keep leave room in a {window:,}-token window")
    runs = sweep([str(p) for p in paths], grid, workers=workers, cache=cache, progress=progress,
                 results_path=results_path, measures="score", cost_model=model_id)
    units = session_units({str(p): session_size(p) for p in paths})
    runs.insert(1, "unit", runs["session"].map(units))
    left_out: dict[str, str] = {}
    failed = runs[runs["error"].notna()] if "error" in runs.columns else runs.iloc[:0]
    for session, error in zip(failed["session"], failed["error"]):
        left_out.setdefault(str(session), f"a run failed: {error}")
    ok = runs[runs["error"].isna()] if "error" in runs.columns else runs
    if "calibration_warning" in ok.columns:
        for session, text in zip(ok["session"], ok["calibration_warning"]):
            if isinstance(text, str):
                left_out.setdefault(str(session), text)
    warned_units = {units[s] for s in left_out if s in units}
    usable = sorted({u for u in ok["unit"] if u not in warned_units})
    table = _fit(ok, usable, n_boot=n_boot, seed=seed) if usable else ADVICE.frame([])
    pick = _pick(table, table["on_front"]) if len(table) else None
    chosen = None if pick is None else {k: int(pick[k]) for k in _SETTING}
    validation = _validate(ok, usable, folds, seed)
    return Advice(model, int(window), table, chosen, validation, runs, left_out)
