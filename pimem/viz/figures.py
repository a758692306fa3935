"""Matplotlib figures of sessions, replays, sweeps and drift reports.

Every function takes an optional ``ax=`` to draw into and returns ``(fig, ax)`` (or
``(fig, axes)`` for figures with several panels or a twin axis). Nothing is shown or saved:
call ``fig.savefig`` or let Jupyter display it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pimem.viz.data import (
    STATUSES,
    compaction_effects,
    cut_points_table,
    estimate_vs_usage_table,
    projection_table,
    tree_layout,
)

__all__ = [
    "STATUS_COLORS",
    "KIND_COLORS",
    "plot_context_over_time",
    "plot_session_tree",
    "plot_context_projection",
    "plot_cut_points",
    "plot_sweep_heatmap",
    "plot_sweep_heatmaps",
    "plot_retention_by_age",
    "plot_section_similarity",
    "plot_summary_sizes",
    "plot_drift",
    "plot_estimate_vs_usage",
]

STATUS_COLORS = {
    "summarized": "#e9a03b",
    "summary": "#8e44ad",
    "kept": "#2a9d8f",
    "after compaction": "#1f4e79",
    "in context": "#1f77b4",
    "not in context": "#c8c8c8",
}

KIND_COLORS = {
    "user": "#1f77b4",
    "assistant": "#2ca02c",
    "toolResult": "#9edae5",
    "bashExecution": "#17becf",
    "compaction": "#8e44ad",
    "branch_summary": "#d62728",
    "custom_message": "#ff7f0e",
    "system": "#7f7f7f",
}
OTHER_KIND_COLOR = "#bbbbbb"


def _figure(ax: Any = None, figsize: tuple[float, float] = (9, 4)) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, constrained_layout=True)
    return fig, ax


def _session_of(obj: Any) -> Any:
    from pimem.core.session_manager import Session, load_session

    if isinstance(obj, Session):
        return obj
    if hasattr(obj, "session") and isinstance(obj.session, Session):
        return obj.session
    return load_session(obj)


# --------------------------------------------------------------------------- replay


def plot_context_over_time(result: Any, *, ax: Any = None, title: str | None = None,
                           show_checks: bool = True) -> tuple[Any, Any]:
    """Context tokens per step of a :class:`~pimem.agent_loop.ReplayResult`.

    The line is the context of each assistant call (the replay's token source), dots are the
    compaction checks, the dashed line is the threshold (window − reserve), the solid line the
    window. Each compaction is an arrow down from the context its check read, as long as what
    it freed (:func:`pimem.viz.data.compaction_effects`), labelled with that amount.
    """
    fig, ax = _figure(ax)
    calls = result.calls
    events = result.events
    window = float(result.context_window)
    reserve = float(getattr(result.settings, "reserve_tokens", 0))
    threshold = window - reserve
    if len(calls):
        ax.plot(calls["step"], calls["context_tokens"], color="#1f77b4", lw=1.5, marker=".", ms=3,
                label="context per call", zorder=3)
    if show_checks and len(events):
        checks = events[events["kind"] == "check"]
        if len(checks):
            ax.scatter(checks["step"], checks["context_tokens"], s=10, color="#7f7f7f", alpha=0.6,
                       label="compaction check", zorder=2)
    ax.axhline(threshold, color="#d62728", ls="--", lw=1.2, label=f"threshold = window − reserve ({threshold:,.0f})")
    ax.axhline(window, color="black", lw=1.0, label=f"context window ({window:,.0f})")
    effects = compaction_effects(result)
    for _, row in effects.iterrows():
        start, freed, step = float(row["trigger_tokens"]), float(row["freed"]), row["step"]
        end = max(start - freed, 0.0)
        ax.annotate("", xy=(step, end), xytext=(step, start),
                    arrowprops=dict(arrowstyle="-|>", color=STATUS_COLORS["summary"], lw=1.6), zorder=4)
        ax.text(step, end, f" −{freed:,.0f}", color=STATUS_COLORS["summary"], fontsize=8,
                va="top", ha="left", zorder=5)
    if len(effects):
        ax.plot([], [], color=STATUS_COLORS["summary"], lw=1.6,
                label=f"compaction ({len(effects)}): tokens freed (chars/4)")
    top = max([window * 1.05] + ([float(calls["context_tokens"].max()) * 1.05] if len(calls) else []))
    ax.set_ylim(0, top)
    ax.set_xlabel("step (entry of the recorded path)")
    ax.set_ylabel("context tokens")
    if title is None:
        s = result.settings
        title = (f"Context over time — window {window:,.0f}, reserve {reserve:,.0f}, "
                 f"keep {getattr(s, 'keep_recent_tokens', 0):,.0f} ({result.token_source})")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    return fig, ax


# --------------------------------------------------------------------------- session tree


def plot_session_tree(session: Any, *, ax: Any = None, title: str | None = None,
                      show_labels: bool = True, max_label_count: int = 40) -> tuple[Any, Any]:
    """The session tree in lanes: x is the depth, one lane per overlapping branch.

    Markers are coloured by kind (user, assistant, tool result, compaction ■, branch summary ◆);
    the active path (root → leaf) is drawn thick. Lines are drawn in one collection, so
    sessions of thousands of entries stay fast.
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    session = _session_of(session)
    layout = tree_layout(session)
    n_lanes = int(layout["lane"].max()) + 1 if len(layout) else 1
    fig, ax = _figure(ax, figsize=(10, min(1.5 + 0.45 * n_lanes, 8)))
    pos = {eid: (x, lane) for eid, x, lane in zip(layout["entry_id"], layout["x"], layout["lane"])}
    active_ids = set(layout.loc[layout["active"], "entry_id"])
    segs_active, segs_other = [], []
    for eid, parent in zip(layout["entry_id"], layout["parent_id"]):
        if parent is None or parent not in pos:
            continue
        (x0, y0), (x1, y1) = pos[parent], pos[eid]
        seg = [(x0, y0), (x1, y1)] if y0 == y1 else [(x0, y0), (x0, y1), (x1, y1)]
        (segs_active if eid in active_ids and parent in active_ids else segs_other).append(seg)
    ax.add_collection(LineCollection(segs_other, colors="#9a9a9a", linewidths=1.0, zorder=1, label="branches"))
    ax.add_collection(LineCollection(segs_active, colors="#111111", linewidths=2.6, zorder=2, label="active path"))
    special = {"compaction": ("s", 70), "branch_summary": ("D", 60)}
    kinds = layout["kind"].where(layout["kind"].isin(list(KIND_COLORS)), "other")
    for kind in sorted(set(kinds)):
        sel = layout[kinds == kind]
        marker, size = special.get(kind, ("o", 14))
        color = KIND_COLORS.get(kind, OTHER_KIND_COLOR)
        ax.scatter(sel["x"], sel["lane"], s=size, marker=marker, color=color, edgecolors="none" if marker == "o" else "black",
                   linewidths=0.6, zorder=3, label=kind)
    leaf = session.leaf_id
    if leaf in pos:
        ax.scatter([pos[leaf][0]], [pos[leaf][1]], s=120, facecolors="none", edgecolors="#d62728", linewidths=1.6,
                   zorder=4, label="leaf")
    if show_labels:
        lab = layout[layout["label"].notna()].head(max_label_count)
        for _, r in lab.iterrows():
            ax.annotate(str(r["label"]), (r["x"], r["lane"]), xytext=(0, 7), textcoords="offset points",
                        fontsize=7, ha="center", color="#444444")
    if len(layout):
        ax.set_xlim(-1, int(layout["x"].max()) + 1)
    ax.set_ylim(n_lanes - 0.5, -0.7)
    ax.set_yticks(range(n_lanes))
    ax.set_yticklabels([f"lane {i}" for i in range(n_lanes)])
    ax.set_xlabel("depth (entries from the root)")
    ax.set_title(title or f"Session tree — {len(layout)} entries, {len(session.leaves())} leaves")
    handles = [Line2D([0], [0], color="#111111", lw=2.6, label="active path"),
               Line2D([0], [0], color="#9a9a9a", lw=1.0, label="other branches")]
    h, labels = ax.get_legend_handles_labels()
    keep = [(hh, ll) for hh, ll in zip(h, labels) if ll not in ("branches", "active path")]
    ax.legend(handles + [k[0] for k in keep], [x.get_label() for x in handles] + [k[1] for k in keep],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return fig, ax


# --------------------------------------------------------------------------- projection


def plot_context_projection(session: Any, leaf_id: str | None = None, *, ax: Any = None,
                            title: str | None = None) -> tuple[Any, Any]:
    """One horizontal bar per entry of the path to ``leaf_id``, sized by estimated tokens.

    Colours: summarized (folded into the latest compaction's summary), the summary itself,
    kept (from ``firstKeptEntryId`` to the compaction), after compaction, in context (no
    compaction), not in context (labels, settings, custom state: drawn as a thin stub).
    """
    session = _session_of(session)
    table = projection_table(session, leaf_id)
    n = len(table)
    fig, ax = _figure(ax, figsize=(9, min(2 + 0.05 * n, 12)))
    widths = table["tokens"].astype(float).to_numpy()
    stub = max(float(widths.max()) * 0.01, 1.0) if n else 1.0
    widths = np.where(table["status"].astype(str) == "not in context", np.maximum(widths, stub), widths)
    colors = [STATUS_COLORS[s] for s in table["status"].astype(str)]
    ax.barh(table["position"], widths, color=colors, height=0.85, edgecolor="none")
    totals = table.groupby("status", observed=False)["tokens"].sum()
    from matplotlib.patches import Patch

    handles = [Patch(color=STATUS_COLORS[s], label=f"{s} ({int(totals.get(s, 0)):,} tok)")
               for s in STATUSES if (table["status"] == s).any()]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    ax.set_ylim(n - 0.5 if n else 0.5, -0.5)
    ax.set_xlabel("estimated tokens (chars/4)")
    ax.set_ylabel("position on the path (root at top)")
    in_ctx = int(table.loc[table["in_context"], "tokens"].sum()) if n else 0
    leaf = leaf_id or session.leaf_id
    ax.set_title(title or f"Context at leaf {leaf}: {in_ctx:,} estimated tokens in context")
    ax.grid(axis="x", alpha=0.3)
    return fig, ax


def plot_cut_points(session: Any, keep_values: Sequence[int] | None = None, leaf_id: str | None = None, *,
                    ax: Any = None, title: str | None = None) -> tuple[Any, Any]:
    """Where Pi cuts as ``keepRecentTokens`` varies: first kept entry and tokens kept.

    Left axis: the first kept entry's position on the path (split turns marked ×); right
    axis: estimated tokens kept, with the ``kept = keepRecentTokens`` diagonal for reference.
    Returns ``(fig, (ax, ax_tokens))``.
    """
    session = _session_of(session)
    if keep_values is None:
        keep_values = [500 * k for k in range(1, 41)]
    table = cut_points_table(session, keep_values, leaf_id)
    fig, ax = _figure(ax)
    ax.step(table["keep_recent_tokens"], table["first_kept_index"], where="post", color="#1f77b4",
            label="first kept entry (path position)")
    split = table[table["split_turn"]]
    ax.scatter(split["keep_recent_tokens"], split["first_kept_index"], marker="x", color="#d62728", zorder=3,
               label="split turn")
    ax.set_xlabel("keepRecentTokens")
    ax.set_ylabel("first kept entry (position on path)", color="#1f77b4")
    ax2 = ax.twinx()
    ax2.plot(table["keep_recent_tokens"], table["tokens_kept"], color="#2a9d8f", marker=".", label="tokens kept")
    ax2.plot(table["keep_recent_tokens"], table["keep_recent_tokens"], color="#2a9d8f", ls=":", lw=1,
             label="tokens kept = keepRecentTokens")
    ax2.set_ylabel("estimated tokens kept", color="#2a9d8f")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="center right", fontsize=8)
    ax.set_title(title or "Cut point as keepRecentTokens varies")
    ax.grid(alpha=0.3)
    return fig, (ax, ax2)


def plot_estimate_vs_usage(session: Any, leaf_id: str | None = None, *, ax: Any = None,
                           title: str | None = None) -> tuple[Any, Any]:
    """Pi's chars/4 estimate of the context against the recorded usage, per assistant message.

    Left axis: both token counts along the path; right axis: their ratio (recorded ÷ estimate),
    with the median as a dotted line (the ratio axis stops at 3× the median). Returns
    ``(fig, (ax, ax_ratio))``.
    """
    session = _session_of(session)
    table = estimate_vs_usage_table(session, leaf_id)
    fig, ax = _figure(ax)
    ax.plot(table["position"], table["recorded_tokens"], color="#2ca02c", marker="o", ms=3,
            label="recorded usage (calculateContextTokens)")
    ax.plot(table["position"], table["estimated_tokens"], color="#1f77b4", marker="s", ms=3,
            label="Pi estimate (chars/4)")
    ax.set_xlabel("position on the path")
    ax.set_ylabel("context tokens")
    ax2 = ax.twinx()
    ax2.plot(table["position"], table["ratio"], color="#ff7f0e", lw=1, alpha=0.8, label="ratio recorded / estimate")
    if len(table):
        med = float(np.nanmedian(table["ratio"]))
        ax2.axhline(med, color="#ff7f0e", ls=":", lw=1, label=f"median ratio {med:.2f}")
        top = float(np.nanmax(table["ratio"]))
        if math.isfinite(med) and med > 0:  # a few tiny early contexts must not flatten the rest
            ax2.set_ylim(0, min(top, 3 * med) * 1.1)
    ax2.set_ylabel("recorded / estimate", color="#ff7f0e")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    ax.set_title(title or f"Estimate vs recorded usage ({len(table)} assistant messages)")
    ax.grid(alpha=0.3)
    return fig, (ax, ax2)


# --------------------------------------------------------------------------- sweeps


def _pivot(df: pd.DataFrame, metric: str, x: str, y: str, agg: str) -> pd.DataFrame:
    if metric not in df.columns:
        raise KeyError(f"sweep results have no column {metric!r} (columns: {', '.join(map(str, df.columns))})")
    data = df
    if "error" in df.columns:
        data = df[df["error"].isna()]
    return data.pivot_table(index=y, columns=x, values=metric, aggfunc=agg).sort_index().sort_index(axis=1)


def plot_sweep_heatmap(df: pd.DataFrame, metric: str = "compactions", *, x: str = "keep_recent_tokens",
                       y: str = "reserve_tokens", agg: str = "mean", ax: Any = None, title: str | None = None,
                       annotate: bool = True, cmap: str = "viridis") -> tuple[Any, Any]:
    """A heatmap of ``metric`` over the sweep grid (``y`` × ``x``), aggregated with ``agg``
    over the remaining dimensions (sessions, windows); runs with an error are left out."""
    grid = _pivot(df, metric, x, y, agg)
    fig, ax = _figure(ax, figsize=(1.2 + 1.1 * max(len(grid.columns), 1), 1.2 + 0.8 * max(len(grid.index), 1)))
    values = grid.to_numpy(dtype=float)
    im = ax.imshow(values, cmap=cmap, aspect="auto", origin="lower")
    ax.set_xticks(range(len(grid.columns)))
    ax.set_xticklabels([f"{v:,}" if isinstance(v, (int, np.integer)) else str(v) for v in grid.columns])
    ax.set_yticks(range(len(grid.index)))
    ax.set_yticklabels([f"{v:,}" if isinstance(v, (int, np.integer)) else str(v) for v in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if annotate and values.size:
        finite = values[np.isfinite(values)]
        mid = (finite.max() + finite.min()) / 2 if finite.size else 0
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                if not math.isfinite(v):
                    continue
                text = f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if v < mid else "black")
    fig.colorbar(im, ax=ax, label=metric)
    ax.set_title(title or f"{metric} ({agg})")
    return fig, ax


def plot_sweep_heatmaps(df: pd.DataFrame, metrics: Sequence[str] = ("compactions", "summarization_request_tokens",
                                                                    "peak_context_tokens", "mean_context_tokens"),
                        *, x: str = "keep_recent_tokens", y: str = "reserve_tokens", agg: str = "mean",
                        axes: Any = None) -> tuple[Any, Any]:
    """One heatmap per metric, side by side. Returns ``(fig, axes)``."""
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if m in df.columns]
    if not metrics:
        raise KeyError("none of the metrics is a column of the sweep results")
    if axes is None:
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), constrained_layout=True,
                                 squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    for metric, ax in zip(metrics, axes):
        plot_sweep_heatmap(df, metric, x=x, y=y, agg=agg, ax=ax)
    return fig, axes


# --------------------------------------------------------------------------- drift


def plot_retention_by_age(report: pd.DataFrame, *, ax: Any = None, by_kind: bool = False,
                          title: str | None = None) -> tuple[Any, Any]:
    """Share of captured facts still present k compactions after the one that introduced them."""
    from pimem.drift import retention_by_age

    fig, ax = _figure(ax, figsize=(6, 4))
    r = retention_by_age(report, by_kind=by_kind)
    if by_kind and len(r):
        for kind, g in r.groupby("kind"):
            ax.plot(g["age"], g["retention"], marker="o", label=str(kind))
    elif len(r):
        ax.plot(r["age"], r["retention"], marker="o", color="#1f77b4", label="all facts")
        for a, v, n in zip(r["age"], r["retention"], r["n"]):
            ax.annotate(f"n={n}", (a, v), xytext=(0, 6), textcoords="offset points", fontsize=7, ha="center")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("age (compactions since introduced)")
    ax.set_ylabel("retention")
    ax.set_title(title or "Fact retention by age")
    if len(r):
        ax.legend(fontsize=8)
        ax.set_xticks(sorted(set(int(a) for a in r["age"])))
    else:
        ax.text(0.5, 0.5, "no facts to follow", transform=ax.transAxes, ha="center")
    ax.grid(alpha=0.3)
    return fig, ax


def plot_section_similarity(report: pd.DataFrame, *, ax: Any = None, measure: str = "cosine_prev",
                            title: str | None = None) -> tuple[Any, Any]:
    """Similarity of each template section to its previous version, per compaction."""
    from pimem.drift import section_similarity

    fig, ax = _figure(ax, figsize=(6, 4))
    s = section_similarity(report)
    s = s[s[measure].notna()] if len(s) else s
    for section, g in s.groupby("section", sort=False):
        ax.plot(g["compaction"], g[measure], marker="o", label=str(section))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("compaction")
    ax.set_ylabel(f"similarity to previous ({measure.split('_')[0]})")
    ax.set_title(title or "Section similarity across compactions")
    if len(s):
        ax.legend(fontsize=7, ncol=2)
        ax.set_xticks(sorted(set(int(c) for c in s["compaction"])))
    else:
        ax.text(0.5, 0.5, "fewer than two compactions", transform=ax.transAxes, ha="center")
    ax.grid(alpha=0.3)
    return fig, ax


def plot_summary_sizes(report: pd.DataFrame, *, ax: Any = None, title: str | None = None) -> tuple[Any, Any]:
    """Summary tokens and summarized-span tokens per compaction, compression ratio on the right.

    Returns ``(fig, (ax, ax_ratio))``.
    """
    fig, ax = _figure(ax, figsize=(6, 4))
    idx = report["compaction"].astype(int).to_numpy() if len(report) else np.array([], dtype=int)
    span = report["span_tokens"].astype(float).to_numpy() if "span_tokens" in report else np.zeros(len(idx))
    summ = report["summary_tokens"].astype(float).to_numpy() if "summary_tokens" in report else np.zeros(len(idx))
    ax.bar(idx - 0.2, span, width=0.4, color="#e9a03b", label="span summarized (tokens)")
    ax.bar(idx + 0.2, summ, width=0.4, color="#8e44ad", label="summary (tokens)")
    ax.set_xlabel("compaction")
    ax.set_ylabel("estimated tokens")
    ax2 = ax.twinx()
    if "compression_ratio_with_prev" in report and len(report):
        ax2.plot(idx, report["compression_ratio_with_prev"].astype(float), color="black", marker="o", lw=1,
                 label="compression (span + previous summary) ÷ summary")
    ax2.set_ylabel("compression ratio")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
    if len(idx):
        ax.set_xticks(idx)
    ax.set_title(title or "Summary size per compaction")
    ax.grid(axis="y", alpha=0.3)
    return fig, (ax, ax2)


def plot_drift(report: pd.DataFrame, *, axes: Any = None, title: str | None = None) -> tuple[Any, Any]:
    """The three drift panels: retention by age, section similarity, summary size."""
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), constrained_layout=True)
    else:
        fig = axes[0].figure
    plot_retention_by_age(report, ax=axes[0])
    plot_section_similarity(report, ax=axes[1])
    plot_summary_sizes(report, ax=axes[2])
    if title:
        fig.suptitle(title)
    return fig, axes
