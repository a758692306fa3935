"""What agents did after real compactions: rework against matched controls, and the summary measures held
against it (``pimem.drift.rework``).

Run: ``.venv/bin/python benchmarks/rework.py [--window 60 --lookback 60 --controls 3] [--level 0.95]
[--no-measures | --measures DIR/rework_measures.csv] [-o DIR]``

Every real session of ``../shared/datasets`` (or ``$PIMEM_SHARED_DIR/datasets``): the Claude Code transcripts,
the Codex rollouts and the Pi sessions (``pi-mono``; ``*.v1.jsonl`` copies and Claude Code checkpoint copies
of one session hold the same compactions, which count once). Printed as Markdown, the tables of
``benchmarks/README.md``:

1. the signals after each compaction against its matched controls, per agent, with session-clustered
   intervals; the same with other windows (sensitivity) and with the stricter re-read count;
2. Spearman's rank correlation of ``score``, its parts, ``needed_recall`` and its classes, the recorded
   summary's rank among the degenerate baselines and each baseline's own ``score`` with rework, over all
   compactions with a summary text;
3. the per-fact view: needed-later facts the summary dropped or kept, and how often the agent got them
   back by rework in the window;
4. rework beside the orphan-reference rate of the same recorded compactions;
5. the compactions with the most rework beyond their controls, with what the agent did.

``-o DIR`` also writes the per-compaction tables as CSV. The measures take a few minutes (every summary
is measured with its faithfulness checks, and each baseline summarizes the same span); the rest seconds.
``--measures FILE`` reads them from an earlier run's ``rework_measures.csv`` instead (the rework, the facts
and the orphan references are computed again): only while the measures themselves have not changed.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

import pimem
from pimem.drift import rework

ROOT = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared")) / "datasets"
AGENTS = {"claude-code": "Claude Code", "codex": "Codex", "pi": "Pi"}


def real_session_files(datasets: Path) -> list[Path]:
    """Every transcript and session file of the shared data, in a fixed order."""
    claude = datasets / "claude-code"
    files = [*sorted(claude.rglob("*.jsonl")), *sorted(claude.rglob("*.jsonl.gz")),
             *sorted((datasets / "codex").rglob("*.jsonl")), *sorted((datasets / "pi-mono").rglob("*.jsonl"))]
    return [f for f in files if f.is_file()]


def _cell(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (int,)) or (isinstance(value, float) and value.is_integer() and abs(value) >= 100):
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _with_interval(row: Any, name: str, digits: int = 2) -> str:
    est, low, high = row[name], row[f"{name}_low"], row[f"{name}_high"]
    if isinstance(low, float) and not math.isnan(low):
        return f"{_cell(est, digits)} [{_cell(low, digits)}, {_cell(high, digits)}]"
    return _cell(est, digits)


def markdown(table: pd.DataFrame, index: bool = True) -> str:
    """A small table as Markdown (numbers as :func:`_cell` writes them)."""
    frame = table.reset_index() if index else table
    lines = ["| " + " | ".join(str(c) for c in frame.columns) + " |", "|" + " --- |" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join((f"{v:,.0f}" if v.is_integer() else _cell(v, 3)) if isinstance(v, float)
                                       else str(v) for v in row) + " |")
    return "\n".join(lines)


def signal_markdown(table: pd.DataFrame) -> str:
    lines = ["| agent | signal | n (sessions) | after | control | excess (after − control) | share after / control |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for _, r in table.iterrows():
        share = (f"{_cell(r['share_after'])} / {_cell(r['share_control'])}"
                 if not (isinstance(r["share_after"], float) and math.isnan(r["share_after"])) else "–")
        stat = "" if r["statistic"] == "mean" else f" ({r['statistic']})"
        lines.append(f"| {AGENTS.get(r['agent'], r['agent'])} | {r['signal']}{stat} | {r['n_compactions']} "
                     f"({r['n_sessions']}) | {_with_interval(r, 'after')} | {_with_interval(r, 'control')} | "
                     f"{_with_interval(r, 'excess')} | {share} |")
    return "\n".join(lines)


def correlation_markdown(table: pd.DataFrame, outcomes: list[str]) -> str:
    lines = ["| measure | " + " | ".join(outcomes) + " |", "| --- |" + " ---: |" * len(outcomes)]
    for measure, part in table.groupby("measure", sort=False):
        cells = []
        for o in outcomes:
            row = part[part["outcome"] == o]
            if not len(row):
                cells.append("–")
                continue
            r = row.iloc[0]
            cells.append(f"{_with_interval(r, 'rho')} (n={r['n_compactions']})")
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def strict_rereads(points: pd.DataFrame) -> pd.DataFrame:
    """The points with ``rereads`` counting only lines read before (events whose earlier kind is ``read``)."""
    events = points.attrs["events"]
    strict = events[(events["signal"] == "rereads") & (events["earlier_kind"] == "read")]
    counts = strict.groupby(["file", "compaction_id", "point", "position"]).size()
    out = points.copy()
    out.attrs = {}
    keys = list(zip(out["file"], out["compaction_id"], out["point"], out["position"]))
    out["rereads"] = [float(counts.get(k, 0)) if m else math.nan for k, m in zip(keys, out["measured"].astype(bool))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=rework.DEFAULT_WINDOW)
    ap.add_argument("--lookback", type=int, default=rework.DEFAULT_LOOKBACK)
    ap.add_argument("--controls", type=int, default=rework.DEFAULT_CONTROLS)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--no-measures", action="store_true", help="the signals only (seconds, not minutes)")
    ap.add_argument("--measures", type=Path, help="an earlier run's rework_measures.csv, read instead of measuring")
    ap.add_argument("-o", "--out", type=Path, help="a folder for the per-compaction CSV tables")
    args = ap.parse_args()
    if not DATASETS.is_dir():
        raise SystemExit(f"no real sessions: {DATASETS} is absent")
    warnings.simplefilter("ignore", pimem.PimemWarning)
    files = real_session_files(DATASETS)
    t0 = time.perf_counter()
    points = rework.rework_corpus(files, window=args.window, lookback=args.lookback, controls=args.controls)
    after = points[points["point"] == "after"]
    print(f"## {len(files)} files, {after['session'].nunique()} sessions, {len(after)} distinct compactions "
          f"({points.attrs['copies']} copies left out), {int(after['measured'].sum())} measured, "
          f"{int((after['n_controls'] > 0).sum())} with a control; window {args.window}, look-back "
          f"{args.lookback}, {args.controls} controls; {time.perf_counter() - t0:.0f} s\n")
    print(markdown(after.groupby("agent").agg(compactions=("compaction_id", "size"), sessions=("session", "nunique"),
                                     measured=("measured", "sum"),
                                     with_controls=("n_controls", lambda x: int((x > 0).sum())))))
    table = rework.rework_table(points, level=args.level)
    print("\n### Signals after compaction against matched controls\n")
    print(signal_markdown(table))
    reuses = after[after["measured"].astype(bool)].groupby("agent")[["reuses", "reuses_summary", "reuses_kept"]].sum()
    print("\nRe-reads and re-runs after compaction, and how many of them the summary named / the kept tail showed:\n")
    print(markdown(reuses))
    strict = rework.rework_table(strict_rereads(points), level=args.level, signals=["rereads"])
    print("\nRe-reads counting only lines read before (no file merely edited or written):\n")
    print(signal_markdown(strict))
    for window in (40, 100):
        other = rework.rework_corpus(files, window=window, lookback=window, controls=args.controls)
        print(f"\nWindow and look-back {window} messages:\n")
        print(signal_markdown(rework.rework_table(other, level=args.level, signals=["rereads", "reruns", "rework",
                                                                                     "steps_to_progress"])))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        points.to_csv(args.out / "rework_points.csv", index=False)
        points.attrs["events"].to_csv(args.out / "rework_events.csv", index=False)
    print("\n### Examples: the most rework beyond the controls\n")
    examples = rework.rework_examples(points, count=5)
    examples["file"] = [str(Path(f).relative_to(DATASETS)) if Path(f).is_relative_to(DATASETS) else f
                        for f in examples["file"]]
    print(markdown(examples, index=False))
    if args.no_measures:
        return
    t0 = time.perf_counter()
    keep = set(zip(after["file"], after["compaction_id"]))
    measures, facts, orphans = [], [], []
    for file in sorted({f for f, _ in keep}):
        session = pimem.load_session(file)
        if not any(str(e.get("summary") or "").strip() for e in session.entries if e.get("type") == "compaction"):
            continue
        mine = points[points["file"] == file]
        parts = [(facts, rework.fact_reacquisition(session, window=args.window, lookback=args.lookback)),
                 (orphans, rework.rework_vs_orphans(session, mine))]
        if args.measures is None:
            parts.append((measures, rework.compaction_measures(session)))
        for frame_list, part in parts:
            if len(part):
                frame_list.append(part[[(f, c) in keep for f, c in zip(part["file"], part["compaction_id"])]])
    m = pd.read_csv(args.measures) if args.measures is not None else pd.concat(measures, ignore_index=True)
    f = pd.concat(facts, ignore_index=True)
    o = pd.concat(orphans, ignore_index=True)
    print(f"\n## Measures held against rework ({len(m)} compactions with a summary, "
          f"{time.perf_counter() - t0:.0f} s)\n")
    outcomes = ["rework", "rework_excess", "rereads", "rereads_excess", "steps_to_progress"]
    corr = rework.rework_correlations(points, m, level=args.level, outcomes=outcomes, by_agent=False)
    print(correlation_markdown(corr, outcomes))
    for agent, label in AGENTS.items():
        part = rework.rework_correlations(points[points["agent"] == agent], m, level=args.level,
                                          measure_names=["score", "needed_recall", "recorded_rank"],
                                          outcomes=["rework", "rework_excess"], by_agent=False)
        if len(part) and part["n_compactions"].max() > 0:
            print(f"\n{label} alone:\n")
            print(correlation_markdown(part, ["rework", "rework_excess"]))
    print("\n### Per fact: needed-later facts first used in the window, re-acquired by rework\n")
    facts_table = rework.reacquisition_table(f, level=args.level)
    lines = ["| agent | class | facts (dropped) | sessions | re-acquired when dropped | when kept | dropped − kept |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for _, r in facts_table.iterrows():
        lines.append(f"| {AGENTS.get(r['agent'], r['agent'])} | {r['class']} | {r['n_facts']} ({r['n_dropped']}) | "
                     f"{r['n_sessions']} | {_with_interval(r, 'reacquired_dropped')} | "
                     f"{_with_interval(r, 'reacquired_kept')} | {_with_interval(r, 'difference')} |")
    print("\n".join(lines))
    print("\n### Rework beside orphan references (recorded compactions)\n")
    joined = o.dropna(subset=["orphan_rate"])
    rho = rework.rank_correlation(joined["orphan_rate"], joined["rework"], joined["session"], level=args.level)
    print(f"orphan rate (pooled) {o['orphans'].sum() / max(1, o['references'].sum()):.3f} over "
          f"{int(o['references'].sum())} references of {len(o)} compactions; Spearman with rework "
          f"{_cell(rho[0])} [{_cell(rho[1])}, {_cell(rho[2])}] (n={len(joined)})")
    if args.out:
        m.to_csv(args.out / "rework_measures.csv", index=False)
        f.to_csv(args.out / "rework_facts.csv", index=False)
        o.to_csv(args.out / "rework_orphans.csv", index=False)


if __name__ == "__main__":
    main()
