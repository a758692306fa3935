"""Summarizers on hostile input: lone surrogates through the cache, credentials in URLs and pickles."""

from __future__ import annotations

import logging
import pickle

import pytest

from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.summarizers.cached import CachedSummarizer


class EchoSummarizer:
    model = "echo"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        return SummaryResponse(text=f"summary of {request.prompt}", usage={"input": 1, "output": 1},
                               stop_reason="stop", extra={"reasoning": "think \udc80"})


@pytest.mark.parametrize("prompt", ["lone \ud800 high", "lone \udfff low", "pair \ud83d\ude00 ok", "\udc80" * 3])
def test_lone_surrogates_are_stored_and_served_exactly(tmp_path, prompt):
    inner = EchoSummarizer()
    cache = CachedSummarizer(inner, tmp_path / "c.sqlite")
    request = SummaryRequest("history", "sys \ud800", prompt, 100)
    first = cache.complete(request)
    assert first.text == f"summary of {prompt}" and inner.calls == 1
    again = CachedSummarizer(EchoSummarizer(), tmp_path / "c.sqlite").complete(request)
    assert again.extra["cached"] is True and again.text == first.text  # served from the file, exactly
    assert again.extra["reasoning"] == "think \udc80" and again.usage == {"input": 1, "output": 1}
    table = cache.export()
    assert table["text"].tolist() == [first.text] and table["request"][0]["prompt"] == prompt
    assert cache.stats()["entries_for_summarizer"] == 1
