"""pimem against Pi 0.87.1 on every leaf of the sample sessions and the real sessions.

Each op of the oracle driver (projection, LLM conversion, estimates, cut points,
preparations with serialized text, whole summary requests and compaction results, branch
collection/budgets/summaries) is compared with pimem's answer, live when Node and the
release are installed, and always against the committed goldens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REAL_DIR, REAL_V3, SAMPLES_DIR
from tests.oracle import goldens as golden_store
from tests.oracle.mirror import Mirror, normalize
from tests.oracle.plans import (
    canonical_digest,
    first_difference,
    request_key,
    requests_for,
)
from tests.oracle.plugin import COUNTS

OPS = ["info", "entry_messages", "project", "estimate", "cut_points", "prepare", "compact", "branch"]
SAMPLE_PATHS = sorted(SAMPLES_DIR.glob("*.jsonl"))
REAL_PATHS = [REAL_DIR / n for n in REAL_V3 if (REAL_DIR / n).exists()]


class Plan:
    """Requests per session file, pimem's answers, and the oracle's answers (lazily, batched)."""

    def __init__(self) -> None:
        self.mirror = Mirror()
        self._requests: dict[Path, list[dict[str, Any]]] = {}
        self._oracle: dict[Path, dict[str, Any]] = {}
        self._mine: dict[str, Any] = {}

    def requests(self, path: Path, kind: str) -> list[dict[str, Any]]:
        if path not in self._requests:
            info = self.mirror.run({"op": "info", "path": str(path)})
            entry_ids = [e.get("id") for e in self.mirror.session(path).entries]
            self._requests[path] = [{"op": "info", "path": str(path)}] + requests_for(path, info, entry_ids, kind)
        return self._requests[path]

    def oracle_results(self, oracle: Any, path: Path, kind: str) -> dict[str, Any]:
        if path not in self._oracle:
            reqs = self.requests(path, kind)
            results = oracle.run_batch(reqs)
            self._oracle[path] = {request_key(r): normalize(r["op"], res) for r, res in zip(reqs, results)}
        return self._oracle[path]

    def mine(self, req: dict[str, Any]) -> Any:
        key = request_key(req)
        if key not in self._mine:
            self._mine[key] = self.mirror.run(req)
        return self._mine[key]


@pytest.fixture(scope="module")
def plan() -> Plan:
    return Plan()


def _compare(op: str, mine: Any, theirs: Any, label: str) -> None:
    if mine == theirs:
        return
    where = first_difference(mine, theirs)
    leaf = ""
    if isinstance(mine, list) and where and where.startswith("$["):
        idx = int(where[2 : where.index("]")])
        row = mine[idx] if idx < len(mine) else None
        if isinstance(row, dict):
            leaf = f" (leaf {row.get('leafId')!r}, pair {row.get('oldLeafId')!r}->{row.get('targetId')!r})"
    pytest.fail(f"{label}: pimem differs from Pi in {op}{leaf}: {where}", pytrace=False)


def _count(op: str, result: Any) -> None:
    COUNTS["requests"] += 1
    if isinstance(result, list):
        COUNTS[f"{op} cases"] += len(result)


def _cases(paths: list[Path], kind: str) -> list[Any]:
    marks = [pytest.mark.slow] if kind == "real" else []  # the real sessions are the long checks
    return [pytest.param(p, kind, op, id=f"{p.stem}-{op}", marks=marks) for p in paths for op in OPS]


ALL_CASES = _cases(SAMPLE_PATHS, "sample") + _cases(REAL_PATHS, "real")


@pytest.mark.oracle
@pytest.mark.parametrize(("path", "kind", "op"), ALL_CASES or [pytest.param(None, None, None, marks=pytest.mark.skip("no sessions"))])
def test_live_oracle(plan: Plan, oracle: Any, path: Path, kind: str, op: str) -> None:
    """pimem == Pi (run now in Node) for every request of this op on this session."""
    theirs_by_key = plan.oracle_results(oracle, path, kind)
    reqs = [r for r in plan.requests(path, kind) if r["op"] == op]
    assert reqs
    for req in reqs:
        mine = plan.mine(req)
        _compare(op, mine, theirs_by_key[request_key(req)], f"{path.name} {request_key(req)}")
        _count(op, mine)


@pytest.mark.parametrize(("path", "kind", "op"), ALL_CASES or [pytest.param(None, None, None, marks=pytest.mark.skip("no sessions"))])
def test_goldens(plan: Plan, path: Path, kind: str, op: str) -> None:
    """pimem == the committed oracle goldens (no Node needed)."""
    store = golden_store.load_session_goldens(path, kind)
    keys = [k for k, r in store["requests"].items() if r["op"] == op]
    assert keys, f"goldens for {path.name} hold no {op} requests"
    for key in keys:
        req = {**store["requests"][key], "path": str(path)}
        mine = plan.mine(req)
        stored = store["results"][key]
        if kind == "real":
            assert canonical_digest(mine) == stored, f"{path.name} {key}: pimem differs from the golden digest"
        else:
            _compare(op, mine, stored, f"{path.name} {key} (golden)")
        _count("golden " + op, mine)
