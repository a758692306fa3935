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
from typing import Any, Mapping, Sequence

import pandas as pd
from markupsafe import Markup

from pimem.errors import SourceOverwriteError
from pimem.base.files import atomic_write_bytes, atomic_write_text, mark_output, write_table
from pimem.base.tables import escape_lone_surrogates, frame
from pimem.drift import drift_report, headline, lost_facts
from pimem.drift.measures import compare_sources, measure_docs
from pimem.drift.records import compaction_records
from pimem.drift.rework import rework_table
from pimem.experiments.advise import pareto_front
from pimem.experiments.study import (QUALITY_METRICS, REPEATED_COMPACTIONS, STUDY_KEEPS, STUDY_METRICS,
                                     STUDY_RESERVES, STUDY_TOKEN_SOURCES, STUDY_WINDOWS, ReportRun, StudyDesign,
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
)
from pimem.viz.figures import plot_pooled_drift, plot_setting_tradeoffs
from pimem.viz.measure_plots import plot_measures, plot_recall_curve
from pimem.viz.rework_plots import plot_rework
from pimem.viz.templating import format_cell as _fmt, render as _render

__all__ = ["write_drift_report", "drift_report_html", "measures_section_html", "default_sources", "run_study",
           "figure_png"]

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
    """The main job: which compaction settings suit a model, on ``paths``, as a browsable study.

    The study (:mod:`pimem.experiments.study`) replays every session over model windows × reserve ×
    keep in tokens (default: the recorded model's own window, then 128,000, 200,000 and 1,000,000;
    reserve 8,192, 16,384, 32,768; keep 10,000, 20,000, 40,000) with the offline extractive summarizer,
    under each of ``token_sources`` (the spread is the token-source band), with the summary-quality
    measures under the reference source. This writes it out.

    Writes into ``out_dir``: ``index.html`` (per window: compactions, refused requests, cost, summary
    ``score`` and ``needed_recall`` per setting over the same sessions, with intervals, ``n`` and the
    Pareto front; the drift of the recorded summaries across repeated compactions beside a replay's;
    every session with its result or the reason it has none), ``sweep.csv`` (one row per session ×
    setting × token source), ``summary.csv`` (:func:`pimem.experiments.study.study_summary`),
    ``tradeoff-w<window>.png``, ``reports/<name>.html`` and ``replays/<name>.jsonl`` (a replay at a
    setting where compactions repeat, and its drift report), ``reports/<name>-recorded.html`` (the
    drift of the session's own recorded summaries), ``drift.png``, and ``cache.sqlite`` (the
    summaries, reused by a re-run) and ``sweep-runs.jsonl`` (finished runs: an interrupted study
    resumes). Returns a short text summary.

    Args:
        paths: the session files.
        out_dir: the folder to write into (made if missing; a study never overwrites a session file).
        reserve: the ``reserve_tokens`` values (default: 8,192, 16,384, 32,768).
        keep: the ``keep_recent_tokens`` values (default: 10,000, 20,000, 40,000).
        window: the context windows (default: each session's model's, then 128k, 200k and 1M).
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
    recorded: dict[str, pd.DataFrame] = {}
    replayed: dict[str, pd.DataFrame] = {}

    def write_reports(run: ReportRun) -> None:
        """The session's drift reports (its recorded summaries; a replay's) and its row of the index."""
        size = run.size
        row: dict[str, Any] = {"name": run.name, "path": str(run.path), "model": size.model or "not recorded",
                               "model_window": size.model_window, "size": round(size.reach),
                               "recorded_compactions": size.recorded_compactions, "recorded_report": None,
                               "report": None, "replay": None, "setting": None, "compactions": None,
                               "refused_requests": None, "failed_turns": None, "reused": run.reused,
                               "reason": run.reason, "error": run.error}
        try:
            if run.recorded is not None and len(run.recorded):
                recorded[run.name] = run.recorded
                write_drift_report(run.path, out / "reports" / f"{run.name}-recorded.html",
                                   title=f"Recorded summaries: {run.name}", report=run.recorded,
                                   index_href="../index.html")
                row["recorded_report"] = f"reports/{run.name}-recorded.html"
            result = run.result
            if result is not None and run.setting is not None:
                mr, mk, mw = (run.setting[k] for k in ("reserve_tokens", "keep_recent_tokens", "context_window"))
                result.write(out / "replays" / f"{run.name}.jsonl")
                write_drift_report(result, out / "reports" / f"{run.name}.html", report=run.report, compare_max=0,
                                   title=f"Summary drift: {run.name} (reserve {mr:,}, keep {mk:,}, window {mw:,})",
                                   index_href="../index.html")
                if run.report is not None:
                    replayed[run.name] = run.report
                s = result.summary()
                row.update(setting=f"{mr:,} / {mk:,} / {mw:,}", compactions=s["compactions"],
                           refused_requests=s["refused_requests"], failed_turns=s["failed_turns"],
                           report=f"reports/{run.name}.html", replay=f"replays/{run.name}.jsonl")
        except Exception as exc:  # noqa: BLE001 - one broken session must not stop the study
            row["error"] = f"{type(exc).__name__}: {exc}"
        per_session.append(row)

    results = run_study_sweep(design, cache=out / "cache.sqlite", results_path=out / "sweep-runs.jsonl",
                              workers=workers, progress=progress, on_report=write_reports)
    df, summary = results.runs, results.summary
    write_table(df.drop(columns=[c for c in ("traceback",) if c in df.columns]), out / "sweep.csv")
    write_table(summary, out / "summary.csv")

    windows: list[dict[str, Any]] = []
    for w in design.window_order:
        views = {group: _window_table(summary, group, w) for group in ("main", "calibration warned")}
        main = views["main"]
        if main is None and views["calibration warned"] is None:
            continue
        png = None
        if main is not None and main.means.get("score", pd.Series(dtype=float)).notna().any():
            name = f"tradeoff-w{w}.png"
            atomic_write_bytes(out / name, figure_png(plot_setting_tradeoffs(
                main.means, title=f"Window {w:,}: cost against summary score, mean over {main.n_text}")[0]))
            png = name
        windows.append({"window": w, "recorded_by": sum(1 for size in design.sizes.values() if size.model_window == w),
                        "main": main, "warned": views["calibration warned"], "png": png})

    rework = _rework_section(out, [r.attrs.get("rework") for r in recorded.values()])
    drift_png = None
    if recorded or replayed:
        fig, _ = plot_pooled_drift({"recorded summaries (real)": list(recorded.values()),
                                    "replayed summaries (extractive, each session's report setting)":
                                        list(replayed.values())})
        atomic_write_bytes(out / "drift.png", figure_png(fig))
        drift_png = "drift.png"

    elapsed = time.perf_counter() - start
    units = design.units
    warned = _warned_names(df, design)
    index = _index_html(per_session, windows=windows, drift_png=drift_png, rework=rework, sources=design.sources,
                        reference=design.reference, runs=_runs(df), elapsed=elapsed, n_units=len(set(units.values())),
                        warned=warned, left_out=_left_out_rows(design), errors=table_view(_failed_runs(df)),
                        grid_text=_grid_text(design), refused_note=_refused_note(df))
    atomic_write_text(out / "index.html", escape_lone_surrogates(index))

    ok = results.ok
    lines = [f"study of {len(design.paths)} session(s) ({len(set(units.values()))} distinct), {design.n_settings} "
             f"setting(s) × {len(design.sources)} token source(s) = {_runs(df)} runs ({results.errors} with errors) "
             f"in {elapsed:.1f} s",
             f"  {_grid_text(design)}"]
    note = _refused_note(ok)
    if note:
        lines.append(f"  {note[0].lower()}{note[1:]}")
    lines.append("  per session:")
    for row in per_session:
        lines.append(f"    {row['name']}: " + _session_line(row, out))
    lines.append(f"  open {out / 'index.html'}")
    return StudySummary("\n".join(lines), sessions=len(per_session),
                        failed_sessions=sum(1 for row in per_session if row.get("error")))


def _index_html(sessions: Sequence[Mapping[str, Any]], *, windows: Sequence[Mapping[str, Any]] = (),
                drift_png: str | None = None, rework: Mapping[str, Any] | None = None,
                sources: Sequence[str] = ("calibrated",), reference: str = "calibrated",
                runs: int = 0, elapsed: float = 0.0, n_units: int | None = None,
                warned: Sequence[Mapping[str, Any]] = (), left_out: TableView | None = None,
                errors: TableView | None = None, grid_text: str = "", refused_note: str | None = None) -> str:
    """The study's ``index.html`` (``sessions``: one row per session, as :func:`run_study` makes them)."""
    fields = ("name", "path", "model", "model_window", "size", "recorded_compactions", "recorded_report", "report",
              "replay", "setting", "compactions", "refused_requests", "failed_turns", "reason", "error")
    rows = [{f: r.get(f) for f in fields} for r in sessions]
    return _render("study_index.html.j2", title="pimem study: which compaction settings for my model?",
                   index_href=None, open_loop_note=OPEN_LOOP_NOTE, sessions=rows, windows=list(windows),
                   drift_png=drift_png, sources=list(sources), reference=reference, runs=runs, elapsed=elapsed,
                   n_sessions=len(rows), n_units=len(rows) if n_units is None else n_units, warned=list(warned),
                   left_out=left_out, repeated=REPEATED_COMPACTIONS, rework=rework, errors=errors,
                   grid_text=grid_text, refused_note=refused_note)


_REWORK_SIGNALS = ("rework", "rereads", "reruns", "repeated_instructions", "reverts", "steps_to_progress")


def _rework_section(out: Path, points: Sequence[pd.DataFrame | None]) -> dict[str, Any] | None:
    """What followed each recorded compaction of the study's sessions against matched points without one
    (:mod:`pimem.drift.rework`, from the recorded drift reports): its figure (``rework.png``) and table.
    None: no session has a measured compaction."""
    parts = [p for p in points if p is not None and len(p)]
    if not parts:
        return None
    plain = []
    for p in parts:
        q = p.copy()
        q.attrs = {}  # the events behind each session's points: not needed here, and pandas compares attrs
        plain.append(q)
    joined = pd.concat(plain, ignore_index=True)
    table = rework_table(joined)
    if not len(table):
        return None
    atomic_write_bytes(out / "rework.png", figure_png(plot_rework(table)[0]))
    shown = table[table["signal"].isin(_REWORK_SIGNALS)]
    view = frame({"agent": shown["agent"], "signal": shown["signal"],
                  "after": [_with_interval(*v) for v in zip(shown["after"], shown["after_low"], shown["after_high"])],
                  "control": [_with_interval(*v) for v in zip(shown["control"], shown["control_low"],
                                                              shown["control_high"])],
                  "excess": [_with_interval(*v) for v in zip(shown["excess"], shown["excess_low"],
                                                             shown["excess_high"])],
                  "compactions": shown["n_compactions"], "sessions": shown["n_sessions"]})
    after = joined[joined["point"] == "after"]
    measured = int(after["measured"].astype(bool).sum())
    paired = int(table.loc[table["signal"] == "rework", "n_compactions"].sum())
    return {"png": "rework.png", "table": table_view(view), "compactions": int(len(after)), "measured": measured,
            "unmatched": measured - paired}


def _with_interval(value: float, low: float, high: float) -> str:
    """``value [low–high]`` (the interval where one is given)."""
    if pd.isna(value):
        return "–"
    return _fmt(value) + (f" [{_fmt(low)}–{_fmt(high)}]" if pd.notna(low) and pd.notna(high) else "")


def _session_line(row: Mapping[str, Any], out: Path) -> str:
    """One session's line of the text summary: its replay report, the reason it has none, or its error."""
    if row.get("error"):
        return f"failed: {row['error']}"
    parts = []
    if row.get("report"):
        parts.append(f"{row['compactions']} compactions, {row['refused_requests']} refused request(s), "
                     f"{row['failed_turns']} failed turn(s) at reserve / keep / window {row['setting']} -> "
                     f"{out / row['report']}")
    if row.get("reason"):
        parts.append(f"{'no replay report: ' if not row.get('report') else ''}{row['reason']}")
    if row.get("recorded_report"):
        parts.append(f"its {row['recorded_compactions']} recorded compaction(s) -> {out / row['recorded_report']}")
    return "; ".join(parts)


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
    targets = [out / f for f in ("sweep.csv", "summary.csv", "index.html", "cache.sqlite", "sweep-runs.jsonl",
                                 "drift.png", "rework.png")]
    targets += [out / "replays" / f"{n}.jsonl" for n in names] + [out / "reports" / f"{n}.html" for n in names]
    targets += [out / "reports" / f"{n}-recorded.html" for n in names]

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
    """Distinct runs of a study frame."""
    return int(df["run_hash"].nunique()) if "run_hash" in df.columns else len(df)


def _grid_text(design: StudyDesign) -> str:
    """The grid in words: windows, reserves and keeps in tokens."""
    def values(given: list[int] | None, default: Sequence[int]) -> str:
        return ", ".join(f"{v:,}" for v in (given if given is not None else default))

    windows = (values(design.windows, ()) if design.windows is not None
               else "each session's model's own, then " + values(None, STUDY_WINDOWS))
    return (f"window {windows} × reserve {values(design.reserves, STUDY_RESERVES)} × keep "
            f"{values(design.keeps, STUDY_KEEPS)} (tokens)")


def _warned_names(df: pd.DataFrame, design: StudyDesign) -> list[dict[str, Any]]:
    """The sessions whose token calibration carries a warning (summarized apart), with the warning."""
    if "calibration_warning" not in df.columns or "name" not in df.columns:
        return []
    ref = df[(df["token_source"] == design.reference) & df["calibration_warning"].notna()]
    return [{"name": name, "warning": str(group["calibration_warning"].iloc[0])}
            for name, group in ref.groupby("name", sort=True)]


def _left_out_rows(design: StudyDesign) -> TableView | None:
    """Settings left out of some session's grid, grouped by reason, with how many sessions."""
    rows: dict[tuple[int, int, int, str], set[str]] = {}
    for path, name in zip(design.paths, design.names):
        for cell in design.left_out[str(path)]:
            key = (cell["context_window"], cell["reserve_tokens"], cell["keep_recent_tokens"], cell["reason"])
            rows.setdefault(key, set()).add(name)
    if not rows:
        return None
    table = frame([{"window": w, "reserve": r, "keep": k, "sessions": len(names), "why": reason}
                   for (w, r, k, reason), names in sorted(rows.items())])
    return table_view(table, tall=len(table) > 20)


def _failed_runs(df: pd.DataFrame) -> pd.DataFrame | None:
    if "error" not in df.columns or not df["error"].notna().any():
        return None
    return df[df["error"].notna()][[c for c in ("name", "reserve_tokens", "keep_recent_tokens", "context_window",
                                                "token_source", "error") if c in df.columns]]


def _refused_note(df: pd.DataFrame) -> str | None:
    """The sweep's refused requests, failed turns and runs above their window, counted from its rows."""
    if "refused_requests" not in df.columns or not len(df):
        return None
    done = df[df["error"].isna()] if "error" in df.columns else df
    above = int((done["peak_context_tokens"] > done["context_window"]).sum())
    return (f"Requests larger than the window, refused by the provider: {int(done['refused_requests'].sum()):,} in "
            f"{int((done['refused_requests'] > 0).sum()):,} of {len(done):,} runs; failed turns: "
            f"{int(done['failed_turns'].sum()):,}; runs above their window not reported as refused: {above:,}.")


@dataclass(frozen=True)
class WindowTable:
    """One window's settings as the index shows them: the table view, the means (for the figure and the
    front), ``n`` per metric, and the notes on what was left out."""

    view: TableView
    means: pd.DataFrame
    n: dict[str, int]
    notes: list[str]

    @property
    def n_text(self) -> str:
        counts = sorted({v for v in self.n.values() if v})
        if not counts:
            return "no session"
        return (f"{counts[0]:,} session(s)" if len(counts) == 1
                else f"{counts[0]:,}–{counts[-1]:,} sessions (per measure)")


_METRIC_HEADS = {"compactions": "compactions", "refused_requests": "refused requests", "cost_total": "cost (US$)",
                 "score": "score", "needed_recall": "needed recall"}


def _cell(metric: str, mean: float, low: float, high: float, band_low: float, band_high: float) -> str:
    """``mean [interval] {band}`` with each number in the metric's unit."""
    if pd.isna(mean):
        return "–"

    def num(v: float) -> str:
        if metric == "cost_total":
            return f"${v:,.2f}"
        if metric in QUALITY_METRICS:
            return f"{v:.3f}"
        return f"{v:,.1f}" if v != round(v) else f"{int(round(v)):,}"

    text = num(mean)
    if pd.notna(low) and pd.notna(high):
        text += f" [{num(low)}–{num(high)}]"
    if pd.notna(band_low) and pd.notna(band_high) and (band_low != mean or band_high != mean):
        text += f" {{{num(band_low)}–{num(band_high)}}}"
    return text


def _window_table(summary: pd.DataFrame, group: str, window: int) -> WindowTable | None:
    """The index's table of one window for one group of sessions (None: none ran there)."""
    part = summary[(summary["group"] == group) & (summary["context_window"] == window)] if len(summary) else summary
    if not len(part):
        return None
    keys = ["reserve_tokens", "keep_recent_tokens"]
    settings = part[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
    means = settings.copy()
    cells = pd.DataFrame({"reserve (tokens)": [f"{v:,}" for v in settings["reserve_tokens"]],
                          "keep (tokens)": [f"{v:,}" for v in settings["keep_recent_tokens"]]})
    n: dict[str, int] = {}
    notes: list[tuple[str, str]] = []
    for metric in STUDY_METRICS:
        rows = settings.merge(part[part["metric"] == metric], on=keys, how="left")
        if rows["metric"].isna().all():
            continue
        n[metric] = int(rows["n"].max())
        means[metric] = rows["mean"].to_numpy(dtype=float)
        level = rows["level"].dropna()
        head = f"{_METRIC_HEADS[metric]} (n={n[metric]:,}" + (f"; {level.iloc[0]:.0%} interval)" if len(level)
                                                               else ")")
        cells[head] = [_cell(metric, *vals) for vals in zip(rows["mean"], rows["ci_low"], rows["ci_high"],
                                                           rows["band_low"], rows["band_high"])]
        note = next((t for t in rows["note"] if isinstance(t, str) and t), "")
        if n[metric] == 0:
            notes.append((_METRIC_HEADS[metric], "blank (–): no session has a value at any setting of this window"
                          + (" (none compacts here: no summary to measure)" if metric in QUALITY_METRICS else "")))
        elif note:
            notes.append((_METRIC_HEADS[metric], note))
        if n[metric] and not len(level):
            notes.append((_METRIC_HEADS[metric], f"no interval: over {n[metric]:,} session(s) a bootstrap interval was "
                          "not shown to cover at any level from 50% (pimem.drift.intervals)"))
    means["on_front"] = pareto_front(means)
    cells.insert(0, "front", ["★" if f else "" for f in means["on_front"]])
    said: dict[str, list[str]] = {}
    for metric, text in notes:  # one line per remark, naming every measure it applies to
        said.setdefault(text, []).append(metric)
    view = TableView("table-wrap", [([str(c)], "" if i >= 3 else "l") for i, c in enumerate(cells.columns)],
                     [[(str(v), "" if i >= 3 else "l") for i, v in enumerate(row)] for row in cells.itertuples(index=False)],
                     0)
    return WindowTable(view, means, n, [f"{', '.join(metrics)}: {text}." for text, metrics in said.items()])
