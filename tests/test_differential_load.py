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
