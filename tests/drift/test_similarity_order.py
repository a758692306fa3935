"""TF-IDF cosines do not depend on the process's string hash seed (set order)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

SCRIPT = """
from pimem.drift.similarity import TfidfSpace
docs = ["alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu " * 3,
        "beta delta zeta theta kappa mu nu xi omicron pi rho sigma tau upsilon",
        "gamma epsilon eta iota lambda nu omicron rho tau phi chi psi omega alpha"]
space = TfidfSpace(docs)
print(repr([space.cosine(a, b) for a in docs for b in docs]))
"""


def test_cosines_are_the_same_under_every_hash_seed() -> None:
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert "1.0" in outputs.pop()
