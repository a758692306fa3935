"""Summarizers: the protocol and its implementations (offline, OpenAI-compatible, the local model of
:mod:`pimem.summarizers.local_server`, cached, recorded, and the degenerate baselines of :mod:`pimem.summarizers.baselines`).

``summarizer_from_env()`` (:mod:`~pimem.summarizers.registry`) picks one from the environment:

* ``OPENAI_API_KEY`` or ``PIMEM_BASE_URL`` set → :class:`OpenAISummarizer` with model ``PIMEM_MODEL``
  (default ``gpt-4.1-mini``), endpoint ``PIMEM_BASE_URL`` (else OpenAI), key from ``PIMEM_API_KEY`` or
  ``OPENAI_API_KEY``;
* otherwise the offline :class:`ExtractiveSummarizer`;

always wrapped in a :class:`CachedSummarizer` (path ``PIMEM_CACHE`` or the default under the user
cache dir). The model client's limits come from ``PIMEM_TIMEOUT`` (seconds without data),
``PIMEM_RETRIES`` and ``PIMEM_DEADLINE`` (seconds for a whole request, or ``none``) when set;
keyword arguments override them.
"""

from __future__ import annotations

import importlib
from typing import Any

from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse

_LAZY = {
    **{name: "pimem.summarizers.registry" for name in (
        "SUMMARIZER_NAMES", "get_summarizer", "summarizer_named", "summarizer_names", "summarizer_from_env")},
    **{name: "pimem.summarizers.options" for name in (
        "DEFAULT_MODEL", "DEFAULT_TIMEOUT", "DEFAULT_RETRIES", "DEFAULT_DEADLINE", "DEFAULT_MAX_RESPONSE_BYTES",
        "ENV_TIMEOUT", "ENV_RETRIES", "ENV_DEADLINE", "client_options_from_env", "parse_seconds", "parse_deadline",
        "parse_retries")},
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

__all__ = ["Summarizer", "SummaryRequest", "SummaryResponse", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pimem.summarizers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
