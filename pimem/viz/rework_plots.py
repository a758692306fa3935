"""What agents did after real compactions, against matched controls (:mod:`pimem.drift.rework`), at a glance.

One panel per agent, one row per signal: the mean after compaction (filled) and at the matched controls of
the same sessions (open), each with its session-clustered interval where one is supported. The panel's
title gives the number of compactions and sessions behind it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

from pimem.viz.figures import display_safe

__all__ = ["REWORK_PLOT_SIGNALS", "plot_rework"]

REWORK_PLOT_SIGNALS: tuple[str, ...] = ("rework", "rereads", "reruns", "reverts", "repeated_instructions",
                                        "repeated_questions", "returned_to_earlier_task", "steps_to_progress")
_AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "pi": "Pi", "all": "all agents"}
_LABELS = {"steps_to_progress": "calls to progress", "returned_to_earlier_task": "back to a finished task",
           "repeated_instructions": "instruction repeated", "repeated_questions": "question repeated",
           "rework": "rework (sum)", "rereads": "re-reads", "reruns": "re-runs", "reverts": "reverts"}


def _interval(row: pd.Series, name: str) -> tuple[float, float] | None:
    low, high = row.get(f"{name}_low"), row.get(f"{name}_high")
    if low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return None
    return float(low), float(high)


def plot_rework(table: pd.DataFrame, *, signals: Sequence[str] | None = None, axes: Any = None,
                title: str | None = None) -> tuple[Any, Any]:
    """Signals after compaction (●) against matched controls (○), one panel per agent.

    ``table``: :func:`pimem.drift.rework.rework_table` (means; the median rows of seconds and tokens are
    left out, being on other scales). ``signals``: the rows (default :data:`REWORK_PLOT_SIGNALS` present).
    ``axes``: one axes per agent of the table, in its order. Returns ``(fig, axes)``.
    """
    import matplotlib.pyplot as plt

    data = table[table["statistic"] == "mean"] if len(table) and "statistic" in table.columns else table
    agents = list(dict.fromkeys(data["agent"])) if len(data) else []
    wanted = [s for s in (signals or REWORK_PLOT_SIGNALS) if len(data) and s in set(data["signal"])]
    own = axes is None
    if own:
        fig, axes = plt.subplots(1, max(1, len(agents)), figsize=(2.2 + 2.9 * max(1, len(agents)),
                                                                    1.6 + 0.42 * max(1, len(wanted))),
                                 sharey=True, squeeze=False, constrained_layout=True)
        axes = list(axes[0])
    else:
        axes = list(axes) if isinstance(axes, (list, tuple)) else [axes]
        fig = axes[0].figure
    if not agents or not wanted:
        axes[0].text(0.5, 0.5, "no compaction measured against a control", transform=axes[0].transAxes,
                     ha="center", va="center")
        axes[0].set_yticks([])
        axes[0].set_xticks([])
        return fig, axes
    rows = list(range(len(wanted)))
    for ax, agent in zip(axes, agents):
        part = data[data["agent"] == agent].set_index("signal")
        n = part["n_compactions"].max() if len(part) else 0
        sessions = part["n_sessions"].max() if len(part) else 0
        without, right = False, 0.0
        for y, signal in zip(rows, wanted):
            if signal not in part.index:
                continue
            row = part.loc[signal]
            for name, offset, style in (("after", -0.15, dict(color="tab:red", marker="o")),
                                        ("control", 0.15, dict(color="tab:gray", marker="o", markerfacecolor="white"))):
                value = float(row[name])
                if math.isnan(value):
                    continue
                band = _interval(row, name)
                if band is None:
                    without = True
                else:
                    ax.plot(band, [y + offset] * 2, color=style["color"], linewidth=1.5, alpha=0.8)
                right = max(right, value, band[1] if band else value)
                ax.plot([value], [y + offset], linestyle="none", markersize=6, **style)
        note = "\nno interval: too few sessions" if without else ""
        ax.set_title(f"{_AGENT_NAMES.get(agent, agent)}\n{n:,} compactions · {sessions:,} sessions{note}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        span = max(1.0, right * 1.08)
        ax.set_xlim(-0.03 * span, span)
        ax.set_xlabel("mean per compaction", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_yticks(rows, [_LABELS.get(s, s) for s in wanted], fontsize=8)
    axes[0].set_ylim(len(wanted) - 0.5, -0.5)
    handles = [plt.Line2D([], [], color="tab:red", marker="o", linestyle="none", label="after compaction"),
               plt.Line2D([], [], color="tab:gray", marker="o", markerfacecolor="white", linestyle="none",
                          label="matched controls")]
    if own:
        fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
        fig.suptitle(title or "After compaction against matched points of the same sessions", fontsize=10)
    else:
        axes[-1].legend(handles=handles, loc="lower right", fontsize=7)
        if title:
            axes[0].set_title(title)
    return fig, axes


plot_rework = display_safe(plot_rework)
