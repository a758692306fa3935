"""Full compactions of the sample sessions through every summarizer; recorded answers; from_env."""

from __future__ import annotations

import pytest

from pimem.core.compaction.branch_summarization import (
    collect_entries_for_branch_summary,
    generate_branch_summary,
)
from pimem.core.compaction.compaction import (
    CompactionSettings,
    ModelInfo,
    compact,
    prepare_compaction,
)
from pimem.core.session_manager import load_session
from pimem.summarizers import summarizer_from_env
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer, estimate_text_tokens
from pimem.summarizers.openai_compat import OpenAISummarizer
from pimem.summarizers.recorded import (
    NoRecordingError,
    RecordedSummarizer,
    split_turn_summary,
    strip_file_blocks,
)

MODEL = ModelInfo(context_window=200_000, max_tokens=32_000, reasoning=True, provider="openai", id="fake-model")
SETTINGS = CompactionSettings(reserve_tokens=16384, keep_recent_tokens=2000)
HISTORY_SECTIONS = ["## Goal", "## Constraints & Preferences", "### Done", "### In Progress", "### Blocked",
                    "## Key Decisions", "## Next Steps", "## Critical Context"]


def latest_preparation(session):
    """The preparation at the session's leaf, or at the nearest earlier point that has one."""
    branch = session.get_branch()
    for keep in (SETTINGS.keep_recent_tokens, 500, 100):
        settings = CompactionSettings(reserve_tokens=SETTINGS.reserve_tokens, keep_recent_tokens=keep)
        for end in range(len(branch), 0, -1):
            prep = prepare_compaction(branch[:end], settings)
            if prep is not None:
                return prep
    raise AssertionError(f"{session.path}: nothing to compact")


def run_compaction(session, summarizer):
    return compact(latest_preparation(session), summarizer, model=MODEL, thinking_level="medium")


def test_full_compaction_with_extractive(sample_paths):
    for path in sample_paths:
        session = load_session(path)
        prep = latest_preparation(session)
        result = compact(prep, ExtractiveSummarizer(), model=MODEL, thinking_level="medium")
        assert result.first_kept_entry_id == prep.first_kept_entry_id
        history = split_turn_summary(result.summary)[0]
        for heading in HISTORY_SECTIONS:
            assert heading in history, (path.name, heading)
        # the file lists Pi appends are there, and the modified files appear in the summary text too
        for f in result.details["modifiedFiles"]:
            assert f in strip_file_blocks(result.summary) or prep.previous_summary, (path.name, f)
        assert result.usage["output"] > 0
        assert estimate_text_tokens(history) <= int(0.8 * SETTINGS.reserve_tokens)


def test_full_compaction_with_openai_then_cached_run_makes_no_request(sample_paths, server, tmp_path):
    inner = OpenAISummarizer("gpt-5-mini", base_url=server.base_url, api_key="sk-test", backoff_base=0.001)
    cache_file = tmp_path / "cache.sqlite"
    first = [run_compaction(load_session(p), CachedSummarizer(inner, cache_file)) for p in sample_paths]
    requests_made = server.hits
    assert requests_made >= len(sample_paths)
    for body in server.bodies():
        assert body["model"] == "gpt-5-mini" and body["reasoning_effort"] == "medium"
        assert body["max_completion_tokens"] in (int(0.8 * 16384), int(0.5 * 16384))
    for result in first:
        history, turn = split_turn_summary(result.summary)
        assert history.startswith("## Goal") and result.usage["input"] > 0
        assert turn is None or turn.startswith("## Original Request")

    cached = CachedSummarizer(inner, cache_file)
    second = [run_compaction(load_session(p), cached) for p in sample_paths]
    assert server.hits == requests_made  # no request the second time
    assert cached.misses == 0 and cached.hits == requests_made
    assert [r.summary for r in second] == [r.summary for r in first]
    assert len(cached.export()) == requests_made


def test_full_compaction_with_extractive_through_the_cache(sample_paths, tmp_path):
    cache = CachedSummarizer(ExtractiveSummarizer(), tmp_path / "c.sqlite")
    first = [run_compaction(load_session(p), cache).summary for p in sample_paths]
    misses = cache.misses
    again = CachedSummarizer(ExtractiveSummarizer(), tmp_path / "c.sqlite")
    assert [run_compaction(load_session(p), again).summary for p in sample_paths] == first
    assert again.misses == 0 and again.hits == misses


def test_full_compaction_with_recorded_summaries(sample_paths):
    with_compactions = 0
    for path in sample_paths:
        session = load_session(path)
        compactions = [e for e in session.entries if e["type"] == "compaction"]
        recorded = RecordedSummarizer(session)
        if not compactions:
            with pytest.raises(NoRecordingError, match=path.name):
                run_compaction(session, recorded)
            continue
        with_compactions += 1
        # replay the first recorded compaction point: the answer is the recorded text
        branch = session.get_branch(compactions[0]["parentId"])
        prep = prepare_compaction(branch, SETTINGS)
        result = compact(prep, recorded, model=MODEL)
        expected_history, expected_turn = split_turn_summary(compactions[0]["summary"])
        got_history, got_turn = split_turn_summary(result.summary)
        assert got_history == expected_history
        if prep.is_split_turn and expected_turn is not None:
            assert got_turn == expected_turn
    if with_compactions == 0:
        pytest.skip("no sample session holds a compaction")


def test_recorded_matches_by_previous_summary_on_the_real_session(before_compaction):
    session = before_compaction
    compactions = [e for e in session.entries if e["type"] == "compaction"]
    assert len(compactions) == 2
    recorded = RecordedSummarizer(session)
    # ask for the second one first: content matching picks it by its previous summary
    # (the recording comes from an older Pi whose cut differs: choose a cut that is not a split turn,
    # since the recorded compactions have no turn part)
    second_prep = unsplit_preparation(session.get_branch(compactions[1]["parentId"]))
    assert strip_file_blocks(second_prep.previous_summary) == strip_file_blocks(compactions[0]["summary"])
    second = compact(second_prep, recorded, model=MODEL)
    assert second.summary.startswith(compactions[1]["summary"])
    # the first compaction point is one long turn: ask its history request directly
    first_prep = prepare_compaction(session.get_branch(compactions[0]["parentId"]), CompactionSettings())
    first = recorded.complete(_history_request_for(first_prep))
    assert first.text == compactions[0]["summary"] and first.extra["recorded_entry_id"] == compactions[0]["id"]
    with pytest.raises(NoRecordingError, match="every recorded compaction was used"):
        compact(second_prep, recorded, model=MODEL)
    recorded.reset()
    assert compact(second_prep, recorded, model=MODEL).summary == second.summary
    strict = RecordedSummarizer(session, match="content")
    strict.complete(_history_request_for(second_prep))
    with pytest.raises(NoRecordingError):
        strict.complete(_history_request_for(second_prep))


def unsplit_preparation(branch):
    for keep in range(20000, 1000, -1000):
        prep = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=keep))
        if prep is not None and not prep.is_split_turn:
            return prep
    raise AssertionError("every cut splits a turn")


def _history_request_for(prep):
    from pimem.core.compaction.compaction import build_history_prompt
    from pimem.core.llm import SummaryRequest

    return SummaryRequest(kind="history", system_prompt="s", max_tokens=100,
                          prompt=build_history_prompt(prep.messages_to_summarize, None, prep.previous_summary))


def test_branch_summary_through_each_summarizer(sample_paths, server):
    for path in sample_paths:
        session = load_session(path)
        recorded_branch = [e for e in session.entries if e["type"] == "branch_summary"]
        if not recorded_branch:
            continue
        entry = recorded_branch[0]
        entries, _ = collect_entries_for_branch_summary(session, entry["fromId"], entry["parentId"])
        for summarizer in (ExtractiveSummarizer(),
                           OpenAISummarizer("local", base_url=server.base_url, api_key="k"),
                           RecordedSummarizer(session)):
            result = generate_branch_summary(entries, summarizer, model=MODEL)
            assert result.error is None and result.summary, (path.name, summarizer)
            if isinstance(summarizer, RecordedSummarizer):
                assert result.summary.startswith(strip_file_blocks(entry["summary"]))
            if isinstance(summarizer, ExtractiveSummarizer):
                assert "## Critical Context" not in result.summary and "### Done" in result.summary
        return
    pytest.skip("no sample session holds a branch summary")


def test_summarizer_from_env(monkeypatch, tmp_path, server):
    for var in ("OPENAI_API_KEY", "PIMEM_BASE_URL", "PIMEM_MODEL", "PIMEM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIMEM_CACHE", str(tmp_path / "env.sqlite"))
    offline = summarizer_from_env()
    assert isinstance(offline, CachedSummarizer) and isinstance(offline.inner, ExtractiveSummarizer)
    assert offline.path == tmp_path / "env.sqlite"
    monkeypatch.setenv("PIMEM_BASE_URL", server.base_url)
    monkeypatch.setenv("PIMEM_MODEL", "llama-3.1-8b")
    online = summarizer_from_env()
    assert isinstance(online.inner, OpenAISummarizer) and online.inner.model == "llama-3.1-8b"
    from pimem.core.llm import SummaryRequest

    resp = online.complete(SummaryRequest(kind="history", system_prompt="s", prompt="p", max_tokens=10))
    assert resp.stop_reason == "stop" and server.hits == 1
    monkeypatch.delenv("PIMEM_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-xyz")
    assert isinstance(summarizer_from_env().inner, OpenAISummarizer)
    import pimem

    assert pimem.summarizer_from_env is summarizer_from_env
