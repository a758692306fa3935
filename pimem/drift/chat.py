"""Chat models as judges: who may judge, and one checked question.

A judge (probe grader, probe answerer, question writer, entailment matcher) must be a chat model
reached through the OpenAI-compatible path (:class:`pimem.summarizers.OpenAISummarizer`, also
behind a :class:`~pimem.summarizers.CachedSummarizer`), or an object that declares
``chat_model = True``. Anything else — the extractive summarizer, a baseline, a recording — would
answer with a template, not a judgement, so it is an error (:class:`NotAChatModelError`), never a
silent score. A judge must also not be the summarizer whose summaries it judges.
"""

from __future__ import annotations

from typing import Any

from pimem.core.llm import SummaryRequest
from pimem.errors import ConfigurationError, JudgeError, NotAChatModelError
from pimem.summarizers.cached import summarizer_identity

__all__ = ["NotAChatModelError", "JudgeError", "is_chat_model", "require_chat_model", "ask", "model_name"]


def _unwrap(obj: Any) -> Any:
    seen = 0
    while hasattr(obj, "inner") and seen < 8:  # CachedSummarizer and similar wrappers
        obj = obj.inner
        seen += 1
    return obj


def is_chat_model(obj: Any) -> bool:
    """True for an OpenAI-compatible summarizer (possibly cached) or an object with ``chat_model = True``."""
    if getattr(obj, "chat_model", False) is True:
        return True
    inner = _unwrap(obj)
    if getattr(inner, "chat_model", False) is True:
        return True
    from pimem.summarizers.openai_compat import OpenAISummarizer

    return isinstance(inner, OpenAISummarizer)


def model_name(obj: Any) -> str:
    """The model a summarizer or judge stands for (``model`` of the innermost object)."""
    return str(getattr(_unwrap(obj), "model", "") or "")


def _identity(obj: Any) -> Any:
    return summarizer_identity(_unwrap(obj))


def require_chat_model(obj: Any, role: str = "judge", *, not_same_as: Any = None, not_model: str | None = None) -> None:
    """Raise unless ``obj`` is a chat model that is neither ``not_same_as`` nor named ``not_model``."""
    if obj is None or not hasattr(obj, "complete"):
        raise NotAChatModelError(f"the {role} must be a chat model with complete(SummaryRequest); got "
                                 f"{type(obj).__name__}")
    if not is_chat_model(obj):
        raise NotAChatModelError(
            f"the {role} must be a chat model (an OpenAISummarizer for any OpenAI-compatible endpoint, or an "
            f"object with chat_model = True); {type(_unwrap(obj)).__name__} writes summaries by rule and cannot "
            f"judge them")
    if not_same_as is not None and (_unwrap(obj) is _unwrap(not_same_as) or _identity(obj) == _identity(not_same_as)):
        raise ConfigurationError(f"the {role} must not be the summarizer whose summaries it judges ({model_name(obj)!r})")
    if not_model and model_name(obj) and model_name(obj) == not_model:
        raise ConfigurationError(f"the {role} must not be the model that wrote the summaries ({not_model!r})")


def ask(model: Any, system: str, prompt: str, *, max_tokens: int | None = 1024) -> str:
    """One chat request through the summarizer protocol; a failed request raises :class:`JudgeError`."""
    request = SummaryRequest(kind="history", system_prompt=system, prompt=prompt, max_tokens=max_tokens,
                             model=model_name(model))
    response = model.complete(request)
    if response.stop_reason in ("error", "aborted") or response.called_tool:
        raise JudgeError(response.error_message or response.stop_reason)
    if response.stop_reason == "length" and not (response.text or "").strip():
        raise JudgeError("the answer hit the token cap before any text")
    return response.text or ""
