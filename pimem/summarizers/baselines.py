"""Degenerate summarizers: the floor and the cheats every summary measure must see through.

Each is a real summarizer (``complete(SummaryRequest) -> SummaryResponse``) that works in replays,
sweeps and :func:`pimem.drift.compare_sources` like any other. None of them understands anything:
a measure that ranks one of them above a real model's summary is measuring something else.

========================== ====================================================================
summarizer                 answer
========================== ====================================================================
``EmptyTemplateSummarizer`` Pi's template with ``(none)`` in every section (history, branch and
                           turn-prefix templates). Games template conformance and anything that
                           counts the file blocks ``compact()`` appends.
``FactDumpSummarizer``     every fact :func:`pimem.drift.extract_facts` finds in the conversation,
                           one ``- kind: text`` line each, in order; an update keeps the previous
                           dump's lines first. Games fact recall: it is made by the same extractor.
``HeadTruncationSummarizer`` the first ``budget`` tokens of previous summary + conversation text.
``TailTruncationSummarizer`` the last ``budget`` tokens of the same text.
========================== ====================================================================

The budget of an answer is ``min(budget, request.max_tokens)`` (either may be None; both None means
no limit), counted with Pi's estimator (``ceil(UTF-16 length / 4)``). The dump keeps whole lines and
the truncations cut the text, so every answer fits and stops with ``"stop"`` (the empty template
stops with ``"length"`` only when even it does not fit). Usage is estimated like the extractive
summarizer's; cost is zero.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pimem.base.js import utf16_len
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.errors import ConfigurationError
from pimem.summarizers.extractive import result_errors, parse_conversation, split_request
from pimem.text.sections import summarizer_text

__all__ = [
    "BASELINES",
    "EmptyTemplateSummarizer",
    "FactDumpSummarizer",
    "HeadTruncationSummarizer",
    "TailTruncationSummarizer",
    "baseline_summarizers",
]

DEFAULT_BUDGET = 2000

EMPTY_HISTORY = (
    "## Goal\n(none)\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n### Done\n- [x] (none)\n\n"
    "### In Progress\n- [ ] (none)\n\n### Blocked\n- (none)\n\n## Key Decisions\n- (none)\n\n"
    "## Next Steps\n1. (none)\n\n## Critical Context\n- (none)"
)
EMPTY_BRANCH = EMPTY_HISTORY.split("\n\n## Critical Context")[0]
EMPTY_TURN_PREFIX = "## Original Request\n(none)\n\n## Progress So Far\n- (none)\n\n## Context Needed to Continue\n- (none)"


def _tokens(text: str) -> int:
    return math.ceil(utf16_len(text) / 4)


def _head(text: str, tokens: int) -> str:
    units = text.encode("utf-16-le", "surrogatepass")[: max(0, tokens) * 4 * 2]
    return units.decode("utf-16-le", errors="ignore")


def _tail(text: str, tokens: int) -> str:
    data = text.encode("utf-16-le", "surrogatepass")
    keep = max(0, tokens) * 4 * 2
    return data[len(data) - keep :].decode("utf-16-le", errors="ignore") if keep < len(data) else text


class _Baseline:
    """Shared plumbing: budget, usage, identity."""

    model = "baseline"

    def __init__(self, budget: int | None = DEFAULT_BUDGET) -> None:
        if budget is not None and budget < 1:
            raise ConfigurationError(f"budget must be a positive number of tokens or None, not {budget!r}")
        self.budget = budget

    def __repr__(self) -> str:
        return f"{type(self).__name__}(budget={self.budget!r})"

    def identity(self) -> dict[str, Any]:
        """What determines the answers (for cache keys)."""
        return {"class": type(self).__name__, "model": self.model, "version": 1, "budget": self.budget}

    def _limit(self, request: SummaryRequest) -> int | None:
        values = [v for v in (self.budget, request.max_tokens) if v]
        return min(values) if values else None

    def _answer(self, text: str, request: SummaryRequest, start: float, stop: str = "stop") -> SummaryResponse:
        usage: dict[str, Any] = {"input": math.ceil((utf16_len(request.system_prompt) + utf16_len(request.prompt)) / 4),
                 "output": _tokens(text), "cacheRead": 0, "cacheWrite": 0,
                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
        usage["totalTokens"] = usage["input"] + usage["output"]
        return SummaryResponse(text=text, usage=usage, stop_reason=stop, latency_s=time.perf_counter() - start,
                               extra={"summarizer": self.model})

    def _source_text(self, request: SummaryRequest) -> str:
        conversation, previous, _ = split_request(request)
        if previous:
            return summarizer_text(previous) + "\n\n" + conversation
        return conversation


class EmptyTemplateSummarizer(_Baseline):
    """Pi's template, every section ``(none)``.

    Args:
        budget: the most tokens of an answer (UTF-16 chars / 4, as Pi estimates), the request's
            ``max_tokens`` capping it too; None: the request's cap only.
    """

    model = "baseline-empty-template"

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        start = time.perf_counter()
        text = {"turn_prefix": EMPTY_TURN_PREFIX, "branch": EMPTY_BRANCH}.get(request.kind, EMPTY_HISTORY)
        limit = self._limit(request)
        if limit is not None and _tokens(text) > limit:
            return self._answer(_head(text, limit), request, start, stop="length")
        return self._answer(text, request, start)


class HeadTruncationSummarizer(_Baseline):
    """The first ``budget`` tokens of previous summary + conversation.

    Args:
        budget: the most tokens of an answer (UTF-16 chars / 4, as Pi estimates), the request's
            ``max_tokens`` capping it too; None: the request's cap only.
    """

    model = "baseline-head-truncation"

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        start = time.perf_counter()
        text = self._source_text(request)
        limit = self._limit(request)
        return self._answer(text if limit is None else _head(text, limit), request, start)


class TailTruncationSummarizer(_Baseline):
    """The last ``budget`` tokens of previous summary + conversation.

    Args:
        budget: the most tokens of an answer (UTF-16 chars / 4, as Pi estimates), the request's
            ``max_tokens`` capping it too; None: the request's cap only.
    """

    model = "baseline-tail-truncation"

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        start = time.perf_counter()
        text = self._source_text(request)
        limit = self._limit(request)
        return self._answer(text if limit is None else _tail(text, limit), request, start)


def _messages_from_parts(parts: list[Any]) -> list[dict]:
    """Pi-shaped messages rebuilt from serialized conversation parts (enough for the fact extractor)."""
    messages: list[dict] = []
    pending: list[Any] = []
    for part in parts:
        if part.role == "User":
            messages.append({"role": "user", "content": [{"type": "text", "text": part.text}]})
        elif part.role == "Assistant":
            messages.append({"role": "assistant", "content": [{"type": "text", "text": part.text}]})
        elif part.role == "Assistant tool calls":
            blocks = [{"type": "toolCall", "id": f"c{len(messages)}-{i}", "name": c.name, "arguments": c.args}
                      for i, c in enumerate(part.calls)]
            messages.append({"role": "assistant", "content": blocks})
            pending = list(part.calls)
        elif part.role == "Tool result":
            call = pending.pop(0) if pending else None
            failed = bool(result_errors(call.name.lower() if call else "", part.text))
            messages.append({"role": "toolResult", "toolName": call.name if call else "",
                             "content": [{"type": "text", "text": part.text}], "isError": failed})
    return messages


class FactDumpSummarizer(_Baseline):
    """Every extracted fact, one line each, no prose, no order of importance.

    Args:
        budget: the most tokens of an answer (UTF-16 chars / 4, as Pi estimates), the request's
            ``max_tokens`` capping it too; None: the request's cap only.
    """

    model = "baseline-fact-dump"

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        from pimem.text.facts import extract_facts

        start = time.perf_counter()
        conversation, previous, _ = split_request(request)
        lines: list[str] = []
        if previous:
            lines.extend(ln for ln in previous.split("\n") if ln.startswith("- ") and ": " in ln)
        for fact in extract_facts(_messages_from_parts(parse_conversation(conversation))):
            surface = " ".join((fact.surface or fact.value).split())
            lines.append(f"- {fact.kind}: {surface}")
        lines = list(dict.fromkeys(lines))
        limit = self._limit(request)
        out: list[str] = []
        used = 0
        for line in lines:
            cost = utf16_len(line) + (1 if out else 0)
            if limit is not None and math.ceil((used + cost) / 4) > limit:
                break
            out.append(line)
            used += cost
        return self._answer("\n".join(out) if out else "- (no facts)", request, start)


BASELINES: dict[str, type[_Baseline]] = {
    "empty template": EmptyTemplateSummarizer,
    "fact dump": FactDumpSummarizer,
    "head truncation": HeadTruncationSummarizer,
    "tail truncation": TailTruncationSummarizer,
}


def baseline_summarizers(budget: int | None = DEFAULT_BUDGET) -> dict[str, Any]:
    """One instance of each baseline, by display name.

    Args:
        budget: each answer's length in tokens (None: the request's ``max_tokens`` alone).
    """
    return {name: cls(budget) for name, cls in BASELINES.items()}
