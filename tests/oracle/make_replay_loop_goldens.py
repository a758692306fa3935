"""Write ``tests/goldens/real/replay-loop.json``: Pi 0.87.1's compaction lists for the whole replays of
``tests/replays/test_replay_loop_oracle.py`` (run ``python -m tests.oracle.make_replay_loop_goldens``
with Node and the oracle installed, and ``../shared`` beside the repository)."""

from __future__ import annotations

import json
import os
import tempfile

from tests.conftest import REAL_DIR
from tests.oracle.client import Oracle
from tests.replays.test_replay_loop_oracle import CASES, GOLDEN, case_key, file_sha256, pi_compactions, run_pi


def main() -> None:
    oracle = Oracle(driver="replay_loop.mjs")
    goldens = {}
    for name, window, reserve, keep in CASES:
        path = REAL_DIR / name
        if not path.exists():
            continue
        goldens[case_key(name, window, reserve, keep)] = {
            "sha256": file_sha256(path),
            "compactions": pi_compactions(run_pi(oracle, path, window, reserve, keep)),
        }
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=GOLDEN.parent, prefix=".replay-loop")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(goldens, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, GOLDEN)
    print(f"wrote {len(goldens)} cases to {GOLDEN}")


if __name__ == "__main__":
    main()
