"""Single calls on the public path against Pi's warm Node, side by side: CPU time, interleaved rounds, medians.

For every input file (the real Pi sessions of ``../shared/datasets/pi-mono/`` with ``history/``, and the
bundled samples of ``datasets/sessions/``) the entries are loaded once by pimem (v1 files migrated) and
written, header first, to a temporary file that both sides read, so Pi and pimem work on the same JSON.
pimem's side is what a user writes: ``s = pimem.load_session(file)``, ``path = s.get_branch()``, then

==================  ==========================================================================
per leaf            for every leaf of the tree: ``pimem.build_session_context(s, leaf)`` and
                    ``pimem.estimate_context_tokens`` of its messages (Pi: ``buildSessionContext(entries,
                    leaf, byId)`` + ``estimateContextTokens``, with the session's id index)
every path entry    the same for every entry of the active path taken as the leaf
find_cut_point      ``pimem.find_cut_point(path, 0, len(path), keep)`` on the active path
prepare_compaction  ``pimem.prepare_compaction(path, settings)`` on the active path
==================  ==========================================================================

One Node process (Pi 0.87.1 from the oracle cache, modules imported by file path) stays up for the
whole run and is warmed on every call first (``--warm`` seconds of each), so its JIT is warm. Each
round times every call once in Node and once in Python (``process.cpuUsage`` / ``time.process_time``,
each call repeated to fill about ``--target`` seconds), the side going first alternating by round.
The figure is the median per-call CPU time over ``--rounds`` rounds, the ratio pimem ÷ Pi of the
medians (below 1: pimem is faster). Each timed call does all of its own work and nothing is carried
from one repetition to the next: what a session keeps is its index (``pimem.core.incremental.paths``:
entry types and runs of parent links, built once per session as Pi builds its ``byId`` map once, both
outside the timed calls, the index's cost printed with the loading time); ``get_branch`` notes the session
under the first entry of the list it returns, so that ``find_cut_point`` and ``prepare_compaction`` recognise
the list as the session's path (one comparison of its entries, by identity, with the index's path, in every
call) and need not check it again; they keep nothing. Before timing, each call's outputs are compared (contexts, estimates,
cut points, preparations as JSON text); the run fails unless they are identical.

    .venv/bin/python benchmarks/bench_single_calls.py [file.jsonl ...] [--rounds 7] [--target 0.05]
        [--warm 0.3] [--keep 20000] [--reserve 16384] [--out benchmarks/results/single_calls.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pimem  # noqa: E402
from pimem.base.js import js_stringify  # noqa: E402
from pimem.core.compaction.utils import set_member  # noqa: E402
from pimem.core.incremental.paths import session_index  # noqa: E402
from tests.oracle.install import node_path, pi_dist  # noqa: E402

SHARED = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared")) / "datasets" / "pi-mono"
CALLS = ["per leaf", "every path entry", "find_cut_point", "prepare_compaction"]

NODE_SCRIPT = r"""
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { createHash } from "node:crypto";
const dist = process.env.DIST;
const load = (rel) => import(pathToFileURL(join(dist, rel)).href);
const sm = await load("core/session-manager.js");
const cp = await load("core/compaction/compaction.js");
const files = new Map();
function open(file) {
  let f = files.get(file);
  if (f) return f;
  const entries = readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l))
    .filter((e) => e.type !== "session");
  const byId = new Map();
  for (const e of entries) byId.set(e.id, e);
  const parents = new Set(entries.map((e) => e.parentId));
  const leaves = entries.filter((e) => !parents.has(e.id)).map((e) => e.id);
  const leafId = entries.length ? entries[entries.length - 1].id : null;
  const path = [];
  for (let cur = byId.get(leafId); cur; cur = cur.parentId ? byId.get(cur.parentId) : undefined) path.push(cur);
  path.reverse();
  f = { entries, byId, leaves, path, pathIds: path.map((e) => e.id) };
  files.set(file, f);
  return f;
}
function contexts(f, ids) {
  const out = [];
  for (const id of ids) {
    const ctx = sm.buildSessionContext(f.entries, id, f.byId);
    out.push([ctx, cp.estimateContextTokens(ctx.messages)]);
  }
  return out;
}
const sha = (t) => createHash("sha256").update(t, "utf8").digest("hex");
const digests = new WeakMap();
function listDigest(list) {
  return sha(list.map((m) => {
    let d = digests.get(m);
    if (d === undefined) { d = sha(JSON.stringify(m)); digests.set(m, d); }
    return d;
  }).join(","));
}
// What is compared: message lists by digest, everything else as it is (Sets as arrays).
function comparable(call, out) {
  if (call === "per leaf" || call === "every path entry")
    return out.map(([ctx, est]) => [listDigest(ctx.messages), ctx.thinkingLevel, ctx.model, est]);
  if (call === "find_cut_point" || !out) return out ?? null;
  return { firstKeptEntryId: out.firstKeptEntryId, messagesToSummarize: listDigest(out.messagesToSummarize),
    turnPrefixMessages: listDigest(out.turnPrefixMessages), isSplitTurn: out.isSplitTurn, tokensBefore: out.tokensBefore,
    previousSummary: out.previousSummary ?? null,
    read: [...out.fileOps.read], written: [...out.fileOps.written], edited: [...out.fileOps.edited] };
}
const calls = {
  "per leaf": (f, a) => contexts(f, f.leaves),
  "every path entry": (f, a) => contexts(f, f.pathIds),
  "find_cut_point": (f, a) => cp.findCutPoint(f.path, 0, f.path.length, a.keep),
  "prepare_compaction": (f, a) => cp.prepareCompaction(f.path, { enabled: true, reserveTokens: a.reserve, keepRecentTokens: a.keep }),
};
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const req = JSON.parse(line);
  const f = open(req.file);
  const fn = calls[req.call];
  let reply;
  if (req.op === "output") {
    reply = { output: comparable(req.call, fn(f, req)) };
  } else if (req.op === "warm") {
    const t0 = cpu();
    let n = 0;
    while (cpu() - t0 < req.seconds || n < 3) { fn(f, req); n++; }
    reply = { calls: n, seconds: cpu() - t0 };
  } else {
    const t0 = cpu();
    for (let i = 0; i < req.reps; i++) fn(f, req);
    reply = { seconds: (cpu() - t0) / req.reps };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
"""


class Pi:
    """Pi 0.87.1 in one warm Node process, answering one request per line."""

    def __init__(self) -> None:
        node, dist = node_path(), pi_dist()
        if not (node.exists() and dist.exists()):
            raise SystemExit(f"Node or Pi 0.87.1 missing under {node.parent.parent}: run python -m tests.oracle.install")
        self._dir = tempfile.TemporaryDirectory(prefix="pimem-bench-")
        script = Path(self._dir.name) / "single_calls.mjs"
        script.write_text(NODE_SCRIPT, encoding="utf-8")
        self.proc = subprocess.Popen([str(node), str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, "DIST": str(dist)})

    def ask(self, **request: Any) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Node process ended (exit {self.proc.poll()}) on {request}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self._dir.cleanup()


def default_inputs() -> list[Path]:
    real = sorted(SHARED.glob("*.jsonl")) + sorted((SHARED / "history").glob("*.jsonl"))
    return real + sorted((ROOT / "datasets" / "sessions").glob("*.jsonl"))


class Input:
    """One input file: the JSON file both sides read, pimem's session of it, its active path and leaves."""

    def __init__(self, file: Path, tmp: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = pimem.load_session(file)
        self.name = file.name if file.parent.name != "history" else f"history/{file.name}"
        self.real = SHARED in file.parents
        self.json_file = tmp / f"{len(list(tmp.iterdir()))}-{file.name}"
        self.json_file.write_text("".join(js_stringify(e) + "\n" for e in [loaded.header, *loaded.entries]),
                                  encoding="utf-8")
        t0 = time.process_time()
        self.session = pimem.load_session(self.json_file)
        t1 = time.process_time()
        session_index(self.session)  # built once per session, as Pi's byId (the first context call would)
        t2 = time.process_time()
        self.load_ms, self.index_ms = (t1 - t0) * 1e3, (t2 - t1) * 1e3
        self.path = self.session.get_branch()
        self.leaves = [e["id"] for e in self.session.leaves()]
        self.path_ids = [e["id"] for e in self.path]


def _contexts(inp: Input, ids: list[str]) -> list:
    out = []
    for leaf in ids:
        ctx = pimem.build_session_context(inp.session, leaf)
        out.append((ctx, pimem.estimate_context_tokens(ctx.messages)))
    return out


def pimem_calls(args: argparse.Namespace) -> dict[str, Callable[[Input], Any]]:
    settings = pimem.CompactionSettings(True, args.reserve, args.keep)
    return {
        "per leaf": lambda inp: _contexts(inp, inp.leaves),
        "every path entry": lambda inp: _contexts(inp, inp.path_ids),
        "find_cut_point": lambda inp: pimem.find_cut_point(inp.path, 0, len(inp.path), args.keep),
        "prepare_compaction": lambda inp: pimem.prepare_compaction(inp.path, settings),
    }


class Digests:
    """sha256 of a message list as Pi's side computes it: the comma-joined sha256 of each message's JSON."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[dict, str]] = {}

    def one(self, message: dict) -> str:
        hit = self._memo.get(id(message))
        if hit is None or hit[0] is not message:
            hit = (message, hashlib.sha256(js_stringify(message).encode("utf-8", "surrogatepass")).hexdigest())
            self._memo[id(message)] = hit
        return hit[1]

    def of(self, messages: list[dict]) -> str:
        return hashlib.sha256(",".join(map(self.one, messages)).encode()).hexdigest()


def _members(values: Any) -> list[str]:
    return sorted(js_stringify(set_member(v)) for v in values)


def comparable(call: str, value: Any, digests: Digests, from_pi: bool) -> Any:
    """One call's output as compared: message lists by digest, file sets sorted; pimem's in Pi's field names."""
    if from_pi:
        if call == "prepare_compaction" and value is not None:
            value = {**value, **{k: _members(value[k]) for k in ("read", "written", "edited")}}
        return value
    if call in ("per leaf", "every path entry"):
        return [[digests.of(c.messages), c.thinking_level, c.model,
                 {"tokens": e.tokens, "usageTokens": e.usage_tokens, "trailingTokens": e.trailing_tokens,
                  "lastUsageIndex": e.last_usage_index}] for c, e in value]
    if call == "find_cut_point":
        return {"firstKeptEntryIndex": value.first_kept_entry_index, "turnStartIndex": value.turn_start_index,
                "isSplitTurn": value.is_split_turn}
    if value is None:
        return None
    ops = value.file_ops
    return {"firstKeptEntryId": value.first_kept_entry_id, "messagesToSummarize": digests.of(value.messages_to_summarize),
            "turnPrefixMessages": digests.of(value.turn_prefix_messages), "isSplitTurn": value.is_split_turn,
            "tokensBefore": value.tokens_before, "previousSummary": value.previous_summary,
            "read": _members(ops.read), "written": _members(ops.written), "edited": _members(ops.edited)}


def reps_for(fn: Callable[[], Any], target: float) -> int:
    t0 = time.process_time()
    fn()
    one = max(time.process_time() - t0, 1e-5)
    return max(1, min(10_000, round(target / one)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--target", type=float, default=0.05, help="CPU seconds per timed batch")
    ap.add_argument("--warm", type=float, default=0.3, help="CPU seconds of warm-up per call, each side")
    ap.add_argument("--keep", type=int, default=20000)
    ap.add_argument("--reserve", type=int, default=16384)
    ap.add_argument("--calls", nargs="+", default=CALLS, choices=CALLS)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "single_calls.json")
    args = ap.parse_args()
    files = args.files or default_inputs()
    pi = Pi()
    calls = pimem_calls(args)
    digests = Digests()
    report: dict[str, Any] = {"benchmark": "single_calls", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "loadavg_start": os.getloadavg(), "keep": args.keep, "reserve": args.reserve,
                              "rounds": args.rounds, "files": {}}
    ok = True
    with tempfile.TemporaryDirectory(prefix="pimem-inputs-") as tmp:
        inputs = [Input(f, Path(tmp)) for f in files]
        print(f"{len(inputs)} inputs; load {os.getloadavg()[0]:.2f}; pimem's public calls on pimem.load_session's "
              f"{type(inputs[0].session).__module__}.Session")
        print(f"{'input':32} {'entries':>7} {'leaves':>6} {'path':>5}  " + "  ".join(f"{c:>18}" for c in args.calls))
        for inp in inputs:
            req = {"file": str(inp.json_file), "keep": args.keep, "reserve": args.reserve}
            row: dict[str, Any] = {"entries": len(inp.session.entries), "leaves": len(inp.leaves),
                                   "path": len(inp.path), "real": inp.real, "load_ms": inp.load_ms,
                                   "index_ms": inp.index_ms, "calls": {}}
            cells = []
            for call in args.calls:
                fn = calls[call]
                mine = comparable(call, fn(inp), digests, False)
                theirs = comparable(call, pi.ask(op="output", call=call, **req)["output"], digests, True)
                same = json.loads(js_stringify(mine)) == theirs
                ok &= same
                pi.ask(op="warm", call=call, seconds=args.warm, **req)
                t_end = time.process_time() + args.warm
                while time.process_time() < t_end:
                    fn(inp)
                reps = reps_for(lambda: fn(inp), args.target)
                pi_reps = max(1, round(args.target / max(pi.ask(op="time", call=call, reps=1, **req)["seconds"], 1e-6)))
                pi_reps = min(pi_reps, 20_000)
                mine_t, pi_t = [], []
                for r in range(args.rounds):
                    order = (0, 1) if r % 2 == 0 else (1, 0)
                    for side in order:
                        if side == 0:
                            pi_t.append(pi.ask(op="time", call=call, reps=pi_reps, **req)["seconds"])
                        else:
                            t0 = time.process_time()
                            for _ in range(reps):
                                fn(inp)
                            mine_t.append((time.process_time() - t0) / reps)
                m, p = statistics.median(mine_t), statistics.median(pi_t)
                row["calls"][call] = {"pimem_s": m, "pi_s": p, "ratio": m / p, "identical": same,
                                      "pimem_rounds": mine_t, "pi_rounds": pi_t}
                cells.append(f"{m * 1e3:7.3f}/{p * 1e3:6.3f} {m / p:4.2f}" + ("" if same else " DIFF"))
            print(f"{inp.name:32} {row['entries']:7} {row['leaves']:6} {row['path']:5}  " + "  ".join(cells)
                  + f"   (load {inp.load_ms:.1f} ms, index {inp.index_ms:.2f} ms)", flush=True)
            report["files"][inp.name] = row
    pi.close()
    print("\ncells: pimem ms / Pi ms per call, ratio pimem/Pi (medians of the rounds)")
    summary: dict[str, Any] = {}
    for call in args.calls:
        for group, rows in (("real", [r for r in report["files"].values() if r["real"]]),
                            ("all", list(report["files"].values()))):
            ratios = [row["calls"][call]["ratio"] for row in rows]
            if not ratios:
                continue
            summary.setdefault(call, {})[group] = {"median": statistics.median(ratios), "max": max(ratios),
                                                   "min": min(ratios), "n": len(ratios)}
            got = summary[call][group]
            print(f"{call:20} {group:4} median ratio {got['median']:.2f} (min {got['min']:.2f}, "
                  f"max {got['max']:.2f}) over {len(ratios)} inputs")
    report["summary"] = summary
    report["loadavg_end"] = os.getloadavg()
    report["identical"] = ok
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmpname = tempfile.mkstemp(dir=args.out.parent, prefix=".single_calls", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    os.replace(tmpname, args.out)
    print(f"outputs identical: {ok}; wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
