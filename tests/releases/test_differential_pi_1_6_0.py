"""pimem's Pi 1.6.0 functions (``pimem.releases.pi_1_6_0``) against the real Pi 1.6.0 release.

The same ops and plans as the 0.87.1 differential tests (projection, estimates, cut points,
preparations with serialized text, whole summary requests and compaction results, branch
summaries), plus branch summaries with a thinking level, on the sample sessions, sessions written
by Pi 1.6.0's own SessionManager (``tests/fixtures/pi-1.6.0``), the real sessions and generated
trees whose tool results carry ``nestedCalls``. Live when Node and the release are installed,
always against the committed goldens under ``tests/goldens/pi-1.6.0``. Sessions written by
1.6.0 load in pimem without warnings and write back byte for byte.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REAL_DIR, REAL_V3, REPO_ROOT, SAMPLES_DIR
from tests.oracle import goldens as golden_store
from tests.oracle.mirror import Mirror, normalize
from tests.oracle.plans import canonical_digest, first_difference, request_key, requests_for
from tests.oracle.plugin import RELEASE_COUNTS
from tests.core.test_differential_property import draw_trees, tree_requests, write_trees

RELEASE = "1.6.0"
COUNTS = RELEASE_COUNTS[RELEASE]
OPS = ["info", "entry_messages", "project", "estimate", "cut_points", "prepare", "compact", "branch"]
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures" / "pi-1.6.0"
SAMPLE_PATHS = sorted(SAMPLES_DIR.glob("*.jsonl")) + sorted(FIXTURES_DIR.glob("*.jsonl"))
REAL_PATHS = [REAL_DIR / n for n in REAL_V3 if (REAL_DIR / n).exists()]
TREE_COUNT = int(os.environ.get("PIMEM_PROPERTY_TREES_1_6_0", "600"))
GOLDEN_TREES = 120
GOLDEN_NAME = Path("generated-trees.jsonl")
MAKE_SESSIONS = REPO_ROOT / "tests" / "oracle" / "make_sessions.mjs"


# ------------------------------------------------------------------------------------------
# Requests and pimem's answers
# ------------------------------------------------------------------------------------------
class Plan:
    def __init__(self) -> None:
        self.mirror = Mirror(RELEASE)
        self._requests: dict[Path, list[dict[str, Any]]] = {}
        self._oracle: dict[Path, dict[str, Any]] = {}

    def requests(self, path: Path, kind: str) -> list[dict[str, Any]]:
        if path not in self._requests:
            info = self.mirror.run({"op": "info", "path": str(path)})
            entry_ids = [e.get("id") for e in self.mirror.session(path).entries]
            self._requests[path] = [{"op": "info", "path": str(path)}] + requests_for(
                path, info, entry_ids, kind, RELEASE
            )
        return self._requests[path]

    def oracle_results(self, oracle: Any, path: Path, kind: str) -> dict[str, Any]:
        if path not in self._oracle:
            ops = OPS if kind == "sample" else REAL_OPS
            reqs = [r for r in self.requests(path, kind) if r["op"] in ops]
            results = oracle.run_batch(reqs)
            self._oracle[path] = {request_key(r): normalize(r["op"], res) for r, res in zip(reqs, results)}
        return self._oracle[path]


@pytest.fixture(scope="module")
def plan() -> Plan:
    return Plan()


def _count(op: str, result: Any) -> None:
    COUNTS[f"{op} cases"] += len(result) if isinstance(result, list) else 1


def _check(mine: Any, theirs: Any, label: str) -> None:
    if mine != theirs:
        pytest.fail(f"{label}: pimem differs from Pi {RELEASE}: {first_difference(mine, theirs)}", pytrace=False)


# On the real sessions only the ops whose code changed in 1.6.0 are recomputed; for the others
# Pi 1.6.0's stored digests equal Pi 0.87.1's, which test_differential.py checks pimem against.
UNCHANGED_OPS = ["entry_messages", "project", "estimate", "cut_points"]
REAL_OPS = [op for op in OPS if op not in UNCHANGED_OPS]
CASES = [pytest.param(p, "sample", op, id=f"{p.stem}-{op}") for p in SAMPLE_PATHS for op in OPS] + [
    pytest.param(p, "real", op, id=f"{p.stem}-{op}") for p in REAL_PATHS for op in REAL_OPS
]


@pytest.mark.oracle
@pytest.mark.parametrize(("path", "kind", "op"), CASES)
def test_live_pi_1_6_0(plan: Plan, oracle_1_6_0: Any, path: Path, kind: str, op: str) -> None:
    """pimem's 1.6.0 functions == Pi 1.6.0 (run now in Node) for every request of this op."""
    theirs = plan.oracle_results(oracle_1_6_0, path, kind)
    reqs = [r for r in plan.requests(path, kind) if r["op"] == op]
    assert reqs
    for req in reqs:
        mine = plan.mirror.run(req)
        _check(mine, theirs[request_key(req)], f"{path.name} {request_key(req)}")
        _count(op, mine)


@pytest.mark.parametrize(("path", "kind", "op"), CASES)
def test_goldens_pi_1_6_0(plan: Plan, path: Path, kind: str, op: str) -> None:
    """pimem's 1.6.0 functions == the committed Pi 1.6.0 goldens (no Node needed)."""
    store = golden_store.load_session_goldens(path, kind, RELEASE)
    keys = [k for k, r in store["requests"].items() if r["op"] == op]
    assert keys, f"1.6.0 goldens for {path.name} hold no {op} requests"
    for key in keys:
        req = {**store["requests"][key], "path": str(path)}
        mine = plan.mirror.run(req)
        if kind == "real":
            assert canonical_digest(mine) == store["results"][key], f"{path.name} {key}: differs from the golden digest"
        else:
            _check(mine, store["results"][key], f"{path.name} {key} (golden)")
        _count("golden " + op, mine)


@pytest.mark.parametrize("path", REAL_PATHS, ids=lambda p: p.stem)
def test_unchanged_ops_on_real_sessions_equal_0_87_1(path: Path) -> None:
    """Projection, estimates, cut points and entry messages of the real sessions: Pi 1.6.0 gave
    exactly Pi 0.87.1's results (pimem is checked against those in test_differential.py)."""
    new = golden_store.load_session_goldens(path, "real", RELEASE)
    old = golden_store.load_session_goldens(path, "real")
    keys = [k for k, r in new["requests"].items() if r["op"] in UNCHANGED_OPS]
    assert len(keys) == len(UNCHANGED_OPS)
    for key in keys:
        assert new["requests"][key] == old["requests"][key]
        assert new["results"][key] == old["results"][key], f"{path.name} {key}: Pi 1.6.0 differs from 0.87.1"
        COUNTS[f"golden {new['requests'][key]['op']} (= 0.87.1) requests"] += 1


def test_goldens_tell_the_releases_apart() -> None:
    """Pi 0.87.1's functions do not reproduce the 1.6.0 goldens: thinking left out of the summary
    text, no maxTokens, nested-call file operations, context edits in branch summaries."""
    store = golden_store.load_session_goldens(FIXTURES_DIR / "codemode-nested-calls.jsonl", "sample", RELEASE)
    path = FIXTURES_DIR / "codemode-nested-calls.jsonl"
    old, new = Mirror(), Mirror(RELEASE)
    differ = set()
    for key, req in store["requests"].items():
        if req["op"] in ("prepare", "compact", "branch"):
            req = {**req, "path": str(path)}
            assert new.run(req) == store["results"][key]
            if old.run(req) != store["results"][key]:
                differ.add(req["op"])
    assert differ == {"prepare", "compact", "branch"}


# ------------------------------------------------------------------------------------------
# Generated trees whose tool results carry nested calls
# ------------------------------------------------------------------------------------------
_NESTED_SHAPES: list[Any] = [
    None,
    {"calls": [{"id": "n1", "name": "read", "arguments": {"path": "src/app.py"}, "status": "ok", "durationMs": 3},
               {"id": "n2", "name": "edit", "arguments": {"path": "docs/😀.md", "oldText": "a"}, "status": "error",
                "error": "oldText not found"}], "complete": True},
    {"calls": [{"id": "n3", "name": "write", "arguments": {"path": "lib/x.js", "content": ""}, "status": "ok"},
               {"id": "n4", "name": "bash", "arguments": {"command": "ls"}, "status": "ok"},
               {"id": "n5", "name": "read", "argumentsBytes": 9000, "status": "unfinished"}], "complete": False},
    "absent",
    {"calls": [{"name": "read", "arguments": {"path": ""}}, {"name": "read", "arguments": None},
               {"name": "edit", "arguments": {"path": 5}}, {"name": "write", "arguments": {"path": "src/ünï.py"}},
               7, "s", []], "complete": True},
    {"calls": "abc"},
    {"calls": None},
    "null",
    {"calls": []},
    {"calls": [{"name": "edit", "arguments": {"path": "README.md"}}, {"name": "read", "arguments": {"path": "README.md"}}]},
    {"calls": {"name": "read"}},  # not iterable: Pi throws
    {"calls": [None]},  # a null call: Pi throws
]


_WITH_CALLS = [1, 2, 4, 9, 1, 2, 4, 9, 10, 11]  # shapes for a tree's first tool result


def _is_tool_result(entry: dict[str, Any]) -> bool:
    message = entry.get("message") if entry.get("type") == "message" else None
    return isinstance(message, dict) and message.get("role") == "toolResult"


def with_nested_calls(tree: tuple[dict[str, Any], list[dict[str, Any]]], index: int) -> tuple[dict, list[dict]]:
    """The tree with ``nestedCalls`` on its tool results (a fixed shape per result; throwing
    shapes only in every fifth tree; the first result always gets calls). A tree without tool
    results first gets its user messages after the first turned into ones."""
    header, entries = copy.deepcopy(tree)
    if not any(map(_is_tool_result, entries)):
        users = [e for e in entries if e.get("type") == "message" and isinstance(e.get("message"), dict)
                 and e["message"].get("role") == "user"]
        for n, entry in enumerate(users[1:]):
            content = entry["message"].get("content")
            entry["message"] = {
                "role": "toolResult", "toolCallId": f"call_r{n}", "toolName": "code",
                "content": [{"type": "text", "text": content}] if isinstance(content, str) else content,
                "isError": False, "timestamp": entry["message"].get("timestamp", 0),
            }
    k = 0
    for entry in entries:
        if _is_tool_result(entry):
            message = entry["message"]
            n = len(_NESTED_SHAPES) if index % 5 == 0 else len(_NESTED_SHAPES) - 2
            shape = _NESTED_SHAPES[(index * 7 + k) % n] if k else _NESTED_SHAPES[_WITH_CALLS[index % (10 if index % 5 == 0 else 8)]]
            k += 1
            if shape == "absent":
                continue
            message["nestedCalls"] = None if shape == "null" else copy.deepcopy(shape)
    return header, entries


def _release_tree_requests(path: Path, header: dict, entries: list[dict], index: int) -> list[dict[str, Any]]:
    reqs = tree_requests(path, header, entries, index)
    if index % 3 == 0:
        parents = {e["parentId"] for e in entries}
        tips = [e["id"] for e in entries if e["id"] not in parents]
        pairs = [[tips[-1], e["id"]] for e in entries[:: max(1, len(entries) // 4)]]
        reqs.append({"op": "branch", "path": str(path), "pairs": pairs, "hash": True, "budgets": [0],
                     "model": {"reasoning": True}, "thinkingLevel": "medium"})
    return reqs


def _trees(n: int, salt: int) -> list[tuple[dict, list[dict]]]:
    return [with_nested_calls(t, i) for i, t in enumerate(draw_trees(n, salt))]


@pytest.mark.oracle
def test_generated_trees_match_pi_1_6_0(oracle_1_6_0: Any, tmp_path: Path) -> None:
    """PIMEM_PROPERTY_TREES_1_6_0 (default 600) random trees with nested calls: zero differences."""
    trees = _trees(TREE_COUNT, salt=3)
    assert len(trees) >= TREE_COUNT * 0.95
    paths = write_trees(trees, tmp_path, "tree")
    mirror = Mirror(RELEASE)
    problems: list[str] = []
    for start in range(0, len(paths), 250):
        reqs = [r for i in range(start, min(start + 250, len(paths))) for r in _release_tree_requests(paths[i], *trees[i], i)]
        for req, res in zip(reqs, oracle_1_6_0.run_batch(reqs)):
            mine, theirs = mirror.run(req), normalize(req["op"], res)
            COUNTS[f"generated {req['op']} cases"] += len(mine) if isinstance(mine, list) else 1
            if mine != theirs:
                problems.append(f"{Path(req['path']).name} {req['op']}: {first_difference(mine, theirs)}")
    COUNTS["generated trees"] += len(trees)
    assert not problems, f"{len(problems)} differences on {len(trees)} trees:\n" + "\n".join(problems[:15])


def write_generated_goldens(oracle: Any) -> Path:
    """Run Pi 1.6.0 on the fixed golden trees and store trees + requests + results."""
    trees = _trees(GOLDEN_TREES, salt=4)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_trees(trees, Path(tmp), "golden")
        reqs = [r for i, p in enumerate(paths) for r in _release_tree_requests(p, *trees[i], i)]
        results = oracle.run_batch(reqs)
        payload: dict[str, Any] = {
            "pi_version": RELEASE,
            "trees": {p.name: p.read_text(encoding="utf-8") for p in paths},
            "requests": [
                {**req, "path": Path(req["path"]).name, "result": normalize(req["op"], res)}
                for req, res in zip(reqs, results)
            ],
        }
    return golden_store.write_goldens(GOLDEN_NAME, "generated", payload, RELEASE)


def test_generated_goldens_pi_1_6_0(tmp_path: Path) -> None:
    """pimem's 1.6.0 functions == Pi 1.6.0's stored results on the fixed generated trees."""
    store = golden_store.read_goldens(GOLDEN_NAME, "generated", RELEASE)
    if store is None:
        pytest.fail("no 1.6.0 generated-tree goldens; run `python -m tests.oracle.make_goldens --release 1.6.0`",
                    pytrace=False)
    assert store["pi_version"] == RELEASE
    assert len(store["trees"]) == GOLDEN_TREES
    assert sum('"nestedCalls":{"calls":[{' in t for t in store["trees"].values()) > GOLDEN_TREES // 6
    problems = golden_store.generated_tree_problems(store, tmp_path, Mirror(RELEASE), COUNTS)
    assert not problems, f"{len(problems)} differences from the goldens:\n" + "\n".join(problems[:15])


# ------------------------------------------------------------------------------------------
# Sessions written by Pi 1.6.0
# ------------------------------------------------------------------------------------------
NEW_FIELDS = ['"nestedCalls"', '"argumentsError"', '"totalFromProvider"', '"durationMs"', '"thinkingLevel":"medium"',
              '"type":"context_edit"', '"type":"usage"', '"type":"branch_summary"', '"type":"compaction"']


def _assert_loads_cleanly(path: Path) -> Any:
    import pimem

    session = pimem.load_session(path)
    assert session.warnings == [], [str(w) for w in session.warnings]
    assert session.to_jsonl() == path.read_text(encoding="utf-8"), f"{path.name} does not write back byte for byte"
    out = path.parent / (path.stem + ".written.jsonl")
    try:
        session.write(out)
        assert out.read_bytes() == path.read_bytes()
    finally:
        out.unlink(missing_ok=True)
    for frame in ("entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df"):
        getattr(session, frame)()
    return session


def test_sessions_written_by_pi_1_6_0_load_without_warnings(recwarn: Any) -> None:
    """The committed sessions from Pi 1.6.0's SessionManager: every new field present, no warning
    (recorded or Python), every entry kept, written back byte for byte."""
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(FIXTURES_DIR.glob("*.jsonl")))
    missing = [f for f in NEW_FIELDS if f not in text]
    assert not missing, f"the fixtures lack {missing}"
    for path in sorted(FIXTURES_DIR.glob("*.jsonl")):
        session = _assert_loads_cleanly(path)
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert len(session.entries) == len(lines) - 1
    assert [str(w.message) for w in recwarn] == []


@pytest.mark.oracle
def test_fresh_sessions_from_pi_1_6_0(oracle_1_6_0: Any, tmp_path: Path, recwarn: Any) -> None:
    """Sessions Pi 1.6.0's SessionManager writes now (new ids and times) load cleanly, open in Pi
    unchanged and project exactly as Pi 1.6.0 projects them."""
    proc = subprocess.run(
        [str(oracle_1_6_0.node), str(MAKE_SESSIONS), str(oracle_1_6_0.dist), str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    paths = sorted(tmp_path.glob("*.jsonl"))
    assert [p.name for p in paths] == sorted(p.name for p in FIXTURES_DIR.glob("*.jsonl"))
    mirror = Mirror(RELEASE)
    for path in paths:
        session = _assert_loads_cleanly(path)
        pi = oracle_1_6_0.load(path)
        assert pi["openError"] is None and pi["rewritten"] is False
        assert [json.dumps(e, sort_keys=True) for e in session.entries] == [
            json.dumps(e, sort_keys=True) for e in pi["opened"]["entries"]
        ]
        info = mirror.run({"op": "info", "path": str(path)})
        ids = [e.get("id") for e in mirror.session(path).entries]
        reqs = requests_for(path, info, ids, "sample", RELEASE)
        for req, res in zip(reqs, oracle_1_6_0.run_batch(reqs)):
            _check(mirror.run(req), normalize(req["op"], res), f"{path.name} {req['op']}")
            COUNTS[f"fresh-session {req['op']} requests"] += 1
    assert [str(w.message) for w in recwarn] == []
