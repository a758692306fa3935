"""Whole replays of the real Pi sessions against Pi 0.87.1's own agent loop.

``tests/oracle/replay_loop.mjs`` drives ``AgentSession.prompt`` through a recorded session: a
canned model answers each request with the recorded response (refusing, as a provider does, a
request larger than the window by Pi's own estimate of it), canned tools answer with the recorded
results, summaries are the oracle's canned ones. ``pimem.replay(..., token_source="estimate")``
with the same summaries must compact at the same places: the same list of compactions (after which
recorded entry, the first kept entry, reason, retry, ``tokensBefore``). Pi's lists are committed
(``tests/goldens/real/replay-loop.json``, with each file's sha256) so that the check holds where
Node is absent; where it is present the goldens are checked against the live run too.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays.engine import replay
from pimem.sessions.load import load_session
from tests.oracle.client import Oracle, OracleUnavailable
from tests.oracle.plugin import COUNTS, oracle_required
from tests.support.summarizers import OracleSummarizer

pytestmark = pytest.mark.oracle

GOLDEN = Path(__file__).resolve().parent.parent / "goldens" / "real" / "replay-loop.json"
SESSIONS = ["before-compaction.jsonl", "large-session.jsonl", "history/compact.jsonl", "history/session.jsonl"]
SETTINGS = [(24000, 4096, 2000), (64000, 16384, 20000), (100000, 16384, 20000)]  # window, reserve, keep
CASES = [(s, *setting) for s in SESSIONS for setting in SETTINGS]


def case_key(name: str, window: int, reserve: int, keep: int) -> str:
    return f"{name}@{window}/{reserve}/{keep}"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pimem_compactions(path: Path, window: int, reserve: int, keep: int) -> list[dict[str, Any]]:
    """pimem's replay of ``path`` as the driver reports Pi's: one dict per compaction, in order, entries
    named by their position on the recorded branch (the driver's are ids Pi gave a migrated v1 file)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(path, CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep),
                        context_window=window, token_source="estimate", summarizer=OracleSummarizer())
    rows = result.events[result.events["kind"] == "compaction"]
    position = {entry.get("id"): i for i, entry in enumerate(load_session(path).get_branch(None))}
    out: list[dict[str, Any]] = []
    after = None
    for entry in result.session.get_branch(None):
        if entry.get("type") == "compaction":
            out.append({"after": after, "firstKept": position.get(entry.get("firstKeptEntryId")),
                        "tokensBefore": entry.get("tokensBefore")})
        elif entry.get("type") == "message" and not _written(entry):
            after = position.get(entry.get("id"), after)
    assert len(out) == len(rows)
    for item, row in zip(out, rows.itertuples()):
        item["reason"] = row.reason
        item["willRetry"] = bool(row.will_retry)
    return out


def _written(entry: dict) -> bool:
    """Whether a message entry is one the replay wrote itself (a refusal), not a recorded one."""
    message = entry.get("message") or {}
    return message.get("role") == "assistant" and str(message.get("errorMessage") or "").startswith(
        "prompt is too long:") and not message.get("content")


def pi_compactions(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: e.get(k) for k in ("after", "firstKept", "tokensBefore", "reason", "willRetry")}
            for e in result["events"] if e["kind"] == "compaction"]


@pytest.fixture(scope="module")
def replay_oracle() -> Oracle | None:
    """Pi's agent loop driven through a recording (``replay_loop.mjs``), or None without Node."""
    try:
        return Oracle(driver="replay_loop.mjs")
    except OracleUnavailable as exc:
        if oracle_required():
            pytest.fail(f"PIMEM_REQUIRE_ORACLE=1 but the oracle is missing: {exc}", pytrace=False)
        return None


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}


def run_pi(oracle: Oracle, path: Path, window: int, reserve: int, keep: int) -> dict[str, Any]:
    return oracle.run("replay_run", path=str(path), model={"contextWindow": window, "maxTokens": 32000},
                      settings={"enabled": True, "reserveTokens": reserve, "keepRecentTokens": keep})


@pytest.mark.parametrize("name,window,reserve,keep", CASES, ids=[case_key(*c) for c in CASES])
def test_a_whole_replay_compacts_where_pis_loop_does(name: str, window: int, reserve: int, keep: int, real_dir: Path,
                                                     replay_oracle: Oracle | None, goldens: dict[str, Any]) -> None:
    path = real_dir / name
    if not path.exists():
        pytest.skip(f"{name} is not in {real_dir}")
    key = case_key(name, window, reserve, keep)
    golden = goldens.get(key)
    if golden is not None and golden["sha256"] != file_sha256(path):
        pytest.fail(f"the golden of {key} was made from another file; run `python -m tests.oracle.make_replay_loop_goldens`")
    if replay_oracle is not None:
        expected = pi_compactions(run_pi(replay_oracle, path, window, reserve, keep))
        if golden is not None:
            assert golden["compactions"] == expected, f"stale golden for {key}"
    elif golden is not None:
        expected = golden["compactions"]
    else:
        pytest.skip(f"no oracle and no golden for {key}")
    assert expected, "a case with no compaction checks nothing"
    assert pimem_compactions(path, window, reserve, keep) == expected
    COUNTS["whole-replay compaction lists"] += 1
