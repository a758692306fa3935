"""The study: which compaction settings suit a model, measured on recorded sessions, as data.

* :func:`design_study` — the sessions (each file once), what each recorded (:func:`session_size`:
  its model and window, its size, its own compactions) and the grid each runs (:func:`study_grid`):
  model windows in tokens (the recorded model's own first, then :data:`STUDY_WINDOWS`) × reserve ×
  keep in tokens, with every setting left out and why.
* :func:`run_study_sweep` — every session over its grid under each token source
  (:func:`pimem.experiments.sweep.sweep_runs`; the reference source with the summary-quality
  measures, ``measures="score"``), the summary per setting (:func:`study_summary`) and, per session,
  the drift of its own recorded summaries and of a replay at a setting where compactions repeat
  (:class:`ReportRun`).
* :func:`study_summary` — per window and setting: compactions, refused requests, cost, ``score`` and
  ``needed_recall``, each the mean over the same sessions (paired), with its interval where one
  holds and its ``n``; copies of one session (checkpoint files of one session id) count once;
  sessions whose token calibration is poor are summarized apart.

The replay a report is made from is the sweep's own, sent back by the process that ran it (no
session is replayed twice; only a run resumed from the sweep's log is replayed again).
:func:`pimem.viz.report.run_study` writes all of it as pages.
"""

from __future__ import annotations

import functools
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, cast

import pandas as pd

from pimem.base.tables import Column, Table, format_number, frame
from pimem.core.compaction.compaction import CompactionSettings, estimate_tokens
from pimem.core.session_manager import build_session_projection, session_entry_to_context_messages
from pimem.drift import drift_report
from pimem.drift.intervals import interval_supported
from pimem.errors import ConfigurationError, PimemWarning, SessionFormatError, SkippedFileWarning
from pimem.experiments.sweep import SWEEP, runs_frame, sweep_runs
from pimem.experiments.uncertainty import bootstrap_ci, token_source_bands
from pimem.replays.config import resolve_model
from pimem.replays.engine import TOKEN_SOURCES, replay
from pimem.replays.recording import calibrate_recording
from pimem.sessions.discover import dedupe_session_paths
from pimem.sessions.load import load_session
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.registry import get_summarizer

if TYPE_CHECKING:
    from pimem.replays.result import ReplayResult
    from pimem.replays.tokens import TokenSourceName

__all__ = ["design_study", "run_study_sweep", "study_summary", "StudyDesign", "StudyResults", "ReportRun",
           "study_grid", "session_size", "SessionSize", "unique_names", "session_units", "STUDY_WINDOWS",
           "STUDY_RESERVES", "STUDY_KEEPS", "STUDY_TOKEN_SOURCES", "STUDY_METRICS", "QUALITY_METRICS",
           "REPEATED_COMPACTIONS", "MIN_SUMMARY_TOKENS", "LEVELS", "supported_level", "paired_block",
           "STUDY_SUMMARY", "STUDY_RUNS"]

# The default grid, in tokens: model windows (the recorded model's own is put first), and reserve
# and keep around Pi's defaults (16,384 and 20,000), halved and doubled.
STUDY_WINDOWS = (128_000, 200_000, 1_000_000)
STUDY_RESERVES = (8_192, 16_384, 32_768)
STUDY_KEEPS = (10_000, 20_000, 40_000)
STUDY_TOKEN_SOURCES = ("calibrated", "chars", "tiktoken")
# what the study reports per setting; the quality measures need a compaction (a summary to measure)
STUDY_METRICS = ("compactions", "refused_requests", "cost_total", "score", "needed_recall")
QUALITY_METRICS = ("score", "needed_recall")
BANDED_METRICS = ("compactions", "refused_requests", "cost_total")  # also run under the other sources
REPEATED_COMPACTIONS = 2  # a drift report shows drift across rewrites from this many compactions on
SUMMARY_SHARE = 0.8  # Pi caps a summary at 0.8 × reserveTokens
MIN_SUMMARY_TOKENS = 256  # a reserve whose cap is below this leaves no room for a summary
_SETTING = ("reserve_tokens", "keep_recent_tokens", "context_window")
_PI_DEFAULTS = (16_384, 20_000)


# --------------------------------------------------------------------------- sessions and grids


def unique_names(paths: Sequence[Path]) -> list[str]:
    """File names without ``.jsonl`` / ``.jsonl.gz``, made distinct (``a``, ``a-2``, …), never equal to
    another file's name."""
    stems = [_stem(p) for p in paths]
    taken = set(stems)
    names: list[str] = []
    used: set[str] = set()
    for base in stems:
        name, n = base, 1
        while name in used or (name != base and name in taken):
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        names.append(name)
    return names


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl"):
        name = name.removesuffix(suffix) if name != suffix else name
    return name or "session"


def _int_values(name: str, values: Any) -> list[int]:
    if isinstance(values, (int, float)):
        values = [values]
    out = []
    for v in values:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != int(v):
            raise ConfigurationError(f"{name}: {v!r} is not a non-negative integer")
        out.append(int(v))
    if not out:
        raise ConfigurationError(f"{name}: no values given")
    return sorted(set(out))


@dataclass(frozen=True)
class SessionSize:
    """What a session recorded, for its grid and for the reasons given about it (:func:`session_size`)."""

    estimate: int
    overhead: float = 0.0
    slope: float = 1.0
    largest_step: float = 0.0  # the most one request adds, in provider tokens (a prompt or tool results, the reply)
    recorded_peak: float = 0.0  # the largest request the recording made, in provider tokens
    model: str | None = None  # "provider/modelId" of the model the session ends with (None: it names none)
    model_window: int = 200_000  # that model's context window (Pi's table; 200,000 for a model not in it)
    session_id: str | None = None  # the header's id: checkpoint copies of one session share it
    recorded_compactions: int = 0  # compactions on the recorded path

    @property
    def reach(self) -> float:
        """The largest context a replay that never compacts would send (estimate or recorded usage)."""
        return max(self.tokens, self.recorded_peak)

    @property
    def tokens(self) -> float:
        """The session in provider tokens: ``overhead + slope · estimate``."""
        return self.overhead + self.slope * self.estimate


def session_size(path: str | os.PathLike) -> SessionSize:
    """Pi's usage-free estimate of every message on the session's path, compactions ignored (the
    context a replay that never compacts would reach), with the session's token calibration
    (:mod:`pimem.replays.calibration`: the overhead every request carries and provider tokens per
    estimated token), its largest step and request, its model and that model's window."""
    session = load_session(path)
    branch = session.get_branch()
    total = 0
    system = 0
    step = largest = 0
    for entry in branch:
        if entry.get("type") == "compaction":
            continue
        for message in session_entry_to_context_messages(entry):
            if message.get("role") == "system":
                system = estimate_tokens(message)  # only the current system message is sent
                continue
            tokens = estimate_tokens(message)
            total += tokens
            step += tokens
            if message.get("role") == "assistant":  # a reply closes the step it answers
                largest = max(largest, step)
                step = 0
    calibration = calibrate_recording(branch)
    # the largest growth of the recorded usage from one call to the next (when a step is larger in
    # provider tokens than its estimate says: images, thinking)
    grown = peak = 0.0
    previous = None
    for entry in branch:
        answer = entry.get("message") if entry.get("type") == "message" else None
        if entry.get("type") == "compaction":
            previous = None
        if not answer or answer.get("role") != "assistant" or not isinstance(answer.get("usage"), dict):
            continue
        usage = answer["usage"]
        tokens = sum(usage.get(k) or 0 for k in ("input", "cacheRead", "cacheWrite", "output")
                     if isinstance(usage.get(k), (int, float)))
        if tokens and previous:
            grown = max(grown, tokens - previous)
        peak = max(peak, tokens - (usage.get("output") or 0 if isinstance(usage.get("output"), (int, float)) else 0))
        previous = tokens or previous
    step_tokens = max(calibration.slope * max(largest, step), grown)
    current = build_session_projection(branch).model
    model = (f"{current.get('provider')}/{current.get('modelId')}" if isinstance(current, dict)
             and isinstance(current.get("modelId"), str) else None)
    window = resolve_model(None, None, current if isinstance(current, dict) else None).context_window
    session_id = session.header.get("id") if isinstance(session.header.get("id"), str) else None
    return SessionSize(total + system, calibration.overhead, calibration.slope, step_tokens, peak, model,
                       int(window), session_id, sum(1 for e in branch if e.get("type") == "compaction"))


def study_grid(size: SessionSize | int, reserve: Sequence[int] | None = None, keep: Sequence[int] | None = None,
               window: Sequence[int] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The settings a study runs on one session, and those left out with why.

    Windows, reserves and keeps are in tokens: the values given, else the recorded model's own
    window followed by :data:`STUDY_WINDOWS`, and :data:`STUDY_RESERVES` × :data:`STUDY_KEEPS`. A
    setting is left out only when Pi could not work with it: reserve ≥ window; keep ≥ window −
    reserve, or the overhead every request carries plus keep reaching window − reserve (every check
    compacts again); a summary cap (``SUMMARY_SHARE`` × reserve) below :data:`MIN_SUMMARY_TOKENS`.
    A setting whose threshold the session never reaches runs (no compaction is a result), and so
    does one where requests are refused (counted). Each setting carries ``model_window``: whether
    its window is the recorded model's.
    """
    if not isinstance(size, SessionSize):
        size = SessionSize(int(size))
    windows = list(dict.fromkeys(window if window is not None else (size.model_window, *STUDY_WINDOWS)))
    reserves = list(reserve) if reserve is not None else list(STUDY_RESERVES)
    keeps = list(keep) if keep is not None else list(STUDY_KEEPS)
    settings: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for w in windows:
        for r in reserves:
            for k in keeps:
                reason = _left_out_reason(size, r, k, w)
                cell = {"reserve_tokens": r, "keep_recent_tokens": k, "context_window": w}
                if reason:
                    left_out.append({**cell, "reason": reason})
                else:
                    settings.append({**cell, "model_window": w == size.model_window})
    return settings, left_out


def _left_out_reason(size: SessionSize, r: int, k: int, w: int) -> str | None:
    """Why Pi could not work with reserve ``r``, keep ``k`` in window ``w`` (None: it can)."""
    if r >= w:
        return "reserve ≥ window: no room for any context"
    if k >= w - r:
        return "keep ≥ window − reserve: every check compacts again"
    if size.overhead and size.overhead + k >= w - r:
        return (f"the overhead every request carries ({format_number(size.overhead)} tokens) plus keep reaches "
                "window − reserve: every check compacts again")
    if SUMMARY_SHARE * r < MIN_SUMMARY_TOKENS:
        return f"reserve leaves a summary fewer than {MIN_SUMMARY_TOKENS} tokens (Pi caps it at 0.8 × reserve)"
    return None


def session_units(sizes: Mapping[str, SessionSize]) -> dict[str, str]:
    """Per session path, the unit it counts as in statistics: its session id (copies of one session,
    such as the checkpoint files of one Claude Code session, count once), else the path."""
    return {path: size.session_id or path for path, size in sizes.items()}


@dataclass
class StudyDesign:
    """What a study runs (:func:`design_study`): the sessions, what they recorded, their grids, the sources.

    ``reserves``, ``keeps`` and ``windows`` are the values given (None: the defaults);
    ``left_out`` lists, per session path, the settings of its grid left out and why.
    """

    paths: list[Path]
    names: list[str]
    sizes: dict[str, SessionSize]
    grids: dict[str, list[dict[str, Any]]]
    left_out: dict[str, list[dict[str, Any]]]
    reserves: list[int] | None
    keeps: list[int] | None
    windows: list[int] | None
    sources: list[str]
    reference: TokenSourceName

    @property
    def n_settings(self) -> int:
        """The settings run over all sessions (each under every token source)."""
        return sum(len(grid) for grid in self.grids.values())

    @property
    def units(self) -> dict[str, str]:
        """Per session path, the unit it counts as (:func:`session_units`)."""
        return session_units(self.sizes)

    @property
    def window_order(self) -> list[int]:
        """Every window of the study: the recorded models' own first (most sessions first), then the rest."""
        recorded: dict[int, int] = {}
        for size in self.sizes.values():
            recorded[size.model_window] = recorded.get(size.model_window, 0) + 1
        all_windows = {g["context_window"] for grid in self.grids.values() for g in grid}
        first = [w for w, _ in sorted(recorded.items(), key=lambda kv: (-kv[1], kv[0])) if w in all_windows]
        return first + sorted(all_windows - set(first))

    def sweep_grid(self, path: Path, sources: Sequence[str]) -> list[dict[str, Any]]:
        """The sweep's settings for one session under ``sources``."""
        return [{**{k: g[k] for k in _SETTING}, "token_source": src} for g in self.grids[str(path)] for src in sources]


def design_study(paths: Sequence[str | os.PathLike], reserve: Sequence[int] | None = None,
                 keep: Sequence[int] | None = None, window: Sequence[int] | None = None,
                 token_sources: Sequence[str] = STUDY_TOKEN_SOURCES) -> StudyDesign:
    """The sessions of a study (each file once; a file that cannot be read is left out with a
    :class:`~pimem.errors.SkippedFileWarning`), what they recorded and their grids (:func:`study_grid`).

    Raises :class:`FileNotFoundError` for a missing file and
    :class:`~pimem.errors.ConfigurationError` for bad values or when no setting is left to run.
    """
    session_paths = [Path(p) for p in paths]
    if not session_paths:
        raise ConfigurationError("no session files given")
    for p in session_paths:
        if not p.exists():
            raise FileNotFoundError(f"session file not found: {p}")
    session_paths = dedupe_session_paths(session_paths)
    reserves = None if reserve is None else _int_values("reserve", reserve)
    keeps = None if keep is None else _int_values("keep", keep)
    windows = None if window is None else _int_values("window", window)
    sources = list(dict.fromkeys(token_sources))
    if not sources or any(src not in TOKEN_SOURCES for src in sources):
        raise ConfigurationError(f"token_sources must be some of {TOKEN_SOURCES}, not {token_sources!r}")
    reference = cast("TokenSourceName", "calibrated" if "calibrated" in sources else sources[0])
    sizes: dict[str, SessionSize] = {}
    for p in list(session_paths):
        try:
            sizes[str(p)] = session_size(p)
        except (OSError, SessionFormatError) as exc:  # unreadable, a FIFO, not a session: the rest goes on
            why = str(exc) if isinstance(exc, SessionFormatError) else f"{p}: cannot read: {exc.strerror or exc}"
            warnings.warn(f"{why}; left out of the study", SkippedFileWarning, stacklevel=2)
            session_paths.remove(p)
    if not session_paths:
        raise ConfigurationError("none of the session files given can be read")
    grids: dict[str, list[dict[str, Any]]] = {}
    left_out: dict[str, list[dict[str, Any]]] = {}
    for p in session_paths:
        grids[str(p)], left_out[str(p)] = study_grid(sizes[str(p)], reserves, keeps, windows)
    if not any(grids.values()):
        reasons = sorted({cell["reason"] for cells in left_out.values() for cell in cells})
        raise ConfigurationError("no setting is left to run: " + "; ".join(reasons))
    return StudyDesign(session_paths, unique_names(session_paths), sizes, grids, left_out, reserves, keeps,
                       windows, sources, reference)


# --------------------------------------------------------------------------- runs


STUDY_RUNS = Table("study_runs", [
    *SWEEP.columns[:1],
    Column("name", description="the session's name in the study (its file name, made distinct)"),
    Column("unit", description="what the session counts as in statistics: its session id (copies once)"),
    Column("session_size", description="the largest context it reaches without compacting, provider tokens"),
    *SWEEP.columns[1:],
    Column("model_window", description="whether the run's window is the recorded model's own"),
], "One row per session × setting × token source of a study: a sweep row, with the session's name, unit "
   "and size (pimem.experiments.study.run_study_sweep).")


@dataclass
class ReportRun:
    """What a session's drift reports are made from.

    ``recorded``: the drift report (:func:`pimem.drift.drift_report`) of the session's own recorded
    summaries (None without a recorded compaction). ``setting`` and ``result``: the replay under the
    study's reference token source at a setting where compactions repeat (:func:`_report_setting`),
    ``report`` its drift report; ``reused``: that replay is the sweep's own (False: its run was
    resumed from the sweep's log and replayed again here). ``reason``: why there is no replay report,
    an expected outcome (no setting compacts); ``error``: what failed unexpectedly.
    """

    path: Path
    name: str
    size: SessionSize
    recorded: pd.DataFrame | None = field(default=None, repr=False)
    setting: dict[str, Any] | None = None
    result: ReplayResult | None = field(default=None, repr=False)
    report: pd.DataFrame | None = field(default=None, repr=False)
    reused: bool = False
    compactions: int = 0
    reason: str | None = None
    error: str | None = None


@dataclass
class StudyResults:
    """What :func:`run_study_sweep` measured.

    ``runs``: one row per session × setting × token source (the sweep's columns, with ``name``,
    ``unit``, ``session_size`` and ``model_window``); ``summary``: :func:`study_summary` of them;
    ``reports``: per session, what its drift reports are made from (replay results dropped once
    ``on_report`` has had them).
    """

    design: StudyDesign
    runs: pd.DataFrame
    summary: pd.DataFrame
    reports: list[ReportRun]
    elapsed_s: float

    @property
    def errors(self) -> int:
        """Distinct runs that ended in an error."""
        df = self.runs
        return int(df.loc[df["error"].notna(), "run_hash"].nunique()) if "error" in df.columns else 0

    @property
    def ok(self) -> pd.DataFrame:
        """The runs without an error."""
        return self.runs[self.runs["error"].isna()] if "error" in self.runs.columns else self.runs

    @property
    def reference_runs(self) -> pd.DataFrame:
        """The runs without an error under the reference token source."""
        ok = self.ok
        return ok[ok["token_source"] == self.design.reference] if "token_source" in ok.columns else ok


def _rank(row: Mapping[str, Any], size: SessionSize) -> tuple:
    """How a compacting run ranks as a session's replay report (lower first): compactions repeat (at least
    :data:`REPEATED_COMPACTIONS`), no turn failed, the recorded model's window, reserve and keep nearest
    Pi's defaults, then the smaller setting."""
    distance = abs(math.log(row["reserve_tokens"] / _PI_DEFAULTS[0])) + abs(math.log(
        max(row["keep_recent_tokens"], 1) / _PI_DEFAULTS[1]))
    return (row["compactions"] < REPEATED_COMPACTIONS, bool(row.get("failed_turns")),
            row["context_window"] != size.model_window, round(distance, 6), row["context_window"],
            row["reserve_tokens"], row["keep_recent_tokens"])


def _report_setting(rows: pd.DataFrame, size: SessionSize) -> tuple[dict[str, Any] | None, str | None]:
    """The setting of a session's replay report, from its reference runs (:func:`_rank`'s first), and a
    note when compactions do not repeat there. None: no run compacts."""
    done = rows[rows["error"].isna()] if "error" in rows.columns else rows
    if not len(done) or "compactions" not in done.columns or not (done["compactions"] > 0).any():
        return None, None
    best = min((r for r in done.to_dict("records") if r["compactions"] > 0), key=lambda r: _rank(r, size))
    setting = {k: int(best[k]) for k in _SETTING}
    note = None
    if best["compactions"] < REPEATED_COMPACTIONS:
        note = (f"no setting of the grid compacts this session {REPEATED_COMPACTIONS} times or more: the replay "
                f"report shows {int(best['compactions'])} compaction, so no drift across rewrites")
    return setting, note


def _no_compaction_reason(size: SessionSize, grid: list[dict[str, Any]]) -> str:
    """Why no setting compacts a session: its largest context against the lowest threshold of its grid."""
    lowest = min(g["context_window"] - g["reserve_tokens"] for g in grid)
    return (f"never compacts at any setting of the grid: the session's largest context "
            f"({format_number(size.reach)} tokens) stays below the lowest threshold, window − reserve = "
            f"{format_number(lowest)} tokens")


def _every_compaction_failed(rows: pd.DataFrame) -> str | None:
    """The error of a session none of whose runs compacted because every compaction it tried failed
    (the summarizer failed), with the first reason; None when some compaction worked or none was tried."""
    if not len(rows) or "failed_compactions" not in rows.columns:
        return None
    done = rows[rows["error"].isna()] if "error" in rows.columns else rows
    tried = int(done["failed_compactions"].fillna(0).sum())
    if not tried or (done["compactions"] > 0).any():
        return None
    reasons = done["failure_reasons"].dropna() if "failure_reasons" in done.columns else pd.Series(dtype=object)
    return (f"SummarizationError: every compaction failed ({tried} in {len(done)} runs)"
            + (f"; the first: {reasons.iloc[0]}" if len(reasons) else ""))


def _keep_for_report(row: Mapping[str, Any], reference: str) -> bool:
    """Whether a sweep run is sent back as a possible replay report: it compacts under the reference source."""
    return not row.get("error") and row.get("token_source") == reference and bool(row.get("compactions"))


def run_study_sweep(
    design: StudyDesign,
    *,
    cache: str | os.PathLike,
    results_path: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = True,
    on_report: Callable[[ReportRun], None] | None = None,
    n_boot: int = 2000,
) -> StudyResults:
    """Sweep every session of ``design`` over its grid, summarize the runs per setting, and make each
    session's drift reports (see module docs).

    Args:
        design: the study (:func:`design_study`).
        cache: the SQLite file of the summaries (shared by the runs; a re-run reuses them).
        results_path: the sweep's JSONL log (an interrupted study resumes from it).
        workers: processes to run in (as for :func:`pimem.sweep`).
        progress: show progress bars.
        on_report: called with each session's :class:`ReportRun` as soon as it is known (its replay
            result is then dropped, so that one replay is held at a time).
        n_boot: bootstrap replicates of the intervals.
    """
    start = time.perf_counter()
    reference = design.reference
    keep = functools.partial(_keep_for_report, reference=reference)
    others = [src for src in design.sources if src != reference]
    frames: list[pd.DataFrame] = []
    reports: list[ReportRun] = []
    summarizer: CachedSummarizer | None = None
    try:
        for path, name in zip(design.paths, design.names):
            size = design.sizes[str(path)]
            report = ReportRun(path, name, size)
            kept: dict[tuple[Any, ...], Any] = {}
            best: dict[str, Any] | None = None
            rows: list[dict[str, Any]] = []
            grid = design.grids[str(path)]
            if grid:
                for row, result in sweep_runs([str(path)], design.sweep_grid(path, [reference]), workers=workers,
                                              cache=cache, progress=progress, results_path=results_path,
                                              measures="score", keep=keep):
                    rows.append(row)
                    if result is not None and (best is None or _rank(row, size) < _rank(best, size)):
                        best, kept = row, {tuple(row[k] for k in _SETTING): result}  # one replay held at a time
                if others:
                    rows.extend(row for row, _ in sweep_runs(
                        [str(path)], design.sweep_grid(path, others), workers=workers, cache=cache, progress=progress,
                        results_path=results_path, measures="cost"))
                frames.append(runs_frame(rows))
            try:
                if size.recorded_compactions:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", PimemWarning)  # shown in the report
                        report.recorded = drift_report(load_session(path))
                if not grid:
                    reasons = sorted({cell["reason"] for cell in design.left_out[str(path)]})
                    report.reason = "no setting of the grid can run: " + "; ".join(reasons)
                else:
                    runs = runs_frame(rows)
                    runs = runs[runs["token_source"] == reference] if len(runs) else runs
                    chosen, note = _report_setting(runs, size)
                    failed = _every_compaction_failed(runs)
                    if chosen is None and failed:
                        report.error = failed
                    elif chosen is None:
                        report.reason = _no_compaction_reason(size, grid)
                    else:
                        report.setting, report.reason = chosen, note
                        report.result = kept.pop(tuple(chosen[k] for k in _SETTING), None)
                        report.reused = report.result is not None
                        if report.result is None:  # resumed from the log: replayed here
                            if summarizer is None:
                                summarizer = CachedSummarizer(get_summarizer("extractive"), cache)
                            settings = CompactionSettings(reserve_tokens=chosen["reserve_tokens"],
                                                          keep_recent_tokens=chosen["keep_recent_tokens"])
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore", PimemWarning)  # kept on the result
                                report.result = replay(path, settings, context_window=chosen["context_window"],
                                                       summarizer=summarizer, token_source=reference)
                        kept.clear()
                        report.compactions = report.result.summary()["compactions"]
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", PimemWarning)
                            report.report = drift_report(report.result)
            except Exception as exc:  # noqa: BLE001 - one broken session must not stop the study
                report.error = f"{type(exc).__name__}: {exc}"
            if on_report is not None:
                on_report(report)
                report.result = None
            reports.append(report)
    finally:
        if summarizer is not None:
            summarizer.close()

    df = pd.concat(frames, ignore_index=True) if frames else frame()
    if "session" in df.columns:
        name_of = {str(p): n for p, n in zip(design.paths, design.names)}
        model_window = frame([{"session": key, **{k: g[k] for k in _SETTING}, "model_window": g["model_window"]}
                              for key, grid in design.grids.items() for g in grid])
        df.insert(1, "name", df["session"].map(name_of))
        df.insert(2, "unit", df["session"].map(design.units))
        df.insert(3, "session_size", df["session"].map({k: round(v.tokens) for k, v in design.sizes.items()}))
        df = df.merge(model_window, on=["session", *_SETTING], how="left")
    summary = study_summary(df, reference=reference, sources=design.sources, n_boot=n_boot) if len(df) else frame()
    return StudyResults(design, df, summary, reports, time.perf_counter() - start)


# --------------------------------------------------------------------------- statistics


STUDY_SUMMARY = Table("study_summary", [
    Column("group", description="\"main\", or \"calibration warned\" for the sessions whose token calibration "
           "carries a warning (summarized apart)"),
    Column("context_window", description="the model window, in tokens"),
    Column("reserve_tokens", description="the setting's reserveTokens"),
    Column("keep_recent_tokens", description="the setting's keepRecentTokens"),
    Column("metric", description="the measure (compactions, refused_requests, cost_total, score, needed_recall)"),
    Column("mean", description="its mean over the sessions compared (reference token source); NaN: too few of "
           "them have it at this setting (see note)"),
    Column("ci_low", description="the interval's low end (session-level paired bootstrap at level)"),
    Column("ci_high", description="the interval's high end"),
    Column("level", description="the interval's level: the highest whose coverage at n holds (NaN: none)"),
    Column("n", description="sessions compared, each at every setting of the window shown (copies of one "
           "session once)"),
    Column("band_low", description="the lowest mean across the token sources (counts and cost)"),
    Column("band_high", description="the highest mean across the token sources"),
    Column("note", description="what the comparison left out, and why"),
], "One row per group, window, setting and measure of a study: the mean over the same sessions, its interval "
   "and n (pimem.experiments.study.study_summary).")
SUMMARY_COLUMNS = STUDY_SUMMARY.names
# the interval levels tried, highest first: each mean gets the highest one whose coverage holds at its n
LEVELS = (0.95, 0.9, 0.8, 0.5)


def _warned(df: pd.DataFrame, reference: str) -> set[str]:
    """The units any of whose reference runs carries a calibration warning."""
    if "calibration_warning" not in df.columns:
        return set()
    ref = df[df["token_source"] == reference] if "token_source" in df.columns else df
    return set(ref.loc[ref["calibration_warning"].notna(), "unit"])


def supported_level(n: int) -> float | None:
    """The highest of :data:`LEVELS` at which a session-level bootstrap interval over ``n`` sessions was shown
    to cover (:func:`pimem.drift.intervals.interval_supported`); None: none (fewer than a handful)."""
    for level in LEVELS:
        if interval_supported(n, level)[0]:
            return level
    return None


def paired_block(per: pd.DataFrame, metric: str) -> tuple[list[Any], list[tuple[int, int]]]:
    """The units and settings a metric is compared on, every unit at every setting (paired): of the
    blocks "the settings at least t units have, and the units that have all of them", the one with the
    most values (ties: more units). ``per``: one row per unit and setting (``reserve_tokens``,
    ``keep_recent_tokens``)."""
    have = per.dropna(subset=[metric])
    settings_of: dict[Any, set[tuple[int, int]]] = {
        u: {(int(r), int(k)) for r, k in zip(g["reserve_tokens"], g["keep_recent_tokens"])}
        for u, g in have.groupby("unit")}
    counts: dict[tuple[int, int], int] = {}
    for cells in settings_of.values():
        for cell in cells:
            counts[cell] = counts.get(cell, 0) + 1
    best: tuple[int, int, list[Any], list[tuple[int, int]]] = (0, 0, [], [])
    for t in sorted(set(counts.values()), reverse=True):
        chosen = sorted(c for c, k in counts.items() if k >= t)
        units = sorted(u for u, own in settings_of.items() if set(chosen) <= own)
        if units and (len(units) * len(chosen), len(units)) > best[:2]:
            best = (len(units) * len(chosen), len(units), units, chosen)
    return best[2], best[3]


def study_summary(runs: pd.DataFrame, *, reference: str = "calibrated", sources: Sequence[str] | None = None,
                  metrics: Sequence[str] = STUDY_METRICS, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per group, window, setting and metric: the mean over sessions, its interval, its level and ``n``.

    ``runs``: a study's runs (a sweep frame with a ``unit`` column; without one each session is its
    own unit). Copies of one unit are averaged first. ``group``: ``"main"``, or ``"calibration
    warned"`` for the units whose token calibration carries a warning (summarized apart, never mixed
    in). Within a group and window, a metric is compared on the same units at every setting shown
    (paired; :func:`paired_block`): every setting for the counts and the cost; for a summary measure,
    which needs a compaction, the settings where enough sessions compact (the others are NaN and
    ``note`` says why). Intervals: the session-level paired bootstrap of
    :func:`pimem.experiments.uncertainty.bootstrap_ci` at the highest level whose coverage at that ``n``
    holds (:func:`supported_level`; NaN below a handful of sessions). ``band_low``/``band_high``: the
    lowest and highest mean across the token sources (for the metrics every source measures).
    """
    if not len(runs):
        return STUDY_SUMMARY.frame([])
    ok = runs[runs["error"].isna()] if "error" in runs.columns else runs
    if "unit" not in ok.columns:
        ok = ok.assign(unit=ok["session"])
    warned = _warned(ok, reference)
    keys = ["reserve_tokens", "keep_recent_tokens"]
    rows: list[dict[str, Any]] = []
    for group, part in (("main", ok[~ok["unit"].isin(warned)]), ("calibration warned", ok[ok["unit"].isin(warned)])):
        if not len(part):
            continue
        ref = part[part["token_source"] == reference] if "token_source" in part.columns else part
        for window in sorted(ref["context_window"].unique()):
            in_window = ref[ref["context_window"] == window]
            settings = sorted({(int(r), int(k)) for r, k in zip(in_window["reserve_tokens"],
                                                                in_window["keep_recent_tokens"])})
            all_units = in_window["unit"].nunique()
            for metric in metrics:
                if metric not in in_window.columns:
                    continue
                per = in_window.groupby(["unit", *keys])[metric].mean().reset_index()
                units, cells = paired_block(per, metric)
                note = _left_out_note(metric, all_units, units, settings, cells)
                level = supported_level(len(units))
                chosen = in_window[in_window["unit"].isin(units)
                                   & pd.Series([c in set(cells) for c in zip(in_window["reserve_tokens"],
                                                                              in_window["keep_recent_tokens"])],
                                               index=in_window.index)]
                stats = (_paired_stats(chosen.assign(session=chosen["unit"]), metric, level, n_boot, seed)
                         if units else None)
                bands = None
                if metric in BANDED_METRICS and "token_source" in part.columns and part["token_source"].nunique() > 1:
                    every = part[(part["context_window"] == window) & part["unit"].isin(units)]
                    if len(every):
                        bands = token_source_bands(every.assign(session=every["unit"]), [metric], sources=sources,
                                                   by=keys)
                for r, k in settings:
                    row = {"group": group, "context_window": int(window), "reserve_tokens": r,
                           "keep_recent_tokens": k, "metric": metric, "mean": math.nan, "ci_low": math.nan,
                           "ci_high": math.nan, "level": level if level is not None else math.nan,
                           "n": len(units) if (r, k) in cells else 0, "band_low": math.nan, "band_high": math.nan,
                           "note": note}
                    if stats is not None and (r, k) in cells:
                        hit = stats[(stats["reserve_tokens"] == r) & (stats["keep_recent_tokens"] == k)]
                        if len(hit):
                            row.update(mean=hit[metric].iloc[0], ci_low=hit[f"{metric}_ci_low"].iloc[0],
                                       ci_high=hit[f"{metric}_ci_high"].iloc[0])
                    if bands is not None and (r, k) in cells:
                        hit = bands[(bands["reserve_tokens"] == r) & (bands["keep_recent_tokens"] == k)]
                        if len(hit):
                            row.update(band_low=hit[f"{metric}_band_low"].iloc[0],
                                       band_high=hit[f"{metric}_band_high"].iloc[0])
                    rows.append(row)
    return STUDY_SUMMARY.frame(rows)


def _left_out_note(metric: str, all_units: int, units: Sequence[Any], settings: Sequence[tuple[int, int]],
                   cells: Sequence[tuple[int, int]]) -> str:
    """What a metric's paired comparison in a window leaves out, in words ("" for nothing)."""
    parts = []
    why = ("no compaction, so no summary to measure" if metric in QUALITY_METRICS
           else "the setting is left out of its grid: Pi cannot work with it there")
    if len(units) < all_units:
        parts.append(f"{all_units - len(units)} of {all_units} sessions left out ({why} at some setting)")
    if len(cells) < len(settings):
        parts.append(f"{len(settings) - len(cells)} of {len(settings)} settings blank (–): too few of the "
                     f"sessions have a value there ({why}) to compare them with the rest on the same sessions")
    return "; ".join(parts)


def _paired_stats(df: pd.DataFrame, metric: str, level: float | None, n_boot: int, seed: int) -> pd.DataFrame:
    """:func:`~pimem.experiments.uncertainty.bootstrap_ci` of one metric over reserve × keep at ``level``
    (None: the means alone)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PimemWarning)  # n and the missing interval are shown instead
        return bootstrap_ci(df.drop(columns=["token_source"], errors="ignore"), [metric], n_boot=n_boot, seed=seed,
                            by=["reserve_tokens", "keep_recent_tokens"], confidence=level or 0.95,
                            check_coverage=True)
