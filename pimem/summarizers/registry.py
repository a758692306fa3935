"""Summarizers by name, as compaction strategies are (:mod:`pimem.replays.strategies.base`): sweep
grids, the command line and the study name a summarizer and :func:`get_summarizer` builds it.

=================== ===================================================================================
``extractive``      the offline :class:`~pimem.summarizers.extractive.ExtractiveSummarizer` (the default,
                    :func:`default_summarizer`)
``recorded``        the summaries the replayed session holds (needs ``session``)
``env``             :func:`summarizer_from_env`: the model the environment names, behind the cache
``openai``          :class:`~pimem.summarizers.openai_compat.OpenAISummarizer` for ``model``, behind the cache
``local``           the local model server (:func:`pimem.summarizers.local.local_summarizer`)
``empty-template``, the degenerate baselines of :mod:`pimem.summarizers.baselines`
``fact-dump``, …
=================== ===================================================================================

:func:`register_summarizer` adds a name.
"""

from __future__ import annotations

import os
from typing import Any, Callable, cast

from pimem.core.llm import Summarizer
from pimem.errors import ConfigurationError
from pimem.summarizers.baselines import BASELINES
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer
from pimem.summarizers.options import DEFAULT_MODEL
from pimem.summarizers.recorded import RecordedSummarizer

__all__ = ["SUMMARIZER_NAMES", "default_summarizer", "get_summarizer", "register_summarizer", "summarizer_named",
           "summarizer_names", "summarizer_from_env"]

# A factory takes keyword arguments: ``session`` (the session being replayed), ``model`` (a model name)
# and ``client`` (the model client's options: timeout, max_retries, deadline); each uses what it needs.
SummarizerFactory = Callable[..., Summarizer]
_REGISTRY: dict[str, SummarizerFactory] = {}


def register_summarizer(name: str, factory: SummarizerFactory | None = None) -> Any:
    """Register ``factory`` under ``name`` (a decorator, or called directly); a taken name is an error."""

    def add(f: SummarizerFactory) -> SummarizerFactory:
        if _REGISTRY.get(name, f) is not f:
            raise ConfigurationError(f"summarizer {name!r} is already registered")
        _REGISTRY[name] = f
        return f

    return add(factory) if factory is not None else add


def summarizer_names() -> list[str]:
    """The registered names, the offline default first."""
    return list(_REGISTRY)


def default_summarizer() -> Summarizer:
    """The summarizer used when none is given: the offline extractive one."""
    return ExtractiveSummarizer()


def summarizer_from_env(cache_path: str | os.PathLike[str] | None = None, **openai_kwargs: Any) -> Summarizer:
    """The summarizer the environment asks for, wrapped in the on-disk cache (rules in :mod:`pimem.summarizers`).

    Args:
        cache_path: the cache file (default: ``$PIMEM_CACHE``, else the default cache).
        openai_kwargs: options for the model client (``timeout``, ``max_retries``, …).
    """
    base_url = os.environ.get("PIMEM_BASE_URL") or None
    if os.environ.get("OPENAI_API_KEY") or base_url:
        from pimem.summarizers.openai_compat import OpenAISummarizer  # the openai client, only when asked

        # Key and URL credentials are read from the environment, so a pickled summarizer carries neither.
        inner: Any = OpenAISummarizer(os.environ.get("PIMEM_MODEL") or DEFAULT_MODEL, base_url=base_url,
                                      key_env=("PIMEM_API_KEY", "OPENAI_API_KEY"),
                                      url_env=("PIMEM_BASE_URL", "OPENAI_BASE_URL"), **openai_kwargs)
    else:
        inner = default_summarizer()
    path = cache_path if cache_path is not None else (os.environ.get("PIMEM_CACHE") or None)
    return CachedSummarizer(inner, path)


def get_summarizer(name: str, session: Any = None, *, model: str | None = None,
                   client: dict[str, Any] | None = None) -> Summarizer:
    """The summarizer registered as ``name`` (:func:`summarizer_names`).

    Args:
        name: a registered name (module docs).
        session: the session being replayed (``recorded`` reads its summaries).
        model: the model name (``openai``).
        client: the model client's options (``timeout``, ``max_retries``, ``deadline``).

    Unknown names, and names missing what they need, are :class:`~pimem.errors.ConfigurationError` s.
    """
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigurationError(f"unknown summarizer {name!r}; known: {', '.join(_REGISTRY)}")
    return factory(session=session, model=model, client=dict(client or {}))


summarizer_named = get_summarizer  # the former name


@register_summarizer("extractive")
def _extractive(**_: Any) -> Summarizer:
    return default_summarizer()


@register_summarizer("recorded")
def _recorded(*, session: Any = None, **_: Any) -> Summarizer:
    if session is None:
        raise ConfigurationError("the recorded summarizer needs the session it replays")
    return RecordedSummarizer(session)


@register_summarizer("env")
def _env(*, client: dict[str, Any], **_: Any) -> Summarizer:
    return summarizer_from_env(**client)


@register_summarizer("openai")
def _openai(*, model: str | None = None, client: dict[str, Any], **_: Any) -> Summarizer:
    if not model:
        raise ConfigurationError("the openai summarizer needs a model")
    from pimem.summarizers.openai_compat import OpenAISummarizer  # the openai client, only when asked

    return CachedSummarizer(OpenAISummarizer(model, **client))


@register_summarizer("local")
def _local(**_: Any) -> Summarizer:
    from pimem.summarizers.local import local_summarizer  # the openai client, only when asked

    return cast(Summarizer, local_summarizer())


def _baseline(display_name: str) -> SummarizerFactory:
    def make(**_: Any) -> Summarizer:
        return cast(Summarizer, BASELINES[display_name]())

    return make


for _display in BASELINES:
    register_summarizer(_display.replace(" ", "-"), _baseline(_display))

# names a sweep grid can give: those that need no model name or server
SUMMARIZER_NAMES = tuple(n for n in _REGISTRY if n not in ("openai", "local"))
