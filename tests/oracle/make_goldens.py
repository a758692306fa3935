"""Regenerate the oracle goldens: ``python -m tests.oracle.make_goldens [--samples|--real|--generated]``.

Runs Pi 0.87.1 (via the oracle) over the sample sessions, the real sessions (digests only)
and a fixed set of generated trees, and writes gzip JSON files under ``tests/goldens/``.
``--release 1.6.0`` does the same with Pi 1.6.0 (samples + sessions written by 1.6.0) into
``tests/goldens/pi-1.6.0/``; ``--release 0.13.2`` writes Pi 0.13.2's goldens.
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


def session_goldens(oracle: Oracle, path: Path, kind: str, release: str | None = None) -> Path:
    info = oracle.info(path)
    entry_ids = [e["id"] for e in oracle.load_entries(path)] if kind == "sample" else None
    if entry_ids is None:
        entry_ids = [e.get("id") for e in Mirror().session(path).entries]
    reqs = [{"op": "info", "path": str(path)}] + requests_for(path, info, entry_ids, kind, release)
    results = oracle.run_batch(reqs)
    payload = {
        "pi_version": release or PI_VERSION,
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
    return write_goldens(path, kind, payload, release)


def release_goldens(release: str) -> None:
    t0 = time.perf_counter()
    if release == "1.6.0":
        from tests.releases.test_differential_pi_1_6_0 import SAMPLE_PATHS, write_generated_goldens

        oracle = Oracle(release=release)
        for path in SAMPLE_PATHS:
            print("sample", path.name, "->", session_goldens(oracle, path, "sample", release))
        for name in REAL_V3:
            if (REAL_DIR / name).exists():
                print("real", name, "->", session_goldens(oracle, REAL_DIR / name, "real", release))
        print("generated ->", write_generated_goldens(oracle))
    elif release == "0.13.2":
        from tests.releases.test_differential_pi_0_13_2 import write_goldens_0_13_2

        print("0.13.2 ->", write_goldens_0_13_2(Oracle(release=release, driver="driver_0_13_2.mjs")))
    else:
        raise SystemExit(f"no goldens for Pi {release}")
    print(f"done in {time.perf_counter() - t0:.1f}s")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--release" in argv:
        release_goldens(argv[argv.index("--release") + 1])
        return 0
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
        from tests.core.test_differential_property import write_generated_goldens

        print("generated ->", write_generated_goldens(oracle))
    print(f"done in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
