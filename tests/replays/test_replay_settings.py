"""Settings checked against the session, "as recorded" replays of other releases, calibrated floors."""

from __future__ import annotations

import warnings

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.errors import ConfigurationError, ReplayWarning
from pimem.replays.engine import replay
from pimem.replays.recording import recorded_release
from pimem.replays.settings import check_room
from tests.conftest import SHARED_DIR

GPX = "datasets/sessions/gpxkit-antimeridian.jsonl"
VENTAS = "datasets/sessions/ventas-pipeline-refactor.jsonl"


def test_a_window_at_or_below_the_overhead_is_an_error():
    with pytest.raises(ConfigurationError, match="not above the .* tokens every request of this session carries"):
        replay(GPX, CompactionSettings(reserve_tokens=100, keep_recent_tokens=100), context_window=1000)


def test_a_window_of_zero_is_an_error():
    with pytest.raises(ConfigurationError, match="positive"):
        replay(GPX, CompactionSettings(reserve_tokens=100, keep_recent_tokens=100), context_window=0)


def test_keep_that_leaves_no_room_above_the_overhead_warns():
    with pytest.warns(ReplayWarning, match="plus keep_recent_tokens 800 reach the threshold"):
        result = replay(GPX, CompactionSettings(reserve_tokens=100, keep_recent_tokens=800), context_window=4000)
    assert "reach the threshold" in result.summary()["warnings"]


def test_check_room_is_quiet_for_sensible_settings():
    settings = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=4000)
    assert check_room(settings, 40000, 3200) == []
    assert check_room(settings, 6000, 3200)  # threshold 4,000 minus an overhead of 3,200 leaves no room
    with pytest.raises(ConfigurationError):
        check_room(settings, 3200, 3200)


def test_calibrated_calls_never_fall_below_the_overhead():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(VENTAS, CompactionSettings(reserve_tokens=100, keep_recent_tokens=100), context_window=3600)
    assert result.calls["context_tokens"].min() >= result.calibration.overhead > 0


def test_sessions_of_the_current_release_replay_with_its_strategy(sample_paths):
    from pimem.core.session_manager import load_session

    for path in sample_paths:
        assert recorded_release(load_session(path).get_branch()) is None


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "before-compaction.v1.jsonl"])
def test_as_recorded_picks_the_release_that_wrote_the_session(name):
    path = SHARED_DIR / "datasets" / "pi-mono" / name
    if not path.exists():
        pytest.skip("shared datasets not available")
    from pimem.summarizers.recorded import RecordedSummarizer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = replay(path, triggers="recorded", summarizer=RecordedSummarizer(path))
    s = result.summary()
    assert s["strategy"] == "pi-0.13.2"
    assert s["compactions"] == 2 and s["failed_compactions"] == 0
    assert any("written by Pi 0.13.2" in str(w.message) for w in caught)
    assert s["peak_context_tokens"] <= s["context_window"]


def test_failed_recorded_compactions_name_the_strategy_to_use():
    path = SHARED_DIR / "datasets" / "pi-mono" / "before-compaction.jsonl"
    if not path.exists():
        pytest.skip("shared datasets not available")
    from pimem.summarizers.recorded import RecordedSummarizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(path, triggers="recorded", summarizer=RecordedSummarizer(path), strategy="pi-0.87.1")
    s = result.summary()
    assert s["failed_compactions"] == 2
    assert "--strategy pi-0.13.2" in s["warnings"]
    assert "Compaction failed" in s["failure_reasons"]
