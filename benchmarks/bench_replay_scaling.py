"""Replay scaling: seconds of CPU per replay against the length of the session, with fitted exponents.

Chains are cloned from the real paths (``../shared/datasets/pi-mono/``, else the bundled samples): the
paths' entries (compactions and labels left out) in blocks of 250, taken from each path in turn and
repeated, with fresh ids, each entry the child of the one before, timestamps moved on at each block,
so a chain of any length reads like one long session and every chain from 500 entries on holds the
same mix of the paths (which compact at different rates). Every message is a new dict (its content
shared), so the estimates are computed for every message, as in a real session of that length.

For each token source and setting, every size is replayed (extractive summarizer) and timed in CPU
seconds (``time.process_time``), sizes interleaved, best of ``--rounds``; each replay starts without the
walks and estimates a process keeps of the recordings it replayed (``forget_recordings``), as a
single replay does. The exponent is the
least-squares slope of log(seconds) against log(entries) over all sizes (1 is linear); the
compactions' own exponent is printed beside it (a chain's later repetitions may compact more often
than its first one). ``--big N`` replays one chain of ``N`` entries for each of ``--big-runs``
(``SOURCE:SETTING``). ``--memory`` replays ``--memory-run`` once per size (and the big chain) in a
fresh process each and reports its peak RSS (``VmHWM``) after building the chain and after the
replay, with the exponent of the replay's part against entries.

    .venv/bin/python benchmarks/bench_replay_scaling.py [--sizes 1000 5000 20000 50000]
        [--sources estimate calibrated chars tiktoken] [--settings compact-32k compact-64k off]
        [--rounds 1] [--big 500000 --big-runs calibrated:off calibrated:compact-64k] [--memory]
        [--no-timing] [--out benchmarks/results/replay_scaling.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
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
from pimem.replays.recording import forget_recordings  # noqa: E402

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


def build_chain(paths: list[list[dict]], n: int, block: int = 250) -> Session:
    """A session of ``n`` entries cloned from ``paths`` (see module docs): blocks of ``block`` entries
    taken from each path in turn (the first block of each, then the second of each, ...), so that a
    chain of any length from ``block * len(paths)`` on holds the same mix of its sources."""
    entries: list[dict] = []
    parent = None
    k = 0
    while len(entries) < n:
        path = paths[k % len(paths)]
        start = (k // len(paths)) * block % len(path)
        part = path[start:start + block]
        first = parse_iso_ms(part[0]["timestamp"])
        base = (entries and parse_iso_ms(entries[-1]["timestamp"]) or first) + 1000.0
        shift = base - first
        for e in part:
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
        k += 1
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
    forget_recordings()  # every replay walks its recording afresh, as a single replay does
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        result = replay(session, spec["settings"], context_window=spec["context_window"], token_source=source)
        elapsed = time.process_time() - t0
    return elapsed, len(result.compactions)


def peak_rss_mib() -> float:
    """This process's peak resident set (``VmHWM``; ``ru_maxrss`` where there is no ``/proc``, which
    after a fork can carry the parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(n: int, source: str, setting: str) -> dict[str, Any]:
    """One replay of an ``n``-entry chain in this process: its CPU seconds and peak RSS (MiB)."""
    paths = source_paths()
    base_rss = peak_rss_mib()
    session = build_chain(paths, n)
    del paths
    chain_rss = peak_rss_mib()
    seconds, compactions = run_once(session, source, setting)
    peak = peak_rss_mib()
    return {"entries": n, "source": source, "setting": setting, "seconds": round(seconds, 3),
            "compactions": compactions, "base_rss_mib": round(base_rss, 1), "chain_rss_mib": round(chain_rss, 1),
            "peak_rss_mib": round(peak, 1)}


def in_child(n: int, source: str, setting: str) -> dict[str, Any]:
    """:func:`child` in a fresh Python process (its peak RSS is its own)."""
    out = subprocess.run([sys.executable, __file__, "--child", str(n), source, setting], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 50000])
    ap.add_argument("--sources", nargs="+", default=["estimate", "calibrated", "chars", "tiktoken"])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--big", type=int, default=0, help="also replay one chain of this many entries")
    ap.add_argument("--big-runs", nargs="+", default=["calibrated:off", "calibrated:compact-64k"],
                    metavar="SOURCE:SETTING")
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--memory-run", nargs=2, default=["calibrated", "compact-32k"], metavar=("SOURCE", "SETTING"),
                    help="the replay whose peak RSS --memory measures")
    ap.add_argument("--no-timing", action="store_true", help="no timing table (only --big and --memory)")
    ap.add_argument("--child", nargs=3, metavar=("N", "SOURCE", "SETTING"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "replay_scaling.json"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], args.child[2])))
        return 0
    paths = source_paths()
    chains = {} if args.no_timing else {n: build_chain(paths, n) for n in args.sizes}
    print(f"chains from {len(paths)} paths ({', '.join(str(len(p)) for p in paths)} entries); "
          f"load {os.getloadavg()[0]:.2f}")
    results: list[dict[str, Any]] = []
    if not args.no_timing:
        print("CPU seconds per replay (compactions); exponent of seconds (of compactions) against entries")
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
            comp_exp = (fit_exponent(args.sizes, [comps[n] for n in args.sizes])
                        if all(comps[n] for n in args.sizes) else float("nan"))
            row = {"setting": setting, "source": source, "seconds": {str(n): round(best[n], 3) for n in args.sizes},
                   "compactions": {str(n): comps[n] for n in args.sizes}, "exponent": round(exp, 3),
                   "compactions_exponent": None if comp_exp != comp_exp else round(comp_exp, 3),
                   "load": round(os.getloadavg()[0], 2)}
            results.append(row)
            cells = "  ".join(f"{n}: {best[n]:.2f}s ({comps[n]})" for n in args.sizes)
            comp_text = f" ({comp_exp:.2f})" if comp_exp == comp_exp else ""
            print(f"{setting:12s} {source:10s} {cells}  exponent {exp:.2f}{comp_text}  load {os.getloadavg()[0]:.2f}",
                  flush=True)
    chains.clear()
    big: dict[tuple[str, str], dict[str, Any]] = {}
    for run in (args.big_runs if args.big else []):
        source, _, setting = run.partition(":")
        row = in_child(args.big, source, setting)
        big[(source, setting)] = row
        results.append({"big": True, **row, "load": round(os.getloadavg()[0], 2)})
        print(f"{args.big:,} entries {setting} {source}: {row['seconds']:.1f} CPU-s ({row['compactions']} "
              f"compactions), peak RSS {row['peak_rss_mib']:.0f} MiB (chain {row['chain_rss_mib']:.0f})  "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    if args.memory:
        source, setting = args.memory_run
        sizes = list(args.sizes)
        rows = [in_child(n, source, setting) for n in sizes]
        if args.big:
            rows.append(big.get((source, setting)) or in_child(args.big, source, setting))
            sizes.append(args.big)
        print(f"peak RSS, {setting} {source}, one process per size (base: the interpreter, imports and source paths):")
        for row in rows:
            grown = row["peak_rss_mib"] - row["base_rss_mib"]
            print(f"  {row['entries']:>8,} entries: base {row['base_rss_mib']:6.1f} MiB, chain +"
                  f"{row['chain_rss_mib'] - row['base_rss_mib']:6.1f} MiB, peak {row['peak_rss_mib']:7.1f} MiB "
                  f"(+{grown:6.1f} MiB, {grown * 1024 / row['entries']:.2f} KiB per entry)", flush=True)
            results.append({"memory": True, **row})
        grown = [max(r["peak_rss_mib"] - r["base_rss_mib"], 1e-3) for r in rows]
        exp = fit_exponent([r["entries"] for r in rows], grown)
        print(f"  exponent of the peak above the base against entries: {exp:.2f}")
        results.append({"memory_exponent": round(exp, 3), "run": [source, setting],
                        "entries": [r["entries"] for r in rows]})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
