"""Standalone HTML reports and the main study job.

* :func:`write_drift_report` — one HTML file (figures embedded as base64 PNG, tables as HTML)
  describing a session's or a replay's chain of compactions, rendered from the Jinja2 templates in
  ``pimem/viz/templates`` with autoescaping: every text from a session is escaped.
* :func:`run_study` — write the study (:mod:`pimem.experiments.study`: sessions swept over a
  reserve × keep × window grid with the offline extractive summarizer, cached) as the results
  table, heatmaps, a replay and a drift report per session, and an ``index.html`` that links
  everything.
"""

from __future__ import annotations

import io
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from markupsafe import Markup

from pimem.errors import SourceOverwriteError
from pimem.base.files import atomic_write_bytes, atomic_write_text, mark_output, write_table
from pimem.base.tables import escape_lone_surrogates, frame
from pimem.drift import drift_report, headline, lost_facts
from pimem.drift.measures import compare_sources, measure_docs
from pimem.drift.records import compaction_records
from pimem.drift.rework import rework_table
from pimem.experiments.study import (MIN_SUMMARY_TOKENS, STEP_MULTIPLE, STUDY_TOKEN_SOURCES, SUMMARY_METRICS,
                                     DEFAULT_KEEP_SHARES, DEFAULT_RESERVE_SHARES, DEFAULT_WINDOW_SHARES, ReportRun,
                                     design_study, run_study_sweep)
from pimem.replays.orphans import OPEN_LOOP_NOTE, orphan_rate, orphan_references
from pimem.replays.result import ReplayResult
from pimem.sessions.load import SessionLike, as_session
from pimem.summarizers.baselines import baseline_summarizers
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
from pimem.viz.rework_plots import plot_rework
from pimem.viz.templating import format_cell as _fmt, render as _render

__all__ = ["write_drift_report", "drift_report_html", "measures_section_html", "default_sources", "run_study",
           "figure_png"]

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


_REPORT_COLUMNS = [
    "compaction", "entry_id", "first_kept_entry_id", "n_entries", "tokens_before", "span_tokens", "summary_tokens",
    "compression_ratio_with_prev", "split_turn", "conformance", "needed_recall", "fact_recall", "prev_retention", "n_lost",
    "cumulative_loss", "sim_prev_cosine", "goal_sim_request_cosine",
]


def _resolve(session_or_result: SessionLike) -> tuple[Any, ReplayResult | None]:
    """(session, replay result or None) from a Session, a ReplayResult or a path (:func:`pimem.as_session`)."""
    return as_session(session_or_result), session_or_result if isinstance(session_or_result, ReplayResult) else None


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


def drift_report_html(session_or_result: SessionLike, title: str = "Summary drift report", *,
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
            orphans=_orphans_context(subject), rework=_rework_context(report, replayed=result is not None))
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


def _orphans_context(session_or_result: SessionLike) -> dict[str, Any]:
    """The orphan-reference rate per compaction (:mod:`pimem.replays.orphans`)."""
    result = session_or_result if isinstance(session_or_result, ReplayResult) else None
    table = result.orphan_references() if result is not None else orphan_references(session_or_result)
    return {"replayed": result is not None, "rate": orphan_rate(table), "table": table_view(table)}


_REWORK_COLUMNS = ["compaction", "point", "position", "entry_id", "rework", "rereads", "reuses_summary", "reuses_kept",
                   "reruns", "reverts", "repeated_instructions", "repeated_questions", "returned_to_earlier_task",
                   "steps_to_progress"]


def _rework_context(report: pd.DataFrame, *, replayed: bool) -> dict[str, Any]:
    """What the recorded agent did after each compaction and at its matched controls (:mod:`pimem.drift.rework`)."""
    points = report.attrs.get("rework")
    if replayed or points is None or not len(points):
        return {"replayed": replayed, "table": None, "png": None}
    measured = points[points["measured"].astype(bool)]
    return {"replayed": False, "table": table_view(measured[[c for c in _REWORK_COLUMNS if c in points.columns]]),
            "unmeasured": int((~points["measured"].astype(bool)).sum()),
            "png": figure_png(plot_rework(rework_table(points))[0]) if len(measured) else None}


def write_drift_report(session_or_result: SessionLike, path: str | os.PathLike, title: str = "Summary drift report", *,
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
_NEEDED_COLUMNS = ["compaction", "written_tokens", "n_needed", "needed_recall", "needed_recall_constraint",
                   "needed_recall_decision", "needed_recall_error", "needed_recall_artifact", "needed_recall_reference",
                   "fact_recall", "content_sections", "conformance"]


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
        compared = {
            "measures_png": figure_png(plot_measures(matched.table)[0]),
            "table": table_view(matched.table.reset_index().rename(columns={"index": "measure"})),
            "errors": table_view(errors[["source", "compaction", "error"]]) if len(errors) else None,
            "curve_png": figure_png(plot_recall_curve(own.curve(), points=own.per_compaction)[0]),
            "notes": list(dict.fromkeys(matched.notes)),
        }
    return _render("measures.html.j2", n_compactions=len(report), compare_max=compare_max, compared=compared,
                   needed=table_view(report[[c for c in _NEEDED_COLUMNS if c in report.columns]]),
                   pipeline=table_view(report[[c for c in _PIPELINE_COLUMNS if c in report.columns]]),
                   docs=table_view(measure_docs()))


# --------------------------------------------------------------------------- the study


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

    Grids (:func:`pimem.experiments.study.study_grid`): values given are used for every session; a
    dimension left out is derived from each session's size (windows a fifth and two fifths of it,
    reserve and keep 5–20% of the window), so every session compacts and every report measures
    something. Settings without room (reserve ≥ window) or degenerate (keep ≥ window − reserve) are
    left out. Every setting runs under each of ``token_sources``: the spread is the token-source band.
    The runs are :func:`pimem.experiments.study.run_study_sweep`'s; this writes them out.

    Writes into ``out_dir``: ``sweep.csv`` (one row per session × setting × token source, with
    the shares of the derived grid), ``summary.csv`` (per setting: mean over sessions, 95%
    session-level paired bootstrap interval, band across token sources;
    :func:`pimem.experiments.uncertainty.sweep_summary`), heatmaps of the calibrated runs
    (``heatmap-w<window>.png``; per window share of the session size for derived grids),
    ``replays/<name>.jsonl`` and ``reports/<name>.html`` (each session's run at a setting of its
    grid that compacts, with its drift report), ``index.html`` linking everything, and
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
    design = design_study(paths, reserve, keep, window, token_sources)
    out = Path(out_dir)
    _refuse_to_overwrite(design.paths, out, design.names)  # before anything is written
    for folder in (out, out / "replays", out / "reports"):
        mark_output(folder)  # every file in them is pimem's: never read back as sessions
    (out / "replays").mkdir(exist_ok=True)
    (out / "reports").mkdir(exist_ok=True)

    per_session: list[dict[str, Any]] = []

    def write_report(run: ReportRun) -> None:
        """The session's replay and drift report, and its row of the index."""
        row: dict[str, Any] = {"name": run.name, "path": str(run.path), "size": round(run.size.tokens)}
        try:
            result = run.result
            if result is not None and run.setting is not None:
                mr, mk, mw = (run.setting[k] for k in ("reserve_tokens", "keep_recent_tokens", "context_window"))
                result.write(out / "replays" / f"{run.name}.jsonl")
                write_drift_report(result, out / "reports" / f"{run.name}.html",
                                   title=f"Summary drift: {run.name} (reserve {mr}, keep {mk}, window {mw})",
                                   index_href="../index.html")
                s = result.summary()
                row.update(reserve=mr, keep=mk, window=mw, compactions=s["compactions"],
                           peak_context_tokens=s["peak_context_tokens"], refused_requests=s["refused_requests"],
                           failed_turns=s["failed_turns"], orphan_reference_rate=s["orphan_reference_rate"],
                           warnings=s["warnings"], summary_calls=s["summary_calls"],
                           report=f"reports/{run.name}.html", replay=f"replays/{run.name}.jsonl")
            error = run.error
        except Exception as exc:  # noqa: BLE001 - one broken session must not stop the study
            error = f"{type(exc).__name__}: {exc}"
        per_session.append({k: row[k] for k in ("name", "path", "size")} | {"error": error} if error
                           else row | {"error": None})

    results = run_study_sweep(design, cache=out / "cache.sqlite", results_path=out / "sweep-runs.jsonl",
                              workers=workers, progress=progress, on_report=write_report)
    df, summary, by, reference = results.runs, results.summary, design.by, design.reference
    write_table(df.drop(columns=[c for c in ("traceback",) if c in df.columns]), out / "sweep.csv")
    if len(summary):
        write_table(summary, out / "summary.csv")

    heatmaps: list[tuple[Any, str]] = []
    calibrated = results.reference_runs
    if len(calibrated):
        for w in sorted(calibrated[by[0]].dropna().unique()):
            part = calibrated[calibrated[by[0]] == w]
            fig, _ = plot_sweep_heatmaps(part, [m for m in _HEATMAP_METRICS if m in part.columns], x=by[2], y=by[1],
                                          ncols=2)  # 2 × 2: readable on an 800 px screen
            label = f"context window {w:,}" if design.windows is not None else f"context window {w:.0%} of each session"
            fig.suptitle(f"{label} — mean over {part['session'].nunique()} session(s), {reference} tokens")
            name = f"heatmap-w{int(w)}.png" if design.windows is not None else f"heatmap-w{round(w * 100)}pct.png"
            atomic_write_bytes(out / name, figure_png(fig))
            heatmaps.append((w, name))

    elapsed = time.perf_counter() - start
    grid_text = _grid_text(design.reserves, design.keeps, design.windows)
    skipped = design.left_out_text()
    index = _index_html(df, per_session, heatmaps, grid_text, skipped, elapsed, summary=summary, by=by,
                        sources=design.sources, reference=reference)
    atomic_write_text(out / "index.html", escape_lone_surrogates(index))

    ok = results.ok
    lines = [
        f"study of {len(design.paths)} session(s), {design.n_settings} setting(s) × {len(design.sources)} token "
        f"source(s) = {_runs(df)} runs ({results.errors} with errors) in {elapsed:.1f} s",
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
    for metric in SUMMARY_METRICS:
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
