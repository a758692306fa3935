"""Summarizers for tests that need a deterministic one without a model."""

from __future__ import annotations

from typing import Any

from pimem.core.llm import SummaryRequest, SummaryResponse


class EchoSummarizer:
    """Answers ``summary of <prompt>`` with a Pi usage from the prompt's length; counts calls.

    ``fail_on``: a prompt holding it gets an error answer. ``extra``: given with every answer."""

    model = "echo"

    def __init__(self, fail_on: str | None = None, extra: dict[str, Any] | None = None) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.extra = dict(extra or {})

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        if self.fail_on and self.fail_on in request.prompt:
            return SummaryResponse(text="", stop_reason="error", error_message="boom")
        usage = {"input": len(request.prompt), "output": 3, "cacheRead": 0, "cacheWrite": 0,
                 "totalTokens": len(request.prompt) + 3,
                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
        return SummaryResponse(text=f"summary of {request.prompt}", usage=usage, latency_s=0.01,
                               extra=dict(self.extra))
