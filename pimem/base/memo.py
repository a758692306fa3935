"""Memos of pure look-ups over texts, forgotten together.

The measures and the extractive summarizer read the same messages, lines and summaries again and
again: across the compactions of a replay and the replays of one session under other settings.
Their look-ups memoise answers per text (:func:`memoised`, or a memo of its own registered with
:func:`on_forget`). What one session's texts fill them with is rarely met again in another
session's, but it stays until pushed out: in a sweep of hundreds of sessions a process held over a
gigabyte of old answers, and its runs grew slower as the heap grew (a tenth slower after a hundred
sessions). :func:`forget_memos` empties every one of them at once; a sweep's process calls it when
it moves on to another session. Forgetting changes no answer, only what is computed again.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["memoised", "on_forget", "forget_memos"]

F = TypeVar("F", bound=Callable[..., Any])

_FORGET: list[Callable[[], None]] = []
_LOCK = threading.Lock()


def memoised(maxsize: int) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)`` of a pure function, emptied by :func:`forget_memos`."""

    def wrap(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        on_forget(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return wrap


def on_forget(clear: Callable[[], None]) -> None:
    """Have :func:`forget_memos` call ``clear`` (a memo kept in a dict or object of its own)."""
    with _LOCK:
        _FORGET.append(clear)


def forget_memos() -> None:
    """Empty every registered memo (no answer changes; the next look-ups compute theirs again)."""
    with _LOCK:
        clears = list(_FORGET)
    for clear in clears:
        clear()
