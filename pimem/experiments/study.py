"""The study: a grid of compaction settings for each session, the sweep over it, and the run each
session's drift report is made from, as data.

* :func:`design_study` — the sessions (each file once), their sizes (:func:`session_size`) and the
  grid each runs (:func:`study_grid`), with the settings left out.
* :func:`run_study_sweep` — the sweep of every session over its grid under each token source
  (:func:`pimem.experiments.sweep.sweep_runs`), the summary per setting
  (:func:`pimem.experiments.uncertainty.sweep_summary`) and, per session, the run its drift report is
  made from (:class:`ReportRun`). That run is the sweep's own, sent back by the process that ran it,
  when it is the setting preferred before the sweep (the middle of the grid, when it compacts); the
  session is replayed again only when another setting had to be chosen or the run was resumed from
  the sweep's log. Only that one result crosses from a worker: a replay pickled costs about a third of
  replaying it again.

:func:`pimem.viz.report.run_study` writes them out as pages.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, cast

import pandas as pd

from pimem.base.tables import format_number, frame
from pimem.core.compaction.compaction import CompactionSettings, estimate_tokens
from pimem.core.session_manager import session_entry_to_context_messages
from pimem.errors import ConfigurationError, PimemWarning, SessionFormatError, SkippedFileWarning, SummarizationError
from pimem.experiments.sweep import runs_frame, sweep_runs
from pimem.experiments.uncertainty import sweep_summary
from pimem.replays.engine import TOKEN_SOURCES, replay
from pimem.replays.recording import calibrate_recording
from pimem.sessions.discover import dedupe_session_paths
from pimem.sessions.load import load_session
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.registry import get_summarizer

if TYPE_CHECKING:
    from pimem.replays.result import ReplayResult
    from pimem.replays.tokens import TokenSourceName

__all__ = ["design_study", "run_study_sweep", "StudyDesign", "StudyResults", "ReportRun", "study_grid",
           "session_size", "SessionSize", "unique_names", "DEFAULT_WINDOW_SHARES", "DEFAULT_RESERVE_SHARES",
           "DEFAULT_KEEP_SHARES", "STUDY_TOKEN_SOURCES", "SUMMARY_METRICS", "STEP_MULTIPLE", "MIN_SUMMARY_TOKENS"]

# Study grids derived from each session (see study_grid): windows as shares of the session's size,
# reserve and keep as shares of the window's room for conversation (Pi's defaults are 8% and 10% of a
# 200k window).
DEFAULT_WINDOW_SHARES = (0.2, 0.4)
DEFAULT_RESERVE_SHARES = (0.05, 0.1, 0.2)
DEFAULT_KEEP_SHARES = (0.05, 0.1, 0.2)
SUMMARY_SHARE = 0.8  # Pi caps a summary at 0.8 × reserveTokens
STEP_MULTIPLE = 2  # the room a turn in progress needs, in the session's largest steps
MIN_SUMMARY_TOKENS = 256  # a reserve whose cap is below this leaves no room for a summary
STUDY_TOKEN_SOURCES = ("calibrated", "chars", "tiktoken")
# the metrics of the summary per setting
SUMMARY_METRICS = ("compactions", "summarization_request_tokens", "peak_context_tokens", "mean_context_tokens",
                   "orphan_reference_rate")
_SETTING = ("reserve_tokens", "keep_recent_tokens", "context_window")


# --------------------------------------------------------------------------- sessions and grids


def unique_names(paths: Sequence[Path]) -> list[str]:
    """File stems made distinct (``a``, ``a-2``, …), never equal to another file's stem."""
    stems = [p.stem or "session" for p in paths]
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
    """What a study grid is derived from (:func:`session_size`)."""

    estimate: int
    overhead: float = 0.0
    slope: float = 1.0
    largest_step: float = 0.0  # the most one request adds, in provider tokens (a prompt or tool results, the reply)
    recorded_peak: float = 0.0  # the largest request the recording made, in provider tokens

    @property
    def reach(self) -> float:
        """The largest context a replay that never compacts would send (estimate or recorded usage)."""
        return max(self.tokens, self.recorded_peak)

    def room_needed(self, reserve: float, keep: float) -> float:
        """The least room above the overhead in which no turn fails: after a compaction a request holds
        the summary (at most :data:`SUMMARY_SHARE` of ``reserve``, Pi's cap), the kept tail (about
        ``keep``, more where the cut point moves on to the next turn) and the turn in progress:
        :data:`STEP_MULTIPLE` times the session's largest step, in provider tokens."""
        return SUMMARY_SHARE * reserve + keep + STEP_MULTIPLE * self.largest_step

    @property
    def tokens(self) -> float:
        """The session in provider tokens: ``overhead + slope · estimate``."""
        return self.overhead + self.slope * self.estimate


def session_size(path: str | os.PathLike) -> SessionSize:
    """Pi's usage-free estimate of every message on the session's path, compactions ignored (the
    context a replay that never compacts would reach), with the session's token calibration
    (:mod:`pimem.replays.calibration`: the overhead every request carries and provider tokens per
    estimated token)."""
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
    return SessionSize(total + system, calibration.overhead, calibration.slope, step_tokens, peak)


def _nice(value: float, least: int = 100) -> int:
    """Two significant digits, at least ``least`` (16,384 → 16,000; 1,234 → 1,200)."""
    if value <= least:
        return least
    magnitude = 10 ** (len(str(int(value))) - 2)
    return int(round(value / magnitude) * magnitude)


def study_grid(size: SessionSize | int, reserve: Sequence[int] | None = None, keep: Sequence[int] | None = None,
               window: Sequence[int] | None = None) -> tuple[list[dict[str, Any]], int]:
    """The settings a study runs on one session, and how many were left out.

    A dimension given as values is used as is; one left out is derived from the session
    (``size``: :func:`session_size`, or an estimate in tokens): each window holds the overhead
    every request carries plus :data:`DEFAULT_WINDOW_SHARES` of the conversation in provider
    tokens (``overhead + share · slope · estimate``), and reserve and keep are
    :data:`DEFAULT_RESERVE_SHARES` / :data:`DEFAULT_KEEP_SHARES` of what each window leaves for the
    conversation (``window − overhead``), all rounded to two significant digits (windows at least
    100, reserve and keep at least 10). The smallest derived window leaves at least the room in
    which its largest reserve and keep still hold the session's largest step
    (:meth:`SessionSize.room_needed`), the others that room in proportion to their share. Each
    setting carries ``window_share``, ``reserve_share`` and ``keep_share`` (NaN for a dimension
    given as values). Left out (and counted): settings that leave no room (reserve ≥ window), that
    are degenerate for the session (keep ≥ window − reserve, or the overhead every request carries
    plus keep reaching window − reserve: every check compacts again; a window not above the
    overhead; room below :meth:`SessionSize.room_needed`: turns would fail; a reserve whose
    summary cap, ``SUMMARY_SHARE · reserve``, is below :data:`MIN_SUMMARY_TOKENS`; a threshold the
    session never reaches: no compaction, the same run as every such cell), and a setting two
    shares round to that is already in the grid: no two cells are the same run.
    """
    nan = float("nan")
    if not isinstance(size, SessionSize):
        size = SessionSize(int(size))
    r_shares, k_shares = DEFAULT_RESERVE_SHARES, DEFAULT_KEEP_SHARES
    # the least room in which the largest derived reserve and keep leave the largest step room too
    least_room = max(size.room_needed(0, 0) / (1 - SUMMARY_SHARE * max(r_shares) - max(k_shares)),
                     MIN_SUMMARY_TOKENS / SUMMARY_SHARE / max(r_shares))
    windows = ([(w, nan) for w in window] if window is not None
               else [(_nice(size.overhead + max(share * size.slope * size.estimate,
                                                least_room * share / min(DEFAULT_WINDOW_SHARES))), share)
                     for share in DEFAULT_WINDOW_SHARES])
    settings: list[dict[str, Any]] = []
    seen: set[tuple[int, int, int]] = set()
    left_out = 0
    for w, w_share in windows:
        room = w - size.overhead if w > size.overhead else w  # what the window leaves for the conversation
        reserves = [(r, nan) for r in reserve] if reserve is not None else [
            (_nice(room * share, 10), share) for share in r_shares]
        keeps = [(k, nan) for k in keep] if keep is not None else [
            (_nice(room * share, 10), share) for share in k_shares]
        for r, r_share in reserves:
            for k, k_share in keeps:
                degenerate = (r >= w or k >= w - r or (size.overhead and (
                    w <= size.overhead or size.overhead + k >= w - r))
                    or room < size.room_needed(r, k)  # turns would fail: no room for the largest step
                    or SUMMARY_SHARE * r < MIN_SUMMARY_TOKENS  # no room for a summary
                    or w - r >= size.reach)  # never compacts: every such cell is the same run
                if degenerate or (r, k, w) in seen:
                    left_out += 1
                    continue
                seen.add((r, k, w))
                settings.append({"reserve_tokens": r, "keep_recent_tokens": k, "context_window": w,
                                 "window_share": w_share, "reserve_share": r_share, "keep_share": k_share})
    return settings, left_out


def _no_setting_text(size: SessionSize) -> str:
    """Why no setting of a session's grid is left: the room its largest step needs against the session."""
    return (f"no setting of the grid fits this session: a window in which it compacts (below "
            f"{format_number(size.reach)} tokens) leaves too little room above its overhead of "
            f"{format_number(size.overhead)} tokens for its largest step ({format_number(size.largest_step)} tokens; "
            f"{STEP_MULTIPLE} of them, the kept tail and the summary must fit after a compaction), so every "
            f"compacting setting would fail turns")


@dataclass
class StudyDesign:
    """What a study runs (:func:`design_study`): the sessions, their sizes and grids, the token sources.

    ``reserves``, ``keeps`` and ``windows`` are the values given (None: derived per session);
    ``left_out`` counts, per session, the settings of its grid left out (:func:`study_grid`).
    """

    paths: list[Path]
    names: list[str]
    sizes: dict[str, SessionSize]
    grids: dict[str, list[dict[str, Any]]]
    left_out: list[int]
    reserves: list[int] | None
    keeps: list[int] | None
    windows: list[int] | None
    sources: list[str]
    reference: TokenSourceName

    @property
    def by(self) -> list[str]:
        """The columns that name a setting across sessions: tokens where given, else shares."""
        return [("context_window" if self.windows is not None else "window_share"),
                ("reserve_tokens" if self.reserves is not None else "reserve_share"),
                ("keep_recent_tokens" if self.keeps is not None else "keep_share")]

    @property
    def n_settings(self) -> int:
        """The distinct settings over all sessions (each runs under every token source)."""
        return sum(len({tuple(g[k] for k in _SETTING) for g in grid}) for grid in self.grids.values())

    def left_out_text(self) -> str:
        """How many settings were left out: "N per session", "N in all", or "" for none."""
        if not any(self.left_out):
            return ""
        return (f"{self.left_out[0]} per session" if len(set(self.left_out)) == 1
                else f"{sum(self.left_out)} in all")

    def sweep_grid(self, path: Path) -> list[dict[str, Any]]:
        """The sweep's settings for one session: each setting of its grid once, under every source."""
        unique = list(dict.fromkeys(tuple(g[k] for k in _SETTING) for g in self.grids[str(path)]))
        return [{"reserve_tokens": r, "keep_recent_tokens": k, "context_window": w, "token_source": src}
                for r, k, w in unique for src in self.sources]


def design_study(paths: Sequence[str | os.PathLike], reserve: Sequence[int] | None = None,
                 keep: Sequence[int] | None = None, window: Sequence[int] | None = None,
                 token_sources: Sequence[str] = STUDY_TOKEN_SOURCES) -> StudyDesign:
    """The sessions of a study (each file once; a file that cannot be read is left out with a
    :class:`~pimem.errors.SkippedFileWarning`), their sizes and their grids (:func:`study_grid`).

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
    left_out: list[int] = []
    for p in session_paths:
        grids[str(p)], n = study_grid(sizes[str(p)], reserves, keeps, windows)
        left_out.append(n)
    if not any(grids.values()):
        raise ConfigurationError("no setting is left to run: each leaves no room in its window (reserve ≥ window, "
                                 "or keep ≥ window − reserve), too little room above the tokens every request "
                                 "carries for the session's largest step (turns would fail), or a threshold the "
                                 "session never reaches (the same run as no compaction)")
    return StudyDesign(session_paths, unique_names(session_paths), sizes, grids, left_out, reserves, keeps,
                       windows, sources, reference)


# --------------------------------------------------------------------------- runs


@dataclass
class ReportRun:
    """The run a session's drift report is made from, or why there is none (``error``).

    ``setting`` holds ``reserve_tokens``, ``keep_recent_tokens`` and ``context_window``; ``result`` the
    replay under the study's reference token source; ``reused``: it is the sweep's own run (False: the
    run was resumed from the sweep's log and replayed again here).
    """

    path: Path
    name: str
    size: SessionSize
    setting: dict[str, Any] | None = None
    result: ReplayResult | None = field(default=None, repr=False)
    reused: bool = False
    error: str | None = None


@dataclass
class StudyResults:
    """What :func:`run_study_sweep` measured.

    ``runs``: one row per session × setting × token source (the sweep's columns, with ``name``,
    ``session_size`` and the grid's shares); ``summary``: per setting, over the sessions
    (:func:`pimem.experiments.uncertainty.sweep_summary`; empty when no run finished); ``reports``: per
    session, the run of its drift report (results dropped once ``on_report`` has had them).
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


def _middle(grid: list[dict[str, Any]]) -> int:
    """Where a session's drift report is made when it can be: the middle of its grid."""
    return (len(grid) - 1) // 2


def _report_setting(rows: pd.DataFrame, grid: list[dict[str, Any]]) -> dict[str, Any]:
    """The setting of a session's drift report: the compacting setting (reference runs) nearest the
    middle of its grid, so that the report has compactions to measure; the middle if none compacts."""
    middle = _middle(grid)
    if len(rows) and "compactions" in rows.columns:
        done = rows[rows["error"].isna()] if "error" in rows.columns else rows
        compacting = {(r.reserve_tokens, r.keep_recent_tokens, r.context_window)
                      for r in done[done["compactions"] > 0].itertuples()}
        candidates = [i for i, g in enumerate(grid) if tuple(g[k] for k in _SETTING) in compacting]
        if candidates:
            return grid[min(candidates, key=lambda i: (abs(i - middle), i))]
    return grid[middle]


def _keep_for_report(row: Mapping[str, Any], setting: tuple[Any, ...], reference: str) -> bool:
    """Whether a sweep run is sent back for the drift report: the run of the session's preferred report
    setting (:func:`_middle`) under the reference source, when it compacts (:func:`_report_setting`)."""
    return (not row.get("error") and row.get("token_source") == reference and bool(row.get("compactions"))
            and tuple(row.get(k) for k in _SETTING) == setting)


def run_study_sweep(
    design: StudyDesign,
    *,
    cache: str | os.PathLike,
    results_path: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = True,
    on_report: Callable[[ReportRun], None] | None = None,
) -> StudyResults:
    """Sweep every session of ``design`` over its grid, summarize the runs per setting, and find each
    session's drift-report run (see module docs).

    Args:
        design: the study (:func:`design_study`).
        cache: the SQLite file of the summaries (shared by the runs; a re-run reuses them).
        results_path: the sweep's JSONL log (an interrupted study resumes from it).
        workers: processes to run in (as for :func:`pimem.sweep`).
        progress: show progress bars.
        on_report: called with each session's :class:`ReportRun` as soon as it is known (its result
            is then dropped, so that one replay is held at a time).
    """
    start = time.perf_counter()
    reference = design.reference
    frames: list[pd.DataFrame] = []
    reports: list[ReportRun] = []
    summarizer: CachedSummarizer | None = None
    try:
        for path, name in zip(design.paths, design.names):
            report = ReportRun(path, name, design.sizes[str(path)])
            grid = design.sweep_grid(path)
            kept: dict[tuple[Any, ...], Any] = {}
            rows: list[dict[str, Any]] = []
            if grid:
                preferred = design.grids[str(path)][_middle(design.grids[str(path)])]
                keep = functools.partial(_keep_for_report, setting=tuple(preferred[k] for k in _SETTING),
                                         reference=reference)
                for row, result in sweep_runs([str(path)], grid, workers=workers, cache=cache, progress=progress,
                                              results_path=results_path, measures="cost", keep=keep):
                    rows.append(row)
                    if result is not None:
                        kept[tuple(row[k] for k in _SETTING)] = result
                frames.append(runs_frame(rows))
            try:
                if not design.grids[str(path)]:
                    raise ConfigurationError(_no_setting_text(report.size))
                runs = runs_frame(rows)
                if len(runs) and "token_source" in runs.columns:
                    runs = runs[runs["token_source"] == reference]
                chosen = _report_setting(runs, design.grids[str(path)])
                report.setting = {k: chosen[k] for k in _SETTING}
                report.result = kept.pop(tuple(chosen[k] for k in _SETTING), None)
                report.reused = report.result is not None
                if report.result is None:  # resumed from the log, or no run compacts: replayed here
                    if summarizer is None:
                        summarizer = CachedSummarizer(get_summarizer("extractive"), cache)
                    settings = CompactionSettings(reserve_tokens=chosen["reserve_tokens"],
                                                  keep_recent_tokens=chosen["keep_recent_tokens"])
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", PimemWarning)  # kept on the result, shown in the report
                        report.result = replay(path, settings, context_window=chosen["context_window"],
                                               summarizer=summarizer, token_source=reference)
                kept.clear()
                s = report.result.summary()
                if s["failed_compactions"] and not s["compactions"]:
                    failures = report.result.events.loc[report.result.events["kind"] == "compact_failed",
                                                        "error"].dropna()
                    report.error = (f"{SummarizationError.__name__}: every compaction failed "
                                    f"({s['failed_compactions']})"
                                    + (f"; the first: {failures.iloc[0]}" if len(failures) else ""))
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
        shares = frame([{"session": key, **g} for key, grid in design.grids.items() for g in grid])
        df.insert(1, "name", df["session"].map(name_of))
        df.insert(2, "session_size", df["session"].map({k: round(v.tokens) for k, v in design.sizes.items()}))
        df = df.merge(shares, on=["session", *_SETTING], how="left")
    results = StudyResults(design, df, frame(), reports, 0.0)
    ok = results.ok
    metrics = [m for m in SUMMARY_METRICS if m in ok.columns]
    if len(ok) and metrics:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PimemWarning)  # one session: the index says so
            results.summary = sweep_summary(ok, metrics, reference=reference, sources=design.sources, by=design.by)
    results.elapsed_s = time.perf_counter() - start
    return results
