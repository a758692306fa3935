"""Regenerate the oracle goldens: ``python -m tests.oracle.make_goldens [--samples|--real|--generated]``.

Runs Pi 0.87.1 (via the oracle) over the sample sessions, the real sessions (digests only)
and a fixed set of generated trees, and writes gzip JSON files under ``tests/goldens/``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.conftest import REAL_DIR, REAL_V3, SAMPLES_DIR
from tests.oracle.client import Oracle
from tests.oracle.goldens import write_goldens
from tests.oracle.install import PI_VERSION
from tests.oracle.mirror import Mirror, normalize
from tests.oracle.plans import canonical_digest, file_digest, request_key, requests_for


def session_goldens(oracle: Oracle, path: Path, kind: str) -> Path:
    info = oracle.info(path)
    entry_ids = [e["id"] for e in oracle.load_entries(path)] if kind == "sample" else None
    if entry_ids is None:
        entry_ids = [e.get("id") for e in Mirror().session(path).entries]
    reqs = [{"op": "info", "path": str(path)}] + requests_for(path, info, entry_ids, kind)
    results = oracle.run_batch(reqs)
    payload = {
        "pi_version": PI_VERSION,
        "session": path.name,
        "file_sha256": file_digest(path),
        "requests": {},
        "results": {},
    }
    for req, res in zip(reqs, results):
        key = request_key(req)
        res = normalize(req["op"], res)
        payload["requests"][key] = {k: v for k, v in req.items() if k != "path"}
        payload["results"][key] = canonical_digest(res) if kind == "real" else res
    return write_goldens(path, kind, payload)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    which = set(a.lstrip("-") for a in argv) or {"samples", "real", "generated"}
    oracle = Oracle()
    t0 = time.perf_counter()
    if "samples" in which:
        for path in sorted(SAMPLES_DIR.glob("*.jsonl")):
            print("sample", path.name, "->", session_goldens(oracle, path, "sample"))
    if "real" in which:
        for name in REAL_V3:
            path = REAL_DIR / name
            if path.exists():
                print("real", name, "->", session_goldens(oracle, path, "real"))
    if "generated" in which:
        from tests.test_differential_property import write_generated_goldens

        print("generated ->", write_generated_goldens(oracle))
    print(f"done in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
