"""Figures (matplotlib) of sessions, replays, sweeps and drift reports, and the tables behind them.

Each ``plot_*`` function accepts ``ax=`` and returns ``(fig, ax)`` or ``(fig, axes)``.
"""

from pimem.viz.data import (
    STATUSES,
    compaction_effects,
    cut_points_table,
    estimate_vs_usage_table,
    projection_table,
    tree_layout,
)
from pimem.viz.figures import (
    DENSE_CALLS,
    DENSE_COMPACTIONS,
    KIND_COLORS,
    RUG_COMPACTIONS,
    STATUS_COLORS,
    plot_compared,
    plot_context_over_time,
    plot_context_projection,
    plot_cut_points,
    plot_drift,
    plot_estimate_vs_usage,
    plot_retention_by_age,
    plot_section_similarity,
    plot_session_tree,
    plot_summary_sizes,
    plot_sweep_heatmap,
    plot_sweep_heatmaps,
    plot_labelled_scatter,
)
from pimem.viz.measure_plots import plot_measures, plot_recall_curve
from pimem.viz.rework_plots import plot_rework

__all__ = [
    "DENSE_CALLS",
    "DENSE_COMPACTIONS",
    "KIND_COLORS",
    "RUG_COMPACTIONS",
    "STATUSES",
    "STATUS_COLORS",
    "compaction_effects",
    "cut_points_table",
    "estimate_vs_usage_table",
    "plot_compared",
    "plot_context_over_time",
    "plot_context_projection",
    "plot_cut_points",
    "plot_drift",
    "plot_estimate_vs_usage",
    "plot_measures",
    "plot_recall_curve",
    "plot_retention_by_age",
    "plot_rework",
    "plot_section_similarity",
    "plot_session_tree",
    "plot_summary_sizes",
    "plot_sweep_heatmap",
    "plot_sweep_heatmaps",
    "plot_labelled_scatter",
    "projection_table",
    "tree_layout",
]
