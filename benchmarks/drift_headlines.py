"""Headline drift figures: recorded real summaries and extractive replays of every session.

Run: ``.venv/bin/python benchmarks/drift_headlines.py [--window 32000 --reserve 4096 --keep 6000]``.
Prints one row per (session, source): compactions, mean fact recall, retention after 1/2/3
rewrites, median compression ratio and mean template conformance. The real sessions are read
from ``../shared/datasets/pi-mono`` when that folder exists.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

import pimem
from pimem.drift import drift_report, headline

REAL = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "pi-mono"


def _row(name: str, source: str, report: pd.DataFrame) -> dict:
    h = headline(report) if len(report) else {}
    row = {"session": name, "source": source, "compactions": len(report)}
    for key in ("mean_fact_recall", "retention_after_1", "retention_after_2", "retention_after_3"):
        value = h.get(key, math.nan)
        row[key] = None if math.isnan(value) else round(float(value), 3)
    ratios = [r for r in h.get("compression_ratio", []) if not math.isnan(r)]
    row["median_compression"] = round(float(pd.Series(ratios).median()), 1) if ratios else None
    conformance = h.get("conformance", [])
    row["mean_conformance"] = round(sum(conformance) / len(conformance), 2) if conformance else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=32000)
    ap.add_argument("--reserve", type=int, default=4096)
    ap.add_argument("--keep", type=int, default=6000)
    args = ap.parse_args()
    settings = pimem.CompactionSettings(reserve_tokens=args.reserve, keep_recent_tokens=args.keep)

    paths = [(p.stem, p) for p in pimem.sample_session_paths()]
    if REAL.is_dir():
        paths += [(p.stem, p) for p in sorted(REAL.glob("*.jsonl")) if not p.name.endswith(".v1.jsonl")]
    rows = []
    for name, path in paths:
        session = pimem.load_session(path)
        if any(e["type"] == "compaction" for e in session.get_branch()):
            rows.append(_row(name, "recorded", drift_report(session)))
        result = pimem.replay(session, settings, context_window=args.window)
        rows.append(_row(name, f"extractive replay w={args.window} r={args.reserve} k={args.keep}",
                         drift_report(result)))
    df = pd.DataFrame(rows)
    df = df.rename(columns={"mean_fact_recall": "fact_recall", "retention_after_1": "kept_1",
                            "retention_after_2": "kept_2", "retention_after_3": "kept_3"})
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(df.to_string(index=False))


if __name__ == "__main__":
    main()
