"""plot_rework: one panel per agent, with its counts, after compaction beside the matched controls."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from pimem.drift.rework import TABLE_COLUMNS  # noqa: E402
from pimem.viz import plot_rework  # noqa: E402
from tests.support.layout import assert_readable  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_figures")


def _table() -> pd.DataFrame:
    rows = []
    for agent, n, sessions, interval in (("claude-code", 70, 53, True), ("pi", 3, 2, False)):
        for k, signal in enumerate(["rework", "rereads", "reverts", "steps_to_progress", "seconds_to_progress"]):
            after, control = 3.0 + k, 2.0 + k
            row = {"agent": agent, "signal": signal, "n_compactions": n, "n_sessions": sessions, "note": "",
                   "statistic": "median" if signal == "seconds_to_progress" else "mean",
                   "after": after, "control": control, "excess": after - control}
            for name in ("after", "control", "excess"):
                row[f"{name}_low"] = row[name] - 0.5 if interval else math.nan
                row[f"{name}_high"] = row[name] + 0.5 if interval else math.nan
            rows.append(row)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def test_one_panel_per_agent_with_its_compactions_and_sessions() -> None:
    fig, axes = plot_rework(_table())
    assert len(axes) == 2
    assert "70 compactions · 53 sessions" in axes[0].get_title()
    assert "3 compactions · 2 sessions" in axes[1].get_title() and "no interval" in axes[1].get_title()
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    assert labels == ["rework (sum)", "re-reads", "reverts", "calls to progress"]  # medians are on other scales
    # each row: a filled marker after, an open one at the controls; intervals only where the table has them
    markers = [line for line in axes[0].get_lines() if line.get_marker() == "o"]
    assert len(markers) == 8 and {m.get_markerfacecolor() for m in markers} >= {"white"}
    segments = [line for line in axes[0].get_lines() if line.get_marker() in ("None", "", None)]
    assert len(segments) == 8 and not [line for line in axes[1].get_lines() if line.get_marker() in ("None", "")]
    assert_readable(fig)


def test_an_empty_table_says_there_is_nothing_to_show() -> None:
    fig, axes = plot_rework(pd.DataFrame(columns=TABLE_COLUMNS))
    assert "no compaction measured" in " ".join(t.get_text() for t in axes[0].texts)
    assert_readable(fig)
