"""The summarizer protocol: one request in, one response out.

Every summary pimem makes (history, turn prefix, branch) goes through an object with
``complete(request) -> SummaryResponse``. The request carries exactly what Pi sends to the
model (system prompt, the user message text, max tokens, reasoning level), so a summarizer
can be a real model, an offline heuristic, a cache or a recording.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

SummaryKind = Literal["history", "turn_prefix", "branch"]


@dataclass(frozen=True)
class SummaryRequest:
    """What Pi sends to the model for one summary.

    Args:
        kind: ``"history"``, ``"turn_prefix"`` or ``"branch"``.
        system_prompt: the system prompt.
        prompt: the text of the single user message.
        max_tokens: the most tokens the answer may take (None: unbounded).
        reasoning: the thinking level for reasoning models, else None.
        cache_retention: Pi's prompt-cache retention (summaries send ``"none"``).
        session_id: the fresh routing id Pi sends; it never affects the answer.
        model: the model's id.
        sample: not Pi's: the index of a repeated draw of the same request (a model at
            temperature > 0 answers differently each time; caches keep one answer per index).
    """

    kind: SummaryKind
    system_prompt: str
    prompt: str
    max_tokens: int | None
    reasoning: str | None = None
    cache_retention: str = "none"
    session_id: str = ""
    model: str = ""
    sample: int = 0

    def cache_key_fields(self) -> dict[str, Any]:
        """The fields that determine the answer (everything but the routing id).

        ``sample`` appears only when it is not 0, so the first draw keeps the key it had before
        draws were numbered.
        """
        d = asdict(self)
        d.pop("session_id")
        if not d["sample"]:
            d.pop("sample")
        return d


@dataclass
class SummaryResponse:
    """A model's answer in Pi's terms.

    Args:
        text: the answer's text.
        usage: a Pi usage dict, or None when not reported.
        stop_reason: Pi's (``"stop"``, ``"length"``, ``"toolUse"``, ``"error"``, ``"aborted"``).
        error_message: why the answer is not a summary (an error, a cut-off or a tool call), or None.
        called_tool: whether the model answered with a tool call.
        latency_s: the seconds the answer took, if measured.
        extra: what the summarizer adds about itself (not Pi's; e.g. ``{"summarizer": "extractive"}``).
    """

    text: str
    usage: dict[str, Any] | None = None
    stop_reason: str = "stop"
    error_message: str | None = None
    called_tool: bool = False
    latency_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Summarizer(Protocol):
    """Anything that can answer a :class:`SummaryRequest`."""

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        """Answer one request.

        Args:
            request: what Pi sends to the model.
        """
        ...
