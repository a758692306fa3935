"""The incremental ContextTracker gives exactly what the pure functions give, at every prefix.

The pure functions (``build_session_projection``, ``estimate_projected_context_tokens``,
``prepare_compaction``, ``serialize_conversation(convert_to_llm(...))``) are the reference;
they are themselves checked against Pi in the differential tests. Here the tracker grows
along real sessions, the bundled samples, random trees from ``tests.core.test_compaction`` and
hypothesis trees from ``tests.support.strategies``, and every prefix is compared field by field.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from pimem.base.js import js_stringify
from pimem.core.compaction.compaction import (
    CompactionSettings,
    estimate_context_tokens,
    estimate_messages_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    prepare_compaction,
)
from pimem.core.compaction.utils import serialize_conversation
from pimem.core.incremental.caches import SerializationCache, TokenCache, serialize_messages
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import get_current_system_message
from pimem.core.session_manager import (
    build_session_path,
    build_session_projection,
    load_session,
)
from tests.support.strategies import session_trees
from tests.core.test_compaction import random_tree

KEEPS = (0, 1, 100, 2000, 20000)


def _usage_free(messages: list[dict]) -> int:
    """Pi's estimate without usage: the current system message plus every non-system message."""
    system = get_current_system_message(messages)
    rest = [m for m in messages if m.get("role") != "system"]
    return (estimate_tokens(system) if system is not None else 0) + estimate_messages_tokens(rest)


def _serialized(messages: list[dict]) -> str:
    return serialize_conversation(convert_to_llm(messages))


def _compare_prefix(tracker: ContextTracker, prefix: list[dict], keeps: tuple = KEEPS) -> int:
    """Assert the tracker equals the pure functions on ``prefix``; return preparations seen."""
    where = f"prefix of {len(prefix)} entries ending at {prefix[-1].get('id')!r}"
    pure = build_session_projection(prefix)
    proj = tracker.projection
    assert proj.messages == pure.messages, where
    assert [(e.source_entry.get("id"), len(e.messages)) for e in proj.entries] == [
        (e.source_entry.get("id"), len(e.messages)) for e in pure.entries
    ], where
    assert (proj.thinking_level, proj.model) == (pure.thinking_level, pure.model), where
    assert tracker.context_estimate() == estimate_projected_context_tokens(pure, prefix), where
    assert tracker.context_usage_estimate() == estimate_context_tokens(pure.messages), where
    assert tracker.total_estimate == estimate_messages_tokens(pure.messages), where
    assert tracker.usage_free_estimate() == _usage_free(pure.messages), where
    anchor = tracker.usage_message()
    ref_usage = estimate_context_tokens(pure.messages).last_usage_index
    assert anchor == (None if ref_usage is None else pure.messages[ref_usage]), where
    compactions = [e for e in build_session_path(prefix) if e.get("type") == "compaction"]
    assert tracker.latest_compaction is (compactions[-1] if compactions else None), where
    edits = any(e.source_entry.get("type") == "context_edit" for e in pure.entries)
    assert tracker.has_context_edit == edits, where
    # usage read through a function: the anchor's tokens are replaced, the trailing estimate stays
    shifted = tracker.context_usage_estimate(lambda m: 1_000_000)
    plain = tracker.context_usage_estimate()
    if anchor is None:
        assert shifted == plain, where
    else:
        assert shifted.tokens - plain.tokens == 1_000_000 - plain.usage_tokens, where
    prepared = 0
    for keep in keeps:
        s = CompactionSettings(keep_recent_tokens=keep)
        mine, ref = tracker.prepare(s), prepare_compaction(prefix, s)
        assert (mine is None) == (ref is None), (where, keep)
        if ref is None:
            continue
        prepared += 1
        assert mine.first_kept_entry_id == ref.first_kept_entry_id, (where, keep)
        assert (mine.is_split_turn, mine.tokens_before, mine.previous_summary) == (
            ref.is_split_turn, ref.tokens_before, ref.previous_summary), (where, keep)
        assert mine.messages_to_summarize == ref.messages_to_summarize, (where, keep)
        assert mine.turn_prefix_messages == ref.turn_prefix_messages, (where, keep)
        assert mine.file_ops == ref.file_ops, (where, keep)
        assert mine.settings == ref.settings
        assert tracker.serialize(mine.messages_to_summarize) == _serialized(ref.messages_to_summarize), (where, keep)
        assert tracker.serialize(mine.turn_prefix_messages) == _serialized(ref.turn_prefix_messages), (where, keep)
    return prepared


def _walk(path: list[dict], keeps: tuple = KEEPS, stride: int = 1) -> int:
    tracker = ContextTracker()
    prepared = 0
    for i, entry in enumerate(path):
        tracker.append(entry)
        if i % stride == 0 or i == len(path) - 1:
            prepared += _compare_prefix(tracker, path[: i + 1], keeps)
    return prepared


@pytest.mark.slow
def test_tracker_equals_pure_functions_on_real_sessions(real_v3_paths: list) -> None:
    """Every prefix of the active path of each real session."""
    for p in real_v3_paths:
        path = load_session(p).get_branch()
        prepared = _walk(path, keeps=(20000, 1000))
        assert prepared > len(path)  # most prefixes have something to summarize


def test_tracker_equals_pure_functions_on_samples(sample_paths: list) -> None:
    """Every prefix of every tip of the bundled samples."""
    assert sample_paths
    for p in sample_paths:
        session = load_session(p)
        for leaf in session.leaves():
            leaf_id = leaf.get("id") if isinstance(leaf, dict) else leaf
            _walk(session.get_branch(leaf_id))


def test_tracker_equals_pure_functions_on_random_paths() -> None:
    rng = random.Random(11)
    prepared = 0
    for _ in range(60):
        entries = random_tree(rng, 60)
        prepared += _walk(build_session_path(entries))
    assert prepared > 100


@pytest.mark.slow
@seed(5)
@settings(max_examples=400, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(tree=session_trees())
def test_tracker_equals_pure_functions_on_generated_trees(tree: Any) -> None:
    """Hypothesis trees (compactions, context edits, system messages, branches): every tip."""
    _header, entries = tree
    parents = {e.get("parentId") for e in entries}
    for tip in [e for e in entries if e.get("id") not in parents]:
        _walk(build_session_path(entries, tip["id"]))


def test_tracker_reset_and_rebuild_match_append() -> None:
    """A tracker reset on a path equals one grown entry by entry, also after compactions."""
    rng = random.Random(3)
    for _ in range(20):
        path = build_session_path(random_tree(rng, 80))
        grown = ContextTracker()
        grown.extend(path)
        fresh = ContextTracker(path)
        s = CompactionSettings(keep_recent_tokens=500)
        a, b = grown.prepare(s), fresh.prepare(s)
        assert (a is None) == (b is None)
        if a is not None:
            assert js_stringify(a.messages_to_summarize) == js_stringify(b.messages_to_summarize)
            assert (a.first_kept_entry_id, a.tokens_before, a.file_ops) == (b.first_kept_entry_id, b.tokens_before, b.file_ops)


def test_tracker_preparations_are_independent_copies() -> None:
    """Changing a returned preparation does not change the next one."""
    s = CompactionSettings(keep_recent_tokens=50)
    rng = random.Random(9)
    expected = None
    while expected is None:
        path = build_session_path(random_tree(rng, 80))
        expected = prepare_compaction(path, s)
    tracker = ContextTracker(path)
    first = tracker.prepare(s)
    assert first is not None and first.file_ops == expected.file_ops
    first.messages_to_summarize.clear()
    first.file_ops.read.add("/not/there")
    second = tracker.prepare(s)
    assert js_stringify(second.messages_to_summarize) == js_stringify(expected.messages_to_summarize)
    assert second.file_ops == expected.file_ops


def test_serialize_messages_with_cache_equals_plain() -> None:
    rng = random.Random(4)
    cache = SerializationCache()
    for _ in range(30):
        projection = build_session_projection(random_tree(rng, 40))
        msgs = projection.messages
        assert serialize_messages(msgs, cache) == _serialized(msgs)
        assert serialize_messages(msgs) == _serialized(msgs)
        assert serialize_messages(msgs[::2], cache) == _serialized(msgs[::2])
    assert len(cache) > 0


def test_append_rejects_entries_off_the_path() -> None:
    path = build_session_path(random_tree(random.Random(1), 10))
    with pytest.raises(ValueError, match="not a child"):
        ContextTracker(path[:2]).append({"type": "message", "id": "q", "parentId": "nope", "message": {}})
    with pytest.raises(ValueError, match="path is empty"):
        ContextTracker().append({"type": "message", "id": "q", "parentId": "x", "message": {}})


def test_token_cache_is_shared_and_reused() -> None:
    path = build_session_path(random_tree(random.Random(2), 60))
    cache = TokenCache()
    tracker = ContextTracker(path, cache=cache)
    n = len(cache)
    assert n > 0
    tracker.prepare(CompactionSettings(keep_recent_tokens=10))
    again = ContextTracker(path, cache=cache)
    # a second tracker on the same path finds the estimates of the entries' messages in the cache; only the
    # messages a projection makes anew (summaries, custom messages) are estimated again
    own = {id(e.get("message")) for e in path}
    made = [m for m in again.projection.messages if id(m) not in own]
    assert len(cache) == n + len(made) < 2 * n
    assert tracker.cache is cache


def test_serialization_cache_reuses_the_last_conversation_exactly() -> None:
    """Growing, equal, shrinking and diverging sequences, with messages that serialize to ""."""
    rng = random.Random(8)
    msgs = build_session_projection(random_tree(rng, 120)).messages
    msgs = [m for m in msgs if m.get("role") != "system"]
    empty = {"role": "user", "content": ""}  # contributes no text
    msgs = msgs[:5] + [empty] + msgs[5:] + [empty]
    cache = SerializationCache()
    for n in list(range(len(msgs) + 1)) + [len(msgs), 7, 3, 0, 9]:
        assert serialize_messages(msgs[:n], cache) == _serialized(msgs[:n]), n
    other = msgs[:4] + msgs[6:10]
    assert serialize_messages(other, cache) == _serialized(other)
    assert serialize_messages([empty, empty], cache) == ""
    assert serialize_messages([empty, empty] + msgs[:3], cache) == _serialized(msgs[:3])


def _state(tracker: ContextTracker) -> dict[str, Any]:
    """Everything a tracker holds about its projection (messages compared by value)."""
    proj = tracker.projection
    return {
        "entries": [(e.source_entry.get("id"), e.messages) for e in proj.entries],
        "messages": proj.messages, "settings": (proj.thinking_level, proj.model),
        "sources": [id(s) for s in tracker._sources], "types": tracker._types, "per_entry": tracker._per_entry,
        "edits": list(tracker._edits.items()), "tokens": tracker._entry_tokens, "cum": tracker._cum,
        "counted": (tracker._counted, tracker.counted_total), "ns": tracker._ns_messages, "ns_off": tracker._ns_off,
        "system": (tracker._system, tracker._system_positions), "cuts": tracker._cut_positions,
        "turns": tracker._turn_positions, "sums": (tracker._total, tracker._non_system, tracker._trailing),
        "usage": (tracker._usage, tracker._usage_index, tracker._usage_entry_pos, tracker._message_count),
    }


def _compare_compactions(path: list[dict], calls: list[bool]) -> None:
    """At every compaction of ``path``, the grown tracker's state equals a rebuilt one's."""
    grown = ContextTracker(counter=len)
    for i, entry in enumerate(path):
        grown.append(entry)
        if entry.get("type") == "compaction":
            assert _state(grown) == _state(ContextTracker(path[: i + 1], counter=len)), f"compaction at {i}"


def test_tracker_compaction_from_kept_entries_equals_a_rebuild(monkeypatch: pytest.MonkeyPatch,
                                                                sample_paths: list) -> None:
    """After a compaction the projection is made from the kept entries of the previous one: the
    state is the one a rebuild from the path gives (random paths with compactions, context edits
    and system messages; the samples), and that way is taken for most compactions."""
    calls: list[bool] = []
    original = ContextTracker._compact_from_kept

    def counted(self: ContextTracker, previous: int) -> bool:
        calls.append(original(self, previous))
        return calls[-1]

    monkeypatch.setattr(ContextTracker, "_compact_from_kept", counted)
    rng = random.Random(17)
    for _ in range(80):
        _compare_compactions(build_session_path(random_tree(rng, 120)), calls)
    for p in sample_paths:
        session = load_session(p)
        for leaf in session.leaves():
            _compare_compactions(session.get_branch(leaf.get("id") if isinstance(leaf, dict) else leaf), calls)
    assert sum(calls) > len(calls) / 2 and not all(calls)


@pytest.mark.slow
@seed(7)
@settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(tree=session_trees())
def test_tracker_compaction_from_kept_entries_on_generated_trees(tree: Any) -> None:
    """Hypothesis trees: at every compaction of every tip, the state equals a rebuild's."""
    _header, entries = tree
    parents = {e.get("parentId") for e in entries}
    for tip in [e for e in entries if e.get("id") not in parents]:
        _compare_compactions(build_session_path(entries, tip["id"]), [])


def test_tracker_context_edit_from_previous_projection_equals_a_rebuild(monkeypatch: pytest.MonkeyPatch,
                                                                        sample_paths: list) -> None:
    """After a ``context_edit`` the entries before the edited one are copied from the previous
    projection: the state is the one a rebuild from the path gives (random paths with edits of
    every kind of entry, before and after compactions)."""
    calls: list[bool] = []
    original = ContextTracker._edit_from_previous

    def counted(self: ContextTracker) -> bool:
        calls.append(original(self))
        return calls[-1]

    monkeypatch.setattr(ContextTracker, "_edit_from_previous", counted)
    rng = random.Random(23)
    for _ in range(80):
        path = build_session_path(random_tree(rng, 120))
        grown = ContextTracker(counter=len)
        for i, entry in enumerate(path):
            grown.append(entry)
            if entry.get("type") == "context_edit":
                assert _state(grown) == _state(ContextTracker(path[: i + 1], counter=len)), f"edit at {i}"
    assert sum(calls) > len(calls) / 2
