"""The projection after a compaction, made from its kept entries on, equals the projection of the
whole path prefix (entries, messages, thinking level, model), on generated trees (model and thinking
changes, context edits, system messages, compactions whose first kept entry is absent, branches)
and on replayed samples."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from pimem import CompactionSettings
from pimem.core.session_manager import Session, build_session_path, is_walked_path, load_session
from pimem.replays.engine import replay
from pimem.sessions.compactions import (
    compaction_spans,
    messages_after_compaction,
    prefix_projection,
    projection_after,
)
from pimem.summarizers import get_summarizer
from tests.support.strategies import session_trees


def _same_projection(a: Any, b: Any) -> None:
    assert [id(pe.source_entry) for pe in a.entries] == [id(pe.source_entry) for pe in b.entries]
    assert [pe.messages for pe in a.entries] == [pe.messages for pe in b.entries]
    assert a.messages == b.messages
    assert (a.thinking_level, a.model) == (b.thinking_level, b.model)


def _check_path(session: Session, leaf_id: str | None = None) -> int:
    """Compare both ways of projecting after every compaction of the leaf's path; the number of
    fast projections checked."""
    path = build_session_path(session, leaf_id)
    walked = is_walked_path(path)
    position = {id(e): i for i, e in enumerate(path)}
    fast = 0
    spans = compaction_spans(session, leaf_id=leaf_id)
    for k, span in enumerate(spans):
        pos = position[id(span.entry)]
        _same_projection(projection_after(span, path, pos, walked), prefix_projection(path, pos + 1, walked))
        if not (walked and span.settings_entries is not None):
            continue
        fast += 1
        end = position[id(spans[k + 1].entry)] if k + 1 < len(spans) else len(path)
        for stop in range(pos + 1, end + 1):
            if any(e.get("type") == "message" and e.get("message").__class__ is not dict for e in path[:stop]):
                break
            assert messages_after_compaction(path, stop, pos) == prefix_projection(path, stop, True).messages
    return fast


@seed(11)
@settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(tree=session_trees())
def test_projection_after_a_compaction_equals_the_whole_prefix_on_generated_trees(tree: Any) -> None:
    header, entries = tree
    session = Session(header, entries)
    parents = {e.get("parentId") for e in entries}
    for tip in [e for e in entries if e.get("id") not in parents]:
        try:
            compaction_spans(session, leaf_id=tip["id"])
        except Exception:  # noqa: BLE001 - a path Pi's projection refuses: no spans to compare
            continue
        _check_path(session, tip["id"])


def test_projection_after_a_compaction_on_replayed_samples(sample_paths: list) -> None:
    fast = 0
    for path in sample_paths:
        session = load_session(path)
        result = replay(session, CompactionSettings(reserve_tokens=1000, keep_recent_tokens=800),
                        summarizer=get_summarizer("extractive", session), context_window=6000,
                        token_source="chars")
        fast += _check_path(result.session)
    assert fast >= 5  # the kept-entries projection was the one compared, not only the fallback
