"""Checks that read stale usage, and compaction counts, on the real Pi sessions at four windows.

Run: ``.venv/bin/python benchmarks/replay_stale_checks.py [--windows 24000,32000,64000,100000]
[--reserve 4096 --keep 2000]``

A calibrated replay of each real Pi session (``before-compaction``, ``large-session``, and the two of
``history/``) at each window. A stale check is an ``agent_end``/``before_prompt`` check on Pi's direct
path (no context edit in the projection, the answer neither errored nor without usage) that reads a
number other than the answer's call row: its request size plus what it wrote. Such a check read the
recorded usage of the uncompacted recording (an aborted answer's, before the fix).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pimem.replays import engine  # noqa: E402
from pimem.sessions.load import load_session  # noqa: E402
from tests.replays.test_token_sources import logged_checks, stale_checks  # noqa: E402

REAL = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared")) / "datasets" / "pi-mono"
FILES = ["before-compaction.jsonl", "large-session.jsonl", "history/compact.jsonl", "history/session.jsonl"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="24000,32000,64000,100000")
    parser.add_argument("--reserve", type=int, default=4096)
    parser.add_argument("--keep", type=int, default=2000)
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    total_compactions = total_stale = 0
    print("| session | " + " | ".join(f"{w:,}" for w in windows) + " |")
    print("| --- |" + " --- |" * len(windows))
    for name in FILES:
        session = load_session(REAL / name)
        cells = []
        for window in windows:
            with logged_checks() as (calls, checks), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = engine.replay(session, {"reserve_tokens": args.reserve, "keep_recent_tokens": args.keep},
                                       context_window=window)
            compactions = len(result.compactions)
            stale = len(stale_checks(calls, checks))
            total_compactions += compactions
            total_stale += stale
            cells.append(f"{compactions} ({stale})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\ncompactions (stale checks) in all: {total_compactions} ({total_stale})")


if __name__ == "__main__":
    main()
