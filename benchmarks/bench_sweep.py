"""Sweep benchmark: 20 settings over the sample and real sessions with the extractive summarizer.

Reports runs per second with 1 and 2 worker processes (side by side, same grid, fresh cache
each), and a second run on the warm cache with its summarizer-call count (expected 0).

    .venv/bin/python benchmarks/bench_sweep.py [--real-dir ../shared/datasets/pi-mono]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.sweep import sweep  # noqa: E402

GRID = {
    "reserve_tokens": [8192, 16384],
    "keep_recent_tokens": [5000, 10000, 20000, 30000, 40000],
    "context_window": [64000, 128000],
}  # 2 x 5 x 2 = 20 settings


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real-dir", default=str(ROOT.parent / "shared" / "datasets" / "pi-mono"))
    args = ap.parse_args()
    sessions = sorted((ROOT / "datasets" / "sessions").glob("*.jsonl"))
    real = Path(args.real_dir)
    sessions += [p for p in (real / "before-compaction.jsonl", real / "large-session.jsonl") if p.exists()]
    runs = len(sessions) * 20
    print(f"{len(sessions)} sessions x 20 settings = {runs} runs")
    with tempfile.TemporaryDirectory() as tmp:
        timings = {}
        for workers in (1, 2):
            cache = Path(tmp) / f"cache-{workers}.sqlite"
            t = time.perf_counter()
            df = sweep(sessions, GRID, workers=workers, cache=cache, progress=False)
            elapsed = time.perf_counter() - t
            timings[workers] = elapsed
            assert df.error.isna().all(), df.error.dropna().tolist()
            print(f"workers={workers}: {elapsed:.1f}s, {runs / elapsed:.2f} runs/s, "
                  f"{int(df.compactions.sum())} compactions, {int(df.summarizer_calls.sum())} summarizer calls")
        print(f"speed-up 1 -> 2 workers: {timings[1] / timings[2]:.2f}x")
        t = time.perf_counter()
        warm = sweep(sessions, GRID, workers=2, cache=Path(tmp) / "cache-2.sqlite", progress=False)
        elapsed = time.perf_counter() - t
        print(f"warm cache, workers=2: {elapsed:.1f}s, {runs / elapsed:.2f} runs/s, "
              f"summarizer calls: {int(warm.summarizer_calls.sum())} "
              f"(requests answered from cache: {int(warm.summary_calls.sum())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
