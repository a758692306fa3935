"""ExtractiveSummarizer: templates, exact facts, updates, budgets, on Pi-shaped requests."""

from __future__ import annotations

import functools
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem.core.compaction.compaction import (
    build_history_prompt,
    build_turn_prefix_prompt,
)
from pimem.core.llm import SummaryRequest
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.summarizers.extractive import (
    ExtractiveSummarizer,
    estimate_text_tokens,
    parse_conversation,
    parse_summary_sections,
    parse_tool_calls,
)
from tests.support import messages

HISTORY_SECTIONS = ["## Goal", "## Constraints & Preferences", "## Progress", "### Done", "### In Progress",
                    "### Blocked", "## Key Decisions", "## Next Steps", "## Critical Context"]
BRANCH_SECTIONS = [s for s in HISTORY_SECTIONS if s != "## Critical Context"]
TURN_SECTIONS = ["## Original Request", "## Progress So Far", "## Context Needed to Continue"]


user = functools.partial(messages.user, blocks=True)
assistant = functools.partial(messages.assistant, stopReason="toolUse")
text = messages.text
call = messages.tool_call


def result(cid, name, t, is_error=False):
    return messages.tool_result(t, call_id=cid, name=name, is_error=is_error)


ERROR_LINE = "src/auth/session.py:42: TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'"

CONVERSATION = [
    user("Fix the login bug in src/auth/session.py where expired tokens are accepted. "
         "Don't touch the public API of `SessionStore`. Always run pytest before finishing."),
    assistant({"type": "thinking", "thinking": "Look at the session code first."},
              call("c1", "read", path="src/auth/session.py")),
    result("c1", "read", "def is_expired(token):\n    return token.exp + SKEW > now()\n"),
    assistant(text("I'll use a monotonic clock instead of wall time because wall time can jump backwards."),
              call("c2", "bash", command="pytest -q tests/test_session.py")),
    result("c2", "bash", f"F\n{ERROR_LINE}\n1 failed in 0.12s\n\nCommand exited with code 1", True),
    assistant(call("c3", "edit", path="src/auth/session.py", oldText="token.exp + SKEW", newText="(token.exp or 0) + SKEW")),
    result("c3", "edit", "Successfully replaced 1 block(s) in src/auth/session.py."),
    assistant(call("c4", "bash", command="pytest -q tests/test_session.py")),
    result("c4", "bash", "3 passed in 0.10s"),
    assistant(call("c5", "write", path="docs/CHANGELOG.md", content="- fix expired tokens\n")),
    result("c5", "write", "Successfully wrote to docs/CHANGELOG.md"),
    assistant(call("c6", "bash", command="ruff check src/auth/db_pool.py")),
    result("c6", "bash", "src/auth/db_pool.py:7:1: F401 error: `os` imported but unused\n\nCommand exited with code 1",
           True),
    assistant(text("The session fix is done. Next I need to clean up the unused import in `db_pool.py` "
                   "and then call `refresh_token()` from the middleware.")),
]


def history_request(messages, previous=None, max_tokens=13107, focus=None):
    return SummaryRequest(kind="history", system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
                          prompt=build_history_prompt(messages, focus, previous), max_tokens=max_tokens)


@pytest.fixture(scope="module")
def summarizer():
    return ExtractiveSummarizer()


def section(text_: str, heading: str) -> str:
    m = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^##|\Z)", text_, re.MULTILINE | re.DOTALL)
    assert m, f"missing {heading}"
    return m.group(1)


def test_parses_serialized_parts_and_tool_calls():
    prompt = build_history_prompt(CONVERSATION)
    conv = prompt[len("<conversation>\n") : prompt.index("\n</conversation>")]
    parts = parse_conversation(conv)
    assert [p.role for p in parts][:4] == ["User", "Assistant thinking", "Assistant tool calls", "Tool result"]
    calls = [c for p in parts for c in p.calls]
    assert [c.name for c in calls] == ["read", "bash", "edit", "bash", "write", "bash"]
    assert calls[2].args == {"path": "src/auth/session.py", "oldText": "token.exp + SKEW",
                             "newText": "(token.exp or 0) + SKEW"}
    tricky = parse_tool_calls('edit(path="a, b).py", text="x); y(z=1"); ls(path=".", limit=5)')
    assert [(c.name, c.args) for c in tricky] == [("edit", {"path": "a, b).py", "text": "x); y(z=1"}),
                                                  ("ls", {"path": ".", "limit": 5})]


def test_history_summary_has_every_section_and_exact_facts(summarizer):
    resp = summarizer.complete(history_request(CONVERSATION))
    out = resp.text
    assert resp.stop_reason == "stop"
    positions = [out.index(h + "\n") for h in HISTORY_SECTIONS]
    assert positions == sorted(positions)
    assert "src/auth/session.py" in section(out, "### Done") and "docs/CHANGELOG.md" in section(out, "### Done")
    assert "`pytest -q tests/test_session.py`" in section(out, "### Done")
    assert "Don't touch the public API of `SessionStore`" in section(out, "## Constraints & Preferences")
    assert "Always run pytest before finishing" in section(out, "## Constraints & Preferences")
    blocked = section(out, "### Blocked")
    assert "src/auth/db_pool.py:7:1: F401 error: `os` imported but unused" in blocked
    assert "test_session" not in blocked  # the pytest failure was fixed by the later passing run
    assert "monotonic clock" in section(out, "## Key Decisions")
    assert "wall time can jump backwards" in section(out, "## Key Decisions")
    nxt = section(out, "## Next Steps")
    assert nxt.startswith("1. ") and "db_pool.py" in nxt
    critical = section(out, "## Critical Context")
    assert ERROR_LINE in critical and "refresh_token()" in critical and "SessionStore" in critical
    assert "Fix the login bug in src/auth/session.py" in section(out, "## Goal")


def test_usage_in_pi_shape(summarizer):
    req = history_request(CONVERSATION)
    resp = summarizer.complete(req)
    u = resp.usage
    assert set(u) == {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}
    assert u["input"] == math.ceil((len(req.system_prompt) + len(req.prompt)) / 4)
    assert u["output"] == estimate_text_tokens(resp.text) and u["totalTokens"] == u["input"] + u["output"]
    assert u["cost"] == {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}


def test_deterministic(summarizer):
    a = summarizer.complete(history_request(CONVERSATION)).text
    b = ExtractiveSummarizer().complete(history_request(CONVERSATION)).text
    assert a == b


def test_update_keeps_done_and_resolves_blockers(summarizer):
    first = summarizer.complete(history_request(CONVERSATION)).text
    previous = first + "\n\n<read-files>\nsrc/auth/session.py\n</read-files>"
    more = [
        user("Now also add rate limiting to src/auth/login.py; prefer the token bucket approach."),
        assistant(call("d1", "edit", path="src/auth/db_pool.py", oldText="import os\n", newText="")),
        result("d1", "edit", "Successfully replaced 1 block(s) in src/auth/db_pool.py."),
        assistant(call("d2", "bash", command="ruff check src/auth/db_pool.py")),
        result("d2", "bash", "All checks passed!"),
        assistant(call("d3", "read", path="src/auth/missing.py")),
        result("d3", "read", "ENOENT: no such file or directory, access 'src/auth/missing.py'", True),
    ]
    out = summarizer.complete(history_request(more, previous=previous)).text
    for h in HISTORY_SECTIONS:
        assert h + "\n" in out
    done = section(out, "### Done")
    for item in ("src/auth/session.py", "docs/CHANGELOG.md", "src/auth/db_pool.py"):
        assert item in done  # earlier Done kept, new Done added
    blocked = section(out, "### Blocked")
    assert "F401" not in blocked  # resolved by the later ruff run
    assert "ENOENT: no such file or directory, access 'src/auth/missing.py'" in blocked
    goal = section(out, "## Goal")
    assert "Fix the login bug" in goal and "rate limiting" in goal
    assert "monotonic clock" in section(out, "## Key Decisions")
    assert "<read-files>" not in out
    assert "prefer the token bucket approach" in section(out, "## Constraints & Preferences")


def test_update_with_free_form_previous_summary(summarizer):
    previous = ("# Context Checkpoint\n\n## Goal\nRefactor `AgentSession`.\n\n## Key Decisions Made\n"
                "1. **Keep old code** - parallel comparison\n\n## Completed Work\n- `src/core/agent-session.ts` created\n\n"
                "## User Preferences\n- **E2E tests only**\n\n## Commands\n- `npm run check` - Full check")
    out = summarizer.complete(history_request(CONVERSATION[:3], previous=previous)).text
    assert "Refactor `AgentSession`." in section(out, "## Goal")
    assert "Keep old code" in section(out, "## Key Decisions")
    assert "`src/core/agent-session.ts` created" in section(out, "### Done")
    assert "E2E tests only" in section(out, "## Constraints & Preferences")
    assert "Commands: `npm run check` - Full check" in section(out, "## Critical Context")


def test_turn_prefix_template(summarizer):
    req = SummaryRequest(kind="turn_prefix", system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
                         prompt=build_turn_prefix_prompt(CONVERSATION[:7]), max_tokens=8192)
    out = summarizer.complete(req).text
    assert [line for line in out.splitlines() if line.startswith("## ")] == TURN_SECTIONS
    assert "Fix the login bug" in section(out, "## Original Request")
    assert "src/auth/session.py" in section(out, "## Progress So Far")
    assert ERROR_LINE in section(out, "## Context Needed to Continue")


def test_branch_template_has_no_critical_context(summarizer):
    from pimem.core.compaction.branch_summarization import build_branch_prompt

    req = SummaryRequest(kind="branch", system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
                         prompt=build_branch_prompt(CONVERSATION, None, False), max_tokens=4096)
    out = summarizer.complete(req).text
    assert [line for line in out.splitlines() if line.startswith("#")] == BRANCH_SECTIONS
    assert "src/auth/db_pool.py:7:1: F401 error" in section(out, "### Blocked")


def test_empty_sections_say_none(summarizer):
    out = summarizer.complete(history_request([user("hello there, what time is it")])).text
    assert section(out, "### Blocked").strip() == "- (none)"
    assert section(out, "## Key Decisions").strip() == "- (none)"


def test_focus_instruction_is_kept(summarizer):
    out = summarizer.complete(history_request(CONVERSATION, focus="the token expiry logic")).text
    assert "Focus: the token expiry logic" in section(out, "## Constraints & Preferences")


@pytest.mark.parametrize("budget", [60, 120, 250, 400, 800])
def test_stays_within_max_tokens(summarizer, budget):
    long_conv = CONVERSATION * 6 + [user(f"Also handle case {i} in src/mod_{i}.py please") for i in range(30)]
    resp = summarizer.complete(history_request(long_conv, max_tokens=budget))
    assert estimate_text_tokens(resp.text) <= budget
    assert resp.stop_reason == "stop"
    for h in HISTORY_SECTIONS:
        assert h + "\n" in resp.text or resp.text.rstrip().endswith(h)


def test_budget_below_the_bare_template_is_a_length_stop(summarizer):
    resp = summarizer.complete(history_request(CONVERSATION, max_tokens=10))
    assert resp.stop_reason == "length" and estimate_text_tokens(resp.text) <= 10


def test_parse_summary_sections_roundtrip(summarizer):
    out = summarizer.complete(history_request(CONVERSATION)).text
    sections = parse_summary_sections(out + "\n\n<modified-files>\nx.py\n</modified-files>")
    assert any("src/auth/session.py" in d for d in sections["done"])
    assert not any("x.py" == c for c in sections["critical"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(min_size=0, max_size=200), min_size=1, max_size=6), st.integers(min_value=40, max_value=600))
def test_any_text_gives_a_bounded_templated_answer(summarizer, texts, budget):
    messages = [user(t) if i % 2 == 0 else assistant(text(t)) for i, t in enumerate(texts)]
    resp = summarizer.complete(history_request(messages, max_tokens=budget))
    assert estimate_text_tokens(resp.text) <= budget
    if resp.stop_reason == "stop":
        assert all(h in resp.text for h in HISTORY_SECTIONS)


@pytest.mark.parametrize("text", ["a+" * 100_000, "a." * 100_000, "a_" * 100_000, "I decided" + " " * 200_000 + "x",
                                  "TypeError" * 20_000])
def test_long_adversarial_lines_stay_linear(text: str) -> None:
    """Runs of word characters, dots, pluses or spaces once made patterns retry from every position
    (minutes at 50 KB, hours at 1 MB). A regression makes this test run for hours, not a second."""
    from pimem.core.llm import SummaryRequest
    from pimem.summarizers.extractive import ExtractiveSummarizer

    prompt = f"<conversation>\n[User]: fix it\n\n[Tool result]: {text}\n</conversation>\n\nsummarize"
    response = ExtractiveSummarizer().complete(SummaryRequest("history", "sys", prompt, 4000))
    assert response.stop_reason == "stop" and "## Goal" in response.text
