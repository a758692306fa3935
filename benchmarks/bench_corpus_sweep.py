"""Corpus sweep: many real-sized sessions x 20 settings, extractive summarizer, every default measure.

The corpus is built from the bundled samples and the real Pi sessions (``../shared/datasets/pi-mono/``):
session ``k`` is source ``k mod len(sources)`` with fresh ids (tree links, first kept entries, labels and
branch summaries follow) and a marker ``[k]`` appended to every text, thinking and tool-result text block,
so no two sessions share a text: nothing a process memoises for one session is free for the next one.
The sessions are written to a temporary folder and swept from their paths, as a user would.

Reported: CPU seconds of the whole sweep (this process and its workers, ``getrusage``), per run, wall
time, the largest worker's peak resident memory, the projection to ``--goal-sessions`` x 20 settings
on 2 cores (CPU-s per run x runs / 2), and, with ``--dask``, the same runs on a ``dask.distributed``
LocalCluster with 2 worker processes, their CPU time, and whether every row equals the process
pool's (timing and worker columns left out).

    .venv/bin/python benchmarks/bench_corpus_sweep.py [--sessions 60] [--workers 2] [--dask]
        [--out benchmarks/results/corpus_sweep.json]

Side by side with other code: ``--against REF`` (a git commit or a checkout's folder) sweeps the same
marked corpus through this checkout and through ``REF`` in two processes started together (one
process each, so each has a core), ``--rounds`` times, and reports each side's CPU seconds and the
ratio this / ``REF``, and whether every row of the first round is the same on both sides (it fails
when not). Both sides share the machine at the same moments, so the ratio holds where the
machine's speed drifts between runs and absolute figures do not. A commit is checked out into a
temporary worktree and removed after.

    .venv/bin/python benchmarks/bench_corpus_sweep.py --against 1b4f142 [--sessions 48] [--rounds 2]

Equality check of every row (not a timing): ``--check-rows FILE`` sweeps the source sessions themselves
(the samples and the real sessions, unmarked) x the 20 settings and writes every row (timing and worker
columns left out) to ``FILE`` when it does not exist, else compares them with it and fails on the first
difference. Run it before a change and again after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.core.session_manager import Session, load_session  # noqa: E402
from pimem.experiments.sweep import sweep  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_sweep import GRID  # noqa: E402  (2 x 5 x 2 = 20 settings)

RESULTS = ROOT / "benchmarks" / "results"
VOLATILE = ("elapsed_s", "worker_pid", "resumed", "traceback")
_LINKS = ("id", "parentId", "firstKeptEntryId", "targetId", "fromId")


def sources() -> list[Session]:
    return [load_session(f) for f in source_paths()]


def _mark_blocks(content: Any, marker: str) -> Any:
    if isinstance(content, str):
        return content + marker
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            block = {**block, "text": block["text"] + marker}
        elif isinstance(block, dict) and block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
            block = {**block, "thinking": block["thinking"] + marker}
        out.append(block)
    return out


def variant(source: Session, k: int) -> Session:
    """Session ``k`` of the corpus: ``source`` with fresh ids and every text marked (see module docs)."""
    ids = {e["id"]: f"{k:04x}{i:04x}" for i, e in enumerate(source.entries) if isinstance(e.get("id"), str)}
    marker = f" [{k}]"
    entries = []
    for e in source.entries:
        c = dict(e)
        for key in _LINKS:
            value = c.get(key)
            if isinstance(value, str) and value in ids:
                c[key] = ids[value]
        if isinstance(c.get("message"), dict):
            m = dict(c["message"])
            if "content" in m:
                m["content"] = _mark_blocks(m["content"], marker)
            c["message"] = m
        if isinstance(c.get("summary"), str):
            c["summary"] = c["summary"] + marker
        entries.append(c)
    header = dict(source.header)
    header["id"] = f"{header.get('id', 'session')}-{k}"
    return Session(header, entries)


def build_corpus(n: int, folder: Path) -> list[Path]:
    srcs = sources()
    paths = []
    for k in range(n):
        path = folder / f"session-{k:04d}.jsonl"
        variant(srcs[k % len(srcs)], k).write(path)
        paths.append(path)
    return paths


def _cpu_self_and_children() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _worker_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _stable(df: Any) -> Any:
    cols = [c for c in df.columns if c not in VOLATILE]
    return df[cols].sort_values(["session_index", "setting_index"]).reset_index(drop=True)


def source_paths() -> list[Path]:
    files = sorted((ROOT / "datasets" / "sessions").glob("*.jsonl"))
    real = ROOT.parent / "shared" / "datasets" / "pi-mono"
    return files + [p for p in (real / "before-compaction.jsonl", real / "large-session.jsonl") if p.exists()]


def _same(a: Any, b: Any) -> bool:
    """Cells equal: the same value, both missing (None or NaN), or the same text."""
    if a is b:
        return True
    missing_a = a is None or (isinstance(a, float) and math.isnan(a))
    missing_b = b is None or (isinstance(b, float) and math.isnan(b))
    if missing_a or missing_b:
        return missing_a and missing_b and type(a) is type(b)
    try:
        if a == b:
            return type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float)))
    except Exception:  # noqa: BLE001 - arrays and the like: compare their text
        pass
    return repr(a) == repr(b)


def check_rows(path: Path, workers: int) -> int:
    """Write the source sessions' rows to ``path``, or compare them with the rows there."""
    import pandas as pd

    files = source_paths()
    cpu0, t0 = _cpu_self_and_children(), time.perf_counter()
    df = _stable(sweep(files, GRID, workers=workers, progress=False))
    cpu, wall = _cpu_self_and_children() - cpu0, time.perf_counter() - t0
    df["session"] = df["session"].map(lambda s: Path(s).name)
    print(f"{len(files)} sessions x 20 settings = {len(df)} runs: CPU {cpu:.1f} s ({cpu / len(df):.3f} per run), "
          f"wall {wall:.1f} s, {int(df['error'].notna().sum())} errors", flush=True)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_pickle(path)
        print(f"rows written to {path}")
        return 0
    df.to_pickle(path.with_name(path.name + ".new"))  # to compare again without a new run
    return 1 if _differences(pd.read_pickle(path), df, str(path)) else 0


def _differences(ref: Any, df: Any, name: str) -> int:
    """The cells of ``df`` that differ from ``ref`` (printing the first 20), or 1 for another shape."""
    if list(ref.columns) != list(df.columns) or ref.shape != df.shape:
        print(f"columns or shape differ: {ref.shape} {list(ref.columns)} vs {df.shape} {list(df.columns)}")
        return 1
    bad = 0
    for column in ref.columns:
        for i, (a, b) in enumerate(zip(ref[column], df[column])):
            if _same(a, b):
                continue
            bad += 1
            if bad <= 20:
                print(f"row {i} ({df['session'][i]}, setting {df['setting_index'][i]}) {column}: {a!r} != {b!r}")
    print(f"{len(df)} rows x {len(df.columns)} columns compared with {name}: "
          + ("all equal" if not bad else f"{bad} cells differ"))
    return bad


# One side of ``--against``: the sweep of a folder's sessions with the pimem of ``root`` (run as
# ``python -c``, so that the other checkout's package is the one imported).
_SIDE = """
import json, resource, sys, time, warnings
from pathlib import Path
root, folder, grid, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)
warnings.simplefilter("ignore")
from pimem.experiments.sweep import sweep
c0 = time.process_time()
df = sweep(sorted(Path(folder).glob("*.jsonl")), grid, workers=1, progress=False)
cpu = time.process_time() - c0
df.to_pickle(rows)
print(json.dumps({"root": root, "cpu_s": cpu, "runs": len(df),
                  "errors": int(df["error"].notna().sum()), "compactions": int(df["compactions"].sum()),
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def side_by_side(against: str, sessions: int, rounds: int) -> dict[str, Any]:
    """``--against``: this checkout and ``against`` sweep the same corpus at the same time (see docs)."""
    import statistics
    import subprocess

    import pandas as pd

    if rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(against)
        if not other.is_dir():  # a commit: check it out beside this one
            other = Path(tmp) / "against"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(other), against],
                           check=True)
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        try:
            build_corpus(sessions, folder)
            print(f"{sessions} marked sessions x 20 settings, this checkout against {against}, "
                  f"{rounds} round(s), one process each; load {os.getloadavg()[0]:.2f}", flush=True)
            ratios, out_rounds = [], []
            for k in range(rounds):
                sides = [ROOT, other] if k % 2 == 0 else [other, ROOT]  # which starts first alternates
                rows = {str(r): Path(tmp) / f"rows-{i}.pkl" for i, r in enumerate(sides)}
                procs = {str(r): subprocess.Popen([sys.executable, "-c", _SIDE, str(r), str(folder), json.dumps(GRID),
                                                   str(rows[str(r)])], stdout=subprocess.PIPE, text=True)
                         for r in sides}
                printed = {r: p.communicate()[0] for r, p in procs.items()}
                for r, p in procs.items():
                    if p.returncode:
                        raise RuntimeError(f"the sweep with the pimem of {r} failed (exit {p.returncode})")
                got = {r: json.loads(text.strip().splitlines()[-1]) for r, text in printed.items()}
                mine, theirs = got[str(ROOT)], got[str(other)]
                if k == 0:  # the same rows on both sides (timing and worker columns left out)
                    equal = not _differences(*(_stable(pd.read_pickle(rows[str(r)])) for r in (other, ROOT)),
                                             f"the rows of {against}")
                ratios.append(mine["cpu_s"] / theirs["cpu_s"])
                out_rounds.append({"this": mine, "against": theirs})
                print(f"round {k + 1}: this {mine['cpu_s']:.1f} CPU-s ({mine['runs']} runs, {mine['errors']} errors, "
                      f"peak RSS {mine['peak_rss_mib']:.0f} MiB), {against} {theirs['cpu_s']:.1f} CPU-s "
                      f"({theirs['runs']} runs, {theirs['errors']} errors, "
                      f"peak RSS {theirs['peak_rss_mib']:.0f} MiB): ratio {ratios[-1]:.3f}; "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
            print(f"median ratio this / {against}: {statistics.median(ratios):.3f} over {rounds} round(s)")
            return {"against": against, "sessions": sessions, "rounds": out_rounds, "ratios": ratios,
                    "median_ratio": statistics.median(ratios), "rows_equal": equal}
        finally:  # the temporary folder goes with the block; git forgets the worktree here
            if other != Path(against):
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dask", action="store_true", help="run the same sweep on a 2-worker LocalCluster")
    ap.add_argument("--goal-sessions", type=int, default=1000)
    ap.add_argument("--out", help="the JSON file of the results (default: benchmarks/results/corpus_sweep.json, "
                                  "with --against corpus_sweep_against.json)")
    ap.add_argument("--check-rows", metavar="FILE", help="write or compare the source sessions' rows (see docs)")
    ap.add_argument("--against", metavar="REF", help="a commit or checkout to sweep side by side with (see docs)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of --against")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.check_rows:
        return check_rows(Path(args.check_rows), args.workers)
    if args.against:
        result = side_by_side(args.against, args.sessions, args.rounds)
        path = Path(args.out or RESULTS / "corpus_sweep_against.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
        return 0 if result["rows_equal"] else 1
    out: dict[str, Any] = {"sessions": args.sessions, "settings": 20}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(args.sessions, Path(tmp))
        runs = len(corpus) * 20
        mb = sum(p.stat().st_size for p in corpus) / 2**20
        print(f"{len(corpus)} sessions ({mb:.1f} MB) x 20 settings = {runs} runs; {os.cpu_count()} cores; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        cpu0, t0 = _cpu_self_and_children(), time.perf_counter()
        df = sweep(corpus, GRID, workers=args.workers, progress=False)
        wall = time.perf_counter() - t0
        cpu = _cpu_self_and_children() - cpu0
        errors = df["error"].dropna().tolist()
        per_run = cpu / runs
        goal_runs = args.goal_sessions * 20
        projected = per_run * goal_runs / 2
        worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest worker's, MiB
        out.update({"runs": runs, "workers": args.workers, "wall_s": wall, "cpu_s": cpu, "cpu_s_per_run": per_run,
                    "peak_worker_rss_mib": worker_rss,
                    "mean_run_elapsed_s": float(df["elapsed_s"].mean()), "errors": len(errors),
                    "compactions": int(df["compactions"].sum()),
                    "projected_goal_wall_s_on_2_cores": projected, "goal_runs": goal_runs})
        print(f"process pool ({args.workers} workers): wall {wall:.1f} s, CPU {cpu:.1f} s, {per_run:.3f} CPU-s per run "
              f"(median run {df['elapsed_s'].median():.3f} s wall, max {df['elapsed_s'].max():.2f} s), "
              f"{int(df['compactions'].sum())} compactions, {len(errors)} errors; peak worker RSS {worker_rss:.0f} MiB; "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"projected {args.goal_sessions} sessions x 20 settings on 2 cores: {projected / 60:.1f} min "
              f"({goal_runs} runs x {per_run:.3f} CPU-s / 2)", flush=True)
        slow = df.sort_values("elapsed_s", ascending=False).head(5)
        print("slowest runs:", "; ".join(
            f"{Path(r.session).name} reserve {r.reserve_tokens} keep {r.keep_recent_tokens} window {r.context_window}: "
            f"{r.elapsed_s:.2f} s, {r.compactions} compactions" for r in slow.itertuples()))
        if errors:
            print("first error:", errors[0])
        if args.dask:
            from distributed import Client, LocalCluster

            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                before = sum(client.run(_worker_cpu).values())
                t0 = time.perf_counter()
                ddf = sweep(corpus, GRID, client=client, progress=False)
                dwall = time.perf_counter() - t0
                dcpu = sum(client.run(_worker_cpu).values()) - before
            a, b = _stable(df), _stable(ddf)
            equal = a.shape == b.shape and list(a.columns) == list(b.columns) and bool(
                a.astype(str).equals(b.astype(str)))
            out.update({"dask_wall_s": dwall, "dask_worker_cpu_s": dcpu, "dask_rows_equal": equal,
                        "dask_cpu_ratio": dcpu / cpu if cpu else math.nan})
            print(f"dask LocalCluster (2 worker processes): wall {dwall:.1f} s, worker CPU {dcpu:.1f} s "
                  f"({dcpu / cpu:.2f}x the process pool), rows equal: {equal}", flush=True)
    path = Path(args.out or RESULTS / "corpus_sweep.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
