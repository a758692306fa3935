"""Standalone HTML reports and the main study job.

* :func:`write_drift_report` — one HTML file (figures embedded as base64 PNG, tables as HTML,
  every text escaped) describing a session's or a replay's chain of compactions.
* :func:`run_study` — sweep sessions over a reserve × keep × window grid with the offline
  extractive summarizer (cached), write the results table, heatmaps, a replay and a drift
  report per session, and an ``index.html`` that links everything.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import time
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from pimem.errors import ConfigurationError
from pimem.io import atomic_write_bytes, atomic_write_text, write_table
from pimem.text import format_number

__all__ = ["write_drift_report", "measures_section_html", "default_sources", "run_study", "figure_png", "DEFAULT_RESERVE", "DEFAULT_KEEP", "DEFAULT_WINDOW"]

# Defaults sized for the bundled samples (contexts of 5k–21k tokens), so that they compact.
DEFAULT_RESERVE = (2048, 4096, 8192)
DEFAULT_KEEP = (2000, 4000, 8000)
DEFAULT_WINDOW = (16000, 24000)

_HEATMAP_METRICS = ("compactions", "summarization_request_tokens", "peak_context_tokens", "mean_context_tokens")

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1240px;padding:0 16px;
color:#222;line-height:1.4}
h1{font-size:1.6em;overflow-wrap:anywhere}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
.table-wrap{max-width:100%;overflow-x:auto;margin:8px 0}
.table-wrap.tall{max-height:34em;overflow-y:auto;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0;font-weight:600}
td.l,th.l{text-align:left}td{white-space:nowrap}td.w{white-space:normal;overflow-wrap:anywhere;min-width:14em;
max-width:40em}
img{max-width:100%;height:auto;border:1px solid #eee;margin:6px 0}
.note{color:#666;font-size:13px}code{background:#f4f4f4;padding:0 3px;overflow-wrap:anywhere}
"""


# --------------------------------------------------------------------------- html helpers


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _href(relative_path: str) -> str:
    """A relative file path as an attribute value: URL-quoted (``#``, ``?``, ``%``, spaces), then escaped."""
    from urllib.parse import quote

    return _esc(quote(relative_path))


def figure_png(fig: Any, dpi: int = 100) -> bytes:
    """A figure as PNG bytes; the figure is closed afterwards."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def _img(png: bytes, alt: str) -> str:
    return f"<img alt='{_esc(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>"


def _fmt(value: Any) -> str:
    """A cell as text: numbers formatted (:func:`pimem.text.format_number`), blanks for None."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    try:
        if pd.isna(value):
            return "–"
    except (TypeError, ValueError):
        pass
    return format_number(value)


def _header(name: Any) -> str:
    """A column name, escaped, that may wrap after its underscores."""
    return "_<wbr>".join(_esc(part) for part in str(name).split("_"))


def _html_table(df: pd.DataFrame, max_rows: int = 200, *, tall: bool = False, blank: Sequence[str] = ()) -> str:
    """A DataFrame as an HTML table in a scrolling wrapper; every header and cell escaped.

    Numeric columns are right-aligned and formatted; text cells wrap. ``tall``: the wrapper
    scrolls vertically too, with the header kept in view. ``blank``: columns whose missing
    values are left empty (elsewhere they show as –).
    """
    if df is None or not len(df.columns):
        return "<p class='note'>(empty)</p>"
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    head = "".join(f"<th class='{'' if n else 'l'}'>{_header(c)}</th>" for c, n in zip(df.columns, numeric))
    empty = [c in blank for c in df.columns]
    rows = []
    for row in df.head(max_rows).itertuples(index=False):
        cells = []
        for v, n, e in zip(row, numeric, empty):
            text = "" if e and pd.isna(v) else _fmt(v)
            kind = "" if n else ("l w" if len(text) > 32 else "l")  # long text wraps, short text stays whole
            cells.append(f"<td class='{kind}'>{_esc(text)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    more = f"<p class='note'>… {len(df) - max_rows:,} more rows</p>" if len(df) > max_rows else ""
    wrap = "table-wrap tall" if tall else "table-wrap"
    return (f"<div class='{wrap}'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
            f"{more}")


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_esc(title)}</h1>\n{body}\n</body></html>\n")


# --------------------------------------------------------------------------- drift report


_REPORT_COLUMNS = [
    "compaction", "entry_id", "first_kept_entry_id", "n_entries", "tokens_before", "span_tokens", "summary_tokens",
    "compression_ratio_with_prev", "split_turn", "conformance", "needed_recall", "fact_recall", "prev_retention", "n_lost",
    "cumulative_loss", "sim_prev_cosine", "goal_sim_request_cosine",
]


def _resolve(session_or_result: Any) -> tuple[Any, Any]:
    """(session, replay result or None) from a Session, a ReplayResult or a path."""
    from pimem.core.session_manager import Session, load_session

    if isinstance(session_or_result, Session):
        return session_or_result, None
    if hasattr(session_or_result, "session") and hasattr(session_or_result, "events"):
        return session_or_result.session, session_or_result
    return load_session(session_or_result), None


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
    return pd.DataFrame(rows, columns=["measure", "value", "min", "median", "max"])


def _lost_facts_table(report: pd.DataFrame) -> pd.DataFrame:
    """Facts lost between consecutive summaries, written as they first appeared (original case)."""
    from pimem.drift import lost_facts

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
    return pd.DataFrame({
        "fact": [surface.get(k, str(k).split(":", 1)[-1]) for k in lost["key"]],
        "kind": lost["kind"].astype(str).to_numpy(),
        "introduced_at": pd.array([introduced.get(k) for k in lost["key"]], dtype="Int64"),
        "lost_at": lost["lost_at"].to_numpy(),
    }).sort_values(["lost_at", "kind"], kind="stable")


def drift_report_html(session_or_result: Any, title: str = "Summary drift report", *,
                      report: pd.DataFrame | None = None, sources: dict[str, Any] | None = None,
                      compare_max: int = 40) -> str:
    """The HTML text of :func:`write_drift_report` (nothing written); ``report``: the drift
    report when already computed (:func:`pimem.drift.drift_report` of the same input)."""
    from pimem.drift import drift_report, headline
    from pimem.viz import (
        plot_context_over_time,
        plot_drift,
        plot_estimate_vs_usage,
        plot_session_tree,
    )

    session, result = _resolve(session_or_result)
    if report is None:
        report = drift_report(result if result is not None else session)
    parts: list[str] = []
    source = getattr(session, "path", None)
    intro = [f"Session <code>{_esc(session.header.get('id'))}</code>"]
    if source:
        intro.append(f"from <code>{_esc(source)}</code>")
    intro.append(f"— {len(session.entries):,} entries, {len(report):,} compactions on the active path.")
    parts.append(f"<p>{' '.join(intro)}</p>")
    if result is not None:
        s = result.summary()
        settings = result.settings
        parts.append("<h2>Replay</h2>")
        parts.append(f"<p>Replayed with reserveTokens {_esc(_fmt(settings.reserve_tokens))}, keepRecentTokens "
                     f"{_esc(_fmt(settings.keep_recent_tokens))}, context window {_esc(_fmt(result.context_window))}, "
                     f"token source <code>{_esc(result.token_source)}</code>.</p>")
        parts.append(_html_table(pd.DataFrame([{k: v for k, v in s.items() if not isinstance(v, (dict, list))}]).T
                                 .reset_index().rename(columns={"index": "measure", 0: "value"})))
        parts.append(_img(figure_png(plot_context_over_time(result)[0]), "context over time"))
    parts.append("<h2>Headline</h2>")
    parts.append(_html_table(_headline_table(headline(report)), blank=("min", "median", "max")))
    if len(report):
        parts.append("<h2>Drift across compactions</h2>")
        parts.append("<p class='note'>Top left: share of facts (paths, identifiers, errors, commands, constraints, "
                     "decisions) a summary captured that later summaries still hold. Top right: summary size "
                     "against the span it summarized. Bottom: similarity of each template section to its "
                     "previous version.</p>")
        parts.append(_img(figure_png(plot_drift(report, arrangement="stacked")[0]), "drift curves"))
        parts.append("<h2>Per compaction</h2>")
        parts.append(_html_table(report[[c for c in _REPORT_COLUMNS if c in report.columns]], max_rows=1000,
                                 tall=len(report) > 20))
        lost = _lost_facts_table(report)
        parts.append(f"<h2>Facts lost between consecutive summaries ({len(lost):,})</h2>")
        parts.append(_html_table(lost, max_rows=200, tall=len(lost) > 20))
        parts.append(measures_section_html(result if result is not None else session, report, sources=sources,
                                           compare_max=compare_max))
    else:
        parts.append("<p>No compaction on the active path: nothing to measure. Replay the session with a "
                     "smaller context window (<code>pimem replay --window …</code>) to make some.</p>")
    parts.append("<h2>Session tree</h2>")
    parts.append(_img(figure_png(plot_session_tree(session)[0]), "session tree"))
    if result is None:
        from pimem.viz import estimate_vs_usage_table

        if len(estimate_vs_usage_table(session)):
            parts.append("<h2>Estimate vs recorded usage</h2>")
            parts.append(_img(figure_png(plot_estimate_vs_usage(session)[0]), "estimate vs recorded usage"))
    notes = report.attrs.get("notes") or []
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>")
    return _page(title, "\n".join(parts))


def write_drift_report(session_or_result: Any, path: str | os.PathLike, title: str = "Summary drift report", *,
                       report: pd.DataFrame | None = None, sources: dict[str, Any] | None = None,
                       compare_max: int = 40) -> Path:
    """Write a standalone HTML drift report of a Session, a ReplayResult or a session file.

    Figures are embedded as base64 PNG; the file is written atomically. Returns the path.
    ``report``: the drift report when already computed. ``sources``: summary sources to set
    beside the session's own summaries (default: the extractive summarizer and the four
    degenerate baselines, at the recorded summaries' length); the comparison is left out, with a
    note, when the chain has more than ``compare_max`` compactions.
    """
    target = Path(path)
    atomic_write_text(target, drift_report_html(session_or_result, title=title, report=report, sources=sources,
                                                compare_max=compare_max))
    return target


# --------------------------------------------------------------------------- measures and sources


_PIPELINE_COLUMNS = ["compaction", "files_block_present", "pipeline_read_precision", "pipeline_read_recall",
                     "pipeline_modified_precision", "pipeline_modified_recall"]
_NEEDED_COLUMNS = ["compaction", "written_tokens", "n_needed", "needed_recall", "needed_recall_constraint",
                   "needed_recall_decision", "needed_recall_error", "needed_recall_artifact", "needed_recall_reference",
                   "fact_recall", "content_sections", "conformance"]


def default_sources() -> dict[str, Any]:
    """The sources a drift report sets beside a session's own summaries: extractive and the four baselines."""
    from pimem.summarizers.baselines import baseline_summarizers
    from pimem.summarizers.extractive import ExtractiveSummarizer

    return {"extractive": ExtractiveSummarizer(), **baseline_summarizers(budget=None)}


def measures_section_html(session_or_result: Any, report: pd.DataFrame, *, sources: dict[str, Any] | None = None,
                          compare_max: int = 40) -> str:
    """The report's measures section: needed-later recall per compaction, the file lists as a pipeline
    check, the session's summaries beside other sources on the same spans, and what each measure
    rewards and how it can be gamed."""
    from pimem.drift.measures import compare_sources, measure_docs
    from pimem.viz.measures import plot_measures, plot_recall_curve

    parts = ["<h2>Measures grounded in the recording</h2>",
             "<p class='note'>Content measures read only the text the summarizer wrote: the <code>&lt;read-files&gt;"
             "</code>/<code>&lt;modified-files&gt;</code> blocks that Pi's <code>compact()</code> appends are "
             "stripped. <b>Needed-later recall</b>: of the facts of the summarized span that the recording used "
             "after the compaction and that the kept tail does not show, the share the summary holds — per class, "
             "averaged with weights constraint 3, decision 3, error 2, written file 2, other names 1.</p>",
             _html_table(report[[c for c in _NEEDED_COLUMNS if c in report.columns]]),
             "<h3>Pipeline check: file lists</h3>",
             "<p class='note'>The file blocks are written by Pi's pipeline from its file operations, not by the "
             "summarizer: every summarizer gets the same. Reported apart, never as summary quality.</p>",
             _html_table(report[[c for c in _PIPELINE_COLUMNS if c in report.columns]])]
    n = len(report)
    if n > compare_max:
        parts.append(f"<p class='note'>{n} compactions: the comparison with other summary sources is left out "
                     f"(more than {compare_max}; pass compare_max to include it).</p>")
    else:
        from pimem.drift.records import compaction_records

        chosen = default_sources() if sources is None else dict(sources)
        named = {"this session": "recorded", **chosen}
        records = compaction_records(session_or_result)
        matched = compare_sources(session_or_result, named, records=records)
        own = compare_sources(session_or_result, named, max_tokens=None, records=records)
        parts.append("<h3>This session's summaries beside other summary sources</h3>")
        parts.append("<p class='note'>Every source summarizes exactly the spans this session's compactions "
                     "summarized (same cut points; its previous summary is its own), at the length of this "
                     "session's summary for that compaction. The baselines are degenerate on purpose: a measure "
                     "that ranks one of them first measures something else.</p>")
        parts.append(_img(figure_png(plot_measures(matched.table)[0]), "measures by source"))
        table = matched.table.reset_index().rename(columns={"index": "measure"})
        parts.append(_html_table(table))
        errors = matched.per_compaction[matched.per_compaction["error"].notna()]
        if len(errors):
            parts.append("<p class='note'>Failed summaries (left out of the means):</p>"
                         + _html_table(errors[["source", "compaction", "error"]]))
        parts.append("<h3>Recall against summary length</h3>")
        parts.append("<p class='note'>Each source at its own length (diamonds: the summarizers with Pi's default "
                     "budget) and the recall of its first B tokens (lines). Longer summaries hold more; compare "
                     "sources at the same length.</p>")
        parts.append(_img(figure_png(plot_recall_curve(own.curve(), points=own.per_compaction)[0]),
                          "recall against summary tokens"))
        notes = list(dict.fromkeys(matched.notes))
        if notes:
            parts.append("<ul>" + "".join(f"<li>{_esc(x)}</li>" for x in notes) + "</ul>")
    parts.append("<h3>What each measure rewards, and how it can be gamed</h3>")
    parts.append(_html_table(measure_docs()))
    return "\n".join(parts)


# --------------------------------------------------------------------------- the study


def _middle(values: Sequence[int]) -> int:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


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


def run_study(
    paths: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    reserve: Sequence[int] | None = None,
    keep: Sequence[int] | None = None,
    window: Sequence[int] | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> str:
    """The main job: sweep ``paths`` over reserve × keep × window and write a browsable study.

    Writes into ``out_dir``: ``sweep.csv`` (one row per session × setting; settings whose
    reserve is not below the window are left out), ``heatmap-w<window>.png`` (compactions,
    summarization tokens, peak and mean context over reserve × keep, mean over sessions),
    ``replays/<name>.jsonl`` and ``reports/<name>.html`` (each session replayed at the middle
    setting, with its drift report), ``index.html`` linking everything, and
    ``cache.sqlite`` (the summaries, reused by a re-run) and ``sweep-runs.jsonl`` (finished
    runs: an interrupted study resumes). Summaries come from the offline extractive
    summarizer. Returns a short text summary.
    """
    from pimem.agent_loop import replay
    from pimem.core.compaction.compaction import CompactionSettings
    from pimem.summarizers.cached import CachedSummarizer
    from pimem.summarizers.extractive import ExtractiveSummarizer
    from pimem.sweeps import sweep
    from pimem.viz import plot_sweep_heatmaps

    start = time.perf_counter()
    session_paths = [Path(p) for p in paths]
    if not session_paths:
        raise ConfigurationError("no session files given")
    for p in session_paths:
        if not p.is_file():
            raise FileNotFoundError(f"session file not found: {p}")
    reserves = _int_values("reserve", reserve, DEFAULT_RESERVE)
    keeps = _int_values("keep", keep, DEFAULT_KEEP)
    windows = _int_values("window", window, DEFAULT_WINDOW)
    grid = [{"reserve_tokens": r, "keep_recent_tokens": k, "context_window": w}
            for w in windows for r in reserves for k in keeps if r < w]
    if not grid:
        raise ConfigurationError("every reserve value is at least the context window: no setting to run")
    skipped = len(reserves) * len(keeps) * len(windows) - len(grid)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "cache.sqlite"

    df = sweep([str(p) for p in session_paths], grid, workers=workers, cache=cache_path, progress=progress,
               results_path=out / "sweep-runs.jsonl")
    names = _unique_names(session_paths)
    name_of = {str(p): n for p, n in zip(session_paths, names)}
    if "session" in df.columns:
        df.insert(1, "name", df["session"].map(name_of))
    write_table(df.drop(columns=[c for c in ("traceback",) if c in df.columns]), out / "sweep.csv")
    errors = int(df["error"].notna().sum()) if "error" in df.columns else 0

    heatmaps: list[tuple[int, str]] = []
    ok = df[df["error"].isna()] if "error" in df.columns else df
    for w in windows:
        part = ok[ok["context_window"] == w] if "context_window" in ok.columns else ok
        if not len(part):
            continue
        fig, axes = plot_sweep_heatmaps(part, [m for m in _HEATMAP_METRICS if m in part.columns])
        fig.suptitle(f"context window {w:,} — mean over {part['session'].nunique()} session(s)")
        name = f"heatmap-w{w}.png"
        atomic_write_bytes(out / name, figure_png(fig))
        heatmaps.append((w, name))

    # one replay per session at the middle setting, with its drift report
    mid_w = _middle(windows)
    valid_r = [r for r in reserves if r < mid_w] or [min(reserves)]
    mid_r = _middle(valid_r)
    mid_k = _middle(keeps)
    if mid_r >= mid_w:
        mid_w = max(windows)
    settings = CompactionSettings(reserve_tokens=mid_r, keep_recent_tokens=mid_k)
    summarizer = CachedSummarizer(ExtractiveSummarizer(), cache_path)
    (out / "replays").mkdir(exist_ok=True)
    (out / "reports").mkdir(exist_ok=True)
    per_session: list[dict[str, Any]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(session_paths), desc="drift reports")
    try:
        for p, name in zip(session_paths, names):
            row: dict[str, Any] = {"name": name, "path": str(p)}
            try:
                result = replay(p, settings, context_window=mid_w, summarizer=summarizer)
                result.write(out / "replays" / f"{name}.jsonl")
                write_drift_report(result, out / "reports" / f"{name}.html",
                                   title=f"Summary drift: {name} (reserve {mid_r}, keep {mid_k}, window {mid_w})")
                s = result.summary()
                row.update(compactions=s["compactions"], peak_context_tokens=s["peak_context_tokens"],
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
    index = _index_html(df, per_session, heatmaps, reserves, keeps, windows, skipped, (mid_r, mid_k, mid_w), elapsed)
    atomic_write_text(out / "index.html", index)

    lines = [
        f"study of {len(session_paths)} session(s) × {len(grid)} setting(s) = {len(df)} runs "
        f"({errors} with errors) in {elapsed:.1f} s",
        f"  reserve {reserves}, keep {keeps}, window {windows}"
        + (f" ({skipped} settings with reserve ≥ window skipped)" if skipped else ""),
    ]
    if "compactions" in ok.columns and len(ok):
        by_setting = ok.groupby(["context_window", "reserve_tokens", "keep_recent_tokens"])["compactions"].mean()
        lines.append(f"  compactions per session: {by_setting.min():.1f} – {by_setting.max():.1f} across settings")
    lines.append(f"  drift reports at reserve {mid_r}, keep {mid_k}, window {mid_w}:")
    for row in per_session:
        if row.get("error"):
            lines.append(f"    {row['name']}: failed: {row['error']}")
        else:
            lines.append(f"    {row['name']}: {row['compactions']} compactions -> {out / row['report']}")
    lines.append(f"  open {out / 'index.html'}")
    return "\n".join(lines)


def _index_html(df: pd.DataFrame, per_session: list[dict[str, Any]], heatmaps: list[tuple[int, str]],
                reserves: list[int], keeps: list[int], windows: list[int], skipped: int,
                middle: tuple[int, int, int], elapsed: float) -> str:
    def values(v: list[int]) -> str:
        return _esc(" / ".join(f"{x:,}" for x in v))

    parts = [
        f"<p>{len(per_session)} session(s) replayed over reserveTokens {values(reserves)} × keepRecentTokens "
        f"{values(keeps)} × context window {values(windows)} with the offline extractive summarizer "
        f"({len(df):,} runs, {elapsed:.1f} s). Tokens are the replay's calibrated token source.</p>",
        "<p>Files: <a href='sweep.csv'>sweep.csv</a> (one row per run)</p>",
    ]
    if skipped:
        parts.append(f"<p class='note'>{skipped} setting(s) with reserve ≥ window were left out.</p>")
    parts.append("<h2>Sessions</h2>")
    rows = []
    for r in per_session:
        if r.get("error"):
            rows.append(f"<tr><td class='l'>{_esc(r['name'])}</td><td class='l' colspan='4'>failed: "
                        f"{_esc(r['error'])}</td></tr>")
            continue
        rows.append(
            f"<tr><td class='l'>{_esc(r['name'])}</td><td>{_esc(_fmt(r['compactions']))}</td>"
            f"<td>{_esc(_fmt(r['peak_context_tokens']))}</td>"
            f"<td class='l'><a href='{_href(r['report'])}'>drift report</a></td>"
            f"<td class='l'><a href='{_href(r['replay'])}'>replayed session</a></td></tr>")
    mr, mk, mw = middle
    parts.append(f"<p class='note'>Replays and drift reports at reserve {mr:,}, keep {mk:,}, window {mw:,}.</p>")
    parts.append("<div class='table-wrap'><table><thead><tr><th class='l'>session</th><th>compactions</th>"
                 "<th>peak context</th><th class='l'>report</th><th class='l'>replay</th></tr></thead><tbody>"
                 + "".join(rows) + "</tbody></table></div>")
    if heatmaps:
        parts.append("<h2>Trade-offs over the grid</h2>")
        for w, name in heatmaps:
            parts.append(f"<h3>Context window {w:,}</h3><img alt='{_esc(name)}' src='{_href(name)}'>")
    ok = df[df["error"].isna()] if "error" in df.columns else df
    cols = [c for c in ("context_window", "reserve_tokens", "keep_recent_tokens", "compactions", "split_turns",
                        "summary_calls", "summarization_request_tokens", "peak_context_tokens",
                        "mean_context_tokens") if c in ok.columns]
    if len(ok) and cols:
        keys = [c for c in cols[:3]]
        table = ok[cols].groupby(keys, as_index=False).mean(numeric_only=True)
        parts.append("<h2>Mean over sessions, per setting</h2>")
        parts.append(_html_table(table))
    if "error" in df.columns and df["error"].notna().any():
        bad = df[df["error"].notna()][["session", "reserve_tokens", "keep_recent_tokens", "context_window", "error"]]
        parts.append("<h2>Runs that failed</h2>" + _html_table(bad))
    return _page("pimem study", "\n".join(parts))
