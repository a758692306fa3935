"""``chain_headline`` gives what a sweep row reads of ``drift_report`` + ``headline``, equal to them:
on recordings (the samples, the real Pi sessions, real Claude Code transcripts) and on replays that
compact again and again, with summaries that hold everything, nothing or half."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.drift.metrics import chain_headline, drift_report, headline
from pimem.replays.engine import replay
from pimem.sessions.load import load_session
from pimem.summarizers.baselines import EmptyTemplateSummarizer, FactDumpSummarizer, HeadTruncationSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer
from tests.conftest import SHARED_DIR

DATASETS = SHARED_DIR / "datasets"
SCALARS = ("compactions", "mean_needed_recall", "mean_fact_recall", "retention_after_1")
COLUMNS = ("needed_recall", "n_needed", "fact_recall", "compression_ratio")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def assert_equal_to_the_report(source: Any, spans: Any = None) -> dict[str, Any]:
    report = drift_report(source, spans=spans)
    full = headline(report)
    lean = chain_headline(source, spans=spans)
    for key in SCALARS:
        assert _same(lean[key], full[key]), (key, lean[key], full[key])
    for key in COLUMNS:
        column = [x.item() if hasattr(x, "item") else x for x in report[key]] if len(report) else []
        assert len(lean[key]) == len(column), key
        assert all(_same(float(a), float(b)) for a, b in zip(lean[key], column)), (key, lean[key], column)
    return lean


def test_recordings_give_the_reports_numbers(sample_paths: list[Path]) -> None:
    compacted = 0
    for path in sample_paths:
        lean = assert_equal_to_the_report(load_session(path))
        compacted += lean["compactions"] > 0
    assert compacted  # some sample records a compaction


def test_real_pi_sessions_give_the_reports_numbers(real_dir: Path) -> None:
    paths = sorted(real_dir.glob("*.jsonl")) + sorted((real_dir / "history").glob("*.jsonl"))
    counts = [assert_equal_to_the_report(load_session(p))["compactions"] for p in paths]
    assert sum(counts) >= 3


@pytest.mark.slow
def test_real_claude_code_transcripts_give_the_reports_numbers() -> None:
    index = DATASETS / "real-sessions-index.json"
    if not index.exists():
        pytest.skip("shared real sessions not present")
    files = [DATASETS / f["stored"] for f in json.loads(index.read_text())["files"]
             if f["source"].startswith("claude-code/") and f["compactions"]]
    files = sorted(files, key=lambda p: p.stat().st_size)[:10]  # ten sessions with real compactions
    assert sum(assert_equal_to_the_report(load_session(p))["compactions"] for p in files) >= 10


SUMMARIZERS = [ExtractiveSummarizer(), FactDumpSummarizer(400), HeadTruncationSummarizer(60),
               EmptyTemplateSummarizer()]
SUMMARIZER_IDS = ["extractive", "fact-dump", "truncation", "empty-template"]


def _compacting(session: Any, summarizer: Any, window: int, keep: int) -> dict[str, Any]:
    result = replay(session, CompactionSettings(reserve_tokens=4_000, keep_recent_tokens=keep),
                    context_window=window, summarizer=summarizer, token_source="estimate")
    lean = assert_equal_to_the_report(result, spans=result.compaction_spans())
    assert lean["compactions"] >= 10
    return lean


@pytest.mark.parametrize("summarizer", SUMMARIZERS, ids=SUMMARIZER_IDS)
def test_replays_that_compact_again_and_again_give_the_reports_numbers(samples_dir: Path, summarizer: Any) -> None:
    _compacting(load_session(samples_dir / "logslice-since-flag.jsonl"), summarizer, 16_000, 2_000)


@pytest.mark.parametrize("summarizer", SUMMARIZERS, ids=SUMMARIZER_IDS)
def test_a_real_session_compacted_80_times_gives_the_reports_numbers(large_session: Any, summarizer: Any) -> None:
    lean = _compacting(large_session, summarizer, 64_000, 5_000)
    if isinstance(summarizer, ExtractiveSummarizer):  # rewrites were measured, and kept some facts
        assert 0 < lean["retention_after_1"] <= 1


def test_no_compaction_gives_empty_columns_and_no_number(auth: Any) -> None:
    result = replay(auth, CompactionSettings(), context_window=1_000_000, token_source="estimate")
    lean = assert_equal_to_the_report(result, spans=result.compaction_spans())
    assert lean["compactions"] == 0 and lean["needed_recall"] == []
    assert math.isnan(lean["mean_needed_recall"]) and math.isnan(lean["retention_after_1"])


def test_replays_of_one_recording_share_their_repeated_compactions_and_give_the_same_numbers(samples_dir: Path) -> None:
    """Inside shared_recordings, a compaction another setting's replay already cut at the same places
    is answered from the first: every number equals the one computed alone, and some were shared."""
    import pimem.drift.needed as needed_module
    from pimem.replays.recording import shared_recordings

    session = load_session(samples_dir / "auth-login-bug.jsonl")
    settings = [(reserve, keep, window) for reserve in (3_000, 4_000) for keep in (2_000, 2_500)
                for window in (20_000, 24_000)]
    results = [replay(session, CompactionSettings(reserve_tokens=r, keep_recent_tokens=k), context_window=w,
                      token_source="estimate") for r, k, w in settings]
    alone = [chain_headline(r, spans=r.compaction_spans()) for r in results]
    needed_module._SPANS.clear()
    calls = []
    real = needed_module.extract_facts

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    needed_module.extract_facts = counting
    try:
        with shared_recordings():
            shared = [chain_headline(r, spans=r.compaction_spans()) for r in results]
    finally:
        needed_module.extract_facts = real
    for a, b in zip(alone, shared):
        for key in SCALARS + COLUMNS:
            assert _same(a[key], b[key]) if key in SCALARS else all(map(_same, a[key], b[key])), key
    compactions = sum(a["compactions"] for a in alone)
    assert compactions >= 20 and 0 < len(calls) < compactions  # some compactions were answered once
