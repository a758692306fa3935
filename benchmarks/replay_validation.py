"""Token sources against what providers counted: every real compaction, out of sample.

Run: ``.venv/bin/python benchmarks/replay_validation.py [--no-tiktoken] [--agents pi,claude-code,codex]``

For every real compaction in ``../shared/datasets`` (or ``$PIMEM_SHARED_DIR/datasets``): Pi sessions,
Claude Code transcripts, Codex rollouts with usage; copies of one compaction counted once. Each token
source is fitted on the requests before the compaction and predicts the requests after it
(:func:`pimem.replays.validation.validate`); the tables give the median ``|error|``, its 90th
percentile and the median bias per agent and source, with n, for requests 1-3 after a compaction and
for the 10th; each ``anchored`` candidate against ``anchored+files`` (what a replay of a Claude Code
session uses after a compaction it made) on the same requests
(:func:`~pimem.replays.validation.sources_head_to_head`); then the coverage of 80% and 90% prediction
intervals on held-out sessions (:func:`~pimem.replays.validation.interval_coverage`) around
``calibrated+profile`` and around ``anchored+files``; and ``anchored+files`` on Claude Code by the
characters a token of a file read (which decides which files are above Claude Code's cap). The rows go to
``benchmarks/results/replay_validation.csv``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd

from pimem.replays.validation import sources_head_to_head, corpus_files, interval_coverage, validate, validation_table

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-tiktoken", action="store_true", help="skip the tiktoken counts (faster)")
    parser.add_argument("--agents", default="pi,claude-code,codex")
    parser.add_argument("--partial", default="restrict", choices=("restrict", "refuse", "keep"))
    args = parser.parse_args()
    agents = set(args.agents.split(","))
    files = [f for f in corpus_files(SHARED) if f.agent in agents]
    if not files:
        raise SystemExit(f"no real sessions under {SHARED / 'datasets'}")
    start = time.process_time()
    frame = validate(files, tiktoken=not args.no_tiktoken, partial=args.partial)
    cpu = time.process_time() - start
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "replay_validation.csv", index=False)
    pd.set_option("display.width", 200)
    scored = frame[frame["source"].notna()]
    unscorable = frame[frame["source"].isna()]
    print(f"{len(files)} files, {scored['compaction'].nunique()} compactions scored "
          f"({unscorable['compaction'].nunique()} unscorable: too few requests before or none after), "
          f"{scored['session'].nunique()} sessions; {cpu:.0f} CPU-s")
    for title, ks in (("requests 1-3 after a compaction", (1, 2, 3)), ("the 10th request after", (10,))):
        print(f"\n{title}")
        print(validation_table(frame, ks=ks).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    candidates = [s for s in scored["source"].unique() if s.startswith("anchored")]
    for title, ks in (("requests 1-3", (1, 2, 3)), ("the 10th request", (10,))):
        print(f"\nagainst anchored+files on the same requests ({title}; change = source - anchored+files)")
        print(sources_head_to_head(frame, "anchored+files", candidates, ks=ks).to_string(
            index=False, float_format=lambda v: f"{v:+.3f}"))
    claude_code = [f for f in files if f.agent == "claude-code"]
    if claude_code:
        print("\nanchored+files on Claude Code (requests 1-3) by the characters a token of a file read "
              "(held out: learnt on the other sessions' reads)")
        rows = []
        for per_token in (None, 2.3, 2.5, 2.62, 2.7, 3.0, 3.5, 4.0):
            table = validation_table(validate(claude_code, tiktoken=False, partial=args.partial,
                                              chars_per_token=per_token)).set_index("source")
            row = table.loc["anchored+files", ["n", "median_abs_error", "p90_abs_error", "median_bias"]]
            rows.append({"chars_per_token": "held out" if per_token is None else per_token, **row.to_dict(),
                         "n": int(row["n"])})
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for source in ("calibrated+profile", "anchored+files"):
        for level in (0.8, 0.9):
            print(f"\n{level:.0%} prediction intervals for requests 1-3, held out by session ({source})")
            print(interval_coverage(frame, source=source, level=level).to_string(
                index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
