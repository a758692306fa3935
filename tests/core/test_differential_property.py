"""Property-based differential tests: thousands of random session trees, pimem vs Pi.

Trees come from ``tests.support.strategies.session_trees`` with a derandomized hypothesis run (the
same trees every time), are written to temporary files and go through the oracle in
batches (one Node process per batch). Every leaf of every tree is compared for every op.
A fixed set of trees with Pi's results is committed as goldens, checked without Node.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.oracle import goldens as golden_store
from tests.oracle.install import PI_VERSION
from tests.oracle.mirror import Mirror, normalize
from tests.oracle.plans import (
    BRANCH_VARIANTS,
    COMPACT_VARIANTS,
    first_difference,
)
from tests.oracle.plans import settings as compaction_settings
from tests.oracle.plugin import COUNTS
from tests.support.strategies import session_trees, tree_to_jsonl

TREE_COUNT = int(os.environ.get("PIMEM_PROPERTY_TREES", "2000"))
BATCH_SIZE = 250
GOLDEN_TREES = 120
GOLDEN_NAME = Path("generated-trees.jsonl")  # the golden file is tests/goldens/generated/generated-trees.json.gz
KEEPS = [0, 1, 2, 5, 20, 100, 1000, 5000, 20000]
PREP_SETTINGS = [compaction_settings(k) for k in (0, 1, 30, 300, 20000)]


def draw_trees(n: int, salt: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """n trees from a seeded hypothesis run: the same trees every time (``salt`` is the seed)."""
    trees: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []

    @seed(salt)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(tree=session_trees())
    def collect(tree: Any) -> None:
        trees.append(tree)

    collect()
    return trees


def tree_requests(path: Path, header: dict[str, Any], entries: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    p = str(path)
    parents = {e["parentId"] for e in entries}
    tips = [e["id"] for e in entries if e["id"] not in parents]
    ids = [e["id"] for e in entries]
    pairs = [[a, b] for a in tips for b in tips if a != b] + [[tips[-1], t] for t in ids[:: max(1, len(ids) // 6)]]
    return [
        {"op": "entry_messages", "path": p, "hash": True},
        {"op": "project", "path": p, "leaves": "all", "hash": True},
        {"op": "estimate", "path": p, "leaves": "all"},
        {"op": "cut_points", "path": p, "leaves": "all", "keeps": KEEPS, "turnStarts": True},
        {"op": "prepare", "path": p, "leaves": "all", "hash": True, "serialize": True, "settings": PREP_SETTINGS},
        {"op": "compact", "path": p, "leaves": "tips", "hash": True, **COMPACT_VARIANTS[index % len(COMPACT_VARIANTS)]},
        {"op": "compact", "path": p, "leaves": ids[:: max(1, len(ids) // 4)], "hash": True,
         **COMPACT_VARIANTS[(index * 3 + 1) % len(COMPACT_VARIANTS)]},
        {"op": "branch", "path": p, "pairs": pairs, "hash": True, **BRANCH_VARIANTS[index % len(BRANCH_VARIANTS)]},
    ]


def write_trees(trees: list[Any], folder: Path, prefix: str) -> list[Path]:
    paths = []
    for i, (header, entries) in enumerate(trees):
        path = folder / f"{prefix}-{i:05d}.jsonl"
        path.write_text(tree_to_jsonl(header, entries), encoding="utf-8")
        paths.append(path)
    return paths


def _compare_all(reqs: list[dict[str, Any]], theirs: list[Any], mirror: Mirror) -> list[str]:
    problems = []
    for req, res in zip(reqs, theirs):
        mine = mirror.run(req)
        theirs_n = normalize(req["op"], res)
        COUNTS[f"generated {req['op']} cases"] += len(mine) if isinstance(mine, list) else 1
        if mine != theirs_n:
            problems.append(f"{Path(req['path']).name} {req['op']}: {first_difference(mine, theirs_n)}")
    return problems


@pytest.mark.oracle
def test_generated_trees_match_pi(oracle: Any, tmp_path: Path) -> None:
    """At least PIMEM_PROPERTY_TREES (default 2000) random trees: zero differences from Pi."""
    trees = draw_trees(TREE_COUNT, salt=1)
    assert len(trees) >= TREE_COUNT * 0.95, f"hypothesis produced only {len(trees)} trees"
    paths = write_trees(trees, tmp_path, "tree")
    problems: list[str] = []
    for start in range(0, len(paths), BATCH_SIZE):
        reqs = []
        for i in range(start, min(start + BATCH_SIZE, len(paths))):
            reqs.extend(tree_requests(paths[i], *trees[i], index=i))
        theirs = oracle.run_batch(reqs)
        problems.extend(_compare_all(reqs, theirs, Mirror()))
    COUNTS["generated trees"] += len(trees)
    if problems:
        keep = Path(os.environ.get("PIMEM_KEEP_FAILURES", "/tmp/pimem-property-failures"))
        keep.mkdir(parents=True, exist_ok=True)
        for line in problems:
            name = line.split(" ", 1)[0]
            (keep / name).write_bytes((tmp_path / name).read_bytes())
        shown = "\n".join(problems[:15])
        pytest.fail(f"{len(problems)} differences on {len(trees)} trees (trees kept in {keep}):\n{shown}", pytrace=False)


# ------------------------------------------------------------------------------------------
# Goldens for a fixed set of generated trees (no Node needed)
# ------------------------------------------------------------------------------------------
def write_generated_goldens(oracle: Any) -> Path:
    """Draw the fixed golden trees, run Pi on them and store trees + requests + results."""
    import tempfile

    trees = draw_trees(GOLDEN_TREES, salt=2)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_trees(trees, Path(tmp), "golden")
        reqs = [r for i, p in enumerate(paths) for r in tree_requests(p, *trees[i], index=i)]
        results = oracle.run_batch(reqs)
        payload: dict[str, Any] = {
            "pi_version": PI_VERSION,
            "trees": {p.name: p.read_text(encoding="utf-8") for p in paths},
            "requests": [],
        }
        for req, res in zip(reqs, results):
            payload["requests"].append({**req, "path": Path(req["path"]).name, "result": normalize(req["op"], res)})
    return golden_store.write_goldens(GOLDEN_NAME, "generated", payload)


def test_generated_goldens(tmp_path: Path) -> None:
    """pimem == Pi's stored results on the fixed generated trees."""
    store = golden_store.read_goldens(GOLDEN_NAME, "generated")
    if store is None:
        pytest.fail("no generated-tree goldens; run `python -m tests.oracle.make_goldens --generated`", pytrace=False)
    assert store["pi_version"] == PI_VERSION
    problems = golden_store.generated_tree_problems(store, tmp_path, Mirror(), COUNTS)
    assert len(store["trees"]) == GOLDEN_TREES
    assert not problems, f"{len(problems)} differences from the goldens:\n" + "\n".join(problems[:15])
