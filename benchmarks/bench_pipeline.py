"""Projection + preparation + serialization: pimem against Pi's own JavaScript, side by side.

Pi runs in Node 22 on the release's own modules (imported by file path), pimem in this
process, on the same session files, in one run. Measured on the active path of each session:

==========================  ===================================================================
one preparation, cold       ``prepare_compaction(path)`` on freshly parsed entries, no caches
                            (Pi: ``prepareCompaction`` on freshly parsed entries; its JIT is
                            already warm — the very first, JIT-cold call is reported apart)
one preparation, warm       pimem: ``ContextTracker.prepare()`` on a tracker standing at the
                            path; Pi: ``prepareCompaction`` again on the same objects
projection                  ``build_session_projection(path)`` / ``buildSessionProjection``
serialization, cold / warm  ``serialize_conversation(convert_to_llm(msgs))`` of the full
                            preparation's messages / the same with a warm SerializationCache
                            (Pi: ``serializeConversation(convertToLlm(msgs))``, JIT warm)
sequence, pure              every prefix of the path (leaf = each entry in turn): projection,
                            preparation, serialization, nothing reused between prefixes
sequence, incremental       the same outputs from a ``ContextTracker`` growing entry by entry
==========================  ===================================================================

Single operations: best and median of ``--reps`` runs; sequences: best of ``--rounds``. The
ratio is pimem ÷ Pi on the best times (below 1: pimem is faster). Every sequence prints a
digest of its outputs (messages in context, first kept entry, tokens before, serialized
text at every prefix); the run fails unless pimem (pure and incremental) and Pi agree.

    python benchmarks/bench_pipeline.py [session.jsonl ...] [--keep 20000] [--reserve 16384]
                                        [--reps 30] [--rounds 3] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pimem.base.js import js_stringify, loads_line  # noqa: E402
from pimem.core.compaction.compaction import CompactionSettings, prepare_compaction  # noqa: E402
from pimem.core.compaction.utils import serialize_conversation  # noqa: E402
from pimem.core.incremental.caches import SerializationCache, serialize_messages  # noqa: E402
from pimem.core.incremental.tracker import ContextTracker  # noqa: E402
from pimem.core.messages import convert_to_llm  # noqa: E402
from pimem.core.session_manager import build_session_path, build_session_projection

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.oracle.install import node_path, pi_dist  # noqa: E402 

NODE = node_path()
DIST = pi_dist()
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
const reps = Number(process.argv[6]);
const now = () => process.hrtime.bigint();
const secs = (t0) => Number(now() - t0) / 1e9;
function activePath() {
  const all = sm.loadEntriesFromFile(file).filter((e) => e.type !== "session");
  const byId = new Map(all.map((e) => [e.id, e]));
  const path = [];
  for (let cur = all[all.length - 1]; cur; cur = cur.parentId ? byId.get(cur.parentId) : undefined) path.push(cur);
  return path.reverse();
}
function stats(times) {
  const s = [...times].sort((a, b) => a - b);
  return { best: s[0], median: s[Math.floor(s.length / 2)] };
}
function timeEach(setup, fn) {
  const times = [];
  for (let r = 0; r < reps; r++) {
    const arg = setup();
    const t0 = now();
    fn(arg);
    times.push(secs(t0));
  }
  return stats(times);
}
const path = activePath();
// The very first call of the process: parse and JIT are cold.
let t0 = now();
cp.prepareCompaction(path, settings);
const firstPrepare = secs(t0);
function sequence() {
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
sequence(); // warm-up (JIT)
const seqTimes = [];
let out;
for (let r = 0; r < rounds; r++) {
  t0 = now();
  out = sequence();
  seqTimes.push(secs(t0));
}
const prep = cp.prepareCompaction(path, settings);
const msgs = prep ? prep.messagesToSummarize : [];
const result = {
  prefixes: path.length,
  digest: createHash("sha256").update(JSON.stringify(out)).digest("hex"),
  first_prepare: firstPrepare,
  prepare_cold: timeEach(() => activePath(), (p) => cp.prepareCompaction(p, settings)),
  prepare_warm: timeEach(() => null, () => cp.prepareCompaction(path, settings)),
  projection: timeEach(() => null, () => sm.buildSessionProjection(path)),
  serialize: timeEach(() => null, () => ut.serializeConversation(ms.convertToLlm(msgs))),
  sequence: stats(seqTimes),
};
console.log(JSON.stringify(result));
"""


def load_path(session: Path) -> list[dict]:
    """The active path of a session file, parsed afresh (new objects every call)."""
    entries = []
    with open(session, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                entries.append(loads_line(line))
            except ValueError:
                continue
    return build_session_path([e for e in entries if isinstance(e, dict) and e.get("type") != "session"])


def stats(times: list[float]) -> dict[str, float]:
    s = sorted(times)
    return {"best": s[0], "median": s[len(s) // 2]}


def time_each(reps: int, fn: Callable[[Any], Any], setup: Callable[[], Any] = lambda: None) -> dict[str, float]:
    times = []
    for _ in range(reps):
        arg = setup()
        t0 = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t0)
    return stats(times)


def sequence_pure(path: list[dict], settings: CompactionSettings) -> list:
    out = []
    for i in range(1, len(path) + 1):
        prefix = path[:i]
        projection = build_session_projection(prefix)
        prep = prepare_compaction(prefix, settings)
        text = serialize_conversation(convert_to_llm(prep.messages_to_summarize)) if prep else None
        out.append([len(projection.messages), prep.first_kept_entry_id if prep else None,
                    prep.tokens_before if prep else None, text])
    return out


def sequence_incremental(path: list[dict], settings: CompactionSettings) -> list:
    out = []
    tracker = ContextTracker()
    for entry in path:
        tracker.append(entry)
        prep = tracker.prepare(settings)
        text = tracker.serialize(prep.messages_to_summarize) if prep else None
        out.append([len(tracker.projection.messages), prep.first_kept_entry_id if prep else None,
                    prep.tokens_before if prep else None, text])
    return out


def best_of(rounds: int, fn: Callable[[], Any]) -> tuple[dict[str, float], Any]:
    times, result = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return stats(times), result


def digest(out: list) -> str:
    return hashlib.sha256(js_stringify(out).encode("utf-8", "surrogatepass")).hexdigest()


def run_node(script: Path, session: Path, args: argparse.Namespace) -> dict | None:
    if not (NODE.exists() and DIST.exists()):
        return None
    proc = subprocess.run(
        [str(NODE), str(script), str(session), str(args.reserve), str(args.keep), str(args.rounds), str(args.reps)],
        capture_output=True, text=True, env={**os.environ, "DIST": str(DIST)}, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"Pi benchmark failed on {session}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_pimem(session: Path, args: argparse.Namespace) -> dict[str, Any]:
    settings = CompactionSettings(True, args.reserve, args.keep)
    path = load_path(session)
    reps = args.reps
    res: dict[str, Any] = {"prefixes": len(path)}
    res["prepare_cold"] = time_each(reps, lambda p: prepare_compaction(p, settings), lambda: load_path(session))
    tracker = ContextTracker(path)
    tracker.prepare(settings)
    res["prepare_warm"] = time_each(reps, lambda _: tracker.prepare(settings))
    res["projection"] = time_each(reps, lambda _: build_session_projection(path))
    prep = prepare_compaction(path, settings)
    msgs = prep.messages_to_summarize if prep else []
    res["serialize"] = time_each(reps, lambda _: serialize_conversation(convert_to_llm(msgs)))
    ser_cache = SerializationCache()
    serialize_messages(msgs, ser_cache)
    res["serialize_warm"] = time_each(reps, lambda _: serialize_messages(msgs, ser_cache))
    res["sequence"], out_pure = best_of(args.rounds, lambda: sequence_pure(path, settings))
    res["sequence_incremental"], out_inc = best_of(args.rounds, lambda: sequence_incremental(path, settings))
    res["digest_pure"], res["digest_incremental"] = digest(out_pure), digest(out_inc)
    return res


# (label, pimem key, Pi key, unit)
ROWS = [
    ("one preparation, cold", "prepare_cold", "prepare_cold", "ms"),
    ("one preparation, warm (tracker)", "prepare_warm", "prepare_warm", "ms"),
    ("projection", "projection", "projection", "ms"),
    ("serialization, cold", "serialize", "serialize", "ms"),
    ("serialization, warm cache", "serialize_warm", "serialize", "ms"),
    ("every prefix, pure", "sequence", "sequence", "s"),
    ("every prefix, incremental", "sequence_incremental", "sequence", "s"),
]


def table(name: str, mine: dict[str, Any], pi: dict[str, Any] | None) -> str:
    lines = [
        f"\n{name}: {mine['prefixes']} entries on the active path",
        f"  {'measurement':34} {'pimem best':>11} {'(median)':>10} {'Pi best':>10} {'(median)':>10} {'pimem/Pi':>9}",
    ]
    for label, mk, pk, unit in ROWS:
        scale = 1e3 if unit == "ms" else 1.0
        m = mine[mk]
        row = f"  {label:34} {m['best'] * scale:8.3f} {unit:2} {m['median'] * scale:10.3f}"
        if pi is not None:
            p = pi[pk]
            row += f" {p['best'] * scale:7.3f} {unit:2} {p['median'] * scale:10.3f} {m['best'] / p['best']:9.3f}"
        lines.append(row)
    if pi is not None:
        lines.append(f"  Pi's very first prepareCompaction in a fresh process (JIT cold): {pi['first_prepare'] * 1e3:.2f} ms")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sessions", nargs="*", type=Path)
    ap.add_argument("--keep", type=int, default=20000)
    ap.add_argument("--reserve", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    sessions = args.sessions or [p for p in DEFAULT_SESSIONS if p.exists()]
    if not sessions:
        print("no sessions given and the real sessions are not available", file=sys.stderr)
        return 2
    report: dict[str, Any] = {
        "benchmark": "pipeline",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg())},
        "settings": {"keepRecentTokens": args.keep, "reserveTokens": args.reserve},
        "reps": args.reps, "rounds": args.rounds,
        "sessions": {},
    }
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench.mjs"
        script.write_text(NODE_SCRIPT)
        for session in sessions:
            pi = run_node(script, session, args)
            mine = measure_pimem(session, args)
            agree = mine["digest_pure"] == mine["digest_incremental"] and (pi is None or pi["digest"] == mine["digest_pure"])
            ok &= agree
            print(table(session.name, mine, pi))
            print(f"  outputs agree (pimem pure / incremental{' / Pi' if pi else ''}): {agree}")
            ratios = {label: mine[mk]["best"] / pi[pk]["best"] for label, mk, pk, _ in ROWS} if pi else None
            report["sessions"][session.name] = {"pimem": mine, "pi": pi, "ratios": ratios, "agree": agree}
    if not (NODE.exists() and DIST.exists()):
        print("\n(Node or the Pi release is not installed: pimem timings only)")
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "pipeline.json"
    fd, tmpname = tempfile.mkstemp(dir=args.out, prefix=".pipeline", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    os.replace(tmpname, target)
    print(f"\nwrote {target}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
