"""The cyclic garbage collector, paused for a stretch of work that allocates many objects.

CPython's collector runs a young collection every 700 net container allocations and a full one
every hundred of those (while the heap grows by a quarter), and a full collection reads every
object alive. A load builds millions of objects that all stay alive; a replay with its measures
allocates millions of small tuples, lists and dicts while the memos of the runs before it hold
millions more, and reference counting frees almost all of what it drops. In a sweep the collector
took 5-10% of a run's CPU time, more as the memos filled.

The context manager nests and may be entered from several threads at once: the first to enter
pauses the collector, the last to leave restores what it found.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_LOCK = threading.Lock()
_paused = 0
_was_enabled = True


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector while entered: for building many objects that all stay alive (a load:
    about 2x faster), or for work whose garbage reference counting frees (the runs of a sweep)."""
    global _paused, _was_enabled
    with _LOCK:
        if not _paused:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _LOCK:
            _paused -= 1
            if not _paused and _was_enabled:
                gc.enable()
