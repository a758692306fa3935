"""The ``pi-1.6.0`` and ``pi-0.13.2`` strategies: registered, built on the functions the
differential tests check, and driving replays (the summarizers understand 0.13.2's requests)."""

from __future__ import annotations

import warnings

import pytest

from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings, ModelInfo
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.session_manager import load_session
from pimem.errors import ConfigurationError
from pimem.replays.strategies import get_strategy, strategy_names
from pimem.releases import pi_0_13_2
from pimem.releases import pi_1_6_0
from pimem.summarizers.extractive import ExtractiveSummarizer, split_request
from tests.conftest import REPO_ROOT
from tests.support.summarizers import OracleSummarizer, RecordingSummarizer

SETTINGS = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=4000)
WINDOW = 24000
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "pi-1.6.0"


def _replay(session, strategy, summarizer=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return replay(session, SETTINGS, context_window=WINDOW, strategy=strategy, summarizer=summarizer)


def test_registered_with_their_parameters():
    assert {"pi-1.6.0", "pi-0.13.2"} <= set(strategy_names())
    assert get_strategy("pi-1.6.0").spec() == "pi-1.6.0"
    assert get_strategy("pi-0.13.2:sizes=recorded").identity() == {"strategy": "pi-0.13.2", "sizes": "recorded"}
    with pytest.raises(ConfigurationError, match="sizes"):
        get_strategy("pi-0.13.2:sizes=usage")


def test_pi_1_6_0_prepares_and_summarizes_like_its_functions():
    """On a session written by Pi 1.6.0: the strategy's preparation (through the tracker) and
    compaction equal pi_1_6_0's, whose results the differential tests compare with Pi 1.6.0."""
    session = load_session(FIXTURES / "codemode-nested-calls.jsonl")
    branch = session.get_branch()
    cut = next(i for i, e in enumerate(branch) if e["type"] == "compaction")
    path = branch[:cut]
    strategy = get_strategy("pi-1.6.0")
    settings = CompactionSettings(keep_recent_tokens=10)
    mine = strategy.prepare(ContextTracker(path), settings)
    ref = pi_1_6_0.prepare_compaction(path, settings)
    assert mine.first_kept_entry_id == ref.first_kept_entry_id
    assert vars(mine.file_ops) == vars(ref.file_ops)
    assert "src/dates/index.ts" in mine.file_ops.written and "src/dates/parse.ts" in mine.file_ops.edited
    model = ModelInfo(context_window=200_000, max_tokens=32_000)
    a, b = OracleSummarizer(), OracleSummarizer()
    result = strategy.summarize(mine, a, model=model, custom_instructions="focus", thinking_level="high")
    assert result.summary == pi_1_6_0.compact(ref, b, model=model, custom_instructions="focus",
                                              thinking_level="high").summary
    assert [r.prompt for r in a.requests] == [r.prompt for r in b.requests]
    assert all(r.max_tokens is None for r in a.requests)
    assert "[Assistant thinking]" not in a.requests[0].prompt
    assert "<modified-files>\nsrc/dates/index.ts\nsrc/dates/parse.ts\ntest/dates.test.ts" in result.summary


def test_pi_0_13_2_with_recorded_sizes_reproduces_the_real_compactions(before_compaction):
    """The strategy on the v3 branch of before-compaction: with the recorded usage it cuts exactly
    where Pi 0.13.2 did (the recorded firstKeptEntryId and tokensBefore of both compactions)."""
    session = before_compaction
    branch = session.get_branch()
    strategy = get_strategy("pi-0.13.2:sizes=recorded")
    positions = [i for i, e in enumerate(branch) if e["type"] == "compaction"]
    assert len(positions) == 2
    for k in positions:
        prep = strategy.prepare(ContextTracker(branch[:k]), pi_0_13_2.DEFAULT_COMPACTION_SETTINGS)
        assert (prep.first_kept_entry_id, prep.tokens_before) == (
            branch[k]["firstKeptEntryId"], branch[k]["tokensBefore"])
        assert prep.is_split_turn is False and prep.turn_prefix_messages == []
    # the second one summarizes what follows the first compaction entry, after its summary
    prep = strategy.prepare(ContextTracker(branch[:positions[1]]), pi_0_13_2.DEFAULT_COMPACTION_SETTINGS)
    assert prep.previous_summary == branch[positions[0]]["summary"]
    assert prep.messages_to_summarize[0] is branch[positions[0] + 1]["message"]


@pytest.mark.parametrize("strategy", ["pi-1.6.0", "pi-0.13.2", "pi-0.13.2:sizes=recorded"])
def test_replays_compact_with_each_release(samples_dir, strategy):
    session = load_session(samples_dir / "logslice-since-flag.jsonl")
    recorder = RecordingSummarizer()
    result = _replay(session, strategy, recorder)
    assert result.strategy == strategy and result.compactions
    assert all(e["summary"] for e in result.compactions)
    if strategy.startswith("pi-0.13.2"):
        assert all(isinstance(r, pi_0_13_2.MessagesSummaryRequest) for r in recorder.requests)
        assert all(r.system_prompt == "" and r.messages[-1]["content"] == r.prompt for r in recorder.requests)
        assert all(r.max_tokens == int(0.8 * SETTINGS.reserve_tokens) for r in recorder.requests)
        assert not any("<read-files>" in e["summary"] for e in result.compactions)
    else:
        assert all(r.max_tokens is None for r in recorder.requests)


def test_pi_0_13_2_cuts_only_at_user_messages(samples_dir):
    """Kept parts start at a user message, or (no cut found: everything kept) right after the
    previous compaction entry."""
    session = load_session(samples_dir / "logslice-since-flag.jsonl")
    result = _replay(session, "pi-0.13.2")
    assert result.compactions
    branch = result.session.get_branch()
    users = 0
    for c in result.compactions:
        kept = result.session.get_entry(c["firstKeptEntryId"])
        at = branch.index(kept)
        if kept["type"] == "message" and kept["message"]["role"] == "user":
            users += 1
        else:
            before = [e for e in branch[: branch.index(c)] if e["type"] == "compaction"]
            assert at == (branch.index(before[-1]) + 1 if before else 0)
    assert users


def test_summarizers_read_a_conversation_request():
    prep = pi_0_13_2.Preparation(0, 3, 10, [
        {"role": "user", "content": "fix src/app.py", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it."},
                                          {"type": "toolCall", "id": "c1", "name": "read",
                                           "arguments": {"path": "src/app.py"}}],
         "api": "x", "provider": "p", "model": "m", "usage": {}, "stopReason": "toolUse", "timestamp": 2},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "x = 1"}],
         "isError": False, "timestamp": 3},
    ], "## Goal\nOld goal", pi_0_13_2.DEFAULT_COMPACTION_SETTINGS)
    request = pi_0_13_2.summary_request(prep, "tests")
    conversation, previous, instructions = split_request(request)
    assert previous == "## Goal\nOld goal"
    assert conversation.startswith("[User]: fix src/app.py") and "read(path=\"src/app.py\")" in conversation
    assert instructions.endswith("\n\nAdditional focus: tests")
    assert ExtractiveSummarizer().complete(request).text

    from pimem.summarizers.openai_compat import OpenAISummarizer

    params, _ = OpenAISummarizer("gpt-4o", api_key="k").build_params(request)
    roles = [m["role"] for m in params["messages"]]
    assert roles == ["user", "user", "assistant", "tool", "user"]
    assert params["messages"][-1]["content"] == request.prompt and params["max_tokens"] == 13107
