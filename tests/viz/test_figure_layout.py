"""The visual regression check: every figure function of pimem.viz, drawn on empty, small, real and
very large inputs, has a readable layout.

Readable is measured on the renderer, not on pixels (see tests/layout.py): the figure has a
bounded size and is not mostly blank, no plotting area collapsed or left the figure, no text
or legend reaches outside the figure, and no two pieces of text (tick labels included) or
legends overlap. Inputs: nothing to show (no compactions, a one-entry session), the bundled
samples (several compactions, a branched session), the real Pi sessions (1,000 entries, a
replay with about 200 compactions, a drift report of about 20) and very large data built
directly (100,000 entries; 50,000 calls and 500 compactions; a 14 × 14 sweep grid).

One test per input size builds its inputs once and draws every figure on them, so that under
xdist the sizes run side by side instead of every worker building every input.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from pimem import viz  # noqa: E402
from pimem.replays.engine import replay  # noqa: E402
from pimem.core.compaction.compaction import CompactionSettings  # noqa: E402
from pimem.core.session_manager import Session, load_session  # noqa: E402
from pimem.drift import drift_report, section_similarity  # noqa: E402
from pimem.viz.figures import LabelSet  # noqa: E402
from tests.support.big_inputs import big_replay, big_report, big_session, big_sweep  # noqa: E402
from tests.support.layout import assert_readable, drawn_items, layout_problems, overlapping_pairs  # noqa: E402


@dataclass
class Inputs:
    session: Session
    branched: Session
    replay: Any
    effects: pd.DataFrame | None
    report: pd.DataFrame
    other_report: pd.DataFrame
    sweep: pd.DataFrame
    keep_values: list[int]
    measures: pd.DataFrame | None = None  # a Comparison's measures × sources table
    curve: pd.DataFrame | None = None  # its recall-against-tokens curve
    rework: pd.DataFrame | None = None  # a rework table (pimem.drift.rework.rework_table)


def _comparison(session: Session, recorded: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The measures table and recall curve of ``session``'s summaries beside the report's sources."""
    from pimem.drift.measures import compare_sources
    from pimem.viz.report import default_sources

    comparison = compare_sources(session, {**({"recorded": "recorded"} if recorded else {}), **default_sources()})
    return comparison.table, comparison.curve()


def _big_comparison(sources: int = 12, budgets: int = 40, compactions: int = 500) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A measures table and a recall curve as a comparison of many sources over a long chain gives them."""
    import numpy as np

    from pimem.viz.measure_plots import SHARE_MEASURES

    rng = np.random.default_rng(5)
    names = [f"summarizer-{i:02d}" for i in range(sources)]
    table = pd.DataFrame(rng.random((len(SHARE_MEASURES), sources)), index=list(SHARE_MEASURES), columns=names)
    table.loc["written_tokens"] = rng.integers(50, 5000, sources)
    grid = pd.MultiIndex.from_product([names, range(compactions), np.geomspace(8, 6000, budgets).astype(int)],
                                      names=["source", "compaction", "budget"]).to_frame(index=False)
    grid["tokens"] = grid["budget"]
    grid["needed_recall"] = np.minimum(1, rng.random(len(grid)) * np.log1p(grid["budget"]) / 8)
    return table, grid


pytestmark = pytest.mark.usefixtures("close_figures")


def _sweep(sessions: list[Session], reserve: list[int], keep: list[int]) -> pd.DataFrame:
    from pimem.experiments.sweep import sweep

    return sweep(sessions, {"reserve_tokens": reserve, "keep_recent_tokens": keep, "context_window": [16000],
                            "token_source": ["estimate"]}, workers=1, progress=False)


def _empty(ventas: Session) -> Inputs:
    one = Session.new("/tmp/p", session_id="one", timestamp="2026-01-01T00:00:00.000Z")
    one.append_message({"role": "user", "content": "hello", "timestamp": 1}, timestamp="2026-01-01T00:00:01.000Z")
    no_compaction = replay(ventas, CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
                           context_window=1_000_000)
    assert len(no_compaction.compactions) == 0
    empty = drift_report(ventas)
    sweep = pd.DataFrame({"reserve_tokens": [1000], "keep_recent_tokens": [500], "error": [None],
                          "compactions": [0.0], "summarization_request_tokens": [0.0]})
    return Inputs(one, one, no_compaction, None, empty, empty, sweep, [1000], *_comparison(ventas))


def _small(auth: Session, ventas: Session) -> Inputs:
    result = replay(auth, CompactionSettings(reserve_tokens=4000, keep_recent_tokens=4000), context_window=16000)
    recorded = drift_report(auth)
    assert len(result.compactions) >= 3 and len(recorded) == 3
    return Inputs(auth, ventas, result, None, drift_report(result), recorded,
                  _sweep([auth, ventas], [2000, 4000], [2000, 8000]), [500 * k for k in range(1, 41)],
                  *_comparison(auth))


def _real(before: Session, large: Session) -> Inputs:
    """Replays and reports of the real sessions (the session figures are checked on their own)."""
    dense = replay(large, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), context_window=8000,
                   token_source="estimate")
    assert len(dense.compactions) > 60  # a failed turn ends its recorded run, so fewer than one per turn
    study = replay(large, CompactionSettings(reserve_tokens=4096, keep_recent_tokens=4000), context_window=16000)
    report = drift_report(study)
    assert len(report) > 15
    return Inputs(before, large, dense, None, report, drift_report(before), _sweep([large], [2048, 4096], [2000, 8000]),
                  [1000 * k for k in range(1, 41)], *_comparison(before))


@pytest.fixture(scope="module")
def small(auth, ventas) -> Inputs:
    return _small(auth, ventas)


@pytest.fixture(scope="module")
def large() -> Inputs:
    result, effects = big_replay()
    return Inputs(Session.new("/p"), Session.new("/p"), result, effects, big_report(),
                  big_report(compactions=120, seed=4), big_sweep(), [], *_big_comparison(), _big_rework_table())


def _rework_table(data: Inputs) -> pd.DataFrame:
    """The inputs' rework table, or that of their sessions (compactions too close to the start of the
    samples to be measured: an empty figure)."""
    from pimem.drift.rework import rework_corpus, rework_table

    if data.rework is not None:
        return data.rework
    return rework_table(rework_corpus([data.session, data.branched]))


def _big_rework_table(agents: int = 5, seed: int = 8) -> pd.DataFrame:
    """A rework table of more agents than there are, every signal, values and intervals over wide ranges."""
    import numpy as np

    from pimem.drift.rework import COUNT_SIGNALS, PROGRESS_SIGNALS, TABLE_COLUMNS

    rng = np.random.default_rng(seed)
    rows = []
    for a in range(agents):
        for s in (*COUNT_SIGNALS, "returned_to_earlier_task", "rework", *PROGRESS_SIGNALS):
            row = {"agent": f"agent-with-a-long-name-{a}", "signal": s, "n_compactions": int(rng.integers(1, 20_000)),
                   "n_sessions": int(rng.integers(1, 5_000)), "note": "",
                   "statistic": "median" if s in ("seconds_to_progress", "tokens_to_progress") else "mean"}
            for name in ("after", "control", "excess"):
                value = float(rng.random() * 10 ** rng.integers(0, 4))
                row.update({name: value, f"{name}_low": value * 0.7 if a % 2 else math.nan, f"{name}_high": value * 1.4})
            rows.append(row)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


FIGURES: dict[str, Callable[[Inputs], Any]] = {
    "plot_context_over_time": lambda d: viz.plot_context_over_time(d.replay, effects=d.effects),
    "plot_session_tree": lambda d: viz.plot_session_tree(d.branched),
    "plot_context_projection": lambda d: viz.plot_context_projection(d.session),
    "plot_cut_points": lambda d: viz.plot_cut_points(d.session, d.keep_values),
    "plot_estimate_vs_usage": lambda d: viz.plot_estimate_vs_usage(d.session),
    "plot_sweep_heatmap": lambda d: viz.plot_sweep_heatmap(d.sweep, "summarization_request_tokens"),
    "plot_sweep_heatmaps": lambda d: viz.plot_sweep_heatmaps(d.sweep),
    "plot_retention_by_age": lambda d: viz.plot_retention_by_age(d.report),
    "plot_retention_by_age(by_kind)": lambda d: viz.plot_retention_by_age(d.report, by_kind=True),
    "plot_section_similarity": lambda d: viz.plot_section_similarity(d.report),
    "plot_summary_sizes": lambda d: viz.plot_summary_sizes(d.report),
    "plot_drift": lambda d: viz.plot_drift(d.report, title="drift"),
    "plot_drift(stacked)": lambda d: viz.plot_drift(d.report, arrangement="stacked"),
    "plot_compared": lambda d: viz.plot_compared(viz.plot_summary_sizes, {"replayed": d.report,
                                                                          "recorded": d.other_report}),
    "plot_measures": lambda d: viz.plot_measures(d.measures),
    "plot_recall_curve": lambda d: viz.plot_recall_curve(d.curve),
    "plot_rework": lambda d: viz.plot_rework(_rework_table(d)),
    "plot_labelled_scatter": lambda d: viz.plot_labelled_scatter(
        d.sweep.head(12).reset_index(drop=True), "reserve_tokens", "summarization_request_tokens"),
}
SESSION_FIGURES = ["plot_session_tree", "plot_context_projection", "plot_cut_points", "plot_estimate_vs_usage"]


def _check(data: Inputs, figures: list[str]) -> None:
    """Draw each figure and fail with the layout problems of all of them, by figure."""
    failures = []
    for name in figures:
        fig, _ = FIGURES[name](data)
        problems = layout_problems(fig)
        plt.close(fig)
        if problems:
            failures.append(f"{name}: " + "; ".join(problems[:8]) + (" …" if len(problems) > 8 else ""))
    assert failures == []


def test_every_figure_function_is_checked() -> None:
    functions = {name for name in viz.__all__ if name.startswith("plot_") and callable(getattr(viz, name))}
    assert functions == {name.split("(")[0] for name in FIGURES}
    for name in functions:
        params = inspect.signature(getattr(viz, name)).parameters
        assert "ax" in params or "axes" in params or name == "plot_compared", name


def test_layout_with_nothing_to_show(ventas) -> None:
    _check(_empty(ventas), list(FIGURES))


def test_layout_on_the_samples(small: Inputs) -> None:
    _check(small, list(FIGURES))


def test_layout_on_the_real_sessions(before_compaction, large_session) -> None:
    _check(Inputs(before_compaction, large_session, None, None, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                  [1000 * k for k in range(1, 41)]), SESSION_FIGURES)


@pytest.mark.slow
def test_layout_on_real_replays_and_reports(before_compaction, large_session) -> None:
    _check(_real(before_compaction, large_session), [name for name in FIGURES if name not in SESSION_FIGURES])


@pytest.mark.slow
def test_layout_on_a_session_of_100k_entries() -> None:
    session = big_session()
    assert len(session.entries) == 100_000 and len(session.leaves()) > 100
    _check(Inputs(session, session, None, None, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [2000, 8000, 20000]),
           SESSION_FIGURES)


@pytest.mark.slow
def test_layout_with_500_compactions_and_a_large_grid(large: Inputs) -> None:
    assert len(large.effects) == 500 and len(large.report) == 500
    _check(large, [name for name in FIGURES if name not in SESSION_FIGURES])


# --------------------------------------------------------------------------- dense data, drawn in aggregate


def _label_sets(ax) -> list[Any]:
    return [c for c in ax.get_children() if isinstance(c, LabelSet)]


def test_dense_compactions_are_a_rug_with_a_few_labels(large: Inputs) -> None:
    from matplotlib.collections import LineCollection

    fig, ax = viz.plot_context_over_time(large.replay, effects=large.effects, max_labels=10)
    fig.canvas.draw()
    assert [c for c in ax.texts if type(c).__name__ == "Annotation"] == []  # no arrow per compaction
    rug = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(rug) == 1 and len(rug[0].get_segments()) == 500
    assert {tuple(seg[:, 1]) for seg in rug[0].get_segments()} == {(0.0, 0.045)}  # ticks along the bottom
    band = [c for c in ax.collections if str(c.get_label()).startswith("context per call: range")]
    assert len(band) == 1 and not [c for c in ax.collections if c.get_label() == "compaction check"]
    median = [ln for ln in ax.get_lines() if ln.get_label().startswith("median over")]
    assert len(median) == 1 and len(median[0].get_xdata()) <= 800  # about one point per pixel, not 50,000
    (labels,) = _label_sets(ax)
    assert len(labels.texts) == 10 and 1 <= len(labels.shown) <= 10
    assert labels.shown[0].get_text() == f"−{large.effects['freed'].max():,.0f}"  # the largest comes first


def test_labels_thin_again_when_the_figure_shrinks(large: Inputs) -> None:
    fig, ax = viz.plot_retention_by_age(large.report, max_points=60)
    fig.canvas.draw()
    (labels,) = _label_sets(ax)
    wide = len(labels.shown)
    fig.set_size_inches(4, 3)
    assert_readable(fig, min_axes_share=0.1)
    narrow = len(labels.shown)
    assert 0 < narrow < wide <= 60


def test_dense_drift_panels_aggregate(large: Inputs) -> None:
    from matplotlib.image import AxesImage

    fig, (ages, sections, sizes) = viz.plot_drift(large.report)
    assert "pooled by" in ages.get_xlabel()
    assert len(ages.get_lines()[0].get_xdata()) <= 30
    (image,) = [c for c in sections.get_children() if isinstance(c, AxesImage)]
    assert image.get_array().shape == (large.report.attrs["sections"]["section"].nunique(), 500)
    assert len(sizes.patches) == 0  # no bar per compaction: an area and a line
    assert len(small_report := drift_report_of_three()) == 3
    fig, (_, sections, sizes) = viz.plot_drift(small_report)
    assert sections.get_lines() and len(sizes.patches) == 6


def drift_report_of_three() -> pd.DataFrame:
    from tests.conftest import SAMPLES_DIR

    return drift_report(load_session(SAMPLES_DIR / "auth-login-bug.jsonl"))


def test_section_similarity_heatmap_leaves_missing_values_grey(small: Inputs) -> None:
    from matplotlib.image import AxesImage

    fig, ax = viz.plot_section_similarity(small.report, dense=True)
    (image,) = [c for c in ax.get_children() if isinstance(c, AxesImage)]
    values = image.get_array()
    assert values.mask[:, 0].all()  # the first compaction has no previous summary
    s = section_similarity(small.report)
    goal = s[(s["section"] == "goal") & (s["compaction"] == 1)]["cosine_prev"].iloc[0]
    row = list(dict.fromkeys(s.loc[s["cosine_prev"].notna(), "section"])).index("goal")
    assert values[row, 1] == pytest.approx(goal)


def test_heatmap_cells_are_annotated_only_when_they_fit(small: Inputs, large: Inputs) -> None:
    fig, ax = viz.plot_sweep_heatmap(small.sweep, "compactions")
    fig.canvas.draw()
    (cells,) = _label_sets(ax)
    assert len(cells.shown) == 4
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    viz.plot_sweep_heatmap(large.sweep, "summarization_request_tokens", ax=ax)
    assert_readable(fig)
    (cells,) = _label_sets(ax)
    assert len(cells.texts) == 14 * 14 and cells.shown == []  # all or none
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert 1 < len(shown) < 14  # tick labels thinned to what fits


def test_colorbar_has_no_offset_text(large: Inputs) -> None:
    fig, ax = viz.plot_sweep_heatmap(large.sweep, "summarization_request_tokens")
    fig.canvas.draw()
    cbar = fig.axes[-1]
    assert cbar.yaxis.get_offset_text().get_text() == ""
    labels = [t.get_text() for t in cbar.get_yticklabels() if t.get_text()]
    assert labels and all(label.endswith("M") for label in labels if label != "0")


def test_projection_ticks_are_integers(small: Inputs) -> None:
    fig, ax = viz.plot_context_projection(small.branched)
    fig.canvas.draw()
    bottom, top = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if top <= t <= bottom]
    assert len(ticks) >= 3 and all(float(t).is_integer() for t in ticks)


def test_compared_panels_share_their_axes(small: Inputs) -> None:
    fig, results = viz.plot_compared(viz.plot_summary_sizes, {"replayed": small.report, "recorded": small.other_report})
    (a1, r1), (a2, r2) = results
    assert a1.get_ylim() == a2.get_ylim() and r1.get_ylim() == r2.get_ylim()
    assert a1.get_title() == "replayed" and a2.get_title() == "recorded"
    separate = [viz.plot_summary_sizes(r)[1][0].get_ylim() for r in (small.report, small.other_report)]
    assert separate[0] != separate[1]  # the reports differ, so sharing changed something
    with pytest.raises(ValueError, match="nothing to compare"):
        viz.plot_compared(viz.plot_summary_sizes, {})


# --------------------------------------------------------------------------- the checker itself


def _blank(figsize=(4, 3)):
    return plt.subplots(figsize=figsize, layout="constrained")


def test_checker_passes_a_plain_figure() -> None:
    fig, ax = _blank()
    ax.plot([0, 1, 2], [3, 1, 2], label="a line")
    ax.set_title("title")
    ax.legend()
    assert layout_problems(fig) == []


def test_checker_finds_overlapping_tick_labels() -> None:
    fig, ax = _blank()
    ax.plot(range(200), range(200))
    ax.set_xticks(range(0, 200, 2))
    problems = layout_problems(fig)
    assert any("x major tick" in p and "overlaps" in p for p in problems)


def test_checker_finds_overlapping_text_and_legend() -> None:
    fig, ax = _blank()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="upper left")
    ax.text(0.0, 1.0, "under the legend", transform=ax.transAxes, va="top")
    ax.text(0.5, 0.5, "one")
    ax.text(0.5, 0.5, "two")
    fig.canvas.draw()
    pairs = overlapping_pairs(drawn_items(fig, fig.canvas.get_renderer()))
    names = {(a.name.split(" in ")[0], b.name.split(" in ")[0]) for a, b in pairs}
    assert ("text 'one'", "text 'two'") in names
    assert any({a, b} == {"legend of 'axes'", "text 'under the legend'"} for a, b in names)


def test_checker_finds_text_outside_and_a_collapsed_figure() -> None:
    fig, ax = _blank()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 40, "far above")  # data coordinates, unclipped: what the old context figure did
    problems = layout_problems(fig)
    assert any("far above" in p and "outside the figure" in p for p in problems)
    assert any("collapsed" in p for p in problems)


def test_checker_bounds_the_figure_size() -> None:
    fig, ax = _blank(figsize=(30, 4))
    assert any("more than" in p for p in layout_problems(fig))
