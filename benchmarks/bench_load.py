"""Loading speed and memory: ``load_session`` beside bare orjson and pandas, in one run.

    .venv/bin/python benchmarks/bench_load.py [--repeat 7] [--synthetic-mb 40]

For each file: best-of-N wall time (contenders interleaved round by round) of
  * ``orjson``   — bare ``orjson.loads`` on every line (the floor: no validation, no tree),
  * ``pimem``    — ``pimem.load_session`` (parse, migrate, index, validate),
  * ``pandas``   — ``pandas.read_json(path, lines=True)``,
and the peak memory of ``load_session`` (tracemalloc) relative to the file size.
Ratios are against orjson measured in the same run. Writes a table to stdout and JSON to
``benchmarks/results/bench_load.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.base.js import js_stringify  # noqa: E402
from pimem.core.session_manager import load_session  # noqa: E402

REAL_DIR = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared")) / "datasets" / "pi-mono"
REAL_FILES = ["before-compaction.jsonl", "large-session.jsonl", "before-compaction.v1.jsonl",
              "large-session.v1.jsonl"]


def bare_orjson(path: Path) -> list[Any]:
    return [orjson.loads(line) for line in path.read_bytes().split(b"\n") if line]


def pandas_lines(path: Path) -> Any:
    import pandas as pd

    return pd.read_json(path, lines=True)


def interleaved(fns: dict[str, Callable[[Path], Any]], path: Path, repeat: int) -> dict[str, list[float]]:
    """Run the contenders in turn, ``repeat`` rounds, so they share the machine's load."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            fn(path)
            times[name].append(time.perf_counter() - start)
    return times


def peak_memory(fn: Callable[[Path], Any], path: Path) -> int:
    gc.collect()
    tracemalloc.start()
    result = fn(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def make_synthetic(sources: list[Path], target_mb: float, out_dir: Path, seed: int = 0) -> Path:
    """Concatenate copies of real v3 entries with fresh ids, chained copy after copy."""
    rng = random.Random(seed)
    header = orjson.loads(sources[0].read_bytes().split(b"\n", 1)[0])
    blocks = [[orjson.loads(l) for l in p.read_bytes().split(b"\n")[1:] if l] for p in sources]
    target = out_dir / f"synthetic-{int(target_mb)}mb.jsonl"
    size = 0
    last_id = None
    with open(target, "w", encoding="utf-8") as f:
        line = js_stringify(header) + "\n"
        f.write(line)
        size += len(line)
        copy = 0
        while size < target_mb * 1e6:
            entries = blocks[copy % len(blocks)]
            copy += 1
            ids = {e["id"]: "%08x" % rng.getrandbits(32) for e in entries}
            for e in entries:
                e = dict(e)
                e["id"] = ids[e["id"]]
                e["parentId"] = ids.get(e.get("parentId"), last_id) if e.get("parentId") else last_id
                if e.get("type") == "compaction":
                    e["firstKeptEntryId"] = ids.get(e.get("firstKeptEntryId"), e["id"])
                line = js_stringify(e) + "\n"
                f.write(line)
                size += len(line)
            last_id = e["id"]
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--synthetic-mb", type=float, default=40.0)
    parser.add_argument("--no-pandas", action="store_true")
    args = parser.parse_args(argv)

    files = [REAL_DIR / n for n in REAL_FILES if (REAL_DIR / n).is_file()]
    tmp = tempfile.TemporaryDirectory()
    v3 = [p for p in files if not p.name.endswith(".v1.jsonl")]
    if v3 and args.synthetic_mb > 0:
        files.append(make_synthetic(v3, args.synthetic_mb, Path(tmp.name)))
    if not files:
        print("no session files found (expected ../shared/datasets/pi-mono)")
        return 1

    rows = []
    for path in files:
        size = path.stat().st_size
        repeat = max(3, args.repeat if size < 10e6 else args.repeat // 2)
        fns: dict[str, Callable[[Path], Any]] = {"orjson": bare_orjson, "pimem": load_session}
        if not args.no_pandas:
            fns["pandas"] = pandas_lines
        times = interleaved(fns, path, repeat)
        t_orjson, t_pimem = min(times["orjson"]), min(times["pimem"])
        t_pandas = min(times["pandas"]) if "pandas" in times else None
        median_ratio = statistics.median(p / o for p, o in zip(times["pimem"], times["orjson"]))
        mem = peak_memory(load_session, path)
        mem_orjson = peak_memory(bare_orjson, path)
        rows.append({
            "file": path.name, "mb": size / 1e6, "lines": path.read_bytes().count(b"\n"),
            "orjson_s": t_orjson, "pimem_s": t_pimem, "pandas_s": t_pandas,
            "pimem_vs_orjson": t_pimem / t_orjson, "pimem_vs_orjson_median": median_ratio,
            "pandas_vs_pimem": (t_pandas / t_pimem) if t_pandas else None,
            "peak_mem_mb": mem / 1e6, "peak_mem_vs_file": mem / size,
            "orjson_peak_mem_mb": mem_orjson / 1e6, "orjson_peak_mem_vs_file": mem_orjson / size,
        })

    header = (f"{'file':32} {'MB':>6} {'orjson ms':>10} {'pimem ms':>9} {'pandas ms':>10} "
              f"{'pimem/orjson':>12} {'(median)':>8} {'pandas/pimem':>12} {'peak MB':>8} {'mem/file':>8} {'orjson mem/file':>15}")
    print(header)
    print("-" * len(header))
    for r in rows:
        pandas_ms = f"{r['pandas_s'] * 1000:10.1f}" if r["pandas_s"] else f"{'-':>10}"
        ratio = f"{r['pandas_vs_pimem']:12.2f}" if r["pandas_vs_pimem"] else f"{'-':>12}"
        print(f"{r['file']:32} {r['mb']:6.1f} {r['orjson_s'] * 1000:10.1f} {r['pimem_s'] * 1000:9.1f} "
              f"{pandas_ms} {r['pimem_vs_orjson']:12.2f} {r['pimem_vs_orjson_median']:8.2f} {ratio} {r['peak_mem_mb']:8.1f} "
              f"{r['peak_mem_vs_file']:8.2f} {r['orjson_peak_mem_vs_file']:15.2f}")
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "load", "python": platform.python_version(), "machine": platform.machine(),
        "orjson": orjson.__version__, "repeat": args.repeat, "rows": rows,
    }
    tmp_out = out_dir / ".bench_load.json.tmp"
    tmp_out.write_text(json.dumps(result, indent=2))
    os.replace(tmp_out, out_dir / "bench_load.json")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
