"""The resume probe over real HTTP: the real ``openai`` client against a local server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings
from pimem.errors import PimemWarning
from pimem.drift.resume_probe import main_argument, resume_probe
from tests.support.fake_openai_server import Reply


@pytest.fixture(scope="module")
def replayed(samples_dir):
    result = replay(samples_dir / "auth-login-bug.jsonl",
                    CompactionSettings(reserve_tokens=4000, keep_recent_tokens=4000), context_window=16000)
    assert len(result.compactions) >= 3
    return result


def _call(name: str, **arguments) -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _recorded_next(result, compaction):
    path = result.session.get_branch()
    i = next(i for i, e in enumerate(path) if e.get("id") == compaction["id"])
    return next(e for e in path[i + 1:] if e.get("type") == "message" and e["message"]["role"] == "assistant")


def test_the_model_answers_from_the_replayed_context(replayed, server):
    first = _recorded_next(replayed, replayed.compactions[0])["message"]
    block = next(b for b in first["content"] if b.get("type") == "toolCall")
    server.script(
        Reply(tool_calls=[_call(block["name"], **block["arguments"])]),  # as recorded
        Reply(tool_calls=[_call("bash", command="ls -la")]),  # something else
        Reply(status=400, error_message="bad request"),  # a failed request
    )
    table = resume_probe(replayed, model="probe-model", base_url=server.base_url, api_key="k",
                         max_compactions=3)
    bodies = server.bodies()
    assert len(table) == 3 and server.hits == 3
    assert table.loc[0, "tool_match"] and table.loc[0, "argument_match"]
    assert table.loc[0, "recorded_tool"] == block["name"]
    assert table.loc[0, "recorded_argument"] == main_argument(block["name"], block["arguments"])
    assert table.loc[1, "predicted_tool"] == "bash" and table.loc[1, "predicted_argument"] == "ls -la"
    assert not table.loc[1, "tool_match"] and not table.loc[1, "argument_match"]
    assert "bad request" in table.loc[2, "error"]
    assert table.attrs["argument_match_rate"] == 0.5
    # what was sent: the replay's context for that response, the summary first, with the session's tools
    body = bodies[0]
    assert body["model"] == "probe-model" and body["temperature"] == 0
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    assert messages[1]["role"] == "user" and replayed.compactions[0]["summary"] in messages[1]["content"]
    names = {t["function"]["name"] for t in body["tools"]}
    assert block["name"] in names and {"read", "bash"} <= names
    ids = {c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]}
    assert all(m["tool_call_id"] in ids for m in messages if m["role"] == "tool")


def test_main_arguments_are_normalized():
    assert main_argument("read", {"path": "./src/a.ts"}) == "src/a.ts"
    assert main_argument("bash", {"command": "  npm   TEST "}) == "npm test"
    assert main_argument("grep", {"pattern": "Foo", "path": "src"}) == "foo"
    assert main_argument("custom", {"n": 3, "query": "X"}) == "x"
    assert main_argument("read", "not a dict") is None


def test_without_a_model_the_probe_is_skipped_with_a_message(replayed, monkeypatch):
    for key in ("PIMEM_BASE_URL", "OPENAI_API_KEY", "PIMEM_MODEL", "PIMEM_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    with pytest.warns(PimemWarning, match="resume probe skipped: no chat model configured"):
        table = resume_probe(replayed)
    assert len(table) == 0 and "PIMEM_BASE_URL" in table.attrs["skipped"]


def test_the_model_can_come_from_the_environment(replayed, monkeypatch, server):
    monkeypatch.setenv("PIMEM_BASE_URL", server.base_url)
    monkeypatch.setenv("PIMEM_MODEL", "env-model")
    table = resume_probe(replayed, max_compactions=1)  # the default answer is text: no tool
    assert server.bodies()[0]["model"] == "env-model"
    assert table.loc[0, "predicted_tool"] is None and table.loc[0, "answer"].startswith("## Goal")
    assert table.loc[0, "tool_match"] == (table.loc[0, "recorded_tool"] is None)
