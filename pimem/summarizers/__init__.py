"""Summarizers: the protocol and its implementations (offline, OpenAI-compatible, the local model of
:mod:`pimem.summarizers.local_server`, cached, recorded, and the degenerate baselines of :mod:`pimem.summarizers.baselines`).

``summarizer_from_env()`` picks one from the environment:

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
import os
from collections.abc import Mapping
from typing import Any

from pimem.errors import ConfigurationError

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

__all__ = ["Summarizer", "SummaryRequest", "SummaryResponse", "summarizer_from_env", "summarizer_named",
           "client_options_from_env", "SUMMARIZER_NAMES", "DEFAULT_MODEL", *_LAZY]

# names a sweep grid or the command line can give for a summarizer
SUMMARIZER_NAMES = ("extractive", "recorded", "env", "empty-template", "fact-dump", "head-truncation",
                    "tail-truncation")

# Limits of the OpenAI-compatible client (see pimem.summarizers.openai_compat); here, so that the
# command line can state and parse them without importing the client.
DEFAULT_TIMEOUT = 120.0
DEFAULT_RETRIES = 4
DEFAULT_DEADLINE = 600.0
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
ENV_TIMEOUT, ENV_RETRIES, ENV_DEADLINE = "PIMEM_TIMEOUT", "PIMEM_RETRIES", "PIMEM_DEADLINE"


def client_options_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``timeout``, ``max_retries`` and ``deadline`` from ``PIMEM_TIMEOUT``, ``PIMEM_RETRIES`` and
    ``PIMEM_DEADLINE`` (only those set); :class:`ConfigurationError` naming a variable that is not a number."""
    env = os.environ if env is None else env
    options: dict[str, Any] = {}
    for name, key, parse in ((ENV_TIMEOUT, "timeout", parse_seconds), (ENV_RETRIES, "max_retries", parse_retries),
                             (ENV_DEADLINE, "deadline", parse_deadline)):
        value = env.get(name)
        if value:
            try:
                options[key] = parse(value)
            except ValueError as exc:
                raise ConfigurationError(f"{name}={value!r}: {exc}") from None
    return options


def parse_seconds(text: str) -> float:
    """A positive number of seconds (``ValueError`` otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"expected a positive number of seconds, got {text!r}")
    return value


def parse_deadline(text: str) -> float | None:
    """A positive number of seconds, or ``none``/``off`` for no deadline."""
    return None if text.strip().lower() in ("none", "off") else parse_seconds(text)


def parse_retries(text: str) -> int:
    """A non-negative whole number of retries."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a whole number of retries, got {text!r}") from None
    if value < 0:
        raise ValueError(f"expected a non-negative number of retries, got {text!r}")
    return value



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

        # Key and URL credentials are read from the environment, so a pickled summarizer carries neither.
        inner: Any = OpenAISummarizer(os.environ.get("PIMEM_MODEL") or DEFAULT_MODEL, base_url=base_url,
                                      key_env=("PIMEM_API_KEY", "OPENAI_API_KEY"), url_env=("PIMEM_BASE_URL", "OPENAI_BASE_URL"),
                                      **openai_kwargs)
    else:
        from pimem.summarizers.extractive import ExtractiveSummarizer

        inner = ExtractiveSummarizer()
    path = cache_path if cache_path is not None else (os.environ.get("PIMEM_CACHE") or None)
    return CachedSummarizer(inner, path)


def summarizer_named(name: str, session: Any = None) -> Any:
    """A summarizer by name (:data:`SUMMARIZER_NAMES`): ``extractive`` (offline), ``recorded`` (the
    summaries ``session`` holds), ``env`` (:func:`summarizer_from_env`), or a degenerate baseline
    (``empty-template``, ``fact-dump``, ``head-truncation``, ``tail-truncation``)."""
    from pimem.errors import ConfigurationError

    if name == "extractive":
        from pimem.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "recorded":
        if session is None:
            raise ConfigurationError("the recorded summarizer needs the session it replays")
        from pimem.summarizers.recorded import RecordedSummarizer

        return RecordedSummarizer(session)
    if name == "env":
        return summarizer_from_env()
    from pimem.summarizers.baselines import BASELINES

    cls = BASELINES.get(name.replace("-", " "))
    if cls is None:
        raise ConfigurationError(f"unknown summarizer {name!r}; known: {', '.join(SUMMARIZER_NAMES)}")
    return cls()
