"""Replay scaling: seconds of CPU per replay against the length of the session, with fitted exponents.

Chains are cloned from the real paths (``../shared/datasets/pi-mono/``, else the bundled samples):
the path's entries (compactions and labels left out) repeated with fresh ids, each entry the child
of the one before, timestamps moved on by the length of the path at each repetition, so a chain of
any length reads like one long session. Every message is a new dict (its content shared), so the
estimates are computed for every message, as in a real session of that length.

For each token source and setting, every size is replayed (extractive summarizer) and timed in CPU
seconds (``time.process_time``), sizes interleaved, best of ``--rounds``. The exponent is the
least-squares slope of log(seconds) against log(entries) over all sizes (1 is linear). ``--memory``
also reports the peak traced memory (``tracemalloc``) of the chain and of one replay per size.

    .venv/bin/python benchmarks/bench_replay_scaling.py [--sizes 1000 5000 20000 50000]
        [--sources estimate calibrated chars tiktoken] [--settings compact-32k compact-64k off]
        [--rounds 1] [--memory] [--out benchmarks/results/replay_scaling.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.base.js import parse_iso_ms, to_iso  # noqa: E402
from pimem.core.compaction.compaction import CompactionSettings  # noqa: E402
from pimem.core.session_manager import Session, load_session  # noqa: E402
from pimem.replays.engine import replay  # noqa: E402

REAL = ROOT.parent / "shared" / "datasets" / "pi-mono"

SETTINGS: dict[str, dict[str, Any]] = {
    "compact-32k": {"context_window": 32000, "settings": CompactionSettings(reserve_tokens=4096, keep_recent_tokens=8000)},
    "compact-64k": {"context_window": 64000, "settings": CompactionSettings(reserve_tokens=16384, keep_recent_tokens=20000)},
    "off": {"context_window": 64000, "settings": CompactionSettings(enabled=False)},
}


def source_paths() -> list[list[dict]]:
    files = [REAL / "before-compaction.jsonl", REAL / "large-session.jsonl"]
    files = [f for f in files if f.exists()] or sorted((ROOT / "datasets" / "sessions").glob("*.jsonl"))
    out = []
    for f in files:
        path = [e for e in load_session(f).get_branch() if e.get("type") not in ("compaction", "label")]
        out.append(path)
    return out


def build_chain(paths: list[list[dict]], n: int) -> Session:
    """A session of ``n`` entries cloned from ``paths`` (see module docs)."""
    entries: list[dict] = []
    parent = None
    shift = 0.0
    rep = 0
    while len(entries) < n:
        path = paths[rep % len(paths)]
        first = parse_iso_ms(path[0]["timestamp"])
        last = parse_iso_ms(path[-1]["timestamp"])
        base = (entries and parse_iso_ms(entries[-1]["timestamp"]) or first) + 1000.0
        shift = base - first
        for e in path:
            if len(entries) >= n:
                break
            c = dict(e)
            c["id"] = f"{len(entries):08x}"
            c["parentId"] = parent
            c["timestamp"] = to_iso(parse_iso_ms(e["timestamp"]) + shift)
            if e.get("type") == "message":
                m = dict(e["message"])
                if isinstance(m.get("timestamp"), (int, float)):
                    m["timestamp"] = m["timestamp"] + shift
                c["message"] = m
            entries.append(c)
            parent = c["id"]
        rep += 1
        del last
    header = {"type": "session", "version": 3, "id": "bench-chain", "timestamp": entries[0]["timestamp"], "cwd": "/bench"}
    return Session(header, entries)


def fit_exponent(sizes: list[int], seconds: list[float]) -> float:
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def run_once(session: Session, source: str, setting: str) -> tuple[float, int]:
    spec = SETTINGS[setting]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        result = replay(session, spec["settings"], context_window=spec["context_window"], token_source=source)
        elapsed = time.process_time() - t0
    return elapsed, len(result.compactions)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 50000])
    ap.add_argument("--sources", nargs="+", default=["estimate", "calibrated", "chars", "tiktoken"])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--memory-run", nargs=2, default=["calibrated", "compact-32k"], metavar=("SOURCE", "SETTING"),
                    help="the replay whose peak memory --memory traces")
    ap.add_argument("--no-timing", action="store_true", help="only --memory")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "replay_scaling.json"))
    args = ap.parse_args()
    paths = source_paths()
    chains = {} if args.no_timing else {n: build_chain(paths, n) for n in args.sizes}
    print(f"chains from {len(paths)} paths ({', '.join(str(len(p)) for p in paths)} entries); "
          f"load {os.getloadavg()[0]:.2f}")
    results: list[dict[str, Any]] = []
    for setting in ([] if args.no_timing else args.settings):
        for source in args.sources:
            best: dict[int, float] = {}
            comps: dict[int, int] = {}
            for _ in range(args.rounds):
                for n in args.sizes:
                    t, k = run_once(chains[n], source, setting)
                    best[n] = min(best.get(n, t), t)
                    comps[n] = k
            exp = fit_exponent(args.sizes, [best[n] for n in args.sizes])
            row = {"setting": setting, "source": source, "seconds": {str(n): round(best[n], 3) for n in args.sizes},
                   "compactions": {str(n): comps[n] for n in args.sizes}, "exponent": round(exp, 3)}
            results.append(row)
            cells = "  ".join(f"{n}: {best[n]:.2f}s ({comps[n]})" for n in args.sizes)
            print(f"{setting:12s} {source:10s} {cells}  exponent {exp:.2f}  load {os.getloadavg()[0]:.2f}", flush=True)
    if args.memory:
        import tracemalloc

        for n in args.sizes:
            tracemalloc.start()
            session = build_chain(paths, n)
            chain_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            run_once(session, *args.memory_run)
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            del session
            print(f"memory n={n}: chain {chain_peak / 2**20:.1f} MiB, replay peak {peak / 2**20:.1f} MiB "
                  f"({peak / n / 1024:.2f} KiB per entry)", flush=True)
            results.append({"memory_entries": n, "run": args.memory_run, "chain_mib": chain_peak / 2**20,
                            "replay_peak_mib": peak / 2**20})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
