"""One way in: every public function that takes a session reads a session, a replay result (its
replayed session) and a session file's path (``Path`` or ``str``) through :func:`pimem.as_session`,
and gives for each what it gives for the session that names; anything else is an
:class:`~pimem.errors.ArgumentTypeError` naming its type."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

import pimem
from pimem.errors import ArgumentTypeError, ConfigurationError
from tests.support.tiny import write_tiny_session

SETTINGS = pimem.CompactionSettings(reserve_tokens=1500, keep_recent_tokens=1500)
WINDOW = 6000
KINDS = ["session", "result", "path", "str"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = write_tiny_session(tmp_path_factory.mktemp("one-way-in") / "tiny.jsonl", turns=20)
    session = pimem.load_session(path)
    result = pimem.replay(session, SETTINGS, context_window=WINDOW)
    assert len(result.compactions) >= 2  # the replayed session differs from the recording
    return {"session": session, "result": result, "path": path, "str": str(path)}


def _same(kind: str, sources: dict[str, Any], call: Callable[[Any], Any]) -> tuple[Any, Any]:
    """(what ``call`` gives for the source of ``kind``, what it gives for the session that names)."""
    source = sources[kind]
    named = pimem.as_session(source)
    if kind == "result":
        assert named is source.session and named is not sources["session"]
    else:
        assert [e["id"] for e in named.entries] == [e["id"] for e in sources["session"].entries]
    return call(source), call(named)


@pytest.mark.parametrize("kind", KINDS)
def test_replay(kind: str, sources: dict[str, Any]) -> None:
    got, want = _same(kind, sources, lambda s: pimem.replay(s, SETTINGS, context_window=WINDOW))
    timing = ["latency_s"]  # how long each summary took: never the same twice
    assert got.events.drop(columns=timing).equals(want.events.drop(columns=timing)) and len(got.events)
    assert [e["type"] for e in got.session.entries] == [e["type"] for e in want.session.entries]


@pytest.mark.parametrize("kind", KINDS)
def test_navigate(kind: str, sources: dict[str, Any]) -> None:
    # an assistant message: the leaf moves to it (a user message would put it on its parent)
    target = [e["id"] for e in pimem.as_session(sources[kind]).entries
              if e["type"] == "message" and e["message"]["role"] == "assistant"][-3]
    got, want = _same(kind, sources, lambda s: pimem.navigate(s, target, summarize=False))
    assert got.leaf_id == want.leaf_id == target
    assert len(got.entries) == len(want.entries) == len(pimem.as_session(sources[kind]).entries)


@pytest.mark.parametrize("kind", KINDS)
def test_drift_report(kind: str, sources: dict[str, Any]) -> None:
    got, want = _same(kind, sources, pimem.drift_report)
    assert got.equals(want)
    assert len(got) == (len(sources["result"].compactions) if kind == "result" else 0)


@pytest.mark.parametrize("kind", KINDS)
def test_orphan_references(kind: str, sources: dict[str, Any]) -> None:
    got, want = _same(kind, sources, pimem.orphan_references)
    assert got.equals(want)
    assert len(got) == (len(sources["result"].compactions) if kind == "result" else 0)


@pytest.mark.parametrize("kind", KINDS)
def test_compare_sources_reference(kind: str, sources: dict[str, Any]) -> None:
    got, want = _same(kind, sources, lambda s: pimem.compare_sources(s, {"recorded": "recorded"}))
    assert got.per_compaction.equals(want.per_compaction)
    assert len(got.per_compaction) == (len(sources["result"].compactions) if kind == "result" else 0)


@pytest.mark.parametrize("kind", KINDS)
def test_compare_sources_source(kind: str, sources: dict[str, Any]) -> None:
    reference = sources["result"]
    got, want = _same(kind, sources, lambda s: pimem.compare_sources(reference, {"other": s}))
    assert got.per_compaction.equals(want.per_compaction)
    assert got.notes == want.notes


_RUN_IDENTITY = ["run_hash", "session", "session_hash", "elapsed_s", "worker_pid"]


@pytest.mark.parametrize("kind", KINDS)
def test_sweep(kind: str, sources: dict[str, Any]) -> None:
    grid = {"reserve_tokens": [1500], "keep_recent_tokens": [1500], "context_window": [WINDOW]}

    def run(s: Any) -> pd.DataFrame:
        return pimem.sweep([s], grid, workers=1, progress=False, measures=False).drop(columns=_RUN_IDENTITY)

    got, want = _same(kind, sources, run)
    assert got.equals(want)
    assert got["error"].isna().all()
    assert got["entries"].iloc[0] == len(pimem.as_session(sources[kind]).get_branch())


ENTRY_POINTS: dict[str, Callable[[Any], Any]] = {
    "as_session": pimem.as_session,
    "replay": lambda x: pimem.replay(x, SETTINGS, context_window=WINDOW),
    "navigate": lambda x: pimem.navigate(x, "u0000", summarize=False),
    "drift_report": pimem.drift_report,
    "orphan_references": pimem.orphan_references,
    "compare_sources": lambda x: pimem.compare_sources(x, {"recorded": "recorded"}),
    "sweep": lambda x: pimem.sweep([x], {"context_window": [WINDOW]}, workers=1, progress=False, measures=False),
    "write_drift_report": lambda x: pimem.write_drift_report(x, Path("never-written.html")),
}


@pytest.mark.parametrize("name", ENTRY_POINTS)
@pytest.mark.parametrize("wrong", [42, {"entries": []}, b"tiny.jsonl"], ids=["int", "dict", "bytes"])
def test_anything_else_is_an_argument_type_error(name: str, wrong: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArgumentTypeError, match=f"got {type(wrong).__name__}$") as caught:
        ENTRY_POINTS[name](wrong)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ConfigurationError)
    assert not (tmp_path / "never-written.html").exists()


def test_a_source_of_no_known_kind_is_named(sources: dict[str, Any]) -> None:
    with pytest.raises(ArgumentTypeError, match="source 'odd': expected 'recorded', a session, .* got int"):
        pimem.compare_sources(sources["session"], {"recorded": "recorded", "odd": 42})  # type: ignore[dict-item]


def test_replay_settings_are_compaction_settings_a_mapping_of_their_fields_or_none(sources: dict[str, Any]) -> None:
    session = sources["session"]
    given = pimem.replay(session, SETTINGS, context_window=WINDOW)
    mapped = pimem.replay(session, {"reserve_tokens": 1500, "keep_recent_tokens": 1500}, context_window=WINDOW)
    assert mapped.settings == given.settings == SETTINGS
    assert pimem.replay(session, None, context_window=40_000).settings == pimem.CompactionSettings()
    with pytest.raises(ArgumentTypeError, match="settings: no field 'reserve' .*reserve_tokens"):
        pimem.replay(session, {"reserve": 1500}, context_window=WINDOW)
    with pytest.raises(ArgumentTypeError, match="settings must be CompactionSettings, .* got Settings"):
        pimem.replay(session, pimem.Settings(), context_window=WINDOW)  # type: ignore[arg-type]
