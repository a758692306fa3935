"""Summarizers by name, for sweep grids, the command line and the study: :func:`get_summarizer`,
:func:`summarizer_names`, and :func:`summarizer_from_env` (the model the environment asks for)."""

from __future__ import annotations

import os
from typing import Any, cast

from pimem.core.llm import Summarizer
from pimem.errors import ConfigurationError
from pimem.summarizers.baselines import BASELINES
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer
from pimem.summarizers.options import DEFAULT_MODEL
from pimem.summarizers.recorded import RecordedSummarizer

__all__ = ["SUMMARIZER_NAMES", "get_summarizer", "summarizer_named", "summarizer_names", "summarizer_from_env"]

# names a sweep grid or the command line can give for a summarizer
SUMMARIZER_NAMES = ("extractive", "recorded", "env", "empty-template", "fact-dump", "head-truncation",
                    "tail-truncation")


def summarizer_names() -> list[str]:
    """The names :func:`get_summarizer` knows, the offline default first."""
    return list(SUMMARIZER_NAMES)


def summarizer_from_env(cache_path: str | os.PathLike[str] | None = None, **openai_kwargs: Any) -> Summarizer:
    """The summarizer the environment asks for, wrapped in the on-disk cache (rules in :mod:`pimem.summarizers`)."""
    base_url = os.environ.get("PIMEM_BASE_URL") or None
    if os.environ.get("OPENAI_API_KEY") or base_url:
        from pimem.summarizers.openai_compat import OpenAISummarizer  # the openai client, only when asked

        # Key and URL credentials are read from the environment, so a pickled summarizer carries neither.
        inner: Any = OpenAISummarizer(os.environ.get("PIMEM_MODEL") or DEFAULT_MODEL, base_url=base_url,
                                      key_env=("PIMEM_API_KEY", "OPENAI_API_KEY"),
                                      url_env=("PIMEM_BASE_URL", "OPENAI_BASE_URL"), **openai_kwargs)
    else:
        inner = ExtractiveSummarizer()
    path = cache_path if cache_path is not None else (os.environ.get("PIMEM_CACHE") or None)
    return CachedSummarizer(inner, path)


def get_summarizer(name: str, session: Any = None) -> Summarizer:
    """A summarizer by name (:func:`summarizer_names`): ``extractive`` (offline), ``recorded`` (the
    summaries ``session`` holds), ``env`` (:func:`summarizer_from_env`), or a degenerate baseline
    (``empty-template``, ``fact-dump``, ``head-truncation``, ``tail-truncation``)."""
    if name == "extractive":
        return ExtractiveSummarizer()
    if name == "recorded":
        if session is None:
            raise ConfigurationError("the recorded summarizer needs the session it replays")
        return RecordedSummarizer(session)
    if name == "env":
        return summarizer_from_env()
    cls = BASELINES.get(name.replace("-", " "))
    if cls is None:
        raise ConfigurationError(f"unknown summarizer {name!r}; known: {', '.join(SUMMARIZER_NAMES)}")
    return cast(Summarizer, cls())


summarizer_named = get_summarizer  # the former name
