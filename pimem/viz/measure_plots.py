"""Figures of summary measures across sources: a measures × sources table and recall against summary tokens.

Both draw every source on one scale (shares in [0, 1]; the same token axis), so sources compare by eye.
Each function takes ``ax=`` and returns ``(fig, ax)``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pimem.base.tables import frame
from pimem.viz.figures import display_safe

__all__ = ["SHARE_MEASURES", "plot_measures", "plot_recall_curve"]

SHARE_MEASURES: tuple[str, ...] = (
    "needed_recall", "needed_recall_constraint", "needed_recall_decision", "needed_recall_error",
    "needed_recall_artifact", "needed_recall_reference", "fact_recall", "content_sections", "conformance",
    "pipeline_modified_recall",
)


def _figure(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, constrained_layout=True)
    return fig, ax


def plot_measures(table: pd.DataFrame, measures: Sequence[str] | None = None, *, ax: Any = None,
                  title: str | None = None) -> tuple[Any, Any]:
    """Measures (rows) × sources (columns) as an annotated heat map on one 0–1 scale.

    ``table``: :attr:`pimem.drift.measures.Comparison.table`. Default rows: the share-valued
    measures present (:data:`SHARE_MEASURES`); token counts are printed under the source names.
    Missing values (no fact of that class, no file block) are drawn blank with "–".
    """
    rows = [m for m in (measures or SHARE_MEASURES) if m in table.index]
    data = table.loc[rows].astype(float) if rows else frame(columns=table.columns, dtype=float)
    fig, ax = _figure(ax, (1.6 + 1.25 * max(1, len(table.columns)), 0.9 + 0.42 * max(1, len(rows))))
    values = data.to_numpy() if len(rows) else np.zeros((0, len(table.columns)))
    masked = np.ma.masked_invalid(values)
    # an empty table (nothing measured) still gets one blank row, so the axes have an extent
    image = ax.imshow(masked if len(rows) else np.ma.masked_all((1, max(1, len(table.columns)))),
                      cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    if not rows:
        ax.text(0.5, 0.5, "nothing measured (no compaction)", transform=ax.transAxes, ha="center", va="center")
    labels = [str(c) for c in table.columns]
    if "written_tokens" in table.index:
        labels = [f"{c}\n{table.loc['written_tokens', c]:,.0f} tok" if not math.isnan(table.loc["written_tokens", c])
                  else str(c) for c in table.columns]
    ax.set_xticks(range(len(table.columns)), labels, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    for i in range(len(rows)):
        for j in range(len(table.columns)):
            v = values[i, j]
            text = "–" if math.isnan(v) else f"{v:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="black" if math.isnan(v) or v > 0.6 else "white")
    ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="share")
    ax.set_title(title or "Measures × summary sources (mean over compactions)")
    return fig, ax


def plot_recall_curve(curve: pd.DataFrame, *, ax: Any = None, points: pd.DataFrame | None = None,
                      measure: str = "needed_recall", title: str | None = None) -> tuple[Any, Any]:
    """Needed-later recall of each source's first *B* summary tokens, mean over compactions.

    ``curve``: :func:`pimem.drift.measures.recall_curve`. ``points``: optionally a per-compaction
    frame (``source``, ``written_tokens`` and the measure) marking each source at its own length.
    One axis for every source (tokens on a log scale, recall 0–1).
    """
    fig, ax = _figure(ax, (7, 4.2))
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    sources = list(dict.fromkeys(curve["source"])) if len(curve) else []
    if points is not None and len(points):
        sources += [s for s in dict.fromkeys(points["source"]) if s not in sources]
    for k, source in enumerate(sources):
        color = colors[k % len(colors)]
        part = curve[curve["source"] == source]
        if len(part):
            mean = part.groupby("budget")[measure].mean()
            ax.plot(mean.index, mean.values, marker=".", color=color, label=str(source))
        if points is not None and len(points):
            own = points[(points["source"] == source) & points[measure].notna()]
            if len(own):
                ax.scatter([own["written_tokens"].mean()], [own[measure].mean()], color=color, marker="D", s=40,
                           edgecolor="black", zorder=3, label=None if len(part) else str(source))
    ax.set_xscale("symlog", linthresh=10)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("summary tokens (first B tokens of each summary)")
    ax.set_ylabel(measure.replace("_", " "))
    ax.set_title(title or "Recall against summary length")
    if sources:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no summaries", transform=ax.transAxes, ha="center")
    ax.grid(alpha=0.3)
    return fig, ax


plot_measures = display_safe(plot_measures)
plot_recall_curve = display_safe(plot_recall_curve)
