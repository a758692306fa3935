"""A session's index gives the port's paths: the runs of parent links answer for any leaf of any tree
where they are exact, and the context calls built on them equal the port's (no Node needed; the port
itself is checked against Pi in the differential tests)."""

from __future__ import annotations

import random

import pytest

import pimem
from pimem.core import session_manager as sm
from pimem.core.incremental import paths
from pimem.core.session_manager import Session, build_session_path, is_walked_path, walk_to_root

HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}


def entry(eid: object, parent: object) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": str(eid)}}


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


def ids(path: list[dict]) -> list[int]:
    return [id(e) for e in path]


def test_indexed_paths_equal_the_ports_walk() -> None:
    rng = random.Random(5)
    answered = 0
    for _ in range(80):
        session = Session(HEADER, random_entries(rng, rng.randrange(1, 40), repeated=0.0))
        leaves = [e["id"] for e in session.entries] + ["missing", None, 3, ["x"], sm.NULL_LEAF]
        for round_ in range(2):
            for leaf in leaves:
                want = build_session_path(session, leaf)
                found = paths.indexed_path(session, leaf)
                if found is not None:  # None only where a parentId cycle is met
                    answered += 1
                    assert ids(found.path) == ids(want), leaf
                    assert found.types == [e.get("type") for e in want]
                    on_path = {e["id"]: k for k, e in enumerate(want)}
                    for eid in {e["id"] for e in session.entries} | {"missing"}:
                        assert found.position_of(eid) == on_path.get(eid), (leaf, eid)
                assert ids(paths.build_session_path(session, leaf)) == ids(want)
                assert paths.build_session_context(session, leaf) == sm.build_session_context(session, leaf)
            session.append_entry(entry(f"n{round_}", rng.choice(leaves[:-5])))  # the index catches up
            leaves.append(f"n{round_}")
    assert answered > 1000


def test_the_index_declines_where_it_is_not_exact() -> None:
    session = Session(HEADER, [entry("a", None), entry("b", "a"), entry("a", "b")])  # an id taken again
    assert paths.indexed_path(session, "b") is None
    assert ids(paths.build_session_path(session, "b")) == ids(build_session_path(session, "b"))
    session = Session(HEADER, [entry("a", None), entry("b", "a")])
    assert paths.indexed_path(session, "b") is not None
    session.entries.append(entry("c", "b"))  # added without indexing: only the port knows
    assert paths.indexed_path(session, "b") is None
    cycle = Session(HEADER, [entry("a", "b"), entry("b", "a")])
    assert paths.indexed_path(cycle, "b") is None
    assert ids(paths.build_session_path(cycle, "b")) == ids(build_session_path(cycle, "b"))


def test_the_loaders_session_takes_the_index(sample_paths: list, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pimem.load_session`` returns a subclass of the core Session: the public calls take its path from the
    index (with the port's walk disabled they still answer), and answer as the port does."""
    session = pimem.load_session(sample_paths[0])
    assert type(session) is not Session and isinstance(session, Session)
    leaf = session.leaf_id
    want = sm.build_session_context(session, leaf)
    projection = sm.build_session_projection(session, leaf)

    def no_walk(*args: object) -> list:
        raise AssertionError("the port walked a path the index holds")

    monkeypatch.setattr(sm, "walk_to_root", no_walk)
    assert pimem.build_session_context(session, leaf) == want
    assert pimem.build_session_projection(session, leaf) == projection
    assert paths.session_index(session) is not None and paths.session_index(session).count == len(session.entries)
    with pytest.raises(AssertionError, match="the port walked"):
        sm.build_session_context(session, leaf)


def test_walked_lists_are_taken_as_they_are() -> None:
    rng = random.Random(11)
    chain = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("d", "c")]
    assert is_walked_path(chain) and build_session_path(chain) == chain and build_session_path(chain) is not chain
    cases = [
        chain[::-1],                                   # reversed
        chain[:2] + [entry("b", "b")] + chain[2:],     # a repeated id
        [entry("z", "d")] + chain[1:],                 # the root's parent on the path
        [dict(chain[0], id="")] + chain[1:],           # an empty id
        [dict(chain[0], id=5)] + chain[1:],            # an id that is no string
        chain[:2] + chain[3:],                         # a gap
    ]
    for entries in cases:
        assert not is_walked_path(entries)
    for _ in range(300):
        entries = random_entries(rng, rng.randrange(1, 12))
        index = sm.build_entry_index(entries)
        walked = walk_to_root(entries[-1], index.get, len(entries))[::-1]
        assert ids(build_session_path(entries)) == ids(walked)
        if is_walked_path(entries):
            assert ids(walked) == ids(entries)


def test_one_walk_stops_at_a_cycle() -> None:
    session = Session(HEADER, [entry("a", "c"), entry("b", "a"), entry("c", "b"), entry("d", "c")])
    assert [e["id"] for e in session.get_branch("d")] == ["a", "b", "c", "d"]
    assert any("cycle" in w.reason for w in session.warnings)
    assert [e["id"] for e in build_session_path(session, "d")] == ["a", "b", "c", "d"]


def test_a_sessions_path_is_recognised_as_its_own_walk_and_nothing_else() -> None:
    """``walked_path``: a list that is, entry for entry, the session's path to its last entry (as ``get_branch``
    returns it, or any prefix of it) gets the index's facts; a list that differs does not."""
    entries = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("x", "a"), entry("d", "c")]
    session = Session(HEADER, entries)
    branch = session.get_branch()
    assert [e["id"] for e in branch] == ["a", "b", "c", "d"]
    found = paths.walked_path(branch)
    assert found is not None and found.checked and found.types == ["message"] * 4
    assert found.position_of("c") == 2 and found.position_of("x") is None
    assert paths.walked_path(branch[:2]) is not None  # a prefix of a walk is the walk to its last entry
    assert paths.walked_path(list(branch)) is not None  # the same entries in another list
    assert paths.walked_path(session.get_branch("x")) is not None
    for other in (branch[1:], branch[:2] + branch[3:], [branch[0], entries[3], branch[2]], list(reversed(branch)),
                  [dict(e) for e in branch], [], tuple(branch)):
        assert paths.walked_path(other) is None, [e["id"] for e in other]  # type: ignore[union-attr]
    session.entries.append(entry("e", "d"))  # not through the session: only the port knows
    assert paths.walked_path(branch) is None


def test_a_path_whose_entries_lack_messages_raises_as_the_port_does() -> None:
    """The index's word that every message entry holds a message object is the session's: where one does not,
    the cut point and the preparation raise the port's error on the session's path."""
    bad = {"type": "message", "id": "b", "parentId": "a", "timestamp": "2025-01-01T00:00:01.000Z"}
    session = Session(HEADER, [entry("a", None), bad, entry("c", "b")])
    branch = session.get_branch()
    found = paths.walked_path(branch)
    assert found is not None and not found.checked
    for fn in (lambda: paths.find_cut_point(branch, 0, 3, 1), lambda: paths.prepare_compaction(branch)):
        with pytest.raises(Exception) as got:
            fn()
        assert "has no message object" in str(got.value)


def test_the_branch_roots_of_a_session_are_forgotten_with_it() -> None:
    import gc

    gc.collect()
    before = set(sm.BRANCH_ROOTS)
    session = Session(HEADER, [entry(f"e{i}", None if i % 3 == 0 else f"e{i - 1}") for i in range(30)])
    for leaf in ("e2", "e5", "e29", "e2"):
        assert paths.walked_path(session.get_branch(leaf)) is not None
    roots = set(sm.BRANCH_ROOTS) - before
    assert roots == {id(session.entries[k]) for k in (0, 3, 27)}
    del session
    gc.collect()
    assert roots & set(sm.BRANCH_ROOTS) == set()
