"""Requests larger than the window: refused as a provider refuses them, recovered or failed as Pi does."""

from __future__ import annotations

import warnings

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.errors import ReplayWarning
from pimem.replays.engine import replay
from pimem.sessions.load import load_session


def _above_overhead(path, room):
    """A window ``room`` tokens above what every request of the session carries (the chars source counts it)."""
    from pimem.replays.recording import calibrate_recording

    return int(calibrate_recording(load_session(path).get_branch()).overhead) + room


def _replay(session, window, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = replay(session, CompactionSettings(reserve_tokens=kw.pop("reserve", 500),
                                                    keep_recent_tokens=kw.pop("keep", 800),
                                                    enabled=kw.pop("enabled", True)),
                        context_window=window, **kw)
    return result, [str(w.message) for w in caught if issubclass(w.category, ReplayWarning)]


@pytest.mark.parametrize("token_source", ["calibrated", "estimate", "chars", "tiktoken"])
def test_no_accepted_call_is_above_the_window(sample_paths, token_source):
    refused_somewhere = 0
    for path in sample_paths:
        result, caught = _replay(path, 4000, token_source=token_source)
        calls = result.calls
        above = calls[calls["context_tokens"] > 4000]
        assert above["refused"].all()  # every request above the window is one the provider refused
        s = result.summary()
        assert s["peak_context_tokens"] <= 4000
        assert s["failed_turns"] == int(calls["refused"].sum())
        if s["refused_requests"]:
            refused_somewhere += 1
            assert any("refused by the provider" in w for w in caught)
            assert "refused by the provider" in (s["warnings"] or "")
    assert refused_somewhere  # the small window does overflow some samples


def test_a_refused_request_is_written_as_pi_writes_it(sample_paths):
    result, _ = _replay(sample_paths[0], _above_overhead(sample_paths[0], 3000), token_source="chars")
    refused = result.events[(result.events["kind"] == "check") & (result.events["check"] == "before_call")]
    assert len(refused)
    errors = [e for e in result.session.entries if e.get("type") == "message"
              and e["message"].get("stopReason") == "error" and "prompt is too long" in e["message"]["errorMessage"]]
    assert len(errors) == len(refused)
    omitted = {e["targetId"] for e in result.session.entries if e.get("type") == "context_edit"}
    compacted = result.events[(result.events["kind"] == "compaction") & (result.events["reason"] == "overflow")]
    assert compacted["will_retry"].all()
    assert len(omitted & {e["id"] for e in errors}) >= len(compacted)


def test_disabled_compaction_fails_the_turn(sample_paths):
    window = _above_overhead(sample_paths[0], 3000)
    result, caught = _replay(sample_paths[0], window, enabled=False, token_source="chars")
    s = result.summary()
    assert s["compactions"] == 0
    assert s["refused_requests"] > 0 and s["failed_turns"] > 0
    failed = result.events[result.events["kind"] == "turn_failed"]
    assert (failed["note"] == "compaction is disabled").all()
    assert "turn failed: compaction is disabled" in s["failure_reasons"]
    assert s["peak_context_tokens"] <= window


def test_a_turn_fails_after_one_retry(sample_paths):
    # keep ≈ the window: compacting cannot make the request fit, the retry is refused again
    for path in sample_paths:
        result, _ = _replay(path, _above_overhead(path, 4000), keep=3900, reserve=1500, token_source="chars")
        ev = result.events
        failed = ev[ev["kind"] == "turn_failed"]
        if (failed["note"] == "overflow recovery already attempted in this run").any():
            assert (ev["kind"] == "compact_failed").any()
            assert "Context overflow recovery failed after one compact-and-retry attempt" in \
                result.summary()["failure_reasons"]
            return
    pytest.fail("no sample failed after its retry")


def test_a_failed_turn_ends_its_run(sample_paths):
    """Pi's run ends at the refusal: the recorded answer and the rest of its run (tool results, later
    calls) never happened, so the replay leaves them out and goes on at the next recorded prompt."""
    checked = 0
    for path in sample_paths:
        result, caught = _replay(path, _above_overhead(path, 3000), enabled=False, token_source="chars")
        refused = result.calls[result.calls["refused"]]
        if not len(refused):
            continue
        recorded = load_session(path).get_branch()
        ids = [e["id"] for e in recorded]
        replayed = {e["id"] for e in result.session.entries}
        left_out = set(result.left_out_ids)
        assert not left_out & replayed
        for entry_id in refused["entry_id"]:
            i = ids.index(entry_id)
            assert entry_id in left_out
            # everything up to the next user message is left out; that message is replayed
            j = i + 1
            while j < len(recorded) and (recorded[j].get("message") or {}).get("role") != "user":
                if (recorded[j].get("message") or {}).get("role") in ("assistant", "toolResult"):
                    assert recorded[j]["id"] in left_out
                j += 1
            if j < len(recorded):
                assert recorded[j]["id"] in replayed
        # one failed turn per run: no request of a failed run is sent again
        assert result.summary()["failed_turns"] == len(refused)
        assert result.summary()["left_out_entries"] == len(left_out) > len(refused) - 1
        assert any(f"{len(left_out):,} recorded entries of those runs are left out" in w for w in caught)
        checked += 1
    assert checked
