"""OpenAISummarizer over real HTTP: the real ``openai`` client against a local OpenAI-compatible server."""

from __future__ import annotations

import logging
import pickle
import threading

import pytest

from pimem.core.llm import SummaryRequest
from pimem.summarizers.openai_compat import (
    AsyncOpenAISummarizer,
    OpenAISummarizer,
    map_usage,
)
from tests.support.fake_openai_server import API_KEY as SECRET
from tests.support.fake_openai_server import Reply, openai_summarizer



def make_request(**kw) -> SummaryRequest:
    base = dict(kind="history", system_prompt="You are a summarizer.", prompt="<conversation>\n[User]: hi\n</conversation>",
                max_tokens=1000, reasoning=None, session_id="0190-routing-id", model="m")
    base.update(kw)
    return SummaryRequest(**base)


def test_normal_answer_maps_request_and_usage(server):
    server.script(Reply(content="## Goal\n- done", usage={"prompt_tokens": 120, "completion_tokens": 30,
                                                         "total_tokens": 150,
                                                         "prompt_tokens_details": {"cached_tokens": 20}}))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.stop_reason == "stop" and resp.text == "## Goal\n- done" and not resp.called_tool
    assert resp.usage == {"input": 100, "output": 30, "cacheRead": 20, "cacheWrite": 0, "reasoning": 0,
                          "totalTokens": 150, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                                       "total": 0}}
    assert server.hits == 1
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.body["messages"] == [{"role": "system", "content": "You are a summarizer."},
                                    {"role": "user", "content": "<conversation>\n[User]: hi\n</conversation>"}]
    assert req.body["max_tokens"] == 1000 and "max_completion_tokens" not in req.body
    # routing id in headers only; no caching requested; no reasoning for a plain request
    assert req.headers["x-session-affinity"] == "0190-routing-id"
    assert req.headers["x-client-request-id"] == "0190-routing-id"
    assert "0190-routing-id" not in req.raw.decode()
    for field in ("prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "user"):
        assert field not in req.body
    assert req.headers["authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize(
    ("model", "level", "override", "field", "effort"),
    [
        ("gpt-5-mini", "xhigh", None, "max_completion_tokens", "high"),
        ("openai/o3-mini", "medium", None, "max_completion_tokens", "medium"),
        ("o4-mini", "minimal", None, "max_completion_tokens", "minimal"),
        ("qwen3-32b", "low", None, "max_tokens", "low"),
        ("qwen3-32b", "high", True, "max_completion_tokens", "high"),
        ("gpt-5", "off", False, "max_tokens", None),
    ],
)
def test_reasoning_requests(server, model, level, override, field, effort):
    server.script(Reply(content="summary", reasoning="thinking about it"))
    s = openai_summarizer(server, model=model, use_max_completion_tokens=override)
    resp = s.complete(make_request(reasoning=level, max_tokens=777))
    assert resp.text == "summary" and resp.extra["reasoning"] == "thinking about it"
    body = server.requests[0].body
    assert body["model"] == model and body[field] == 777
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert other not in body
    assert body.get("reasoning_effort") == effort


def test_429_retry_after_is_honoured(server):
    server.script(Reply(status=429, headers={"Retry-After": "0"}), Reply(status=429, headers={"retry-after-ms": "5"}),
                  Reply(content="after the limit"))
    resp = openai_summarizer(server, backoff_base=60.0).complete(make_request())  # backoff would be huge: headers win
    assert resp.text == "after the limit" and resp.stop_reason == "stop"
    assert server.hits == 3 and resp.extra["attempts"] == 3


def test_500_then_success(server):
    server.script(Reply(status=500), Reply(status=503), Reply(content="recovered"))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.text == "recovered" and server.hits == 3


def test_retries_are_bounded(server):
    server.script(*[Reply(status=500) for _ in range(10)])
    resp = openai_summarizer(server, max_retries=2).complete(make_request())
    assert resp.stop_reason == "error" and "HTTP 500" in resp.error_message
    assert server.hits == 3


def test_client_errors_are_not_retried(server):
    server.script(Reply(status=400, error_message="bad model"))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.stop_reason == "error" and "400" in resp.error_message and server.hits == 1


def test_timeout_then_success(server):
    release = threading.Event()
    server.script(Reply(content="too late", hold=release), Reply(content="in time"))
    resp = openai_summarizer(server, timeout=0.3, max_retries=1).complete(make_request())
    release.set()
    assert resp.text == "in time" and server.hits == 2


def test_timeout_fails_when_retries_exhausted(server):
    release = threading.Event()
    server.script(Reply(content="too late", hold=release))
    resp = openai_summarizer(server, timeout=0.2, max_retries=0).complete(make_request())
    release.set()
    assert resp.stop_reason == "error" and "timed out" in resp.error_message


def test_length_stop_is_a_failure(server):
    server.script(Reply(content="## Goal\n- partial", finish_reason="length"))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.stop_reason == "length" and resp.text == "## Goal\n- partial" and resp.error_message


def test_tool_call_answer_is_a_failure(server):
    server.script(Reply(tool_calls=[{"id": "call_1", "type": "function",
                                     "function": {"name": "read", "arguments": "{\"path\": \"a.py\"}"}}],
                        finish_reason="tool_calls"))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.called_tool and resp.stop_reason == "toolUse"


def test_empty_answer_is_a_failure(server):
    server.script(Reply(content="   "))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.stop_reason == "error" and "empty" in resp.error_message


@pytest.mark.parametrize("raw", [b"this is not json{", b'{"unexpected": true}', b'{"choices": []}'])
def test_malformed_bodies_give_clear_errors(server, raw):
    server.script(Reply(raw_body=raw))
    resp = openai_summarizer(server, max_retries=0).complete(make_request())
    assert resp.stop_reason == "error" and resp.error_message
    assert resp.text == ""


def test_key_never_in_errors_logs_repr_or_identity(server, caplog):
    server.script(Reply(status=500, error_message=f"upstream rejected key {SECRET}"),
                  Reply(status=401, error_message=f"Incorrect API key provided: {SECRET}"))
    s = openai_summarizer(server)
    with caplog.at_level(logging.DEBUG):
        resp = s.complete(make_request())
    assert resp.stop_reason == "error"
    assert server.hits == 2
    assert SECRET not in resp.error_message and "***" in resp.error_message
    assert SECRET not in caplog.text
    assert SECRET not in repr(s) and SECRET not in str(s.identity()) and SECRET not in str(vars(s))
    # a pickled copy (for worker processes) still works against the server
    clone = pickle.loads(pickle.dumps(s))
    assert clone.complete(make_request()).stop_reason == "stop"
    assert server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"


def test_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123")
    s = OpenAISummarizer("m", base_url=server.base_url)
    assert s.complete(make_request()).stop_reason == "stop"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env-123"
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("PIMEM_API_KEY", "sk-pimem-456")
    OpenAISummarizer("m", base_url=server.base_url).complete(make_request())
    assert server.requests[1].headers["authorization"] == "Bearer sk-pimem-456"


def test_openrouter_routing_header():
    s = OpenAISummarizer("anthropic/claude", base_url="https://openrouter.ai/api/v1", api_key="k")
    params, headers = s.build_params(make_request())
    assert headers == {"x-session-id": "0190-routing-id"} and "store" not in params
    s2 = OpenAISummarizer("gpt-4o", api_key="k")
    params2, _ = s2.build_params(make_request())
    assert params2["store"] is False


def test_map_usage_handles_missing_fields():
    assert map_usage(None) is None
    u = map_usage({"prompt_tokens": 10, "completion_tokens": 5, "prompt_cache_hit_tokens": 4,
                   "completion_tokens_details": {"reasoning_tokens": 3}})
    assert (u["input"], u["cacheRead"], u["output"], u["reasoning"], u["totalTokens"]) == (6, 4, 5, 3, 15)


def test_async_concurrency_bound_and_order(server):
    gate = threading.Event()
    server.responder = lambda body: "answer " + body["messages"][1]["content"]
    server.script(*[Reply(hold=gate) for _ in range(6)])
    s = AsyncOpenAISummarizer("m", base_url=server.base_url, api_key=SECRET, concurrency=2, timeout=15)
    requests = [make_request(prompt=f"p{i}") for i in range(6)]
    result: list = []
    worker = threading.Thread(target=lambda: result.extend(s.complete_many(requests)))
    worker.start()
    assert server.wait_for(lambda srv: srv.in_flight == 2)
    gate.set()
    worker.join(20)
    assert [r.text for r in result] == [f"answer p{i}" for i in range(6)]
    assert server.max_in_flight == 2 and s.max_in_flight == 2 and server.hits == 6
    # requests reached the server in some order; every prompt was sent exactly once
    assert sorted(b["messages"][1]["content"] for b in server.bodies()) == [f"p{i}" for i in range(6)]


def test_async_retries(server):
    server.script(Reply(status=429, headers={"Retry-After": "0"}), Reply(content="ok after 429"))
    s = AsyncOpenAISummarizer("m", base_url=server.base_url, api_key=SECRET, concurrency=1, backoff_base=0.001)
    [resp] = s.complete_many([make_request()])
    assert resp.text == "ok after 429" and server.hits == 2


def test_a_key_from_the_environment_is_not_pickled(monkeypatch) -> None:
    import pickle

    from pimem.summarizers.openai_compat import OpenAISummarizer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-123456")
    blob = pickle.dumps(OpenAISummarizer("gpt-4.1-mini", base_url="http://127.0.0.1:9/v1"))
    assert b"sk-env-secret-123456" not in blob
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-key-654321")
    restored = pickle.loads(blob)
    assert restored._key.value == "sk-worker-key-654321"  # the receiving process's own environment


def test_an_explicit_key_travels_with_the_pickle(monkeypatch) -> None:
    import pickle

    from pimem.summarizers.openai_compat import OpenAISummarizer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    restored = pickle.loads(pickle.dumps(OpenAISummarizer("m", base_url="http://127.0.0.1:9/v1",
                                                          api_key="sk-explicit-000111")))
    assert restored._key.value == "sk-explicit-000111"
