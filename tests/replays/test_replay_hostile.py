"""A preparation error during an automatic compaction is caught as Pi's agent catches it."""

from __future__ import annotations

import json

import pytest

from pimem import load_session
from pimem.core.compaction.compaction import CompactionSettings
from pimem.errors import JavaScriptTypeError
from pimem.replays.engine import replay
from tests.support.tiny import tiny_session_lines


def test_a_preparation_error_is_a_failed_compaction_not_an_abort(tmp_path):
    """Pi 1.6.0 throws in prepareCompaction on ``nestedCalls: {"calls": 5}``; its _runAutoCompaction
    prepares inside its try, so the agent goes on (no compaction, no event). pimem records the
    failure and replays to the end."""
    lines = tiny_session_lines(8)
    lines.insert(3, {"type": "message", "id": "t0", "parentId": "a0000", "timestamp": lines[0]["timestamp"],
                     "message": {"role": "toolResult", "toolCallId": "c", "toolName": "code", "content": "ok",
                                 "isError": False, "timestamp": 3, "nestedCalls": {"calls": 5}}})
    lines[4]["parentId"] = "t0"
    path = tmp_path / "nested.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    s = load_session(path)
    settings = CompactionSettings(reserve_tokens=500, keep_recent_tokens=500)
    result = replay(s, settings, context_window=3000, strategy="pi-1.6.0", progress=False)
    failed = result.events[result.events["kind"] == "compact_failed"]
    assert len(failed) >= 1 and failed["error"].str.contains("number 5 is not iterable").all()
    assert result.summary()["assistant_calls"] == 8  # replayed to the end
    assert replay(s, settings, context_window=3000, progress=False).summary()["compactions"] >= 1  # 0.87.1 reads no nestedCalls
    with pytest.raises(JavaScriptTypeError):
        replay(s, settings, context_window=3000, strategy="pi-1.6.0", progress=False, stop_on_error=True)
