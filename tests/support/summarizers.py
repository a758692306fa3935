"""Summarizers for tests that need a deterministic one without a model: one that echoes the
prompt, one with a fixed answer, the extractive one keeping its requests, and the two that answer
exactly as the oracle drivers' canned models do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pimem.core.llm import SummaryRequest, SummaryResponse
from tests.oracle.client import Failure, canned_text, canned_usage, digest_value


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


class FixedSummarizer:
    """Answers every request with the same response and keeps the requests (``requests``).

    ``text``, ``usage``, ``stop_reason``, ``error_message`` and ``called_tool`` are the response's."""

    def __init__(self, text: str = "SUMMARY", *, usage: dict[str, Any] | None = None, stop_reason: str = "stop",
                 error_message: str | None = None, called_tool: bool = False) -> None:
        self.text, self.usage, self.stop_reason = text, usage, stop_reason
        self.error_message, self.called_tool = error_message, called_tool
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse(text=self.text, usage=self.usage, stop_reason=self.stop_reason,
                               error_message=self.error_message, called_tool=self.called_tool)


class RecordingSummarizer:
    """The offline extractive summarizer, keeping every request (``requests``)."""

    def __init__(self) -> None:
        from pimem.summarizers.extractive import ExtractiveSummarizer

        self.inner = ExtractiveSummarizer()
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return self.inner.complete(request)


@dataclass
class OracleSummarizer:
    """Answers exactly like the oracle's canned model for Pi 0.87.1 and 1.6.0 (``cannedReply`` in
    ``tests/oracle/shared.mjs``): ``"SUMMARY:" + sha256(prompt)[:16]`` with usage from the sizes;
    ``fail`` turns the answers to requests of its kind into that failure."""

    fail: Failure | None = None
    requests: list[Any] = field(default_factory=list)

    def complete(self, request: Any) -> SummaryResponse:
        self.requests.append(request)
        text = canned_text(request.prompt)
        stop = "stop"
        error = None
        called_tool = False
        f = self.fail
        if f is not None and (f.kind is None or f.kind == request.kind):
            if f.stop_reason:
                stop = f.stop_reason
            error = f.error_message
            if f.tool_call:
                called_tool = True
                if not f.stop_reason:
                    stop = "toolUse"
            if f.empty_text:
                text = ""
        return SummaryResponse(
            text=text,
            usage=canned_usage(request.kind, request.prompt),
            stop_reason=stop,
            error_message=error,
            called_tool=called_tool,
        )


class Oracle0132Summarizer:
    """Answers exactly like the Pi 0.13.2 oracle's ``complete()`` (``driver_0_13_2.mjs``): the text
    blocks ``"SUMMARY:" + digest(messages)[:16]`` and ``"second block"`` joined with a newline, as
    Pi 0.13.2 joins them. ``fail``: the request's ``fail`` object (``throws``, ``blocks``,
    ``stopReason``)."""

    def __init__(self, fail: dict[str, Any] | None = None) -> None:
        self.fail = fail or {}
        self.requests: list[Any] = []

    def complete(self, request: Any) -> SummaryResponse:
        self.requests.append(request)
        if self.fail.get("throws"):
            raise RuntimeError(self.fail["throws"])
        blocks = self.fail.get("blocks") or [
            {"type": "text", "text": "SUMMARY:" + digest_value(list(request.messages))[:16]},
            {"type": "text", "text": "second block"},
        ]
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
        return SummaryResponse(text=text, stop_reason=self.fail.get("stopReason", "stop"))
