"""Differential check of context overflow against Pi 0.87.1's own agent loop.

``tests/oracle/agent_loop.mjs`` runs ``AgentSession.prompt`` over an in-memory session with a
canned model that measures each request as Pi's chars/4 estimate of the projected context and
refuses one larger than the window with an overflow error, as a provider does. The prompts are
first run with an unbounded window: that session is the recording. Run again with a small
window, Pi refuses, compacts with reason ``overflow``, retries once and fails; pimem replays the
recording at the same window (``token_source="chars"``, the canned summaries) and must give the
same sequence of accepted and refused requests (with their sizes), compactions (reason, retry)
and failed compactions. A failed turn ends its run in both: the recorded answer to the refused
request, and whatever the recording did after it until the next prompt, never happened in Pi,
and the replay leaves it out (``failed-tool-run``, where that answer is a further tool run; a
kept answer would also move the next compaction's cut, as in ``tool-result``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays.engine import replay
from tests.oracle.client import Oracle
from tests.oracle.plugin import COUNTS
from tests.support.summarizers import OracleSummarizer

pytestmark = pytest.mark.oracle

BIG = "lorem ipsum dolor sit amet " * 200  # about 1,350 estimated tokens


def _chat(n: int) -> list[dict[str, Any]]:
    return [{"prompt": f"question {i}: " + "x" * 400, "responses": [{"text": "answer " + "y" * 400}]} for i in range(n)]


SCENARIOS: dict[str, tuple[list[dict[str, Any]], int, int, int]] = {
    # turns, window, reserve, keep
    "recovered": (_chat(6) + [{"prompt": "now this big one " + BIG, "responses": [{"text": ""}]},
                              {"prompt": "and huge " + BIG * 3, "responses": [{"text": ""}]},
                              {"prompt": "small again", "responses": [{"text": "ok"}]}], 3000, 200, 300),
    "retry-fails": (_chat(6) + [{"prompt": "now this big one " + BIG, "responses": [{"text": ""}]},
                                {"prompt": "small again", "responses": [{"text": ""}]},
                                {"prompt": "and again", "responses": [{"text": ""}]}], 3000, 200, 2000),
    "nothing-to-compact": ([{"prompt": "first and big " + BIG, "responses": [{"text": ""}]},
                            {"prompt": "then small", "responses": [{"text": "ok"}]}], 1800, 100, 300),
    "tool-result": ([{"prompt": "read the file", "responses": [
        {"text": "", "tool": {"name": "read", "arguments": {"path": "big.txt"}}}, {"text": ""}]},
        {"prompt": "thanks", "responses": [{"text": "welcome"}]}], 2600, 100, 200),
    # the refused request's recorded answer is a tool run of its own: none of it happened in Pi
    "failed-tool-run": ([{"prompt": "read the file", "responses": [
        {"text": "", "tool": {"name": "read", "arguments": {"path": "big.txt"}}},
        {"text": "and once more", "tool": {"name": "read", "arguments": {"path": "big.txt"}}},
        {"text": "done reading " + "w" * 800}]},
        {"prompt": "thanks", "responses": [{"text": "welcome"}]}], 2600, 100, 200),
    "threshold-then-overflow": (_chat(8) + [{"prompt": "and huge " + BIG * 2, "responses": [{"text": ""}]},
                                            {"prompt": "bye", "responses": [{"text": "bye"}]}], 3200, 1000, 400),
}
BIG_FILE = {"big.txt": "\n".join(f"line {i}: " + "z" * 60 for i in range(80))}
FILES = {"tool-result": BIG_FILE, "failed-tool-run": BIG_FILE}


def _pi_run(oracle: Oracle, name: str, window: int) -> dict[str, Any]:
    turns, _, reserve, keep = SCENARIOS[name]
    return oracle.run("agent_run", turns=turns, files=FILES.get(name, {}), model={"contextWindow": window},
                      settings={"enabled": True, "reserveTokens": reserve, "keepRecentTokens": keep})


def _replay_log(result: Any) -> list[dict[str, Any]]:
    """The replay's requests, compactions and failures in the order they happened."""
    rows: list[tuple[int, int, int, dict[str, Any]]] = []
    for i, r in enumerate(result.events.itertuples()):
        phase = 2 if r.check == "agent_end" else 0
        if r.kind == "check" and r.check == "before_call":
            rows.append((r.step, phase, i, {"kind": "refused", "tokens": r.context_tokens}))
        elif r.kind == "compaction":
            rows.append((r.step, phase, i, {"kind": "compaction", "reason": r.reason, "willRetry": bool(r.will_retry)}))
        elif r.kind == "compact_failed":
            rows.append((r.step, phase, i, {"kind": "compact_failed", "reason": r.reason}))
    for c in result.calls.itertuples():
        if not c.refused:
            rows.append((c.step, 1, 0, {"kind": "accepted", "tokens": c.context_tokens}))
    return [row for *_, row in sorted(rows, key=lambda x: x[:3])]


def _pi_log(run: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for e in run["log"]:
        if e["kind"] == "prompt":
            continue
        out.append({k: v for k, v in e.items() if k != "errorMessage"})
    return out


def _shape(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for e in entries:
        m = e.get("message") or {}
        if e["type"] in ("message", "compaction", "context_edit"):
            out.append((e["type"], m.get("role"), m.get("stopReason")))
    return out


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_overflow_sequence_matches_pi(agent_oracle: Oracle, tmp_path: Path, name: str) -> None:
    turns, window, reserve, keep = SCENARIOS[name]
    unbounded = _pi_run(agent_oracle, name, 10_000_000)
    recording = tmp_path / f"{name}.jsonl"
    recording.write_text("\n".join(json.dumps(x) for x in [unbounded["header"], *unbounded["entries"]]) + "\n")
    pi_run = _pi_run(agent_oracle, name, window)
    pi = _pi_log(pi_run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(recording, CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep),
                        context_window=window, token_source="chars", summarizer=OracleSummarizer())
    ours = _replay_log(result)
    assert any(e["kind"] == "refused" for e in pi)  # every scenario overflows
    assert ours == pi
    summary = result.summary()
    assert summary["refused_requests"] == sum(e["kind"] == "refused" for e in pi)
    assert summary["overflow_compactions"] == sum(e["kind"] == "compaction" and e["reason"] == "overflow" for e in pi)
    assert summary["peak_context_tokens"] <= window
    # the replayed session holds what Pi's does: entry for entry, same kinds, roles and outcomes
    assert _shape(result.session.entries) == _shape(pi_run["entries"])
    COUNTS["agent-loop overflow events"] += len(pi)
    COUNTS["agent-loop refused requests"] += summary["refused_requests"]
    COUNTS["agent-loop failed turns"] += summary["failed_turns"]
