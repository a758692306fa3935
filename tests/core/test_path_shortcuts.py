"""The shortcuts of the path walk agree with the plain walk: a session's remembered path, and a
list of entries recognised as a chain (no Node needed; the walk itself is checked against Pi in
the differential tests)."""

from __future__ import annotations

import random

from pimem.core.compaction.compaction import chain_path
from pimem.core.session_manager import Session, _build_path, _context_of_path, _run_path, build_session_context, build_session_path

HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}


def entry(eid: object, parent: object) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": str(eid)}}


def plain_path(session: Session, leaf: object) -> list[dict]:
    return _build_path(session.entries, session.get_entry, session.leaf_id if leaf is None else leaf)


def random_entries(rng: random.Random, n: int, repeated: float = 0.03) -> list[dict]:
    entries: list[dict] = []
    for i in range(n):
        roll = rng.random()
        if not entries or roll < 0.05:
            parent: object = None
        elif roll < 0.08:
            parent = "missing"
        elif roll < 0.10:
            parent = f"e{rng.randrange(n)}"  # possibly a later entry: cycles and forward links
        else:
            parent = entries[max(0, len(entries) - 1 - int(rng.expovariate(0.3)))]["id"]
        eid = f"e{i}" if rng.random() >= repeated else f"e{rng.randrange(max(i, 1))}"  # a few repeated ids
        entries.append(entry(eid, parent))
    return entries


def test_remembered_paths_equal_the_plain_walk_in_any_order() -> None:
    rng = random.Random(7)
    for _ in range(60):
        session = Session(HEADER, random_entries(rng, rng.randrange(1, 40)))
        ids = [e["id"] for e in session.entries] + ["missing", None]
        for _ in range(80):
            leaf = rng.choice(ids)
            got = build_session_path(session, leaf)
            assert [id(e) for e in got] == [id(e) for e in plain_path(session, leaf)], leaf
            got.append({"type": "label"})  # the caller's list is its own
        # appending a new child keeps the paths right
        session.append_entry(entry("new", rng.choice(ids[:-2])))
        session.append_entry(entry("newer", "new"))
        for leaf in ids + ["new", "newer"]:
            assert [id(e) for e in build_session_path(session, leaf)] == [id(e) for e in plain_path(session, leaf)]


def test_paths_from_runs_equal_the_plain_walk() -> None:
    rng = random.Random(5)
    answered = 0
    for _ in range(80):
        session = Session(HEADER, random_entries(rng, rng.randrange(1, 40), repeated=0.0))
        ids = [e["id"] for e in session.entries] + ["missing", None, 3, ["x"]]
        for round_ in range(2):
            for leaf in ids:
                want = plain_path(session, leaf)
                found = _run_path(session, session.leaf_id if leaf is None else leaf)
                if found is not None:  # None only where a parentId cycle is met
                    answered += 1
                    assert [id(e) for e in found[0]] == [id(e) for e in want], leaf
                    assert found[1] == [e.get("type") for e in want]
                assert [id(e) for e in build_session_path(session, leaf)] == [id(e) for e in want]
                context = build_session_context(session, leaf)
                assert context == _context_of_path(want), leaf
            session.append_entry(entry(f"n{round_}", rng.choice(ids[:-4])))
            ids.append(f"n{round_}")
    assert answered > 1000
    # an id taken again, or entries added without indexing: the runs do not answer
    session = Session(HEADER, [entry("a", None), entry("b", "a"), entry("a", "b")])
    assert _run_path(session, "b") is None
    assert [id(e) for e in build_session_path(session, "b")] == [id(e) for e in plain_path(session, "b")]
    session = Session(HEADER, [entry("a", None), entry("b", "a")])
    session.entries.append(entry("c", "b"))
    assert _run_path(session, "b") is None


def test_chain_path_only_where_the_walk_gives_the_entries_back() -> None:
    rng = random.Random(11)
    chain = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("d", "c")]
    assert chain_path(chain) == chain
    cases = [
        chain[::-1],                                   # reversed
        chain[:2] + [entry("b", "b")] + chain[2:],     # a repeated id
        [entry("z", "d")] + chain[1:],                 # the root's parent on the path
        [dict(chain[0], id="")] + chain[1:],           # an empty id
        [dict(chain[0], id=5)] + chain[1:],            # an id that is no string
        chain[:2] + chain[3:],                         # a gap
        [],
    ]
    for entries in cases:
        assert chain_path(entries) is None
    for _ in range(200):
        entries = random_entries(rng, rng.randrange(1, 12))
        shortcut = chain_path(entries)
        if shortcut is not None:
            assert [id(e) for e in shortcut] == [id(e) for e in build_session_path(entries)]
            assert shortcut is not entries
