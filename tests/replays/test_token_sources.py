"""Token sources: one rule sizes a replayed call and the checks that read it."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays import engine, tokens
from pimem.replays.calibration import Calibration
from pimem.replays.recording import input_tokens, usage_tokens

SMALL = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=2000)


def _replay_logging_checks(session: Any, window: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict, list]:
    """A calibrated replay, with the size each call got and what each direct-path check read."""
    calls: dict[int, float] = {}
    checks: list[tuple[dict, float]] = []
    call_tokens, check_tokens = engine.Replayer.call_tokens, tokens.CalibratedTokens.check_tokens

    def logged_call(self: Any, message: dict) -> float:
        calls[id(message)] = value = call_tokens(self, message)
        return value

    def logged_check(self: Any, rep: Any, message: dict, predates: Any) -> tuple[float, str | None]:
        value = check_tokens(self, rep, message, predates)
        if not rep.has_context_edit and message.get("stopReason") != "error" and usage_tokens(message):
            checks.append((message, value[0]))  # Pi reads the response's own usage here
        return value

    monkeypatch.setattr(engine.Replayer, "call_tokens", logged_call)
    monkeypatch.setattr(tokens.CalibratedTokens, "check_tokens", logged_check)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = engine.replay(session, SMALL, context_window=window)
    return result, calls, checks


def test_a_check_after_an_aborted_response_reads_its_replayed_size(large_session: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The check after step 232 of ``large-session.jsonl`` (reserve 4096, keep 2000, window 24000)
    read the recorded usage of the aborted answer at step 232 from the original, uncompacted run
    (69,972 tokens) while its call row sized the same request at 19,453 and so compacted; every
    direct-path check now reads the call row's size plus what the response wrote."""
    result, calls, checks = _replay_logging_checks(large_session, 24000, monkeypatch)
    path = large_session.get_branch(None)
    aborted = path[232]["message"]
    assert aborted["stopReason"] == "aborted" and usage_tokens(aborted) == 69972
    call = result.calls.set_index("step").loc[232]
    check = result.events[(result.events.step == 233) & (result.events.check == "before_prompt")].iloc[0]
    written = usage_tokens(aborted) - input_tokens(aborted)
    assert check.context_tokens == pytest.approx(call.context_tokens + written)
    assert check.context_tokens < 24000 - 4096 and not check.should_compact
    stale = [(m, v) for m, v in checks if abs(v - (calls[id(m)] + usage_tokens(m) - input_tokens(m))) > 0.5]
    assert checks and not stale
    aborted_checked = [m for m, _ in checks if m.get("stopReason") == "aborted"]
    assert aborted_checked  # the rule is exercised on aborted responses too


def test_an_errored_response_with_recorded_input_is_sized_from_it() -> None:
    """An errored call whose provider counted its input is shifted like any other, not modelled from the fit."""
    source = tokens.CalibratedTokens()
    source.calibration = Calibration(overhead=1000.0, slope=1.2, points=10)

    class Path:
        def usage_free_estimate(self) -> float:
            return 5000.0

    class Rep:
        def usage_free_estimate(self) -> float:
            return 3000.0

    errored = {"role": "assistant", "stopReason": "error",
               "usage": {"input": 7000, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7000}}
    refused = {"role": "assistant", "stopReason": "error",
               "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}}
    size, _ = source.request_size(errored, Path(), Rep())  # type: ignore[arg-type]
    assert size == pytest.approx(7000 - 1.2 * 2000)
    source.record_call(errored, Path(), Rep())  # type: ignore[arg-type]
    assert source.usage(errored) == pytest.approx(size)
    assert source.request_size(refused, Path(), Rep())[0] == pytest.approx(1000 + 1.2 * 3000)  # type: ignore[arg-type]
    source.record_call(refused, Path(), Rep())  # type: ignore[arg-type]
    assert source.usage(refused) == 0  # no usage: Pi's checks estimate from the last valid one
