"""Layout checks for matplotlib figures, measured on the renderer rather than on pixels.

:func:`layout_problems` draws a figure (Agg) and lists what a reader would see as broken: a
figure too large or mostly blank, collapsed or stray axes, text outside the figure, text or
legends overlapping one another (tick labels included). An empty list means the figure passed.
:func:`assert_readable` raises with that list.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axis import Axis
from matplotlib.legend import Legend
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

MAX_PX = (2000, 1600)  # width, height in pixels at the figure's dpi
MIN_AXES_PX = (80, 50)  # smallest width, height of a plotting area
MIN_AXES_SHARE = 0.2  # plotting areas together cover at least this share of the figure
TOLERANCE_PX = 1.0  # overlaps or overhangs up to this are ignored


@dataclass(frozen=True)
class Item:
    """A drawn piece of text (or a legend) and its extent in display pixels."""

    name: str
    box: Bbox


def _axes_name(ax: Any) -> str:
    title = ax.get_title() or ax.get_title("left") or ax.get_ylabel() or ax.get_label() or "axes"
    return title.replace("\n", " ")[:40]


def _is_colorbar(ax: Any) -> bool:
    return getattr(ax, "_colorbar", None) is not None or ax.get_label() == "<colorbar>"


def _drawn_tick_labels(ax: Any, axis: Axis, renderer: Any) -> list[Item]:
    """Tick labels the last draw showed: ticks inside the view interval, label visible and non-empty."""
    out = []
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(hi - lo), 1e-300)
    which = (("major", axis.get_majorticklocs(), axis.get_major_ticks),
             ("minor", axis.get_minorticklocs(), axis.get_minor_ticks))
    for kind, locs, get_ticks in which:
        ticks = get_ticks(len(locs))
        for loc, tick in zip(locs, ticks):
            if not (lo - eps <= loc <= hi + eps):
                continue
            for label in (tick.label1, tick.label2):
                if label.get_visible() and label.get_text().strip():
                    out.append(Item(f"{axis.axis_name} {kind} tick {label.get_text()!r} of '{_axes_name(ax)}'",
                                    label.get_window_extent(renderer)))
    return out


def drawn_items(fig: Any, renderer: Any) -> list[Item]:
    """Every piece of text the figure shows, and every legend as one block."""
    items: list[Item] = []

    def visit(artist: Any, where: str) -> None:
        for child in artist.get_children():
            if not child.get_visible():
                continue
            if isinstance(child, Axis):
                continue  # tick labels, axis labels and offsets are collected per axes below
            if isinstance(child, Legend):
                items.append(Item(f"legend of {where}", child.get_window_extent(renderer)))
                continue
            if isinstance(child, Text):
                if not child.get_text().strip():
                    continue
                if isinstance(child, Annotation) and not child._check_xy(renderer):
                    continue  # an annotation whose point is outside the axes is not drawn
                box = child.get_window_extent(renderer)
                clip = child.get_clip_box() if child.get_clip_on() else None
                if clip is not None:
                    if not box.overlaps(clip):
                        continue  # clipped away entirely
                items.append(Item(f"text {child.get_text()[:30]!r} in {where}", box))
                continue
            visit(child, where)

    for ax in fig.axes:
        if not ax.get_visible():
            continue
        where = f"'{_axes_name(ax)}'"
        visit(ax, where)
        if not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            if not axis.get_visible():
                continue
            items.extend(_drawn_tick_labels(ax, axis, renderer))
            for text, what in ((axis.label, "label"), (axis.get_offset_text(), "offset")):
                if text.get_visible() and text.get_text().strip():
                    items.append(Item(f"{axis.axis_name} {what} {text.get_text()[:30]!r} of {where}",
                                      text.get_window_extent(renderer)))
    for child in fig.get_children():
        if child in fig.axes or not child.get_visible():
            continue
        if isinstance(child, Legend):
            items.append(Item("figure legend", child.get_window_extent(renderer)))
        elif isinstance(child, Text) and child.get_text().strip():
            items.append(Item(f"figure text {child.get_text()[:30]!r}", child.get_window_extent(renderer)))
    return [i for i in items if i.box.width > 0 and i.box.height > 0]


def overlapping_pairs(items: list[Item], tolerance: float = TOLERANCE_PX) -> list[tuple[Item, Item]]:
    """Pairs of items whose boxes overlap by more than ``tolerance`` pixels in both directions."""
    if len(items) < 2:
        return []
    b = np.array([[i.box.x0, i.box.y0, i.box.x1, i.box.y1] for i in items])
    w = np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0])
    h = np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1])
    hit = (w > tolerance) & (h > tolerance)
    i, j = np.nonzero(np.triu(hit, 1))
    return [(items[a], items[c]) for a, c in zip(i, j)]


def _inside(box: Bbox, frame: Bbox, tolerance: float) -> bool:
    return (box.x0 >= frame.x0 - tolerance and box.y0 >= frame.y0 - tolerance
            and box.x1 <= frame.x1 + tolerance and box.y1 <= frame.y1 + tolerance)


def layout_problems(fig: Any, *, max_px: tuple[int, int] = MAX_PX, min_axes_px: tuple[int, int] = MIN_AXES_PX,
                    min_axes_share: float = MIN_AXES_SHARE, tolerance: float = TOLERANCE_PX) -> list[str]:
    """What is wrong with the figure's layout, as readable sentences (empty when nothing is)."""
    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    problems += [f"warning while drawing: {w.message}" for w in caught if "layout" in str(w.message).lower()]
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    width, height = frame.width, frame.height
    if width > max_px[0] or height > max_px[1]:
        problems.append(f"figure is {width:.0f}×{height:.0f} px, more than {max_px[0]}×{max_px[1]}")
    tight = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
    if not _inside(tight, frame, 2 * tolerance):
        problems.append(f"something is drawn outside the figure: tight box {tight.bounds} vs {frame.bounds}")
    areas = {}
    for ax in fig.axes:
        if not ax.get_visible() or _is_colorbar(ax):
            continue
        box = ax.get_window_extent(renderer)
        name = _axes_name(ax)
        if box.width < min_axes_px[0] or box.height < min_axes_px[1]:
            problems.append(f"axes '{name}' collapsed to {box.width:.0f}×{box.height:.0f} px")
        if not _inside(box, frame, tolerance):
            problems.append(f"axes '{name}' reaches outside the figure: {box.bounds}")
        areas[tuple(np.round(box.bounds))] = box.width * box.height  # twins share their box
    share = sum(areas.values()) / (width * height) if width * height else 0.0
    if areas and share < min_axes_share:
        problems.append(f"plotting areas cover {share:.0%} of the figure (less than {min_axes_share:.0%})")
    items = drawn_items(fig, renderer)
    for item in items:
        if not _inside(item.box, frame, tolerance):
            problems.append(f"{item.name} is outside the figure: {tuple(round(v) for v in item.box.extents)}")
    for a, b in overlapping_pairs(items, tolerance):
        problems.append(f"{a.name} overlaps {b.name}")
    return problems


def assert_readable(fig: Any, **limits: Any) -> None:
    """Fail with every layout problem of ``fig`` (see :func:`layout_problems`)."""
    problems = layout_problems(fig, **limits)
    if problems:
        shown = "\n  ".join(problems[:25])
        more = f"\n  … {len(problems) - 25} more" if len(problems) > 25 else ""
        raise AssertionError(f"{len(problems)} layout problem(s):\n  {shown}{more}")
