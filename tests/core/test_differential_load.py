"""Loading against Pi: pimem's parse + migration equals Pi's, and every sample opens in Pi."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REAL_DIR, REAL_V1, REAL_V3, SAMPLES_DIR
from tests.oracle.client import js_stringify

V3_PATHS = sorted(SAMPLES_DIR.glob("*.jsonl")) + [REAL_DIR / n for n in REAL_V3 if (REAL_DIR / n).exists()]
V1_PATHS = [REAL_DIR / n for n in REAL_V1 if (REAL_DIR / n).exists()]


def _load(path: Path) -> Any:
    session_mod = pytest.importorskip("pimem.core.session_manager")
    return session_mod.load_session(path)


def _by_position(entries: list[dict[str, Any]]) -> list[str]:
    """Entries with their (random, v1-migration) ids replaced by file positions."""
    pos = {e.get("id"): i for i, e in enumerate(entries)}
    out = []
    for e in entries:
        e = dict(e)
        for k in ("id", "parentId", "firstKeptEntryId"):
            if k in e and e[k] is not None:
                e[k] = pos.get(e[k], "absent")
        out.append(js_stringify(e))
    return out


@pytest.mark.oracle
@pytest.mark.parametrize("path", V3_PATHS, ids=lambda p: p.stem)
def test_v3_loads_like_pi_and_opens_unchanged(oracle: Any, path: Path) -> None:
    pi = oracle.load(path)
    assert pi["openError"] is None, f"{path.name} does not open in Pi: {pi['openError']}"
    assert pi["rewritten"] is False, f"Pi would rewrite {path.name} on open"
    session = _load(path)
    assert js_stringify(session.header) == js_stringify(pi["opened"]["header"])
    mine = [js_stringify(e) for e in session.entries]
    theirs = [js_stringify(e) for e in pi["opened"]["entries"]]
    assert len(mine) == len(theirs)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, f"{path.name}: entry {i} differs from Pi's:\n{a[:300]}\n{b[:300]}"
    assert session.leaf_id == pi["opened"]["leafId"]


@pytest.mark.oracle
@pytest.mark.parametrize("path", V1_PATHS, ids=lambda p: p.stem)
def test_v1_migrates_like_pi(oracle: Any, path: Path) -> None:
    pi = oracle.load(path)
    assert pi["openError"] is None
    assert pi["rewritten"] is True  # Pi rewrites migrated files on open (we only touch a copy)
    session = _load(path)
    theirs = [e for e in pi["migrated"] if e.get("type") != "session"]
    assert _by_position(session.entries) == _by_position(theirs)
    assert session.header.get("version") == 3


# Lines at the edges of what JSON.parse and Pi's migration accept: Pi keeps or migrates them all.
_TS = "2025-01-01T00:00:00.000Z"


def _edge_file(tmp_path: Path, case: str) -> Path:
    header = '{"type":"session","version":3,"id":"s","timestamp":"%s","cwd":"/"}' % _TS
    first = '{"type":"message","id":"a1","parentId":null,"timestamp":"%s","message":{"role":"user","content":"x","timestamp":1}}' % _TS
    custom = '{"type":"custom","id":"a2","parentId":"a1","timestamp":"%s","customType":"t","data":%%s}' % _TS
    last = '{"type":"message","id":"a3","parentId":"a2","timestamp":"%s","message":{"role":"user","content":"y","timestamp":2}}' % _TS
    bodies = {
        "big_integer": "1" * 5000,
        "big_negative_integer": "-" + "9" * 4500,
        "deep_array_1100": "[" * 1100 + "1" + "]" * 1100,
        "deep_object_3000": '{"k":' * 3000 + '"\\ud800"' + "}" * 3000,
    }
    if case in bodies:
        lines = [header, first, custom % bodies[case], last]
    else:  # a v1 header whose version Pi reads as a number below 2
        version = {"version_list": "[1]", "version_hex": '"0x1"', "version_string": '"1"', "version_null": "null",
                   "version_empty_list": "[]"}[case]
        lines = ['{"type":"session","version":%s,"id":"s","timestamp":"%s","cwd":"/"}' % (version, _TS),
                 '{"type":"message","timestamp":"%s","message":{"role":"user","content":"a","timestamp":1}}' % _TS,
                 '{"type":"message","timestamp":"%s","message":{"role":"assistant","content":[],"timestamp":2}}' % _TS]
    path = tmp_path / f"{case}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


EDGE_V3 = ["big_integer", "big_negative_integer", "deep_array_1100", "deep_object_3000"]
EDGE_VERSIONS = ["version_list", "version_hex", "version_string", "version_null", "version_empty_list"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", EDGE_V3)
def test_edge_lines_are_kept_like_pi(oracle: Any, tmp_path: Path, case: str) -> None:
    path = _edge_file(tmp_path, case)
    pi = oracle.load(path)
    assert pi["openError"] is None and pi["rewritten"] is False
    session = _load(path)
    assert not session.warnings
    assert [js_stringify(e) for e in session.entries] == [js_stringify(e) for e in pi["opened"]["entries"]]
    assert session.leaf_id == pi["opened"]["leafId"] == "a3"


@pytest.mark.oracle
@pytest.mark.parametrize("case", EDGE_VERSIONS)
def test_odd_versions_migrate_like_pi(oracle: Any, tmp_path: Path, case: str) -> None:
    path = _edge_file(tmp_path, case)
    pi = oracle.load(path)
    assert pi["openError"] is None
    session = _load(path)
    theirs = [e for e in pi["migrated"] if e.get("type") != "session"]
    assert _by_position(session.entries) == _by_position(theirs)
    pi_header = next(e for e in pi["migrated"] if e.get("type") == "session")
    assert session.header.get("version") == pi_header.get("version")
