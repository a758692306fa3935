"""Every figure of pimem.viz rendered on the bundled samples, checked for the data it draws."""

from __future__ import annotations

import random

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection, PolyCollection  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from pimem import viz  # noqa: E402
from pimem.replays.engine import replay  # noqa: E402
from pimem.core.compaction.compaction import (
    CompactionSettings,  # noqa: E402
    calculate_context_tokens,
    estimate_tokens,
    get_assistant_usage,
)
from pimem.core.session_manager import (  # noqa: E402  # noqa: E402
    Session,
    build_session_context,
    build_session_projection,
    load_session,
)
from pimem.drift import drift_report, retention_by_age, section_similarity  # noqa: E402

WINDOW, RESERVE, KEEP = 16000, 4000, 4000


pytestmark = pytest.mark.usefixtures("close_figures")


@pytest.fixture(scope="module")
def result(auth):
    return replay(auth, CompactionSettings(reserve_tokens=RESERVE, keep_recent_tokens=KEEP), context_window=WINDOW)


@pytest.fixture(scope="module")
def report(result):
    return drift_report(result)


def _line(ax, label_start: str):
    lines = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith(label_start)]
    assert lines, f"no line labelled {label_start!r}: {[ln.get_label() for ln in ax.get_lines()]}"
    return lines[0]


# --------------------------------------------------------------------------- context over time


def test_context_over_time_draws_calls_threshold_window_and_compactions(result):
    assert len(result.compactions) >= 2, "the fixture replay must compact"
    fig, ax = viz.plot_context_over_time(result)
    calls = _line(ax, "context per call")
    np.testing.assert_array_equal(calls.get_xdata(), result.calls["step"].to_numpy())
    np.testing.assert_allclose(calls.get_ydata(), result.calls["context_tokens"].to_numpy())
    assert set(_line(ax, "threshold").get_ydata()) == {WINDOW - RESERVE}
    assert set(_line(ax, "context window").get_ydata()) == {WINDOW}
    effects = viz.compaction_effects(result)
    assert len(effects) == len(result.compactions)
    arrows = [c for c in ax.get_children() if type(c).__name__ == "Annotation" and c.arrow_patch is not None]
    assert len(arrows) == len(effects) <= viz.DENSE_COMPACTIONS
    assert ax.get_ylim()[1] > effects["trigger_tokens"].max()  # no check of this replay is off the axis
    # each arrow goes down from the context the firing check read by what the compaction freed
    for arrow, (_, row) in zip(arrows, effects.iterrows()):
        assert arrow.xyann == (row["step"], row["trigger_tokens"])
        assert arrow.xy[1] == pytest.approx(max(row["trigger_tokens"] - row["freed"], 0))
    (labels,) = [c for c in ax.get_children() if isinstance(c, viz.figures.LabelSet)]
    freed = sorted(effects["freed"], reverse=True)[:10]
    assert [t.get_text() for t in labels.texts] == [f"−{f:,.0f}" for f in freed]  # largest first
    assert ax.get_xlabel().startswith("step") and ax.get_ylabel() == "context tokens"


def test_context_over_time_puts_far_outliers_on_the_edge(result):
    import copy

    odd = copy.copy(result)
    odd.events = result.events.copy()
    first_check = odd.events.index[odd.events["kind"] == "check"][0]
    odd.events.loc[first_check, "context_tokens"] = 50 * WINDOW
    fig, ax = viz.plot_context_over_time(odd)
    assert ax.get_ylim()[1] < 2 * WINDOW
    edge = [c for c in ax.collections if str(c.get_label()).startswith("check above the axis (1;")]
    assert len(edge) == 1 and len(edge[0].get_offsets()) == 1
    assert f"{50 * WINDOW:,.0f}" in edge[0].get_label()


def test_compaction_effects_are_chars4_differences(result):
    effects = viz.compaction_effects(result)
    s = result.session
    for _, row in effects.iterrows():
        entry = s.get_entry(row["compaction_id"])
        before = sum(estimate_tokens(m) for m in build_session_projection(s, entry["parentId"]).messages)
        after = sum(estimate_tokens(m) for m in build_session_projection(s, entry["id"]).messages)
        assert (row["est_before"], row["est_after"], row["freed"]) == (before, after, before - after)
        assert row["freed"] > 0


def test_context_over_time_draws_into_a_given_axes(result):
    fig, axes = plt.subplots(1, 2)
    got_fig, got_ax = viz.plot_context_over_time(result, ax=axes[1])
    assert got_fig is fig and got_ax is axes[1]
    assert axes[1].get_lines() and not axes[0].get_lines()


# --------------------------------------------------------------------------- tree


def _tree_edges(collection) -> set[tuple[tuple[float, float], tuple[float, float]]]:
    """The parent → child edges a tree line collection draws: straight runs cover one edge per
    depth step, a three-point connector one edge from its start to its end."""
    edges = set()
    for line in collection.get_segments():
        points = [tuple(map(float, p)) for p in line]
        if len(points) == 2 and points[0][1] == points[1][1]:
            (x0, lane), (x1, _) = points
            edges |= {((x, lane), (x + 1, lane)) for x in np.arange(x0, x1)}
        else:
            assert len(points) == 3 and points[0][0] == points[1][0] and points[1][1] == points[2][1]
            edges.add((points[0], points[2]))
    return edges


def _expected_tree_edges(layout: pd.DataFrame) -> tuple[set, set]:
    by_id = layout.set_index("entry_id")
    active, other = set(), set()
    for r in layout.itertuples():
        if r.parent_id is None or pd.isna(r.parent_id):
            continue
        p = by_id.loc[r.parent_id]
        edge = ((float(p["x"]), float(p["lane"])), (float(r.x), float(r.lane)))
        (active if p["active"] and r.active else other).add(edge)
    return active, other


def test_session_tree_of_a_branched_session(ventas):
    fig, ax = viz.plot_session_tree(ventas)
    layout = viz.tree_layout(ventas)
    assert len(layout) == len(ventas.entries)
    collections = [c for c in ax.collections if isinstance(c, LineCollection)]
    widths = sorted(c.get_linewidths()[0] for c in collections)
    active_lc = max(collections, key=lambda c: c.get_linewidths()[0])
    other_lc = min(collections, key=lambda c: c.get_linewidths()[0])
    active, other = _expected_tree_edges(layout)
    assert len(active) == len(ventas.get_branch()) - 1
    assert len(other) == len(ventas.entries) - len(ventas.get_branch())
    assert _tree_edges(active_lc) == active and _tree_edges(other_lc) == other
    assert len(active_lc.get_segments()) == 1  # the active path is one straight line
    assert widths[0] < widths[-1]
    points = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection)
                 and c.get_label() != "leaf")
    assert points == len(ventas.entries)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "branch_summary" in legend and "active path" in legend
    assert ax.get_title() == f"Session tree — {len(ventas.entries)} entries, 3 leaves"
    # three leaves: the active chain and two side branches that do not overlap share lane 1
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["lane 0", "lane 1"]
    (labels,) = [c for c in ax.get_children() if isinstance(c, viz.figures.LabelSet)]
    assert "per-file ✔" in [t.get_text() for t in labels.shown]


def test_tree_layout_keeps_chains_in_lanes_without_overlap(ventas):
    layout = viz.tree_layout(ventas)
    assert set(layout.loc[layout["active"], "lane"]) == {0}
    by_id = layout.set_index("entry_id")
    for _, r in layout.iterrows():
        if pd.notna(r["parent_id"]):
            assert r["x"] == by_id.loc[r["parent_id"], "x"] + 1
    spans = layout.groupby("chain").agg(lane=("lane", "first"), lo=("x", "min"), hi=("x", "max"))
    for lane, g in spans.groupby("lane"):
        g = g.sort_values("lo")
        assert (g["lo"].to_numpy()[1:] > g["hi"].to_numpy()[:-1]).all(), f"chains overlap in lane {lane}"


def _big_branched_session(n: int = 1000, seed: int = 7) -> Session:
    rng = random.Random(seed)
    s = Session.new("/tmp/project", session_id="big", timestamp="2026-01-01T00:00:00.000Z", rng=random.Random(seed))
    ids: list[str] = []
    for i in range(n):
        if ids and rng.random() < 0.03:
            s.branch(rng.choice(ids))
        role = "user" if i % 2 == 0 else "assistant"
        content = f"message {i}" if role == "user" else [{"type": "text", "text": f"answer {i}"}]
        msg = {"role": role, "content": content, "timestamp": 1_700_000_000_000 + i}
        if role == "assistant":
            msg.update(api="x", provider="p", model="m", stopReason="stop",
                       usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
        ids.append(s.append_message(msg, timestamp=f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000Z")["id"])
    return s


def test_session_tree_copes_with_a_thousand_entries():
    s = _big_branched_session()
    assert len(s.entries) == 1000 and len(s.leaves()) > 10
    fig, ax = viz.plot_session_tree(s)
    layout = viz.tree_layout(s)
    assert len(layout) == 1000
    n_lanes = int(layout["lane"].max()) + 1
    assert n_lanes < len(s.leaves()) + 1  # packing reuses lanes
    fig.canvas.draw()
    assert 1 < len(ax.get_yticks()) <= n_lanes
    collections = [c for c in ax.collections if isinstance(c, LineCollection)]
    active_lc = max(collections, key=lambda c: c.get_linewidths()[0])
    other_lc = min(collections, key=lambda c: c.get_linewidths()[0])
    active, other = _expected_tree_edges(layout)
    assert _tree_edges(active_lc) == active and len(active) == len(s.get_branch()) - 1
    assert _tree_edges(other_lc) == other
    assert len(active_lc.get_segments()) + len(other_lc.get_segments()) < len(s.entries) / 5  # merged runs


# --------------------------------------------------------------------------- projection


def test_projection_table_statuses(auth):
    table = viz.projection_table(auth)
    path = auth.get_branch()
    assert list(table["entry_id"]) == [e["id"] for e in path]
    comp = [i for i, e in enumerate(path) if e["type"] == "compaction"][-1]
    first_kept = next(i for i, e in enumerate(path) if e["id"] == path[comp]["firstKeptEntryId"])
    st = table["status"].astype(str)
    assert st[comp] == "summary"
    assert set(st[:first_kept]) <= {"summarized", "not in context"}
    assert set(st[first_kept:comp]) <= {"kept", "not in context"}
    assert set(st[comp + 1:]) <= {"after compaction", "not in context"}
    in_ctx = int(table.loc[table["in_context"], "tokens"].sum())
    assert in_ctx == sum(estimate_tokens(m) for m in build_session_context(auth).messages)


def _bars(ax) -> list[tuple[float, float, float, str]]:
    """(first row, last row, width, colour) of each bar of the projection figure, by first row."""
    (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    out = []
    for path, color in zip(bars.get_paths(), bars.get_facecolors()):
        v = path.vertices[:4]
        out.append((v[:, 1].min() + 0.425, v[:, 1].max() - 0.425, v[:, 0].max(), matplotlib.colors.to_hex(color)))
    return sorted(out)


def test_context_projection_bars(auth):
    fig, ax = viz.plot_context_projection(auth)
    table = viz.projection_table(auth)
    bars = _bars(ax)
    assert len(bars) == len(table)  # one bar per entry
    for (lo, hi, width, color), (_, row) in zip(bars, table.iterrows()):
        assert lo == pytest.approx(row["position"]) and hi == pytest.approx(row["position"])
        assert color == viz.STATUS_COLORS[str(row["status"])]
        if row["status"] != "not in context":
            assert width == row["tokens"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("summarized") for t in legend) and any(t.startswith("kept") for t in legend)


def test_context_projection_groups_long_paths(auth):
    table = viz.projection_table(auth)
    fig, ax = viz.plot_context_projection(auth, max_bars=40)
    per_bar = -(-len(table) // 40)
    bars = _bars(ax)
    assert len(bars) < len(table) and f"largest of {per_bar} entries" in ax.get_xlabel()
    for lo, hi, width, color in bars:
        rows = table[(table["position"] >= lo - 1e-9) & (table["position"] <= hi + 1e-9)]
        assert lo // per_bar == hi // per_bar  # a bar never crosses its group
        same = rows[[viz.STATUS_COLORS[str(s)] == color for s in rows["status"]]]
        if str(same["status"].iloc[0]) != "not in context":
            assert width == same["tokens"].max()
    covered = {int(p) for lo, hi, _, _ in bars for p in range(int(lo), int(hi) + 1)}
    assert covered == set(table["position"])


def test_projection_without_compaction_is_in_context(ventas):
    table = viz.projection_table(ventas)
    assert set(table["status"].astype(str)) == {"in context", "not in context"}
    assert (table.loc[table["type"] == "label", "status"] == "not in context").all()


# --------------------------------------------------------------------------- cut points


def test_cut_points_move_back_as_keep_grows(auth):
    keeps = list(range(1000, 22001, 1000))
    table = viz.cut_points_table(auth, keeps)
    assert (np.diff(table["first_kept_index"]) <= 0).all()
    assert (np.diff(table["tokens_kept"]) >= 0).all()
    assert table["split_turn"].any()
    path_ids = [e["id"] for e in auth.get_branch()]
    for _, r in table.iterrows():
        assert path_ids[r["first_kept_index"]] == r["first_kept_entry_id"]
    fig, (ax, ax2) = viz.plot_cut_points(auth, keeps)
    step = _line(ax, "first kept entry")
    np.testing.assert_array_equal(step.get_ydata(), table["first_kept_index"].to_numpy())
    np.testing.assert_array_equal(_line(ax2, "tokens kept").get_ydata(), table["tokens_kept"].to_numpy())
    assert ax.get_xlabel() == "keepRecentTokens"


# --------------------------------------------------------------------------- estimate vs usage


def test_estimate_vs_usage(auth):
    table = viz.estimate_vs_usage_table(auth)
    path = auth.get_branch()
    with_usage = [e for e in path if e["type"] == "message" and e["message"]["role"] == "assistant"
                  and get_assistant_usage(e["message"]) is not None]
    assert list(table["entry_id"]) == [e["id"] for e in with_usage]
    first = with_usage[0]
    upto = path[: path.index(first) + 1]
    assert table["estimated_tokens"].iloc[0] == sum(estimate_tokens(m) for m in build_session_context(upto).messages)
    assert table["recorded_tokens"].iloc[0] == calculate_context_tokens(first["message"]["usage"])
    np.testing.assert_allclose(table["ratio"], table["recorded_tokens"] / table["estimated_tokens"])
    fig, (ax, ax2) = viz.plot_estimate_vs_usage(auth)
    np.testing.assert_array_equal(_line(ax, "recorded").get_ydata(), table["recorded_tokens"].to_numpy())
    np.testing.assert_array_equal(_line(ax, "Pi estimate").get_ydata(), table["estimated_tokens"].to_numpy())
    np.testing.assert_allclose(_line(ax2, "median").get_ydata(), float(np.median(table["ratio"])))


# --------------------------------------------------------------------------- sweeps


@pytest.fixture(scope="module")
def sweep_frame() -> pd.DataFrame:
    rows = []
    for s in ("a", "b"):
        for r in (1000, 2000):
            for k in (500, 1000, 4000):
                rows.append({"session": s, "reserve_tokens": r, "keep_recent_tokens": k, "error": None,
                             "compactions": r // 1000 + k // 500 + (s == "b"), "peak_context_tokens": 10.0 * k})
    rows.append({"session": "c", "reserve_tokens": 1000, "keep_recent_tokens": 500, "error": "boom",
                 "compactions": 999, "peak_context_tokens": 0.0})
    return pd.DataFrame(rows)


def test_sweep_heatmap_shows_the_mean_over_sessions(sweep_frame):
    fig, ax = viz.plot_sweep_heatmap(sweep_frame, "compactions")
    image = next(c for c in ax.get_children() if isinstance(c, AxesImage))
    expected = np.array([[r // 1000 + k // 500 + 0.5 for k in (500, 1000, 4000)] for r in (1000, 2000)])
    np.testing.assert_allclose(image.get_array(), expected)  # the failed run is left out
    assert [t.get_text() for t in ax.get_xticklabels()] == ["500", "1,000", "4,000"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1,000", "2,000"]
    (cells,) = [c for c in ax.get_children() if isinstance(c, viz.figures.LabelSet)]
    assert len(cells.texts) == 6 and "2.5" in [t.get_text() for t in cells.texts]
    assert ax.get_xlabel() == "keep_recent_tokens" and ax.get_ylabel() == "reserve_tokens"
    with pytest.raises(KeyError, match="nope"):
        viz.plot_sweep_heatmap(sweep_frame, "nope")


def test_sweep_heatmaps_one_panel_per_metric(sweep_frame):
    fig, axes = viz.plot_sweep_heatmaps(sweep_frame, ["compactions", "peak_context_tokens", "absent"])
    assert [a.get_title() for a in axes] == ["compactions (mean)", "peak context tokens (mean)"]


def test_sweep_heatmap_on_a_real_sweep(auth, ventas):
    from pimem.experiments.sweep import sweep

    df = sweep([auth, ventas], {"reserve_tokens": [2000, 4000], "keep_recent_tokens": [2000, 8000],
                                "context_window": [WINDOW]}, workers=1, progress=False)
    fig, ax = viz.plot_sweep_heatmap(df, "compactions", agg="sum")
    image = next(c for c in ax.get_children() if isinstance(c, AxesImage))
    pivot = df.pivot_table(index="reserve_tokens", columns="keep_recent_tokens", values="compactions", aggfunc="sum")
    np.testing.assert_allclose(image.get_array(), pivot.to_numpy())
    assert image.get_array().max() > 0


# --------------------------------------------------------------------------- drift


def test_retention_by_age_plot(report):
    fig, ax = viz.plot_retention_by_age(report)
    r = retention_by_age(report)
    line = _line(ax, "all facts")
    np.testing.assert_array_equal(line.get_xdata(), r["age"].to_numpy())
    np.testing.assert_allclose(line.get_ydata(), r["retention"].to_numpy())
    assert ax.get_ylim() == (0, 1.08)
    fig, ax = viz.plot_retention_by_age(report, by_kind=True)
    assert {ln.get_label() for ln in ax.get_lines()} == set(retention_by_age(report, by_kind=True)["kind"])


def test_section_similarity_plot(report):
    fig, ax = viz.plot_section_similarity(report)
    s = section_similarity(report)
    s = s[s["cosine_prev"].notna()]
    assert {ln.get_label() for ln in ax.get_lines()} == set(s["section"])
    goal = _line(ax, "goal")
    np.testing.assert_allclose(goal.get_ydata(), s[s["section"] == "goal"]["cosine_prev"].to_numpy())


def test_summary_sizes_plot(report):
    fig, (ax, ax2) = viz.plot_summary_sizes(report)
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 2 * len(report)
    heights = [b.get_height() for b in bars]
    assert heights[len(report):] == list(report["summary_tokens"].astype(float))
    np.testing.assert_allclose(_line(ax2, "compression").get_ydata(), report["compression_ratio_with_prev"])


def test_drift_panels(report):
    fig, axes = viz.plot_drift(report, title="drift")
    assert len(axes) == 3
    assert [a.get_title() for a in axes] == ["Fact retention by age", "Section similarity across compactions",
                                             "Summary size per compaction"]
    assert fig._suptitle.get_text() == "drift"


def test_drift_plots_of_a_session_without_compactions(ventas):
    empty = drift_report(ventas)
    fig, axes = viz.plot_drift(empty)
    assert any("no facts" in t.get_text() for t in axes[0].texts)
    assert any("fewer than two" in t.get_text() for t in axes[1].texts)


def _estimate_vs_usage_by_prefix(session) -> list[int]:
    """The estimate column computed the plain way: project every prefix of the path."""
    path = session.get_branch()
    out = []
    for i, e in enumerate(path):
        m = e.get("message") if e["type"] == "message" else None
        if m and m["role"] == "assistant" and get_assistant_usage(m) is not None:
            out.append(sum(estimate_tokens(x) for x in build_session_projection(path[: i + 1]).messages))
    return out


def test_estimate_vs_usage_matches_projecting_every_prefix(samples_dir):
    """Compactions and context edits (gpxkit has both) reshape the context; the rest adds to it."""
    for path in sorted(samples_dir.glob("*.jsonl")):
        session = load_session(path)
        table = viz.estimate_vs_usage_table(session)
        assert list(table["estimated_tokens"]) == _estimate_vs_usage_by_prefix(session), path.name


def test_estimate_vs_usage_projects_only_where_the_context_is_reshaped(auth, monkeypatch):
    from pimem.viz import data

    calls = []
    real = data.build_session_projection
    monkeypatch.setattr(data, "build_session_projection", lambda *a, **k: calls.append(1) or real(*a, **k))
    table = data.estimate_vs_usage_table(auth)
    path = auth.get_branch()
    reshaping = sum(e["type"] in ("compaction", "context_edit") for e in path)
    assert len(table) > 10 * max(reshaping, 1)
    assert len(calls) == reshaping  # not one projection per assistant message


def test_labelled_scatter_never_overlaps_its_labels_and_names_every_point() -> None:
    import matplotlib.pyplot as plt

    from pimem.viz.figures import PlacedLabels, _overlap, plot_labelled_scatter

    names = ["pi-0.87.1", "no-split-turn", "from-scratch", "masking", "hybrid"]
    crowded = pd.DataFrame({"cost": [1.00, 1.001, 1.002, 0.5, 0.501], "recall": [0.8, 0.801, 0.799, 0.6, 0.6],
                            "peak": [9000, 9000, 9100, 4000, 4000]}, index=names)
    spread = pd.DataFrame({"cost": [0, 1, 2, 3, 4], "recall": [0, 1, 0, 1, 0], "peak": [3000] * 5}, index=names)
    for df, all_shown in ((crowded, False), (spread, True)):
        fig, ax = plot_labelled_scatter(df, "cost", "recall", size="peak", size_scale=1 / 60)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        labels = next(a for a in ax.artists if isinstance(a, PlacedLabels))
        boxes = [t.get_window_extent(renderer) for t in labels.shown]
        assert all(not _overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        assert all(b.x0 >= ax.bbox.x0 and b.x1 <= ax.bbox.x1 for b in boxes)
        assert [t.get_text() for t in ax.get_legend().get_texts()] == names
        if all_shown:
            assert sorted(t.get_text() for t in labels.shown) == sorted(names)
        else:
            assert 2 <= len(labels.shown) < len(names)  # the crowded ones cannot all have a free place
        plt.close(fig)
