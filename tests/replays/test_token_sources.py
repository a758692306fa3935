"""Token sources: one rule sizes a replayed call and the checks that read it."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays import engine, tokens
from pimem.replays.calibration import Calibration
from pimem.replays.recording import input_tokens, usage_tokens

SMALL = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=2000)


@contextlib.contextmanager
def logged_checks() -> Iterator[tuple[dict[int, float], list[tuple[dict, float]]]]:
    """Within the block, the size each replayed call got (by message) and what each calibrated
    direct-path check read (Pi reads the response's own usage there: no context edit in the
    projection, the response neither errored nor without usage)."""
    calls: dict[int, float] = {}
    checks: list[tuple[dict, float]] = []
    call_tokens, check_tokens = engine.Replayer.call_tokens, tokens.CalibratedTokens.check_tokens

    def logged_call(self: Any, message: dict) -> float:
        calls[id(message)] = value = call_tokens(self, message)
        return value

    def logged_check(self: Any, rep: Any, message: dict, *rest: Any) -> tuple[float, str | None]:
        value = check_tokens(self, rep, message, *rest)
        if not rep.has_context_edit and message.get("stopReason") != "error" and usage_tokens(message):
            checks.append((message, value[0]))
        return value

    engine.Replayer.call_tokens = logged_call  # type: ignore[method-assign]
    tokens.CalibratedTokens.check_tokens = logged_check  # type: ignore[method-assign]
    try:
        yield calls, checks
    finally:
        engine.Replayer.call_tokens = call_tokens  # type: ignore[method-assign]
        tokens.CalibratedTokens.check_tokens = check_tokens  # type: ignore[method-assign]


def stale_checks(calls: dict[int, float], checks: list[tuple[dict, float]]) -> list[tuple[dict, float]]:
    """The checks that read a number other than their response's call row (size plus what it wrote)."""
    return [(m, v) for m, v in checks if abs(v - (calls[id(m)] + usage_tokens(m) - input_tokens(m))) > 0.5]


def test_a_check_after_an_aborted_response_reads_its_replayed_size(large_session: Any) -> None:
    """The check after step 232 of ``large-session.jsonl`` (reserve 4096, keep 2000, window 24000)
    read the recorded usage of the aborted answer at step 232 from the original, uncompacted run
    (69,972 tokens) while its call row sized the same request at 19,453 and so compacted; every
    direct-path check now reads the call row's size plus what the response wrote."""
    with logged_checks() as (calls, checks), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = engine.replay(large_session, SMALL, context_window=24000)
    path = large_session.get_branch(None)
    aborted = path[232]["message"]
    assert aborted["stopReason"] == "aborted" and usage_tokens(aborted) == 69972
    call = result.calls.set_index("step").loc[232]
    check = result.events[(result.events.step == 233) & (result.events.check == "before_prompt")].iloc[0]
    written = usage_tokens(aborted) - input_tokens(aborted)
    assert check.context_tokens == pytest.approx(call.context_tokens + written)
    assert check.context_tokens < 24000 - 4096 and not check.should_compact
    assert checks and not stale_checks(calls, checks)
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


def _chat_with_usage(n: int, input_tokens: int, first: int | None = None) -> list[dict]:
    """A Pi v3 session of ``n`` small exchanges whose answers recorded ``input_tokens`` of input (and
    growing), the first ``first`` when given."""
    entries: list[dict] = [{"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z",
                            "cwd": "/w"}]
    parent = None
    for i in range(n):
        for role, body in (("user", f"question {i} " + "x" * 200), ("assistant", f"answer {i} " + "y" * 200)):
            eid = f"{role[0]}{i}"
            message: dict[str, Any] = {"role": role, "timestamp": 1735689600000 + 2 * i + (role == "assistant")}
            if role == "user":
                message["content"] = [{"type": "text", "text": body}]
            else:
                size = first if (first is not None and i == 0) else input_tokens + 120 * i
                message.update(content=[{"type": "text", "text": body}], provider="anthropic", model="claude-opus-4-5",
                               api="anthropic-messages", stopReason="stop",
                               usage={"input": size, "output": 50, "cacheRead": 0, "cacheWrite": 0,
                                      "totalTokens": size + 50})
            entries.append({"type": "message", "id": eid, "parentId": parent,
                            "timestamp": f"2025-01-01T00:00:{i:02d}.{500 if role == 'assistant' else 0:03d}Z",
                            "message": message})
            parent = eid
    return entries


def test_implausible_recorded_usage_names_the_fit_not_the_window(tmp_path) -> None:
    """After a plausible first request every request recorded ~867k tokens for a few hundred estimated:
    the calibration's overhead is no request's real overhead, and the error says so instead of blaming
    the 200k window."""
    import json

    from pimem.errors import ConfigurationError

    path = tmp_path / "huge.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in _chat_with_usage(12, 867_000, first=2_000)) + "\n",
                    encoding="utf-8")
    with pytest.raises(ConfigurationError, match="token calibration of this session cannot be trusted.*implausible"):
        engine.replay(path, CompactionSettings(), context_window=200_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = engine.replay(path, CompactionSettings(), context_window=200_000, token_source="chars")
    assert result.calls["context_tokens"].max() < 10_000


def test_a_first_request_far_above_its_estimate_marks_a_partial_recording(tmp_path) -> None:
    """Every request recorded ~867k tokens from the first one on: the file lacks what they carried; the
    fit is refused (no compaction to restrict it to) and the warning says why."""
    import json

    path = tmp_path / "partial.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in _chat_with_usage(12, 867_000)) + "\n", encoding="utf-8")
    with pytest.warns(Warning, match="partial recording \\(its first request counted 867,000 tokens"):
        result = engine.replay(path, CompactionSettings(), context_window=2_000_000)
    assert result.calibration.points == 0 and result.calibration.overhead == 0


def test_a_partial_transcript_is_detected_and_its_fit_restricted() -> None:
    """A Claude Code transcript that starts mid-conversation (its first request counted 121,765 tokens for
    45 estimated) was fitted with an overhead of 121.5k at R² 1.00 and no warning; it is now named a
    partial recording and fitted only on the requests after its first compaction."""
    from pimem.core.incremental.caches import TokenCache
    from pimem.replays.calibration import MAX_PLAUSIBLE_OVERHEAD
    from pimem.replays.recording import walk_recording
    from pimem.replays.tokens import partial_recording
    from pimem.sessions.load import load_session
    from tests.conftest import SHARED_DIR

    path = SHARED_DIR / "datasets" / "claude-code" / "entireio-cli" / "3f_603dd13c2c_0_full.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not available")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = load_session(path)
    branch = session.get_branch()
    whole = walk_recording(branch)[1]
    assert whole.overhead > MAX_PLAUSIBLE_OVERHEAD  # the whole-file fit that went unnoticed
    assert partial_recording(branch) == "its first entry's parent is not in the file"
    unmarked = [{**branch[0], "source": {k: v for k, v in branch[0]["source"].items() if k != "parentMissing"}},
                *branch[1:]]
    assert "first request counted" in (partial_recording(unmarked) or "")  # the size test finds it too
    source = tokens.CalibratedTokens()
    source.start(branch, TokenCache())
    warning = source.warning() or ""
    assert "partial recording" in warning
    assert source.calibration.overhead < MAX_PLAUSIBLE_OVERHEAD
    assert source.calibration.points < whole.points


@pytest.mark.parametrize("name", ["chars", "tiktoken"])
def test_what_if_sources_carry_the_overhead_every_request_carries(auth: Any, name: str) -> None:
    """chars/4 and cl100k_base leave out the system prompt and tools every request carries; each
    what-if source adds the calibration's overhead, so its first request is that much above the count."""
    from pimem.replays.recording import calibrate_recording

    overhead = calibrate_recording(auth.get_branch()).overhead
    assert overhead > 500
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counted = engine.replay(auth, CompactionSettings(), context_window=10**6, token_source=name)
    source = tokens.make_token_source(name)
    assert isinstance(source, tokens.CharsTokens)
    first = counted.calls.iloc[0]
    path = auth.get_branch()
    step = int(first.step)
    from pimem.core.incremental.tracker import ContextTracker
    from pimem.text.tokenizers import TiktokenCounter

    tracker = ContextTracker(path[:step], counter=TiktokenCounter() if name == "tiktoken" else None)
    bare = tracker.counted_total if name == "tiktoken" else tracker.usage_free_estimate()
    assert first.context_tokens == pytest.approx(overhead + bare)
