"""CPU of a whole replay against Pi 0.87.1's own agent loop over the same recording.

Run: ``.venv/bin/python benchmarks/bench_replay_loop.py [--repeat 3]``

For each case of ``tests/replays/test_replay_loop_oracle.py`` (the real Pi sessions at three
settings), Pi's ``AgentSession`` is driven through the recording by ``tests/oracle/replay_loop.mjs``
(CPU measured inside Node around the run: opening the file, the loop, the canned answers) and pimem
replays it with ``token_source="estimate"`` and the same canned summaries (CPU of ``pimem.replay``,
loading the file included); best of ``--repeat`` for each. The compaction lists are compared as in the test.
Needs Node and the oracle (``python -m tests.oracle.install``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pimem.core.compaction.compaction import CompactionSettings  # noqa: E402
from pimem.replays.engine import replay  # noqa: E402
from tests.conftest import REAL_DIR  # noqa: E402
from tests.oracle.client import Oracle  # noqa: E402
from tests.support.summarizers import OracleSummarizer  # noqa: E402
from tests.replays.test_replay_loop_oracle import (  # noqa: E402
    CASES, case_key, pi_compactions, pimem_compactions, run_pi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    oracle = Oracle(driver="replay_loop.mjs")
    ratios = []
    print("| case | compactions | identical | Pi CPU s | pimem CPU s | pimem / Pi |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, window, reserve, keep in CASES:
        path = REAL_DIR / name
        if not path.exists():
            continue
        pi_cpu, ours_cpu = [], []
        settings = CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep)
        for _ in range(args.repeat):
            result = run_pi(oracle, path, window, reserve, keep)
            pi_cpu.append(result["cpuSeconds"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.process_time()
                replay(path, settings, context_window=window, token_source="estimate", summarizer=OracleSummarizer())
                ours_cpu.append(time.process_time() - start)
        theirs = pi_compactions(result)
        ours = pimem_compactions(path, window, reserve, keep)
        ratio = min(ours_cpu) / min(pi_cpu)
        ratios.append(ratio)
        print(f"| {case_key(name, window, reserve, keep)} | {len(theirs)} | {ours == theirs} | {min(pi_cpu):.2f} | "
              f"{min(ours_cpu):.2f} | {ratio:.3f} |")
    print(f"\nmedian pimem / Pi CPU over {len(ratios)} cases: {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
