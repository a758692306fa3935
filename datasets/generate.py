#!/usr/bin/env python3
"""Generate pimem's bundled sample sessions (Pi v3 JSONL) deterministically.

    python datasets/generate.py [--out DIR] [--seed N]

Each sample is a scripted coding-agent session played against a small in-memory
project: tool calls really run against that project (``read`` returns the file,
``edit`` applies the replacement or fails like Pi's edit tool, ``grep``/``ls``
search it), usage grows with the projected context, and compactions and branch
summaries are produced by pimem's own reimplementation of Pi's pipeline, so each
entry is what Pi would have written at that point. The same seed gives
byte-identical files.

The harness and the stories live in ``datasets/generator/`` (see datasets/README.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
for folder in (REPO_ROOT, HERE):  # pimem from the source tree, then the generator package next to this file
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from generator import DEFAULT_SEED, generate  # noqa: E402

DEFAULT_OUT = HERE / "sessions"


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, write the samples, print each path and size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: datasets/sessions)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in generate(args.out, args.seed):
        print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
