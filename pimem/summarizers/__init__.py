"""Summarizers: the protocol and its implementations (offline, OpenAI-compatible, the local model of
:mod:`pimem.localmodel`, cached, recorded, and the degenerate baselines of :mod:`pimem.summarizers.baselines`).

``summarizer_from_env()`` picks one from the environment:

* ``OPENAI_API_KEY`` or ``PIMEM_BASE_URL`` set → :class:`OpenAISummarizer` with model ``PIMEM_MODEL``
  (default ``gpt-4.1-mini``), endpoint ``PIMEM_BASE_URL`` (else OpenAI), key from ``PIMEM_API_KEY`` or
  ``OPENAI_API_KEY``;
* otherwise the offline :class:`ExtractiveSummarizer`;

always wrapped in a :class:`CachedSummarizer` (path ``PIMEM_CACHE`` or the default under the user
cache dir).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse

DEFAULT_MODEL = "gpt-4.1-mini"

_LAZY = {
    "ExtractiveSummarizer": "pimem.summarizers.extractive",
    "OpenAISummarizer": "pimem.summarizers.openai_compat",
    "AsyncOpenAISummarizer": "pimem.summarizers.openai_compat",
    "LocalModelSummarizer": "pimem.summarizers.local",
    "local_summarizer": "pimem.summarizers.local",
    "CachedSummarizer": "pimem.summarizers.cached",
    "CacheCorruptError": "pimem.summarizers.cached",
    "RecordedSummarizer": "pimem.summarizers.recorded",
    "NoRecordingError": "pimem.summarizers.recorded",
    "EmptyTemplateSummarizer": "pimem.summarizers.baselines",
    "FactDumpSummarizer": "pimem.summarizers.baselines",
    "HeadTruncationSummarizer": "pimem.summarizers.baselines",
    "TailTruncationSummarizer": "pimem.summarizers.baselines",
    "baseline_summarizers": "pimem.summarizers.baselines",
    "BASELINES": "pimem.summarizers.baselines",
}

__all__ = ["Summarizer", "SummaryRequest", "SummaryResponse", "summarizer_from_env", "DEFAULT_MODEL", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pimem.summarizers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def summarizer_from_env(cache_path: str | os.PathLike[str] | None = None, **openai_kwargs: Any) -> Any:
    """The summarizer the environment asks for, wrapped in the on-disk cache (see module docstring)."""
    from pimem.summarizers.cached import CachedSummarizer

    base_url = os.environ.get("PIMEM_BASE_URL") or None
    if os.environ.get("OPENAI_API_KEY") or base_url:
        from pimem.summarizers.openai_compat import OpenAISummarizer

        api_key = os.environ.get("PIMEM_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
        inner: Any = OpenAISummarizer(os.environ.get("PIMEM_MODEL") or DEFAULT_MODEL, base_url=base_url,
                                      api_key=api_key, **openai_kwargs)
    else:
        from pimem.summarizers.extractive import ExtractiveSummarizer

        inner = ExtractiveSummarizer()
    path = cache_path if cache_path is not None else (os.environ.get("PIMEM_CACHE") or None)
    return CachedSummarizer(inner, path)
