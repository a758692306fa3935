"""Limits of the OpenAI-compatible client, over real HTTP on 127.0.0.1 with the real ``openai`` client.

A server that trickles its answer (each read quick, the whole answer slow) is cut off by the
whole-request deadline; HTML and oversized answers are refused with a message that says why; a
failing server is no longer asked once the circuit breaker opens; timeout, retries and deadline
come from the command line and the environment.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pimem.cli.main import _client_options, build_parser, main
from pimem.core.llm import SummaryRequest
from pimem.errors import ConfigurationError
from pimem.summarizers import DEFAULT_DEADLINE, client_options_from_env, summarizer_from_env
from pimem.summarizers.openai_compat import OpenAISummarizer
from tests.support.fake_openai_server import Reply, openai_summarizer


def make_request(prompt: str = "hi") -> SummaryRequest:
    return SummaryRequest(kind="history", system_prompt="You are a summarizer.", prompt=prompt, max_tokens=1000,
                          reasoning=None, session_id="r", model="m")


@pytest.mark.parametrize("part", ["headers", "body"])
def test_trickling_server_is_cut_off_by_the_deadline(server, part):
    # one byte every 50 ms: every read arrives well within the 5 s read timeout, so only the deadline
    # for the whole request can stop it; the full answer (~700 bytes) would take over 30 s
    server.script(*[Reply(content="a summary", trickle=part) for _ in range(5)])
    resp = openai_summarizer(server, deadline=0.5, max_retries=3).complete(make_request())
    assert resp.stop_reason == "error" and "deadline" in resp.error_message and resp.text == ""
    assert server.hits == 1  # the deadline covers the retries too: never asked again


def test_a_trickled_answer_within_the_deadline_is_used(server):
    server.script(Reply(raw_body=b'{"choices": [{"index": 0, "finish_reason": "stop", '
                                 b'"message": {"role": "assistant", "content": "ok"}}]}',
                        trickle="body", trickle_every=0.001))
    resp = openai_summarizer(server, deadline=60).complete(make_request())
    assert resp.stop_reason == "stop" and resp.text == "ok"


def test_an_html_page_with_status_200_says_so(server):
    server.script(Reply(raw_body=b"<!DOCTYPE html><html><body>Welcome to nginx!</body></html>",
                        content_type="text/html"))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.stop_reason == "error"
    assert "HTML page" in resp.error_message and "/v1" in resp.error_message and "Welcome to nginx" in resp.error_message
    assert server.hits == 1


def test_a_body_that_is_not_json_says_so(server):
    server.script(Reply(raw_body=b"OK", content_type="text/plain"))
    resp = openai_summarizer(server).complete(make_request())
    assert resp.stop_reason == "error" and "not JSON" in resp.error_message and "'OK'" in resp.error_message


def test_an_oversized_answer_is_refused(server):
    big = b'{"choices": [{"message": {"role": "assistant", "content": "' + b"x" * (1 << 20) + b'"}}]}'
    server.script(Reply(raw_body=big))
    resp = openai_summarizer(server, max_response_bytes=64 * 1024).complete(make_request())
    assert resp.stop_reason == "error" and "longer than 65536 bytes" in resp.error_message


def test_circuit_breaker_stops_asking_a_failing_server(server):
    server.script(*[Reply(status=500) for _ in range(100)])
    s = openai_summarizer(server, max_retries=1, breaker_threshold=3, breaker_cooldown=3600)
    responses = [s.complete(make_request(f"p{i}")) for i in range(10)]
    assert server.hits == 3 * 2  # three requests, each tried twice; then no more
    assert all(r.stop_reason == "error" for r in responses)
    assert [bool(r.extra.get("circuit_open")) for r in responses] == [False] * 3 + [True] * 7
    assert "circuit open" in responses[-1].error_message and "HTTP 500" in responses[-1].error_message


def test_circuit_half_opens_after_the_cooldown_and_a_success_closes_it(server):
    server.script(Reply(status=500), Reply(status=500), Reply(content="back"), Reply(status=500))
    s = openai_summarizer(server, max_retries=0, breaker_threshold=2, breaker_cooldown=0)
    assert [s.complete(make_request()).stop_reason for _ in range(2)] == ["error", "error"]
    assert s.complete(make_request()).text == "back"  # the cooldown is over: one request let through
    assert s.complete(make_request()).stop_reason == "error"  # one failure after a success: still closed
    assert s.complete(make_request()).stop_reason == "stop"
    assert server.hits == 5


def test_only_failures_in_a_row_open_the_circuit(server):
    server.script(Reply(status=500), Reply(content="fine"), Reply(status=500), Reply(content="fine"))
    s = openai_summarizer(server, max_retries=0, breaker_threshold=2, breaker_cooldown=3600)
    assert [s.complete(make_request()).stop_reason for _ in range(4)] == ["error", "stop", "error", "stop"]
    assert server.hits == 4


def test_replay_against_a_failing_server_asks_a_bounded_number_of_times(server, tmp_path: Path, sample_paths,
                                                                        monkeypatch, capsys):
    server.script(*[Reply(status=503) for _ in range(1000)])
    monkeypatch.setenv("PIMEM_BASE_URL", server.base_url)
    monkeypatch.setenv("PIMEM_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    session = tmp_path / "s.jsonl"
    shutil.copy(next(p for p in sample_paths if p.name == "logslice-since-flag.jsonl"), session)
    code = main(["replay", str(session), "--summarizer", "env", "--window", "12000", "--reserve", "2000",
                 "--keep", "1000", "--retries", "1", "-q"])
    out = capsys.readouterr()
    assert code == 1 and "every compaction failed" in out.err, out.err  # a run that compacted nothing is a failure
    failed = int(re.search(r"failed_compactions\s+(\d+)", out.out).group(1))
    assert failed > 2 * 5 * 2  # the replay needed a summary far more often than it asked...
    assert server.hits == 5 * 2  # ...but five failing requests (two tries each) opened the circuit


# ------------------------------------------------------------------------ settings: CLI and env


def test_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("PIMEM_TIMEOUT", "7.5")
    monkeypatch.setenv("PIMEM_RETRIES", "1")
    monkeypatch.setenv("PIMEM_DEADLINE", "none")
    s = OpenAISummarizer("m", base_url="http://127.0.0.1:9/v1")
    assert (s.timeout, s.max_retries, s.deadline) == (7.5, 1, None)
    explicit = OpenAISummarizer("m", base_url="http://127.0.0.1:9/v1", timeout=3, max_retries=0, deadline=9)
    assert (explicit.timeout, explicit.max_retries, explicit.deadline) == (3, 0, 9)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert summarizer_from_env(cache_path=None).inner.max_retries == 1
    monkeypatch.delenv("PIMEM_DEADLINE")
    assert OpenAISummarizer("m").deadline == DEFAULT_DEADLINE


@pytest.mark.parametrize(("name", "value"), [("PIMEM_RETRIES", "many"), ("PIMEM_TIMEOUT", "-1"),
                                             ("PIMEM_DEADLINE", "0"), ("PIMEM_TIMEOUT", "nan")])
def test_bad_environment_values_name_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=name):
        client_options_from_env()


@pytest.mark.parametrize("command", ["replay", "sweep"])
def test_cli_flags_reach_the_client(command):
    argv = [command, "s.jsonl", "--timeout", "3", "--retries", "0", "--deadline", "none"]
    if command == "sweep":
        argv += ["-o", "r.csv"]
    args = build_parser().parse_args(argv)
    assert _client_options(args) == {"timeout": 3.0, "max_retries": 0, "deadline": None}
    unset = build_parser().parse_args(argv[:2] + argv[8:])
    assert _client_options(unset) == {}  # the environment, then the defaults, decide


def test_cli_rejects_a_bad_deadline(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["replay", "s.jsonl", "--deadline", "soon"])
    assert "--deadline" in capsys.readouterr().err
