"""A replay's summary has exactly the keys its TypedDict (``ReplaySummary``) declares, of the declared kinds."""

from __future__ import annotations

import typing

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays.engine import replay
from pimem.replays.result import ReplaySummary
from pimem.sessions.samples import sample_session_paths

KINDS = {int: (int,), float: (int, float), str: (str,)}


def _kinds_of(hint: object) -> tuple[type, ...]:
    args = typing.get_args(hint) or (hint,)
    return tuple(kind for arg in args for kind in (KINDS.get(arg, (arg,)) if isinstance(arg, type) else ()))


@pytest.mark.parametrize("token_source", ["calibrated", "estimate"])
def test_the_summary_is_described_by_its_typeddict(token_source: str) -> None:
    path = next(p for p in sample_session_paths() if p.name == "gpxkit-antimeridian.jsonl")
    result = replay(path, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), context_window=8000,
                    token_source=token_source)
    summary = result.summary()
    keys = set(summary)
    assert ReplaySummary.__required_keys__ <= keys <= ReplaySummary.__required_keys__ | ReplaySummary.__optional_keys__
    assert (keys >= ReplaySummary.__optional_keys__) == (token_source == "calibrated")
    hints = typing.get_type_hints(ReplaySummary)
    wrong = {k: v for k, v in summary.items() if not isinstance(v, _kinds_of(hints[k]))}
    assert wrong == {}
    assert summary["compactions"] > 0  # the replay compacted: the figures are not all defaults
