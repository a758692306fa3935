"""Replay memory at scale: peak resident memory of loading a session file, of its context, and of a
replay, against the number of entries, with the memory per entry and the fitted exponent.

The sessions are files of tiny entries (user prompts and assistant answers of a few words with their
usage, about 260 bytes a line), written to a temporary folder (``--dir``, default the system's) and
removed after, never kept in the repository. Each measurement runs in a fresh process, which reports
its peak RSS (``VmHWM``): ``import`` alone, after ``load_session`` (``load``), after
``build_session_context`` at the leaf (``context``), and after a replay (``replay``: a 32k window,
reserve 4096, keep 8000, the offline summarizer, tokens as characters / 4; the session fills the
window every few thousand entries). The memory per entry is (peak − the process's memory after imports) / entries; the exponent
is the least-squares slope of log(peak − imports) against log(entries) (1 is linear).

    .venv/bin/python benchmarks/bench_replay_memory.py [--sizes 250000 500000 1000000 2000000]
        [--window 32000 --reserve 4096 --keep 8000] [--dir /tmp] [--out benchmarks/results/replay_memory.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TS0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def write_tiny_session(path: Path, n: int) -> int:
    """``n`` entries after the header, each the child of the one before: user prompts and assistant
    answers of a few words, the answers' recorded input growing by 60 tokens a turn and falling back
    every 400 entries (a compaction in the recording's own window); returns the file's size."""
    from pimem.base.js import to_iso

    cost = '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}'
    with open(path, "w", encoding="ascii") as f:
        f.write(json.dumps({"type": "session", "version": 3, "id": "tiny-scale", "timestamp": to_iso(TS0),
                            "cwd": "/bench"}, separators=(",", ":")) + "\n")
        parent = "null"
        for i in range(n):
            eid = f"{i:08x}"
            ms = TS0 + i * 1000
            ts = to_iso(ms)
            if i % 2 == 0:
                message = f'{{"role":"user","content":"step {i}: check the parser again","timestamp":{ms}}}'
            else:
                inp = 2000 + 60 * (i % 400)
                message = (f'{{"role":"assistant","content":[{{"type":"text","text":"done {i}, all green"}}],'
                           f'"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5",'
                           f'"usage":{{"input":{inp},"output":40,"cacheRead":0,"cacheWrite":0,"totalTokens":{inp + 40},'
                           f'{cost}}},"stopReason":"stop","timestamp":{ms}}}')
            f.write(f'{{"type":"message","id":"{eid}","parentId":{parent},"timestamp":"{ts}","message":{message}}}\n')
            parent = f'"{eid}"'
    return path.stat().st_size


def peak_rss_mib() -> float:
    """This process's peak resident set (``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no /proc/self/status")


def child(path: str, stage: str, window: int, reserve: int, keep: int) -> dict[str, Any]:
    """One stage in this process: its peak RSS after imports and after the stage, and the seconds."""
    import warnings

    import pimem
    from pimem.core.session_manager import build_session_context

    imports = peak_rss_mib()
    start, cpu = time.perf_counter(), time.process_time()
    session = pimem.load_session(path)
    out: dict[str, Any] = {"entries": len(session.entries), "import_mib": imports}
    if stage == "context":
        build_session_context(session)
    elif stage == "replay":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pimem.replay(session, pimem.CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep),
                                  context_window=window, token_source="chars")
        out["compactions"] = len(result.compactions)
    out["seconds"] = time.perf_counter() - start
    out["cpu_seconds"] = time.process_time() - cpu
    out["peak_mib"] = peak_rss_mib()
    return out


def in_child(path: Path, stage: str, window: int, reserve: int, keep: int) -> dict[str, Any]:
    code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.bench_replay_memory import child; " \
           f"print(json.dumps(child({str(path)!r}, {stage!r}, {window}, {reserve}, {keep})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def fit_exponent(sizes: list[int], values: list[float]) -> float:
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(v, 1e-9)) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250_000, 500_000, 1_000_000, 2_000_000])
    ap.add_argument("--stages", nargs="+", default=["load", "context", "replay"])
    ap.add_argument("--window", type=int, default=32_000, help="the replay's context window (default 32000)")
    ap.add_argument("--reserve", type=int, default=4096, help="its reserve tokens (default 4096)")
    ap.add_argument("--keep", type=int, default=8000, help="its keep-recent tokens (default 8000)")
    ap.add_argument("--dir", default=None, help="where the session files are written (and removed)")
    ap.add_argument("--out", default=None, help="a JSON file for the rows")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="pimem-bench-memory-") as folder:
        for n in args.sizes:
            path = Path(folder) / f"tiny-{n}.jsonl"
            size = write_tiny_session(path, n)
            for stage in args.stages:
                row = {"stage": stage, "n": n, "file_mb": round(size / 1e6, 1), **in_child(path, stage, args.window, args.reserve, args.keep)}
                row["per_entry_bytes"] = round((row["peak_mib"] - row["import_mib"]) * 2**20 / n)
                rows.append(row)
                print(f"{stage:8} {n:>9,} entries  file {row['file_mb']:7.1f} MB  peak {row['peak_mib']:8.0f} MiB  "
                      f"{row['per_entry_bytes']:6,} B/entry  {row['seconds']:7.1f} s ({row['cpu_seconds']:.1f} s CPU)"
                      + (f"  {row['compactions']:,} compactions" if "compactions" in row else ""), flush=True)
            path.unlink()
    for stage in args.stages:
        mine = [r for r in rows if r["stage"] == stage]
        if len(mine) > 1:
            exp = fit_exponent([r["n"] for r in mine], [r["peak_mib"] - r["import_mib"] for r in mine])
            print(f"{stage:8} memory exponent {exp:.3f} (n={len(mine)} sizes)")
            rows.append({"stage": stage, "memory_exponent": round(exp, 3), "sizes": [r["n"] for r in mine]})
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
