"""Figures of measures across summary sources: one scale for every source."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pimem.drift import compare_sources  # noqa: E402
from pimem.summarizers.baselines import baseline_summarizers  # noqa: E402
from pimem.viz import plot_measures, plot_recall_curve  # noqa: E402
from tests.support.drift_chain import build_needed_chain  # noqa: E402


def test_measures_table_and_recall_curve_share_one_scale() -> None:
    chain, _ = build_needed_chain()
    comparison = compare_sources(chain.entries, {"recorded": "recorded", **baseline_summarizers(budget=None)})
    fig, ax = plot_measures(comparison.table)
    image = ax.get_images()[0]
    assert image.get_clim() == (0.0, 1.0)
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == comparison.sources
    texts = {t.get_text() for t in ax.texts}
    assert "1.00" in texts and "0.00" in texts
    plt.close(fig)
    fig, ax = plot_recall_curve(comparison.curve([1, 20, 200]), points=comparison.per_compaction)
    assert [line.get_label() for line in ax.get_lines()] == comparison.sources
    assert ax.get_ylim() == (-0.02, 1.02)
    assert len(ax.collections) == len(comparison.sources)  # one own-length marker per source
    plt.close(fig)


def test_empty_inputs_draw_a_note() -> None:
    fig, ax = plot_recall_curve(pd.DataFrame(columns=["source", "compaction", "budget", "tokens", "needed_recall"]))
    assert any("no summaries" in t.get_text() for t in ax.texts)
    plt.close(fig)
    table = pd.DataFrame({"a": [math.nan]}, index=["needed_recall"])
    fig, ax = plot_measures(table)
    assert [t.get_text() for t in ax.texts] == ["–"]
    plt.close(fig)
