"""Matplotlib figures of sessions, replays, sweeps and drift reports.

Every function takes an optional ``ax=`` to draw into and returns ``(fig, ax)`` (or
``(fig, axes)`` for figures with several panels or a twin axis). Nothing is shown or saved:
call ``fig.savefig`` or let Jupyter display it.

The figures stay readable from an empty report to hundreds of compactions and sessions of
100,000 entries: a figure keeps its size, tick labels are thinned to what fits the axes when
it is drawn, text labels (amounts freed, observation counts, tree labels, heatmap cells) are
drawn most important first and skipped where they would overlap, and dense data is drawn in
aggregate (compaction rugs instead of arrows, ages binned, section similarity as a heatmap,
summary sizes as lines instead of bars).
"""

from __future__ import annotations

import functools
import math
import textwrap
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.ticker import Formatter, Locator

from pimem.base.tables import escape_lone_surrogates, format_number
from pimem.errors import ConfigurationError, UnknownColumnError
from pimem.drift import retention_by_age, section_similarity
from pimem.sessions.load import as_session
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
    "DENSE_COMPACTIONS",
    "RUG_COMPACTIONS",
    "DENSE_CALLS",
    "plot_context_over_time",
    "plot_session_tree",
    "plot_context_projection",
    "plot_cut_points",
    "plot_sweep_heatmap",
    "plot_sweep_heatmaps",
    "plot_labelled_scatter",
    "plot_retention_by_age",
    "plot_section_similarity",
    "plot_summary_sizes",
    "plot_drift",
    "plot_estimate_vs_usage",
    "plot_compared",
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

# Above this many compactions a figure draws them in aggregate (lines, heatmap); above
# RUG_COMPACTIONS the context figure marks them as a rug; above DENSE_CALLS it draws a band.
DENSE_COMPACTIONS = 25
RUG_COMPACTIONS = 200
DENSE_CALLS = 3000
# Above this many points a line is drawn without markers (and rasterized in vector output).
DENSE_POINTS = 400


# --------------------------------------------------------------------------- layout helpers


def _figure(ax: Any = None, figsize: tuple[float, float] = (9, 4)) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


def _overlap(a: Any, b: Any, pad: float = 0.0) -> bool:
    return (a.x0 - pad < b.x1 and b.x0 - pad < a.x1 and a.y0 - pad < b.y1 and b.y0 - pad < a.y1)


def _inside(box: Any, frame: Any) -> bool:
    return box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1


def _label_set(ax: Any, texts: Sequence[Any], *, all_or_none: bool = False, pad: float = 2.0) -> "LabelSet":
    """Add ``texts`` (most important first) to ``ax`` as one :class:`LabelSet`."""
    labels = LabelSet(texts, all_or_none=all_or_none, pad=pad)
    ax.add_artist(labels)
    for t in labels.texts:
        t.axes = ax
        t.set_figure(ax.figure)
    return labels


class LabelSet(Artist):
    """Text labels drawn in priority order; a label that would overlap one already drawn or the
    axes' legend, or reach outside the axes, is skipped.

    The choice is made at every draw, after the layout, so it holds at any figure size or dpi.
    ``all_or_none``: draw every label or none (heatmap cells). :attr:`shown` lists the labels
    of the last draw (they are also the artist's children).
    """

    def __init__(self, texts: Sequence[Any], *, all_or_none: bool = False, pad: float = 2.0) -> None:
        super().__init__()
        self.texts = list(texts)
        self.shown = list(self.texts)
        self.all_or_none = all_or_none
        self.pad = pad
        self.set_in_layout(False)
        self.set_zorder(5)

    def get_children(self) -> list[Any]:
        return list(self.shown)

    def draw(self, renderer: Any) -> None:
        if not self.get_visible() or self.axes is None:
            self.shown = []
            return
        frame = self.axes.bbox
        placed = []
        legend = self.axes.get_legend()
        if legend is not None and legend.get_visible() and not self.all_or_none:
            placed.append(legend.get_window_extent(renderer))
        shown: list[Any] = []
        for t in self.texts:
            box = t.get_window_extent(renderer)
            if not _inside(box, frame) or any(_overlap(box, p, self.pad) for p in placed):
                if self.all_or_none:
                    shown = []
                    break
                continue
            placed.append(box)
            shown.append(t)
        for t in shown:
            t.draw(renderer)
        self.shown = shown
        self.stale = False


def _text(ax: Any, x: float, y: float, s: str, *, dx: float = 0.0, dy: float = 0.0, **kwargs: Any) -> Any:
    """A Text at data (x, y), shifted by (dx, dy) points, not yet added to the axes."""
    from matplotlib.text import Text
    from matplotlib.transforms import offset_copy

    transform = offset_copy(ax.transData, fig=ax.figure, x=dx, y=dy, units="points") if (dx or dy) else ax.transData
    return Text(x, y, s, transform=transform, **kwargs)


_HALO = dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.75)


def _tick_fontsize(axis: str = "x") -> float:
    import matplotlib
    from matplotlib.font_manager import FontProperties

    key: Any = f"{axis}tick.labelsize"
    return FontProperties(size=matplotlib.rcParams[key]).get_size_in_points()


class CategoryLocator(Locator):
    """Every k-th of positions 0..n−1, k chosen when the axis is drawn so that labels of
    ``chars`` characters fit the axes (category labels never overlap, at any size)."""

    def __init__(self, n: int, chars: int) -> None:
        self.n = n
        self.chars = max(chars, 1)

    def __call__(self) -> list[int]:
        if self.n <= 0:
            return []
        axis: Any = self.axis
        vertical = axis.axis_name == "y"
        box = axis.axes.bbox
        length = box.height if vertical else box.width
        px = _tick_fontsize(axis.axis_name) * axis.axes.figure.dpi / 72
        per_label = 1.5 * px if vertical else (0.62 * self.chars + 1.2) * px
        fit = max(int(length // per_label), 1)
        step = max(math.ceil(self.n / fit), 1)
        return list(range(0, self.n, step))

    def tick_values(self, vmin: float, vmax: float) -> list[int]:
        return self()


def _category_ticks(axis: Any, labels: Sequence[str]) -> None:
    """Label positions 0..n−1 of ``axis`` with ``labels``, thinned at draw time to what fits."""
    from matplotlib.ticker import FuncFormatter

    labels = [str(v) for v in labels]
    n = len(labels)
    axis.set_major_locator(CategoryLocator(n, max((len(v) for v in labels), default=1)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: labels[int(round(v))] if 0 <= round(v) < n else ""))


def _integer_ticks(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins="auto", integer=True, min_n_ticks=1))


def _unit(largest: float) -> tuple[float, str]:
    """The divisor and suffix that numbers up to ``largest`` are written in (k from 10,000)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if largest >= scale:
            return (1e3 if suffix == "k" else scale), suffix
    return 1.0, ""


def _in_unit(value: float, unit: tuple[float, str]) -> str:
    divisor, suffix = unit
    if not math.isfinite(value):
        return format_number(value)
    if divisor == 1.0:
        return format_number(value)
    return f"{value / divisor:.3g}{suffix}" if value else "0"


class UnitFormatter(Formatter):
    """Tick labels in one unit per axis, chosen from the largest tick: ``5,000 … 9,000`` or
    ``5k … 40k`` or ``0.2M … 1.2M``; never an offset or exponent above the axis."""

    def __init__(self) -> None:
        self.ticks: list[float] = []

    def set_locs(self, locs: Sequence[float]) -> None:
        super().set_locs(list(locs))
        self.ticks = [abs(float(v)) for v in locs if math.isfinite(v)]

    def __call__(self, x: float, pos: int | None = None) -> str:
        return _in_unit(x, _unit(max(self.ticks or [abs(x)])))


def _compact_ticks(axis: Any) -> None:
    axis.set_major_formatter(UnitFormatter())


def _legend_outside(ax: Any, handles: Any = None, labels: Any = None, fontsize: float = 8) -> Any:
    """A legend to the right of the axes (the layout makes room for it)."""
    kwargs: dict[str, Any] = dict(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                                  fontsize=fontsize, frameon=False)
    if handles is not None:
        return ax.legend(handles, labels, **kwargs)
    return ax.legend(**kwargs)


def _legend_on_top(ax: Any, handles: list[Any], labels: list[str], lift: Sequence[Any], *, ncol: int = 2,
                   fontsize: float = 8) -> Any:
    """A legend across the top of the axes; the y limits of ``lift`` grow so data stays below it."""
    if not labels:
        return None
    rows = math.ceil(len(labels) / ncol)
    fig = ax.figure
    height_in = max(ax.get_position().height * fig.get_figheight(), 1.0)
    share = min((rows * fontsize * 1.45 / 72 + 0.12) / height_in, 0.6)
    for a in lift:
        lo, hi = a.get_ylim()
        a.set_ylim(lo, lo + (hi - lo) / (1 - share))
    return ax.legend(handles, labels, loc="upper left", ncol=ncol, fontsize=fontsize, framealpha=0.9)


def _human(name: str, width: int = 26) -> str:
    """A column name for a title or colorbar: underscores as spaces, wrapped to ``width``."""
    return "\n".join(textwrap.wrap(str(name).replace("_", " "), width)) or str(name)


def _marker(n: int, marker: str = "o") -> dict[str, Any]:
    """Marker keywords for a line of ``n`` points: markers only while they stay distinct."""
    if n > DENSE_POINTS:
        return {"marker": None, "rasterized": True}
    return {"marker": marker, "ms": 3 if n > 40 else 5}


# --------------------------------------------------------------------------- replay


def plot_context_over_time(result: Any, *, ax: Any = None, title: str | None = None,
                           show_checks: bool = True, effects: pd.DataFrame | None = None,
                           max_labels: int = 10) -> tuple[Any, Any]:
    """Context tokens per step of a :class:`~pimem.replays.engine.ReplayResult`.

    The line is the context of each assistant call (the replay's token source), dots are the
    compaction checks, the dashed line is the threshold (window − reserve), the solid line the
    window. Each compaction goes down from the context its check read by what it freed
    (:func:`pimem.viz.data.compaction_effects`; pass ``effects=`` when already computed): an
    arrow while there are at most :data:`DENSE_COMPACTIONS`, a thin line beyond. The
    ``max_labels`` largest amounts freed are written beside them where they fit. Beyond
    :data:`RUG_COMPACTIONS` the compactions are a rug along the bottom, and beyond
    :data:`DENSE_CALLS` calls the context is drawn as the range and median of about one bin
    of calls per pixel, without the check dots.

    The y axis covers the calls, the window and what checks read up to 1.5 times more; checks
    that read more than that are drawn as ▲ on the top edge and counted in the legend, so that
    a few outliers do not flatten the rest.
    """
    from matplotlib.collections import LineCollection
    from matplotlib.transforms import blended_transform_factory

    fig, ax = _figure(ax, figsize=(10, 4))
    calls = result.calls
    events = result.events
    window = float(result.context_window)
    reserve = float(getattr(result.settings, "reserve_tokens", 0))
    threshold = window - reserve
    purple = STATUS_COLORS["summary"]
    grey = "#7f7f7f"
    if effects is None:
        effects = compaction_effects(result)
    checks = events[events["kind"] == "check"] if show_checks and len(events) else events.iloc[:0]
    peak = float(np.nanmax(calls["context_tokens"].astype(float))) if len(calls) else 0.0
    base = max(window, peak if math.isfinite(peak) else 0.0)
    read = np.concatenate([checks["context_tokens"].astype(float).to_numpy() if len(checks) else [],
                           effects["trigger_tokens"].astype(float).to_numpy() if len(effects) else []])
    near = read[np.isfinite(read) & (read <= 1.5 * base)]  # modest overshoots stay on the axis
    top = max(base, float(near.max()) if len(near) else 0.0) * 1.06
    on_top = blended_transform_factory(ax.transData, ax.transAxes)
    enveloped = len(calls) > DENSE_CALLS
    if enveloped:  # about one bin per pixel: the range and median of each bin's calls
        per = math.ceil(len(calls) / 800)
        binned = (calls.assign(bin=np.arange(len(calls)) // per).groupby("bin")
                  .agg(step=("step", "mean"), lo=("context_tokens", "min"), hi=("context_tokens", "max"),
                       mid=("context_tokens", "median")))
        ax.fill_between(binned["step"], binned["lo"], binned["hi"], color="#1f77b4", alpha=0.3, lw=0, zorder=2,
                        label=f"context per call: range\nover each {per} calls")
        ax.plot(binned["step"], binned["mid"], color="#1f4e79", lw=1.0, zorder=3, label=f"median over each {per} calls")
    elif len(calls):
        ax.plot(calls["step"], calls["context_tokens"], color="#1f77b4", lw=1.2, label="context per call", zorder=3,
                **_marker(len(calls), "."))
    refused = calls[calls["refused"].fillna(False).astype(bool)] if "refused" in calls.columns and len(calls) else None
    if refused is not None and len(refused):
        ax.scatter(refused["step"], np.minimum(refused["context_tokens"].astype(float), top / 1.06), marker="x",
                   color="#d62728", s=22, zorder=4, label=f"refused by the provider (> window): {len(refused):,}")
    if len(checks):
        tokens = checks["context_tokens"].astype(float)
        inside = checks[tokens <= top]
        if not enveloped:  # beyond that, the checks read what the calls' band already shows
            ax.scatter(inside["step"], inside["context_tokens"], s=8 if len(checks) > DENSE_POINTS else 12,
                       color=grey, alpha=0.6, label="compaction check", zorder=2,
                       rasterized=len(checks) > DENSE_POINTS)
        above = checks[tokens > top]
        if len(above):
            ax.scatter(above["step"], np.full(len(above), 0.975), transform=on_top, marker="^", s=22, color=grey,
                       zorder=4, label=f"check above the axis ({len(above)};\nup to {tokens.max():,.0f})")
    ax.axhline(threshold, color="#d62728", ls="--", lw=1.2, label=f"threshold ({threshold:,.0f})\n= window − reserve")
    ax.axhline(window, color="black", lw=1.0, label=f"context window ({window:,.0f})")
    n = len(effects)
    if n:
        start = np.minimum(effects["trigger_tokens"].astype(float).to_numpy(), top)
        freed = effects["freed"].astype(float).to_numpy()
        steps = effects["step"].astype(float).to_numpy()
        end = np.clip(effects["trigger_tokens"].astype(float).to_numpy() - freed, 0.0, top)
        if n <= DENSE_COMPACTIONS:
            for x, y0, y1 in zip(steps, start, end):
                ax.annotate("", xy=(x, y1), xytext=(x, y0), zorder=4,
                            arrowprops=dict(arrowstyle="-|>", color=purple, lw=1.4))
        elif n <= RUG_COMPACTIONS:
            ax.add_collection(LineCollection([[(x, y0), (x, y1)] for x, y0, y1 in zip(steps, start, end)],
                                             colors=purple, linewidths=0.9, alpha=0.75, zorder=4))
            ax.scatter(steps, end, marker="v", s=9, color=purple, zorder=4, linewidths=0)
        else:  # a rug along the bottom: where the compactions are; the drops show in the line itself
            ax.add_collection(LineCollection([[(x, 0.0), (x, 0.045)] for x in steps], colors=purple, linewidths=0.8,
                                             alpha=0.8, zorder=4, transform=on_top))
        order = np.argsort(-freed, kind="stable")[:max_labels]
        _label_set(ax, [_text(ax, steps[i], end[i], f"−{freed[i]:,.0f}", dx=2, dy=-1, color=purple, fontsize=8,
                              va="top", ha="left", bbox=_HALO) for i in order if freed[i] > 0])
        shape = "tokens freed" if n <= RUG_COMPACTIONS else "marked below;\ntokens freed"
        ax.plot([], [], color=purple, lw=1.4, label=f"compaction ({n}): {shape}\n(chars/4; largest labelled)")
    ax.set_ylim(0, top)
    ax.set_xlabel("step (entry of the recorded path)")
    ax.set_ylabel("context tokens")
    _compact_ticks(ax.yaxis)
    if title is None:
        s = result.settings
        title = (f"Context over time — window {window:,.0f}, reserve {reserve:,.0f}, "
                 f"keep {getattr(s, 'keep_recent_tokens', 0):,.0f} ({result.token_source})")
    ax.set_title(title)
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    return fig, ax


# --------------------------------------------------------------------------- session tree


def plot_session_tree(session: Any, *, ax: Any = None, title: str | None = None,
                      show_labels: bool = True, max_label_count: int = 40) -> tuple[Any, Any]:
    """The session tree in lanes: x is the depth, one lane per overlapping branch.

    Markers are coloured by kind (user, assistant, tool result, compaction ■, branch summary ◆);
    the active path (root → leaf) is drawn thick. Lines are drawn in one collection, so
    sessions of 100,000 entries stay fast; markers shrink as entries grow dense. Labels are
    written where they fit, first labels first.
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    session = as_session(session)
    layout = tree_layout(session)
    n_lanes = int(layout["lane"].max()) + 1 if len(layout) else 1
    fig, ax = _figure(ax, figsize=(10, min(1.6 + 0.45 * n_lanes, 8)))
    active_lines, other_lines = _tree_lines(layout)
    ax.add_collection(LineCollection(other_lines, colors="#9a9a9a", linewidths=1.0, zorder=1, label="branches"))
    ax.add_collection(LineCollection(active_lines, colors="#111111", linewidths=2.6, zorder=2, label="active path"))
    depth = int(layout["x"].max()) + 1 if len(layout) else 1
    dense = depth > 400  # markers closer than a few pixels apart: smaller, no outlines
    special = {"compaction": ("s", 18 if dense else 60), "branch_summary": ("D", 24 if dense else 55)}
    kinds = layout["kind"].where(layout["kind"].isin(list(KIND_COLORS)), "other")
    for kind in sorted(set(kinds)):
        sel = layout[kinds == kind]
        marker, size = special.get(kind, ("o", 4 if dense else 14))
        color = KIND_COLORS.get(kind, OTHER_KIND_COLOR)
        outline = "none" if marker == "o" or dense else "black"
        ax.scatter(sel["x"], sel["lane"], s=size, marker=marker, color=color, edgecolors=outline,
                   linewidths=0.6, zorder=3, label=kind, rasterized=len(sel) > 2000)
    leaf = layout[layout["entry_id"] == session.leaf_id]
    if len(leaf):
        ax.scatter(leaf["x"].to_numpy()[:1], leaf["lane"].to_numpy()[:1], s=120, facecolors="none",
                   edgecolors="#d62728", linewidths=1.6,
                   zorder=4, label="leaf")
    if show_labels:
        lab = layout[layout["label"].notna()].head(max_label_count)
        _label_set(ax, [_text(ax, r.x, r.lane, str(r.label), dy=6, fontsize=7, ha="center", va="bottom",
                              color="#444444") for r in lab.itertuples()])
    ax.set_xlim(-1, depth)
    ax.set_ylim(n_lanes - 0.5, -0.8)
    _category_ticks(ax.yaxis, [f"lane {i}" for i in range(n_lanes)])
    ax.set_xlabel("depth (entries from the root)")
    n_leaves = len(session.leaves())
    leaves = f"{n_leaves:,} {'leaf' if n_leaves == 1 else 'leaves'}"
    ax.set_title(title or f"Session tree — {len(layout):,} entries, {leaves}")
    handles = [Line2D([0], [0], color="#111111", lw=2.6, label="active path"),
               Line2D([0], [0], color="#9a9a9a", lw=1.0, label="other branches")]
    h, labels = ax.get_legend_handles_labels()
    keep = [(hh, ll) for hh, ll in zip(h, labels) if ll not in ("branches", "active path")]
    _legend_outside(ax, handles + [k[0] for k in keep], [x.get_label() for x in handles] + [k[1] for k in keep])
    return fig, ax


def _tree_lines(layout: pd.DataFrame) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Polylines of the tree: (active path, other branches).

    An edge parent → child is active when both are on the active path. Edges inside a chain
    (same lane, consecutive depths) are merged into one straight line per run of equal
    activity; an edge into a new chain is a connector (down the parent's column, then across).
    A session of 100,000 entries gives a few hundred polylines instead of 100,000 segments.
    """
    if not len(layout):
        return [], []
    index = {eid: i for i, eid in enumerate(layout["entry_id"].tolist())}
    parent = np.array([index.get(p, -1) if p is not None else -1 for p in layout["parent_id"].tolist()])
    x = layout["x"].to_numpy(dtype=float)
    lane = layout["lane"].to_numpy(dtype=float)
    chain = layout["chain"].to_numpy()
    active = layout["active"].to_numpy(dtype=bool)
    child = np.nonzero(parent >= 0)[0]
    par = parent[child]
    flag = active[child] & active[par]
    lines: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    cross = chain[child] != chain[par]
    for c, p, f in zip(child[cross], par[cross], flag[cross]):
        lines[0 if f else 1].append(np.array([(x[p], lane[p]), (x[p], lane[c]), (x[c], lane[c])]))
    same = child[~cross]
    same_flag = flag[~cross]
    order = np.lexsort((x[same], chain[same]))
    same, same_flag = same[order], same_flag[order]
    if len(same):
        breaks = np.ones(len(same), dtype=bool)
        breaks[1:] = ((chain[same][1:] != chain[same][:-1]) | (same_flag[1:] != same_flag[:-1])
                      | (x[same][1:] != x[same][:-1] + 1))
        starts = np.nonzero(breaks)[0]
        ends = np.append(starts[1:], len(same)) - 1
        for a, b in zip(starts, ends):
            first, last = same[a], same[b]
            lines[0 if same_flag[a] else 1].append(np.array([(x[first] - 1, lane[first]), (x[last], lane[last])]))
    return lines


# --------------------------------------------------------------------------- projection


def plot_context_projection(session: Any, leaf_id: str | None = None, *, ax: Any = None,
                            title: str | None = None, max_bars: int = 1500) -> tuple[Any, Any]:
    """One horizontal bar per entry of the path to ``leaf_id``, sized by estimated tokens.

    Colours: summarized (folded into the latest compaction's summary), the summary itself,
    kept (from ``firstKeptEntryId`` to the compaction), after compaction, in context (no
    compaction), not in context (labels, settings, custom state: drawn as a thin stub). The
    bars are one collection, so paths of 100,000 entries draw in a moment.
    """
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    session = as_session(session)
    table = projection_table(session, leaf_id)
    n = len(table)
    fig, ax = _figure(ax, figsize=(9, min(3.2 + 0.05 * n, 9)))
    tokens = table["tokens"].astype(float).to_numpy()
    stub = max(float(tokens.max()) * 0.01, 1.0) if n else 1.0
    status = table["status"].astype(str).to_numpy()
    widths = np.where(status == "not in context", np.maximum(tokens, stub), tokens)
    position = table["position"].to_numpy(dtype=float)
    per_bar = max(math.ceil(n / max_bars), 1)
    bars = pd.DataFrame({"bin": position // per_bar, "status": status, "position": position, "width": widths})
    bars["stub"] = bars["status"] == "not in context"
    bars = (bars.groupby(["bin", "status"], sort=False)
            .agg(lo=("position", "min"), hi=("position", "max"), width=("width", "max"), stub=("stub", "first"))
            .reset_index().sort_values(["stub", "bin"], ascending=[False, True], kind="stable"))
    half = 0.425
    verts = np.zeros((len(bars), 4, 2))
    verts[:, 1, 0] = verts[:, 2, 0] = bars["width"].to_numpy()
    verts[:, 0, 1] = verts[:, 1, 1] = bars["lo"].to_numpy() - half
    verts[:, 2, 1] = verts[:, 3, 1] = bars["hi"].to_numpy() + half
    ax.add_collection(PolyCollection(list(verts), facecolors=[STATUS_COLORS[s] for s in bars["status"]],
                                     edgecolors="none", label="entries"))
    totals = table.groupby("status", observed=False)["tokens"].sum()
    handles = [Patch(color=STATUS_COLORS[s], label=f"{s}\n({int(totals.get(s, 0)):,} tok)")
               for s in STATUSES if (table["status"] == s).any()]
    _legend_outside(ax, handles, [h.get_label() for h in handles])
    ax.set_xlim(0, (float(widths.max()) if n else 1.0) * 1.03)
    ax.set_ylim(n - 0.5 if n else 0.5, -0.5)
    _integer_ticks(ax.yaxis)
    _compact_ticks(ax.xaxis)
    ax.set_xlabel("estimated tokens (chars/4)" + (f"; each bar the largest of {per_bar} entries" if per_bar > 1
                                                  else ""))
    ax.set_ylabel("position on the path\n(root at top)")
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
    session = as_session(session)
    if keep_values is None:
        keep_values = [500 * k for k in range(1, 41)]
    table = cut_points_table(session, keep_values, leaf_id)
    fig, ax = _figure(ax)
    many = len(table) > DENSE_POINTS
    ax.step(table["keep_recent_tokens"], table["first_kept_index"], where="post", color="#1f77b4",
            label="first kept entry (path position)")
    split = table[table["split_turn"]]
    ax.scatter(split["keep_recent_tokens"], split["first_kept_index"], marker="x", s=12 if many else 30,
               color="#d62728", zorder=3, label="split turn")
    ax.set_xlabel("keepRecentTokens")
    ax.set_ylabel("first kept entry (position on path)", color="#1f77b4")
    ax2 = ax.twinx()
    ax2.plot(table["keep_recent_tokens"], table["tokens_kept"], color="#2a9d8f", label="tokens kept",
             **_marker(len(table), "."))
    ax2.plot(table["keep_recent_tokens"], table["keep_recent_tokens"], color="#2a9d8f", ls=":", lw=1,
             label="tokens kept = keepRecentTokens")
    ax2.set_ylabel("estimated tokens kept", color="#2a9d8f")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    for a in (ax.xaxis, ax2.yaxis):
        _compact_ticks(a)
    _integer_ticks(ax.yaxis)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    _legend_on_top(ax, h1 + h2, l1 + l2, [ax, ax2])
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
    session = as_session(session)
    table = estimate_vs_usage_table(session, leaf_id)
    fig, ax = _figure(ax)
    n = len(table)
    ax.plot(table["position"], table["recorded_tokens"], color="#2ca02c", lw=1.2,
            label="recorded usage (calculateContextTokens)", **_marker(n, "o"))
    ax.plot(table["position"], table["estimated_tokens"], color="#1f77b4", lw=1.2,
            label="Pi estimate (chars/4)", **_marker(n, "s"))
    ax.set_xlabel("position on the path")
    ax.set_ylabel("context tokens")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(table["position"], table["ratio"], color="#ff7f0e", lw=1, alpha=0.8, label="ratio recorded / estimate",
             rasterized=n > DENSE_POINTS)
    ax2.set_ylim(bottom=0)
    if n:
        med = float(np.nanmedian(table["ratio"])) if table["ratio"].notna().any() else math.nan
        if math.isfinite(med):
            ax2.axhline(med, color="#ff7f0e", ls=":", lw=1, label=f"median ratio {med:.2f}")
            top = float(np.nanmax(table["ratio"]))
            if med > 0:  # a few tiny early contexts must not flatten the rest
                ax2.set_ylim(0, min(top, 3 * med) * 1.1)
    ax2.set_ylabel("recorded / estimate", color="#ff7f0e")
    _compact_ticks(ax.yaxis)
    _integer_ticks(ax.xaxis)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    _legend_on_top(ax, h1 + h2, l1 + l2, [ax, ax2])
    ax.set_title(title or f"Estimate vs recorded usage ({n:,} assistant messages)")
    ax.grid(alpha=0.3)
    return fig, (ax, ax2)


# --------------------------------------------------------------------------- sweeps


def _pivot(df: pd.DataFrame, metric: str, x: str, y: str, agg: str) -> pd.DataFrame:
    if metric not in df.columns:
        raise UnknownColumnError(f"sweep results have no column {metric!r} (columns: {', '.join(map(str, df.columns))})")
    data = df
    if "error" in df.columns:
        data = df[df["error"].isna()]
    return data.pivot_table(index=y, columns=x, values=metric, aggfunc=agg).sort_index().sort_index(axis=1)


def _grid_label(value: Any) -> str:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        return format_number(value)
    return str(value)


def plot_sweep_heatmap(df: pd.DataFrame, metric: str = "compactions", *, x: str = "keep_recent_tokens",
                       y: str = "reserve_tokens", agg: str = "mean", ax: Any = None, title: str | None = None,
                       annotate: bool = True, cmap: str = "viridis") -> tuple[Any, Any]:
    """A heatmap of ``metric`` over the sweep grid (``y`` × ``x``), aggregated with ``agg``
    over the remaining dimensions (sessions, windows); runs with an error are left out.

    Cells are annotated (compact numbers: ``62.5``, ``543k``, ``1.05M``) when every value fits
    its cell; tick labels are thinned to what fits; the colorbar uses the same compact numbers
    (no offset text above it).
    """
    grid = _pivot(df, metric, x, y, agg)
    nx, ny = max(len(grid.columns), 1), max(len(grid.index), 1)
    fig, ax = _figure(ax, figsize=(min(2.2 + 0.9 * nx, 14), min(1.6 + 0.55 * ny, 9)))
    values = grid.to_numpy(dtype=float)
    im = ax.imshow(values, cmap=cmap, aspect="auto", origin="lower", interpolation="nearest")
    _category_ticks(ax.xaxis, [_grid_label(v) for v in grid.columns])
    _category_ticks(ax.yaxis, [_grid_label(v) for v in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if annotate and values.size:
        finite = values[np.isfinite(values)]
        mid = (finite.max() + finite.min()) / 2 if finite.size else 0
        unit = _unit(float(np.abs(finite).max()) if finite.size else 0.0)
        cells = [_text(ax, j, i, _in_unit(values[i, j], unit), ha="center", va="center", fontsize=8,
                       color="white" if values[i, j] < mid else "black")
                 for i in range(values.shape[0]) for j in range(values.shape[1]) if math.isfinite(values[i, j])]
        _label_set(ax, cells, all_or_none=True, pad=1.0)
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label(_human(metric, 30), fontsize=8)
    _compact_ticks(cbar.ax.yaxis)
    ax.set_title(title or f"{_human(metric)} ({agg})", fontsize=10)
    return fig, ax


def plot_sweep_heatmaps(df: pd.DataFrame, metrics: Sequence[str] = ("compactions", "summarization_request_tokens",
                                                                    "peak_context_tokens", "mean_context_tokens"),
                        *, x: str = "keep_recent_tokens", y: str = "reserve_tokens", agg: str = "mean",
                        axes: Any = None, ncols: int = 4) -> tuple[Any, Any]:
    """One heatmap per metric, up to ``ncols`` per row. Returns ``(fig, axes)`` (a flat list)."""
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if m in df.columns]
    if not metrics:
        raise UnknownColumnError("none of the metrics is a column of the sweep results")
    if axes is None:
        cols = min(len(metrics), max(ncols, 1))
        rows = math.ceil(len(metrics) / cols)
        fig, grid = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.6 * rows), layout="constrained",
                                 squeeze=False)
        axes = list(grid.ravel())
        for extra in axes[len(metrics):]:
            extra.set_visible(False)
        axes = axes[: len(metrics)]
    else:
        axes = list(np.ravel(axes))
        fig = axes[0].figure
    for metric, ax in zip(metrics, axes):
        plot_sweep_heatmap(df, metric, x=x, y=y, agg=agg, ax=ax)
    return fig, axes


class PlacedLabels(Artist):
    """One label per point, each put at the first of its candidate positions that overlaps no label
    already placed, no marker and no legend and stays inside the axes; a label with no free place is
    left out (the legend still names every point). Chosen at every draw, after the layout."""

    def __init__(self, candidates: Sequence[Sequence[Any]], markers: Any = None, pad: float = 2.0) -> None:
        super().__init__()
        self.candidates = [list(c) for c in candidates]
        self.markers = markers
        self.pad = pad
        self.shown: list[Any] = []
        self.set_in_layout(False)
        self.set_zorder(5)

    def get_children(self) -> list[Any]:
        return list(self.shown)

    def draw(self, renderer: Any) -> None:
        from matplotlib.transforms import Bbox

        if not self.get_visible() or self.axes is None:
            self.shown = []
            return
        frame = self.axes.bbox
        placed: list[Any] = []
        legend = self.axes.get_legend()
        if legend is not None and legend.get_visible():
            placed.append(legend.get_window_extent(renderer))
        if self.markers is not None:  # each marker's own box, from its size (area in points²)
            offsets = self.axes.transData.transform(self.markers.get_offsets())
            sizes = np.broadcast_to(self.markers.get_sizes(), (len(offsets),))
            for (px, py), area in zip(offsets, sizes):
                r = math.sqrt(area) / 2 * self.axes.figure.dpi / 72
                placed.append(Bbox([[px - r, py - r], [px + r, py + r]]))
        shown: list[Any] = []
        for options in self.candidates:
            for t in options:
                box = t.get_window_extent(renderer)
                if _inside(box, frame) and not any(_overlap(box, p, self.pad) for p in placed):
                    placed.append(box)
                    shown.append(t)
                    break
        for t in shown:
            t.draw(renderer)
        self.shown = shown
        self.stale = False


_LABEL_OFFSETS = [(6, 4, "left", "bottom"), (-6, 4, "right", "bottom"), (6, -4, "left", "top"),
                  (-6, -4, "right", "top"), (0, 10, "center", "bottom"), (0, -10, "center", "top"),
                  (14, 0, "left", "center"), (-14, 0, "right", "center")]


def plot_labelled_scatter(df: pd.DataFrame, x: str, y: str, *, label: str | None = None, size: str | None = None,
                          size_scale: float = 1.0, ax: Any = None, title: str | None = None,
                          xlabel: str | None = None, ylabel: str | None = None) -> tuple[Any, Any]:
    """A scatter of ``df[x]`` against ``df[y]``, one named point per row (``df[label]``, else the index),
    marker area ``df[size] * size_scale`` when given. Names are drawn beside their points where they
    overlap nothing (:class:`PlacedLabels`) and always listed in a legend outside the axes."""
    import matplotlib.pyplot as plt

    fig, ax = _figure(ax, figsize=(8, 4.5))
    names = [str(v) for v in (df[label] if label is not None else df.index)]
    xs = pd.to_numeric(df[x], errors="coerce").to_numpy(dtype=float)
    ys = pd.to_numeric(df[y], errors="coerce").to_numpy(dtype=float)
    sizes = (pd.to_numeric(df[size], errors="coerce").fillna(0).to_numpy(dtype=float) * size_scale
             if size is not None else np.full(len(df), 36.0))
    colors = [plt.get_cmap("tab10")(i % 10) for i in range(len(df))]
    markers = ax.scatter(xs, ys, s=np.clip(sizes, 9, 4000), c=colors, alpha=0.6, edgecolors="none")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", linestyle="", color=c, alpha=0.8) for c in colors]
    if len(df):
        _legend_outside(ax, handles, names)
    candidates: list[Any] = []
    for name, px, py in zip(names, xs, ys):
        if not (np.isfinite(px) and np.isfinite(py)):
            candidates.append([])
            continue
        candidates.append([_text(ax, px, py, name, dx=dx, dy=dy, ha=ha, va=va, fontsize=8, bbox=_HALO)
                           for dx, dy, ha, va in _LABEL_OFFSETS])
    labels = PlacedLabels(candidates, markers)
    ax.add_artist(labels)
    for options in labels.candidates:
        for t in options:
            t.axes = ax
            t.set_figure(ax.figure)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    if not len(df):
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#888")
    return fig, ax


# --------------------------------------------------------------------------- drift


def _bin_ages(r: pd.DataFrame, max_points: int) -> tuple[pd.DataFrame, int]:
    """Retention by age pooled over bins of ``width`` ages when there are more than ``max_points``."""
    ages = r["age"].astype(int)
    span = int(ages.max()) + 1 if len(r) else 1
    width = max(math.ceil(span / max_points), 1)
    if width == 1:
        return r.assign(lo=ages, hi=ages), 1
    keys = [c for c in ("kind",) if c in r.columns]
    b = r.assign(bin=ages // width)
    g = b.groupby(keys + ["bin"], sort=True).agg(n=("n", "sum"), n_present=("n_present", "sum"),
                                                  lo=("age", "min"), hi=("age", "max")).reset_index()
    g["age"] = (g["lo"] + g["hi"]) / 2
    g["retention"] = g["n_present"] / g["n"]
    return g, width


def plot_retention_by_age(report: pd.DataFrame, *, ax: Any = None, by_kind: bool = False,
                          title: str | None = None, max_points: int = 30) -> tuple[Any, Any]:
    """Share of captured facts still present k compactions after the one that introduced them.

    With more than ``max_points`` ages, ages are pooled into equal bins (retention = facts
    present ÷ observed over the bin, drawn at the bin's middle). Observation counts (``n=``)
    are written where they fit.
    """
    fig, ax = _figure(ax, figsize=(6.5, 4))
    r = retention_by_age(report, by_kind=by_kind)
    width = 1
    if len(r):
        r, width = _bin_ages(r, max_points)
    binned = f"\nages pooled by {width}" if width > 1 else ""
    if by_kind and len(r):
        for kind, g in r.groupby("kind"):
            ax.plot(g["age"], g["retention"], lw=1.3, label=str(kind), **_marker(len(g) * 20 if width > 1 else len(g)))
        _legend_outside(ax, fontsize=7)
    elif len(r):
        ax.plot(r["age"], r["retention"], color="#1f77b4", lw=1.5, label="all facts", **_marker(len(r)))
        _label_set(ax, [_text(ax, a, v, f"n={format_number(n)}", dy=5, fontsize=7, ha="center", va="bottom")
                        for a, v, n in zip(r["age"], r["retention"], r["n"])])
        ax.legend(fontsize=8, loc="lower left")
    ax.set_ylim(0, 1.08)
    ax.set_xlabel("age (compactions since introduced)" + binned)
    ax.set_ylabel("retention")
    ax.set_title(title or "Fact retention by age")
    if len(r):
        _integer_ticks(ax.xaxis)
    else:
        ax.text(0.5, 0.5, "no facts to follow", transform=ax.transAxes, ha="center")
    ax.grid(alpha=0.3)
    return fig, ax


def plot_section_similarity(report: pd.DataFrame, *, ax: Any = None, measure: str = "cosine_prev",
                            title: str | None = None, dense: bool | None = None) -> tuple[Any, Any]:
    """Similarity of each template section to its previous version, per compaction.

    One line per section for a few compactions; beyond 8 compactions (or with ``dense=True``)
    a heatmap, sections × compactions, where missing values (a section absent from either
    summary) are grey.
    """
    fig, ax = _figure(ax, figsize=(6.5, 4))
    s = section_similarity(report)
    s = s[s[measure].notna()] if len(s) else s
    label = f"similarity to previous ({measure.split('_')[0]})"
    n_comp = s["compaction"].nunique() if len(s) else 0
    if dense is None:
        dense = n_comp > 8
    ax.set_xlabel("compaction")
    ax.set_title(title or "Section similarity across compactions")
    if not len(s):
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(label)
        ax.text(0.5, 0.5, "fewer than two compactions", transform=ax.transAxes, ha="center")
        ax.grid(alpha=0.3)
        return fig, ax
    if dense:
        import matplotlib

        sections = list(dict.fromkeys(s["section"]))
        lo, hi = int(report["compaction"].min()), int(report["compaction"].max())
        wide = s.pivot_table(index="section", columns="compaction", values=measure, aggfunc="first")
        wide = wide.reindex(index=sections, columns=range(lo, hi + 1))
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#e6e6e6")
        im = ax.imshow(np.ma.masked_invalid(wide.to_numpy(dtype=float)), aspect="auto", cmap=cmap, vmin=0, vmax=1,
                       interpolation="nearest", extent=(lo - 0.5, hi + 0.5, len(sections) - 0.5, -0.5))
        _category_ticks(ax.yaxis, [str(x) for x in sections])
        cbar = fig.colorbar(im, ax=ax, fraction=0.06, pad=0.02)
        cbar.set_label(label, fontsize=8)
    else:
        for section, g in s.groupby("section", sort=False):
            ax.plot(g["compaction"], g[measure], lw=1.3, label=str(section), **_marker(len(g)))
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(label)
        _legend_outside(ax, fontsize=7)
        ax.grid(alpha=0.3)
    _integer_ticks(ax.xaxis)
    return fig, ax


def plot_summary_sizes(report: pd.DataFrame, *, ax: Any = None, title: str | None = None,
                       dense: bool | None = None) -> tuple[Any, Any]:
    """Summary tokens and summarized-span tokens per compaction, compression ratio on the right
    ((span + previous summary) ÷ summary).

    Bars for a few compactions; beyond :data:`DENSE_COMPACTIONS` (or with ``dense=True``) the
    span is a shaded area and the summary a line. Returns ``(fig, (ax, ax_ratio))``.
    """
    fig, ax = _figure(ax, figsize=(6.5, 4))
    idx = report["compaction"].astype(int).to_numpy() if len(report) else np.array([], dtype=int)
    span = report["span_tokens"].astype(float).to_numpy() if "span_tokens" in report else np.zeros(len(idx))
    summ = report["summary_tokens"].astype(float).to_numpy() if "summary_tokens" in report else np.zeros(len(idx))
    if dense is None:
        dense = len(idx) > DENSE_COMPACTIONS
    if dense:
        ax.fill_between(idx, span, step="mid", color="#e9a03b", alpha=0.45, lw=0, label="span summarized")
        ax.step(idx, summ, where="mid", color="#8e44ad", lw=1.2, label="summary")
    else:
        ax.bar(idx - 0.2, span, width=0.4, color="#e9a03b", label="span summarized")
        ax.bar(idx + 0.2, summ, width=0.4, color="#8e44ad", label="summary")
    ax.set_xlabel("compaction")
    ax.set_ylabel("estimated tokens")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    if "compression_ratio_with_prev" in report and len(report):
        ax2.plot(idx, report["compression_ratio_with_prev"].astype(float), color="black", lw=1,
                 label="compression ratio (right)", **_marker(len(idx) * (8 if dense else 1)))
    ax2.set_ylim(bottom=0)
    ax2.set_ylabel("compression ratio")
    _compact_ticks(ax.yaxis)
    if len(idx):
        _integer_ticks(ax.xaxis)
        ax.set_xlim(idx.min() - 0.6, idx.max() + 0.6)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    _legend_on_top(ax, h1 + h2, l1 + l2, [ax, ax2], ncol=2, fontsize=7)
    ax.set_title(title or "Summary size per compaction")
    ax.grid(axis="y", alpha=0.3)
    return fig, (ax, ax2)


def plot_drift(report: pd.DataFrame, *, axes: Any = None, title: str | None = None,
               arrangement: str = "row") -> tuple[Any, Any]:
    """The three drift panels: retention by age, section similarity, summary size.

    ``arrangement``: ``"row"`` (side by side, 17 in wide) or ``"stacked"`` (retention and
    summary size on top, section similarity across the bottom, 12 in wide: one compaction per
    column has room). Returns ``(fig, [ax_retention, ax_sections, ax_sizes])``.
    """
    import matplotlib.pyplot as plt

    if axes is None:
        if arrangement == "row":
            fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), layout="constrained")
        elif arrangement == "stacked":
            fig, named = plt.subplot_mosaic([["ages", "sizes"], ["sections", "sections"]], figsize=(12, 8.4),
                                            layout="constrained")
            axes = [named["ages"], named["sections"], named["sizes"]]
        else:
            raise ConfigurationError(f"arrangement must be 'row' or 'stacked', not {arrangement!r}")
    else:
        fig = axes[0].figure
    plot_retention_by_age(report, ax=axes[0])
    plot_section_similarity(report, ax=axes[1])
    plot_summary_sizes(report, ax=axes[2])
    if title:
        fig.suptitle(title)
    return fig, axes


# --------------------------------------------------------------------------- comparisons


def plot_compared(plot: Callable[..., tuple[Any, Any]], items: Mapping[str, Any], *, sharey: bool = True,
                  sharex: bool = False, ncols: int | None = None, panel_size: tuple[float, float] = (6.0, 4.0),
                  **kwargs: Any) -> tuple[Any, list[Any]]:
    """Draw ``plot(item, ax=…, title=name, **kwargs)`` once per item, side by side, on common axes.

    With ``sharey`` every y axis of a panel (twin axes included, matched by position in what
    ``plot`` returns) gets the same limits as in the other panels, so panels compare by eye;
    ``sharex`` does the same for x. Returns ``(fig, results)``, ``results`` holding what each
    call returned after the figure (``ax`` or a tuple of axes).
    """
    import matplotlib.pyplot as plt

    names = list(items)
    if not names:
        raise ConfigurationError("nothing to compare: items is empty")
    cols = min(ncols or len(names), len(names))
    rows = math.ceil(len(names) / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(panel_size[0] * cols, panel_size[1] * rows), layout="constrained",
                             squeeze=False)
    flat = list(grid.ravel())
    for extra in flat[len(names):]:
        extra.set_visible(False)
    results = []
    for name, ax in zip(names, flat):
        _, got = plot(items[name], ax=ax, title=str(name), **kwargs)
        results.append(got)
    per_panel = [list(r) if isinstance(r, (tuple, list)) else [r] for r in results]
    for k in range(min(len(p) for p in per_panel)):
        group = [p[k] for p in per_panel]
        for share, get, set_ in ((sharey, "get_ylim", "set_ylim"), (sharex, "get_xlim", "set_xlim")):
            if not share:
                continue
            limits = [getattr(a, get)() for a in group]
            flipped = limits[0][0] > limits[0][1]
            lo = min(min(v) for v in limits)
            hi = max(max(v) for v in limits)
            for a in group:
                getattr(a, set_)((hi, lo) if flipped else (lo, hi))
    return fig, results


def display_safe(plot: Callable[..., Any]) -> Callable[..., Any]:
    """``plot`` whose figure's texts show lone UTF-16 surrogates (which Pi's strings may hold and no
    font can render) as ``\\udXXX`` escapes instead of failing when the figure is drawn."""

    @functools.wraps(plot)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = plot(*args, **kwargs)
        fig = result[0] if isinstance(result, tuple) else result
        for text in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "set_text")):
            value = text.get_text()
            if isinstance(value, str):
                safe = escape_lone_surrogates(value)
                if safe is not value:
                    text.set_text(safe)
        return result

    return wrapper


for _name in [n for n in __all__ if n.startswith("plot_")]:
    globals()[_name] = display_safe(globals()[_name])
