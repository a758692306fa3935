"""Summarizers on hostile input: lone surrogates through the cache, credentials in URLs and pickles."""

from __future__ import annotations

import base64
import logging
import pickle

import pytest

from pimem.core.llm import SummaryRequest
from pimem.summarizers.cached import CachedSummarizer
from tests.support.summarizers import EchoSummarizer


@pytest.mark.parametrize("prompt", ["lone \ud800 high", "lone \udfff low", "pair \ud83d\ude00 ok", "\udc80" * 3])
def test_lone_surrogates_are_stored_and_served_exactly(tmp_path, prompt):
    inner = EchoSummarizer(extra={"reasoning": "think \udc80"})
    cache = CachedSummarizer(inner, tmp_path / "c.sqlite")
    request = SummaryRequest("history", "sys \ud800", prompt, 100)
    first = cache.complete(request)
    assert first.text == f"summary of {prompt}" and inner.calls == 1
    again = CachedSummarizer(EchoSummarizer(extra={"reasoning": "think \udc80"}), tmp_path / "c.sqlite").complete(request)
    assert again.extra["cached"] is True and again.text == first.text  # served from the file, exactly
    assert again.extra["reasoning"] == "think \udc80" and again.usage == first.usage
    table = cache.export()
    assert table["text"].tolist() == [first.text] and table["request"][0]["prompt"] == prompt
    assert cache.stats()["entries_for_summarizer"] == 1


# ---------------------------------------------------------------------------------------------
# credentials


def _fail_fast(summarizer):
    """Every request fails at once (connection refused), the circuit opens after two."""
    summarizer.max_retries = 0
    summarizer.breaker_threshold = 2
    return summarizer


def test_url_credentials_never_leave_memory(tmp_path, monkeypatch, caplog):
    from pimem.summarizers import summarizer_from_env

    monkeypatch.setenv("PIMEM_BASE_URL", "http://alice:s3cret-pw@127.0.0.1:9/v1")
    monkeypatch.setenv("PIMEM_API_KEY", "sk-test-0123456789abcdef")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cached = summarizer_from_env(tmp_path / "c.sqlite")
    inner = _fail_fast(cached.inner)
    assert inner.base_url == "http://127.0.0.1:9/v1"
    for text in (repr(cached), repr(inner), str(inner.identity()), str(cached.identity)):
        assert "s3cret-pw" not in text and "alice" not in text
    blob = pickle.dumps(cached)
    assert b"s3cret-pw" not in blob and b"sk-test-0123456789abcdef" not in blob
    monkeypatch.setenv("PIMEM_API_KEY", "sk-worker-key-0000000000")
    again = pickle.loads(blob)
    assert again.inner._key.value == "sk-worker-key-0000000000"  # the receiving process's own environment
    assert again.inner._userinfo.value == "alice:s3cret-pw"
    caplog.set_level(logging.DEBUG)
    request = SummaryRequest("history", "sys", "prompt", 100)
    errors = [cached.complete(SummaryRequest("history", "sys", f"p{i}", 100)).error_message for i in range(3)]
    assert "circuit open" in errors[-1] and "127.0.0.1:9" in errors[-1]
    cached.cache_failures = True
    cached.complete(request)
    database = (tmp_path / "c.sqlite").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("c.sqlite-*"))
    for text in (*errors, caplog.text, database.decode("utf-8", "replace")):
        assert "s3cret-pw" not in text and "alice:" not in text and "sk-test-0123456789abcdef" not in text


def test_the_client_still_sends_the_url_credentials(monkeypatch, server):
    from pimem.summarizers.openai_compat import OpenAISummarizer
    from tests.support.fake_openai_server import Reply

    server.script(Reply(content="a summary"))
    url = server.base_url.replace("http://", "http://alice:pw@")
    response = OpenAISummarizer("m", url, api_key="k").complete(SummaryRequest("history", "s", "p", 10))
    assert response.stop_reason == "stop", response.error_message
    # as before: the HTTP client turns the URL's user:password into Basic authentication
    assert server.requests[0].headers.get("authorization") == "Basic " + base64.b64encode(b"alice:pw").decode()


@pytest.mark.parametrize("secret", ["ab", "host", "p", "//", "x-1"])
def test_a_short_key_does_not_mangle_text(secret):
    from pimem.summarizers.openai_compat import redact

    text = "http://host/v1 answered 401 with key ab / p and x-1"
    out = redact(text, secret)
    assert out.replace("***", secret) == text  # only whole tokens replaced
    assert "http://***host" not in out
    tokens = {"ab": 1, "host": 1, "p": 1, "//": 0, "x-1": 1}
    assert out.count("***") == tokens[secret]
    assert redact("key sk-abcdefghijklmnop leaked", "sk-abcdefghijklmnop") == "key *** leaked"
