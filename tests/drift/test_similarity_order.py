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


def test_tokens_of_a_text_are_its_lines_tokens() -> None:
    import re

    from pimem.drift import similarity as S
    from pimem.text.facts import STOPWORDS

    for text in ["", "\n", "Foo BAR_baz\nthe $x 12 ab\n\nΣΑΣ end", "a\nb", "one line only"]:
        assert S._tokens(text) == tuple(t for t in re.findall(r"[a-z0-9_$]{2,}", text.lower()) if t not in STOPWORDS)
