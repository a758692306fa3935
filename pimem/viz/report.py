"""Standalone HTML reports and the main study job.

* :func:`write_drift_report` — one HTML file (figures embedded as base64 PNG, tables as HTML)
  describing a session's or a replay's chain of compactions, rendered from the Jinja2 templates in
  ``pimem/viz/templates`` with autoescaping: every text from a session is escaped.
* :func:`run_study` — sweep sessions over a reserve × keep × window grid with the offline
  extractive summarizer (cached), write the results table, heatmaps, a replay and a drift
  report per session, and an ``index.html`` that links everything.
"""

from __future__ import annotations

import io
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, cast

import pandas as pd
from markupsafe import Markup

from pimem.errors import (
    ConfigurationError,
    PimemWarning,
    SessionFormatError,
    SkippedFileWarning,
    SourceOverwriteError,
    SummarizationError,
)
from pimem.base.files import atomic_write_bytes, atomic_write_text, mark_output, write_table
from pimem.base.tables import escape_lone_surrogates, format_number, frame
from pimem.core.compaction.compaction import CompactionSettings, estimate_tokens
from pimem.core.session_manager import session_entry_to_context_messages
from pimem.drift import drift_report, headline, lost_facts
from pimem.drift.measures import compare_sources, measure_docs
from pimem.drift.records import compaction_records
from pimem.experiments.sweep import sweep
from pimem.experiments.uncertainty import sweep_summary
from pimem.replays.engine import TOKEN_SOURCES, replay
from pimem.replays.recording import calibrate_recording
from pimem.replays.orphans import OPEN_LOOP_NOTE, orphan_rate, orphan_references
from pimem.sessions.discover import dedupe_session_paths
from pimem.sessions.load import as_session, load_session
from pimem.summarizers.baselines import baseline_summarizers
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.registry import get_summarizer
from pimem.viz import (
    estimate_vs_usage_table,
    plot_context_over_time,
    plot_drift,
    plot_estimate_vs_usage,
    plot_session_tree,
    plot_sweep_heatmaps,
)
from pimem.viz.measure_plots import plot_measures, plot_recall_curve
from pimem.viz.templating import format_cell as _fmt, render as _render

if TYPE_CHECKING:
    from pimem.replays.tokens import TokenSourceName

__all__ = ["write_drift_report", "drift_report_html", "measures_section_html", "default_sources", "run_study",
           "study_grid", "session_size", "SessionSize", "figure_png", "DEFAULT_WINDOW_SHARES", "DEFAULT_RESERVE_SHARES",
           "DEFAULT_KEEP_SHARES", "STUDY_TOKEN_SOURCES"]

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
_SUMMARY_METRICS = ("compactions", "summarization_request_tokens", "peak_context_tokens", "mean_context_tokens",
                    "orphan_reference_rate")

_HEATMAP_METRICS = ("compactions", "summarization_request_tokens", "peak_context_tokens", "mean_context_tokens")

# --------------------------------------------------------------------------- figures and tables


def figure_png(fig: Any, dpi: int = 100) -> bytes:
    """A figure as PNG bytes; the figure is closed afterwards."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


@dataclass(frozen=True)
class TableView:
    """A DataFrame prepared for the ``table`` macro of ``templates/macros.html.j2``: the wrapper's class,
    header cells as (name split at underscores, class), rows of (text, class) and how many rows are left out."""

    wrap: str
    head: list[tuple[list[str], str]]
    rows: list[list[tuple[str, str]]]
    more: int


def table_view(df: pd.DataFrame | None, max_rows: int = 200, *, tall: bool = False,
               blank: Sequence[str] = ()) -> TableView | None:
    """A DataFrame as a :class:`TableView` (None when it has no columns: shown as "(empty)").

    Numeric columns are right-aligned and formatted; text cells wrap. ``tall``: the wrapper
    scrolls vertically too, with the header kept in view. ``blank``: columns whose missing
    values are left empty (elsewhere they show as –).
    """
    if df is None or not len(df.columns):
        return None
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    head = [(str(c).split("_"), "" if n else "l") for c, n in zip(df.columns, numeric)]
    empty = [c in blank for c in df.columns]
    rows = []
    for row in df.head(max_rows).itertuples(index=False):
        cells = []
        for v, n, e in zip(row, numeric, empty):
            text = "" if e and pd.isna(v) else _fmt(v)
            cells.append((text, "" if n else ("l w" if len(text) > 32 else "l")))  # long text wraps
        rows.append(cells)
    return TableView("table-wrap tall" if tall else "table-wrap", head, rows, max(len(df) - max_rows, 0))


# --------------------------------------------------------------------------- drift report


_BY_COMPACTION_COLUMNS = ["compaction", "source", "score", "recall_faithful", "faithfulness", "n_needed", "few_needed",
                          "written_tokens"]
_REPORT_COLUMNS = [
    "compaction", "entry_id", "first_kept_entry_id", "n_entries", "tokens_before", "span_tokens", "summary_tokens",
    "compression_ratio_with_prev", "split_turn", "conformance", "score", "needed_recall", "fact_recall",
    "prev_retention", "n_lost",
    "cumulative_loss", "sim_prev_cosine", "goal_sim_request_cosine",
]


def _resolve(session_or_result: Any) -> tuple[Any, Any]:
    """(session, replay result or None) from a Session, a ReplayResult or a path."""
    if hasattr(session_or_result, "session") and hasattr(session_or_result, "events"):
        return session_or_result.session, session_or_result
    return as_session(session_or_result), None


def _headline_table(head: dict[str, Any]) -> pd.DataFrame:
    """The headline as rows: one number per measure; per-compaction lists as their mean, with
    min, median and max over the compactions (never the list itself)."""
    rows = []
    for name, value in head.items():
        if isinstance(value, (list, tuple)):
            values = pd.Series(value, dtype=float).dropna()
            if len(values):
                rows.append({"measure": f"{name} (mean over {len(values):,} compactions)", "value": values.mean(),
                             "min": values.min(), "median": values.median(), "max": values.max()})
            else:
                rows.append({"measure": name, "value": math.nan})
        else:
            rows.append({"measure": name, "value": value})
    return frame(rows, columns=["measure", "value", "min", "median", "max"])


def _lost_facts_table(report: pd.DataFrame) -> pd.DataFrame:
    """Facts lost between consecutive summaries, written as they first appeared (original case)."""
    lost = lost_facts(report)
    facts = report.attrs.get("facts")
    surface: dict[Any, Any] = {}
    introduced: dict[Any, Any] = {}
    if facts is not None and len(facts):
        written = facts["surface"] if "surface" in facts.columns else facts["value"]
        # the normalized value, unless normalizing lower-cased it (errors, commands): then the text as written
        surface = {k: " ".join(w.split()) if isinstance(w, str) and str(v) == str(v).lower() and w != w.lower()
                   else v for k, v, w in zip(facts["key"], facts["value"], written)}
        introduced = dict(zip(facts["key"], facts["introduced_at"]))
    return frame({
        "fact": [surface.get(k, str(k).split(":", 1)[-1]) for k in lost["key"]],
        "kind": lost["kind"].astype(str).to_numpy(),
        "introduced_at": pd.array([introduced.get(k) for k in lost["key"]], dtype="Int64"),
        "lost_at": lost["lost_at"].to_numpy(),
    }).sort_values(["lost_at", "kind"], kind="stable")


def _replay_entries_text(session: Any, result: Any) -> str:
    """What the replayed session holds: the recording's entries it kept and the ones it wrote."""
    s = result.summary()
    written = dict(getattr(result, "written_entries", {}) or {})
    n_written = sum(written.values())
    kept = len(session.entries) - n_written
    left_out = s.get("left_out_entries", 0)
    dropped = s["entries"] - kept - left_out
    parts = []
    if left_out:
        parts.append(f"{left_out:,} of failed runs left out")
    if dropped > 0:
        parts.append(f"{dropped:,} recorded compactions and labels dropped")
    what = ", ".join(f"{written.get(k, 0):,} {name}" for k, name in (
        ("compaction", "compactions"), ("refusal", "refused requests"), ("context_edit", "context edits")))
    return (f"{len(session.entries):,} entries: {kept:,} of the recording's {s['entries']:,}"
            + (f" ({'; '.join(parts)})" if parts else "") + f" and {n_written:,} written by the replay ({what})")


def drift_report_html(session_or_result: Any, title: str = "Summary drift report", *,
                      report: pd.DataFrame | None = None, sources: dict[str, Any] | None = None,
                      compare_max: int = 40, index_href: str | None = None) -> str:
    """The HTML text of :func:`write_drift_report` (nothing written); ``report``: the drift
    report when already computed (:func:`pimem.drift.drift_report` of the same input)."""
    session, result = _resolve(session_or_result)
    if report is None:
        report = drift_report(result if result is not None else session)
    subject = result if result is not None else session
    context: dict[str, Any] = {
        "title": title, "index_href": index_href, "session_id": session.header.get("id"),
        "source": getattr(session, "path", None), "n_entries": len(session.entries), "n_compactions": len(report),
        "replay": _replay_context(result) if result is not None else None, "open_loop_note": OPEN_LOOP_NOTE,
        "headline": table_view(_headline_table(headline(report)), blank=("min", "median", "max")),
        "tree_png": figure_png(plot_session_tree(session)[0]), "estimates_png": None,
        "notes": report.attrs.get("notes") or [],
    }
    if len(report):
        lost = _lost_facts_table(report)
        context.update(
            drift_png=figure_png(plot_drift(report, arrangement="stacked")[0]),
            per_compaction=table_view(report[[c for c in _REPORT_COLUMNS if c in report.columns]], max_rows=1000,
                                      tall=len(report) > 20),
            n_lost=len(lost), lost=table_view(lost, max_rows=200, tall=len(lost) > 20),
            measures_html=Markup(measures_section_html(subject, report, sources=sources, compare_max=compare_max)),
            orphans=_orphans_context(subject))
    if result is None and len(estimate_vs_usage_table(session)):
        context["estimates_png"] = figure_png(plot_estimate_vs_usage(session)[0])
    return _render("drift_report.html.j2", **context)


def _replay_context(result: Any) -> dict[str, Any]:
    """What the report's replay section shows: the settings, the summary, the context figure, the
    token calibration and any warning."""
    s = result.summary()
    settings = result.settings
    summary = (frame([{k: v for k, v in s.items() if not isinstance(v, (dict, list))}]).T
               .reset_index().rename(columns={"index": "measure", 0: "value"}))
    return {"recorded": s["entries"], "entries_text": _replay_entries_text(result.session, result),
            "reserve_tokens": settings.reserve_tokens,
            "keep_recent_tokens": settings.keep_recent_tokens, "context_window": result.context_window,
            "token_source": result.token_source, "refused_requests": s.get("refused_requests"),
            "failed_turns": s.get("failed_turns", 0), "failure_reasons": s.get("failure_reasons") or "",
            "summary": table_view(summary), "context_png": figure_png(plot_context_over_time(result)[0]),
            "calibration": result.calibration if result.token_source == "calibrated" else None,
            "floored_calls": result.floored_calls, "warnings": list(result.warnings)}


def _orphans_context(session_or_result: Any) -> dict[str, Any]:
    """The orphan-reference rate per compaction (:mod:`pimem.replays.orphans`)."""
    replayed = hasattr(session_or_result, "orphan_references")
    table = session_or_result.orphan_references() if replayed else orphan_references(session_or_result)
    return {"replayed": replayed, "rate": orphan_rate(table), "table": table_view(table)}


def write_drift_report(session_or_result: Any, path: str | os.PathLike, title: str = "Summary drift report", *,
                       report: pd.DataFrame | None = None, sources: dict[str, Any] | None = None,
                       compare_max: int = 40, index_href: str | None = None) -> Path:
    """Write a standalone HTML drift report of a Session, a ReplayResult or a session file.

    Figures are embedded as base64 PNG; the file is written atomically. Returns the path.

    Args:
        session_or_result: a ``Session``, a ``ReplayResult`` or a session file's path.
        path: the HTML file to write.
        title: the page's title.
        report: the drift report when already computed (:func:`pimem.drift_report` of the same input).
        sources: summary sources to set beside the session's own summaries (default: the extractive
            summarizer and the four degenerate baselines, at the recorded summaries' length).
        compare_max: the comparison is left out, with a note, when the chain has more compactions.
        index_href: a link back to the page that lists this report (the study's ``index.html``),
            at the top and the bottom.
    """
    target = Path(path)
    page = drift_report_html(session_or_result, title=title, report=report, sources=sources, compare_max=compare_max,
                             index_href=index_href)
    atomic_write_text(target, escape_lone_surrogates(page))  # a UTF-8 page cannot hold lone surrogates
    return target


# --------------------------------------------------------------------------- measures and sources


_PIPELINE_COLUMNS = ["compaction", "files_block_present", "pipeline_read_precision", "pipeline_read_recall",
                     "pipeline_modified_precision", "pipeline_modified_recall"]
_NEEDED_COLUMNS = ["compaction", "written_tokens", "score", "recall_faithful", "faithfulness", "n_needed",
                   "n_needed_constraint", "n_needed_decision", "n_needed_error", "n_needed_artifact",
                   "n_needed_reference", "needed_recall", "needed_recall_constraint", "needed_recall_decision",
                   "needed_recall_error", "needed_recall_artifact", "needed_recall_reference", "fact_recall",
                   "content_sections", "conformance"]


def default_sources() -> dict[str, Any]:
    """The sources a drift report sets beside a session's own summaries: extractive and the four baselines."""
    return {"extractive": get_summarizer("extractive"), **baseline_summarizers(budget=None)}


def measures_section_html(session_or_result: Any, report: pd.DataFrame, *, sources: dict[str, Any] | None = None,
                          compare_max: int = 40) -> str:
    """The report's measures section: needed-later recall per compaction, the file lists as a pipeline
    check, the session's summaries beside other sources on the same spans, and what each measure
    rewards and how it can be gamed."""
    compared = None
    if len(report) <= compare_max:
        chosen = default_sources() if sources is None else dict(sources)
        named = {"this session": "recorded", **chosen}
        records = compaction_records(session_or_result)
        matched = compare_sources(session_or_result, named, records=records)
        own = compare_sources(session_or_result, named, max_tokens=None, records=records)
        errors = matched.per_compaction[matched.per_compaction["error"].notna()]
        per = matched.per_compaction
        compared = {
            "measures_png": figure_png(plot_measures(matched.table)[0]),
            "table": table_view(matched.table.reset_index().rename(columns={"index": "measure"})),
            "by_compaction": table_view(per[[c for c in _BY_COMPACTION_COLUMNS if c in per.columns]],
                                        max_rows=400, tall=len(per) > 20),
            "errors": table_view(errors[["source", "compaction", "error"]]) if len(errors) else None,
            "curve_png": figure_png(plot_recall_curve(own.curve(), points=own.per_compaction)[0]),
            "notes": list(dict.fromkeys(matched.notes)),
        }
    return _render("measures.html.j2", n_compactions=len(report), compare_max=compare_max, compared=compared,
                   needed=table_view(report[[c for c in _NEEDED_COLUMNS if c in report.columns]]),
                   pipeline=table_view(report[[c for c in _PIPELINE_COLUMNS if c in report.columns]]),
                   docs=table_view(measure_docs()))


# --------------------------------------------------------------------------- the study


def _unique_names(paths: Sequence[Path]) -> list[str]:
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


def _int_values(name: str, values: Any, default: Sequence[int]) -> list[int]:
    if values is None:
        return list(default)
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


def _report_setting(rows: pd.DataFrame, grid: list[dict[str, Any]]) -> dict[str, Any]:
    """The setting of a session's drift report: the compacting setting (calibrated runs) nearest the
    middle of its grid, so that the report has compactions to measure; the middle if none compacts."""
    middle = (len(grid) - 1) // 2
    if len(rows) and "compactions" in rows.columns:
        done = rows[rows["error"].isna()] if "error" in rows.columns else rows
        compacting = {(r.reserve_tokens, r.keep_recent_tokens, r.context_window)
                      for r in done[done["compactions"] > 0].itertuples()}
        candidates = [i for i, g in enumerate(grid)
                      if (g["reserve_tokens"], g["keep_recent_tokens"], g["context_window"]) in compacting]
        if candidates:
            return grid[min(candidates, key=lambda i: (abs(i - middle), i))]
    return grid[middle]


def run_study(
    paths: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    reserve: Sequence[int] | None = None,
    keep: Sequence[int] | None = None,
    window: Sequence[int] | None = None,
    workers: int | None = None,
    progress: bool = True,
    token_sources: Sequence[str] = STUDY_TOKEN_SOURCES,
) -> str:
    """The main job: sweep ``paths`` over reserve × keep × window and write a browsable study.

    Grids (:func:`study_grid`): values given are used for every session; a dimension left out
    is derived from each session's size (windows a fifth and two fifths of it, reserve and keep
    5–20% of the window), so every session compacts and every report measures something.
    Settings without room (reserve ≥ window) or degenerate (keep ≥ window − reserve) are left
    out. Every setting runs under each of ``token_sources``: the spread is the token-source band.

    Writes into ``out_dir``: ``sweep.csv`` (one row per session × setting × token source, with
    the shares of the derived grid), ``summary.csv`` (per setting: mean over sessions, 95%
    session-level paired bootstrap interval, band across token sources;
    :func:`pimem.experiments.uncertainty.sweep_summary`), heatmaps of the calibrated runs
    (``heatmap-w<window>.png``; per window share of the session size for derived grids),
    ``replays/<name>.jsonl`` and ``reports/<name>.html`` (each session replayed at a setting of
    its grid that compacts, with its drift report), ``index.html`` linking everything, and
    ``cache.sqlite`` (the summaries, reused by a re-run) and ``sweep-runs.jsonl`` (finished runs:
    an interrupted study resumes). Summaries come from the offline extractive summarizer.
    Returns a short text summary.

    Args:
        paths: the session files.
        out_dir: the folder to write into (made if missing; a study never overwrites a session file).
        reserve: the ``reserve_tokens`` values (default: derived per session).
        keep: the ``keep_recent_tokens`` values (default: derived per session).
        window: the context windows (default: derived per session).
        workers: processes to run in (as for :func:`pimem.sweep`).
        progress: show a progress bar.
        token_sources: the token sources every setting runs under (default: calibrated, chars, tiktoken).
    """
    start = time.perf_counter()
    session_paths = [Path(p) for p in paths]
    if not session_paths:
        raise ConfigurationError("no session files given")
    for p in session_paths:
        if not p.exists():
            raise FileNotFoundError(f"session file not found: {p}")
    session_paths = dedupe_session_paths(session_paths)
    _refuse_to_overwrite(session_paths, Path(out_dir), _unique_names(session_paths))
    reserves = None if reserve is None else _int_values("reserve", reserve, ())
    keeps = None if keep is None else _int_values("keep", keep, ())
    windows = None if window is None else _int_values("window", window, ())
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
    left_out_by_session: list[int] = []
    for p in session_paths:
        grids[str(p)], left_out = study_grid(sizes[str(p)], reserves, keeps, windows)
        left_out_by_session.append(left_out)
    skipped = (f"{left_out_by_session[0]} per session" if len(set(left_out_by_session)) == 1
               else f"{sum(left_out_by_session)} in all") if any(left_out_by_session) else ""
    if not any(grids.values()):
        raise ConfigurationError("no setting is left to run: each leaves no room in its window (reserve ≥ window, "
                                 "or keep ≥ window − reserve), too little room above the tokens every request "
                                 "carries for the session's largest step (turns would fail), or a threshold the "
                                 "session never reaches (the same run as no compaction)")
    out = Path(out_dir)
    for folder in (out, out / "replays", out / "reports"):
        mark_output(folder)  # every file in them is pimem's: never read back as sessions
    cache_path = out / "cache.sqlite"

    frames = []
    for p in session_paths:
        unique = list(dict.fromkeys((g["reserve_tokens"], g["keep_recent_tokens"], g["context_window"])
                                    for g in grids[str(p)]))
        grid = [{"reserve_tokens": r, "keep_recent_tokens": k, "context_window": w, "token_source": src}
                for r, k, w in unique for src in sources]
        if grid:
            frames.append(sweep([str(p)], grid, workers=workers, cache=cache_path, progress=progress,
                                results_path=out / "sweep-runs.jsonl", measures="cost"))
    df = pd.concat(frames, ignore_index=True) if frames else frame()
    names = _unique_names(session_paths)
    _refuse_to_overwrite(session_paths, out, names)
    name_of = {str(p): n for p, n in zip(session_paths, names)}
    shares = frame([{"session": key, **g} for key, grid in grids.items() for g in grid])
    if "session" in df.columns:
        df.insert(1, "name", df["session"].map(name_of))
        df.insert(2, "session_size", df["session"].map({k: round(v.tokens) for k, v in sizes.items()}))
        df = df.merge(shares, on=["session", "reserve_tokens", "keep_recent_tokens", "context_window"], how="left")
    write_table(df.drop(columns=[c for c in ("traceback",) if c in df.columns]), out / "sweep.csv")
    errors = int(df.loc[df["error"].notna(), "run_hash"].nunique()) if "error" in df.columns else 0

    ok = df[df["error"].isna()] if "error" in df.columns else df
    by = [("context_window" if windows is not None else "window_share"),
          ("reserve_tokens" if reserves is not None else "reserve_share"),
          ("keep_recent_tokens" if keeps is not None else "keep_share")]
    metrics = [m for m in _SUMMARY_METRICS if m in ok.columns]
    summary = frame()
    if len(ok) and metrics:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PimemWarning)  # one session: the index says so
            summary = sweep_summary(ok, metrics, reference=reference, sources=sources, by=by)
        write_table(summary, out / "summary.csv")

    heatmaps: list[tuple[Any, str]] = []
    calibrated = ok[ok["token_source"] == reference] if "token_source" in ok.columns else ok
    if len(calibrated):
        for w in sorted(calibrated[by[0]].dropna().unique()):
            part = calibrated[calibrated[by[0]] == w]
            fig, _ = plot_sweep_heatmaps(part, [m for m in _HEATMAP_METRICS if m in part.columns], x=by[2], y=by[1],
                                          ncols=2)  # 2 × 2: readable on an 800 px screen
            label = f"context window {w:,}" if windows is not None else f"context window {w:.0%} of each session"
            fig.suptitle(f"{label} — mean over {part['session'].nunique()} session(s), {reference} tokens")
            name = f"heatmap-w{int(w)}.png" if windows is not None else f"heatmap-w{round(w * 100)}pct.png"
            atomic_write_bytes(out / name, figure_png(fig))
            heatmaps.append((w, name))

    summarizer = CachedSummarizer(get_summarizer("extractive"), cache_path)
    (out / "replays").mkdir(exist_ok=True)
    (out / "reports").mkdir(exist_ok=True)
    per_session: list[dict[str, Any]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(session_paths), desc="drift reports")
    try:
        for p, name in zip(session_paths, names):
            row: dict[str, Any] = {"name": name, "path": str(p), "size": round(sizes[str(p)].tokens)}
            try:
                if not grids[str(p)]:
                    raise ConfigurationError(_no_setting_text(sizes[str(p)]))
                runs = calibrated[calibrated["session"] == str(p)] if len(calibrated) else calibrated
                chosen = _report_setting(runs, grids[str(p)])
                mr, mk, mw = chosen["reserve_tokens"], chosen["keep_recent_tokens"], chosen["context_window"]
                settings = CompactionSettings(reserve_tokens=mr, keep_recent_tokens=mk)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PimemWarning)  # kept on the result, shown in the report
                    result = replay(p, settings, context_window=mw, summarizer=summarizer, token_source=reference)
                result.write(out / "replays" / f"{name}.jsonl")
                write_drift_report(result, out / "reports" / f"{name}.html",
                                   title=f"Summary drift: {name} (reserve {mr}, keep {mk}, window {mw})",
                                   index_href="../index.html")
                s = result.summary()
                if s["failed_compactions"] and not s["compactions"]:
                    failures = result.events.loc[result.events["kind"] == "compact_failed", "error"].dropna()
                    raise SummarizationError(f"every compaction failed ({s['failed_compactions']})"
                                             + (f"; the first: {failures.iloc[0]}" if len(failures) else ""))
                row.update(reserve=mr, keep=mk, window=mw, compactions=s["compactions"],
                           peak_context_tokens=s["peak_context_tokens"], refused_requests=s["refused_requests"],
                           failed_turns=s["failed_turns"],
                           orphan_reference_rate=s["orphan_reference_rate"], warnings=s["warnings"],
                           summary_calls=s["summary_calls"], report=f"reports/{name}.html",
                           replay=f"replays/{name}.jsonl", error=None)
            except Exception as exc:  # noqa: BLE001 - one broken session must not stop the study
                row.update(error=f"{type(exc).__name__}: {exc}")
            per_session.append(row)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        summarizer.close()

    elapsed = time.perf_counter() - start
    grid_text = _grid_text(reserves, keeps, windows)
    index = _index_html(df, per_session, heatmaps, grid_text, skipped, elapsed, summary=summary, by=by,
                        sources=sources, reference=reference)
    atomic_write_text(out / "index.html", escape_lone_surrogates(index))

    n_settings = sum(len({(g["reserve_tokens"], g["keep_recent_tokens"], g["context_window"]) for g in grid})
                     for grid in grids.values())
    lines = [
        f"study of {len(session_paths)} session(s), {n_settings} setting(s) × {len(sources)} token source(s) = "
        f"{_runs(df)} runs ({errors} with errors) in {elapsed:.1f} s",
        f"  {grid_text}" + (f" (settings without room or degenerate left out: {skipped})" if skipped else ""),
    ]
    if "refused_requests" in ok.columns and len(ok):
        refusing = ok[ok["refused_requests"] > 0]
        lines.append(f"  requests larger than the window, refused by the provider: {int(ok['refused_requests'].sum()):,} "
                     f"in {len(refusing):,} of {len(ok):,} runs; failed turns: {int(ok['failed_turns'].sum()):,}; "
                     f"runs above their window not reported as refused: "
                     f"{int((ok['peak_context_tokens'] > ok['context_window']).sum()):,}")
    if len(summary) and "compactions" in summary.columns:
        lines.append(f"  compactions per session ({reference}): {summary['compactions'].min():.1f} – "
                     f"{summary['compactions'].max():.1f} across settings")
    lines.append("  drift reports:")
    for row in per_session:
        if row.get("error"):
            lines.append(f"    {row['name']}: failed: {row['error']}")
        else:
            lines.append(f"    {row['name']}: {row['compactions']} compactions, {row['refused_requests']} refused "
                         f"request(s), {row['failed_turns']} failed turn(s) at reserve {row['reserve']}, keep "
                         f"{row['keep']}, window {row['window']} -> {out / row['report']}")
    lines.append(f"  open {out / 'index.html'}")
    return StudySummary("\n".join(lines), sessions=len(per_session),
                        failed_sessions=sum(1 for row in per_session if row.get("error")))


class StudySummary(str):
    """The text :func:`run_study` returns, with how many sessions it reported on and how many failed."""

    sessions: int
    failed_sessions: int

    def __new__(cls, text: str, *, sessions: int, failed_sessions: int) -> "StudySummary":
        self = super().__new__(cls, text)
        self.sessions = sessions
        self.failed_sessions = failed_sessions
        return self


def _refuse_to_overwrite(sources: Sequence[Path], out: Path, names: Sequence[str]) -> None:
    """Raise :class:`SourceOverwriteError` (before any work) when a file the study writes is a source."""
    targets = [out / f for f in ("sweep.csv", "summary.csv", "index.html", "cache.sqlite", "sweep-runs.jsonl")]
    targets += [out / "replays" / f"{n}.jsonl" for n in names] + [out / "reports" / f"{n}.html" for n in names]
    def file_id(path: Path) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    real_sources = {os.path.realpath(p): p for p in sources}
    source_ids = {file_id(p): p for p in sources}
    source_ids.pop(None, None)
    for target in targets:
        source = real_sources.get(os.path.realpath(target)) or source_ids.get(file_id(target))
        if source is not None:
            raise SourceOverwriteError(f"{target}: the study would overwrite the source session {source}; "
                                       "choose another output folder")


def _runs(df: pd.DataFrame) -> int:
    """Distinct runs of a study frame (a setting two shares round to appears once per share)."""
    return int(df["run_hash"].nunique()) if "run_hash" in df.columns else len(df)


def _grid_text(reserves: list[int] | None, keeps: list[int] | None, windows: list[int] | None) -> str:
    def dim(values: list[int] | None, shares: Sequence[float], of: str) -> str:
        if values is not None:
            return ", ".join(f"{v:,}" for v in values)
        return ", ".join(f"{s:.0%}" for s in shares) + f" of {of}"

    return (f"reserve {dim(reserves, DEFAULT_RESERVE_SHARES, 'the room for conversation')} × keep "
            f"{dim(keeps, DEFAULT_KEEP_SHARES, 'the room for conversation')} × window = request overhead + "
            f"{dim(windows, DEFAULT_WINDOW_SHARES, 'each session')}" if windows is None else
            f"reserve {dim(reserves, DEFAULT_RESERVE_SHARES, 'the room for conversation')} × keep "
            f"{dim(keeps, DEFAULT_KEEP_SHARES, 'the room for conversation')} × window {dim(windows, (), '')}")


def _index_html(df: pd.DataFrame, per_session: list[dict[str, Any]], heatmaps: list[tuple[Any, str]],
                grid_text: str, skipped: str, elapsed: float, *, summary: pd.DataFrame, by: list[str],
                sources: list[str], reference: str) -> str:
    fields = ("name", "error", "size", "reserve", "keep", "window", "compactions", "peak_context_tokens",
              "refused_requests", "failed_turns", "orphan_reference_rate", "warnings", "report", "replay")
    failed = None
    if "error" in df.columns and df["error"].notna().any():
        failed = table_view(df[df["error"].notna()][[c for c in ("session", "reserve_tokens", "keep_recent_tokens",
                                                                 "context_window", "token_source", "error")
                                                     if c in df.columns]])
    return _render(
        "study_index.html.j2", title="pimem study", index_href=None, open_loop_note=OPEN_LOOP_NOTE,
        sessions=[{f: r.get(f) for f in fields} for r in per_session], grid_text=grid_text, sources=sources,
        runs=_runs(df), elapsed=elapsed, reference=reference, skipped=skipped, refused_note=_refused_note(df),
        step_multiple=STEP_MULTIPLE, min_summary_tokens=MIN_SUMMARY_TOKENS,
        heatmaps=[(f"Context window {w:,}" if by[0] == "context_window" else f"Context window {w:.0%} of each session",
                   name) for w, name in heatmaps],
        summary=table_view(_summary_cells(summary, by)) if len(summary) else None,
        n_sessions=int(summary["n_sessions"].max()) if len(summary) and "n_sessions" in summary.columns else 0,
        failed=failed)


def _refused_note(df: pd.DataFrame) -> str | None:
    """The sweep's refused requests, failed turns and runs above their window, counted from its rows."""
    if "refused_requests" not in df.columns or not len(df):
        return None
    done = df[df["error"].isna()] if "error" in df.columns else df
    above = int((done["peak_context_tokens"] > done["context_window"]).sum())
    return (f"Requests larger than the window, refused by the provider: {int(done['refused_requests'].sum()):,} in "
            f"{int((done['refused_requests'] > 0).sum()):,} of {len(done):,} runs; failed turns: "
            f"{int(done['failed_turns'].sum()):,}; runs above their window not reported as refused: {above:,}.")


def _summary_cells(summary: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """One text cell per metric: ``mean [interval] {band}``."""
    view = summary[by + ["n_sessions"]].copy()
    for column in by:
        if column.endswith("_share"):
            view[column] = [f"{v:.0%}" for v in summary[column]]
    for metric in _SUMMARY_METRICS:
        if metric not in summary.columns:
            continue
        cells = []
        for _, r in summary.iterrows():
            cell = f"{_fmt(r[metric])} [{_fmt(r[f'{metric}_ci_low'])}, {_fmt(r[f'{metric}_ci_high'])}]"
            if f"{metric}_band_low" in summary.columns:
                cell += f" {{{_fmt(r[f'{metric}_band_low'])}–{_fmt(r[f'{metric}_band_high'])}}}"
            cells.append(cell)
        view[metric] = cells
    return view
