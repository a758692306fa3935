"""Sweep benchmark: 20 settings over the sample and real sessions with the extractive summarizer.

Reports runs per second with 1 and 2 worker processes (side by side, same grid, fresh cache
each, best of ``--repeat`` alternating rounds), and runs on the warm cache with their
summarizer-call count (expected 0), with the machine's load average beside every figure.

    .venv/bin/python benchmarks/bench_sweep.py [--real-dir ../shared/datasets/pi-mono]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.experiments.sweep import sweep  # noqa: E402

GRID = {
    "reserve_tokens": [8192, 16384],
    "keep_recent_tokens": [5000, 10000, 20000, 30000, 40000],
    "context_window": [64000, 128000],
}  # 2 x 5 x 2 = 20 settings


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real-dir", default=str(ROOT.parent / "shared" / "datasets" / "pi-mono"))
    ap.add_argument("--repeat", type=int, default=2, help="best of this many rounds (1 and 2 workers alternate)")
    args = ap.parse_args()
    sessions = sorted((ROOT / "datasets" / "sessions").glob("*.jsonl"))
    real = Path(args.real_dir)
    sessions += [p for p in (real / "before-compaction.jsonl", real / "large-session.jsonl") if p.exists()]
    runs = len(sessions) * 20
    print(f"{len(sessions)} sessions x 20 settings = {runs} runs; {os.cpu_count()} cores; {_load()}")
    with tempfile.TemporaryDirectory() as tmp:
        best: dict[int, float] = {}
        for round_ in range(args.repeat):
            for workers in (1, 2):
                cache = Path(tmp) / f"cache-{workers}-{round_}.sqlite"
                t = time.perf_counter()
                df = sweep(sessions, GRID, workers=workers, cache=cache, progress=False)
                elapsed = time.perf_counter() - t
                best[workers] = min(best.get(workers, elapsed), elapsed)
                assert df.error.isna().all(), df.error.dropna().tolist()
                print(f"round {round_ + 1} workers={workers}: {elapsed:.1f}s, {runs / elapsed:.2f} runs/s, "
                      f"{int(df.compactions.sum())} compactions, {int(df.summarizer_calls.sum())} summarizer calls; "
                      f"{_load()}")
        print(f"best: workers=1 {runs / best[1]:.2f} runs/s, workers=2 {runs / best[2]:.2f} runs/s, "
              f"speed-up 1 -> 2 workers: {best[1] / best[2]:.2f}x")
        warm_best = None
        for round_ in range(args.repeat):
            t = time.perf_counter()
            warm = sweep(sessions, GRID, workers=2, cache=Path(tmp) / "cache-2-0.sqlite", progress=False)
            elapsed = time.perf_counter() - t
            warm_best = elapsed if warm_best is None else min(warm_best, elapsed)
            print(f"warm cache round {round_ + 1}, workers=2: {elapsed:.1f}s, {runs / elapsed:.2f} runs/s, "
                  f"summarizer calls: {int(warm.summarizer_calls.sum())} "
                  f"(requests answered from cache: {int(warm.summary_calls.sum())}); {_load()}")
        print(f"best warm: {runs / warm_best:.2f} runs/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
