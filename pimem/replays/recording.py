"""What the recording says: usage totals of a recorded message, its tool calls and timestamp, the
recording's own projection along its path, and the token calibration fitted over it."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import operator
import threading
from typing import Any, Iterator, Sequence

from pimem.base.js import parse_iso_ms
from pimem.base.memo import on_forget
from pimem.core.compaction.compaction import calculate_context_tokens, get_assistant_usage
from pimem.core.incremental.caches import TokenCache
from pimem.core.incremental.tracker import ContextTracker
from pimem.replays.calibration import Calibration, fit_calibration

__all__ = ["usage_tokens", "input_tokens", "output_tokens", "has_tool_calls", "timestamp_ms", "RecordedPath",
           "calibrate_recording", "walk_recording", "recording_token_cache", "shared_recordings", "recordings_shared",
           "forget_recordings", "recorded_release", "recorded_agent"]


def usage_tokens(message: dict) -> float:
    """Pi's ``calculateContextTokens`` of a message's recorded usage (0 without usage)."""
    usage = message.get("usage")
    return calculate_context_tokens(usage) if usage else 0


def input_tokens(message: dict) -> float:
    """The request as the provider counted it: ``input + cacheRead + cacheWrite`` (NaN if not numbers)."""
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return 0
    a, b, c = usage.get("input") or 0, usage.get("cacheRead") or 0, usage.get("cacheWrite") or 0
    if type(a) not in (int, float) or type(b) not in (int, float) or type(c) not in (int, float):
        return float("nan")
    return a + b + c


def output_tokens(message: dict) -> float:
    """The recorded output tokens (0 when missing or not a number)."""
    usage = message.get("usage")
    value = usage.get("output") if isinstance(usage, dict) else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def has_tool_calls(message: dict) -> bool:
    """Whether an assistant message asks for tools (its run goes on)."""
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "toolCall" for b in content)


def timestamp_ms(value: Any) -> float | None:
    """A message's numeric timestamp, or an entry's ISO one in ms (None when neither)."""
    if isinstance(value, (int, float)):
        return value
    return parse_iso_ms(value) if isinstance(value, str) else None


class _RecordingTracker(ContextTracker):
    """A tracker of the recording's own projection (the path's root may name a lost parent)."""

    def append(self, entry: dict) -> None:
        if self.path:
            super().append(entry)
        else:
            self.reset([entry])


class RecordedPath:
    """The recording's own context along its path, step by step, as the calibrated source reads it.

    ``usage_free_estimate()`` is Pi's usage-free estimate of the recorded entries before the
    current step (:func:`walk_recording`, read at assistant steps); ``append(entry)`` moves on
    to the next step. The walk is made once, before the replay, so the replay keeps no second
    projection of the recording.
    """

    __slots__ = ("_estimates", "_step", "_compacted_at")

    def __init__(self, estimates: Sequence[float] = ()) -> None:
        self._estimates = estimates
        self._step = 0
        self._compacted_at = -1

    def append(self, entry: dict) -> None:
        if entry.get("type") == "compaction":
            self._compacted_at = self._step
        self._step += 1

    @property
    def step(self) -> int:
        """The index on the path of the entry being replayed."""
        return self._step

    @property
    def compacted_at(self) -> int:
        """The step of the recording's latest compaction so far (-1: none yet)."""
        return self._compacted_at

    def usage_free_estimate(self) -> float:
        if self._step >= len(self._estimates):
            raise IndexError(f"no recorded estimate at step {self._step} (the recording was not walked)")
        return self._estimates[self._step]


class _Walk:
    """What a process keeps of one recorded path across its replays (:func:`walk_recording`)."""

    __slots__ = ("path", "cache", "result")

    def __init__(self, path: Sequence[dict], cache: TokenCache) -> None:
        self.path = list(path)  # holds the entries, so that their ids are not reused while kept
        self.cache = cache
        self.result: tuple[list[float], Calibration] | None = None


_WALKS: "collections.OrderedDict[tuple[int, int, int], _Walk]" = collections.OrderedDict()
_MAX_WALKS = 4
_WALKS_LOCK = threading.Lock()


_SHARING: contextvars.ContextVar[bool] = contextvars.ContextVar("pimem_shared_recordings", default=False)


@contextlib.contextmanager
def shared_recordings() -> Iterator[None]:
    """Within this block, replays of the same recorded path (the same entry objects in the same
    order) share its walk and per-message estimates, and their measures share the later trajectory
    of the same message objects and the answers for compactions cut at the same places
    (:mod:`pimem.drift.needed`): a sweep replays one session under many settings. Outside it every
    replay walks its recording afresh, so that a message edited in place between two replays is
    estimated again. Entries must not change inside the block."""
    token = _SHARING.set(True)
    try:
        yield
    finally:
        _SHARING.reset(token)


def recordings_shared() -> bool:
    """Whether this code runs inside :func:`shared_recordings` (entries and messages do not change)."""
    return _SHARING.get()


def _walk_of(path: Sequence[dict], cache: TokenCache | None = None) -> _Walk:
    """The kept walk of ``path`` (the same entry objects in the same order), made when missing;
    a fresh one, not kept, outside :func:`shared_recordings`."""
    if not _SHARING.get():
        return _Walk(path, cache if cache is not None else TokenCache())
    key = (len(path), id(path[0]), id(path[-1])) if path else (0, 0, 0)
    with _WALKS_LOCK:  # the threads of one worker may replay at once
        walk = _WALKS.get(key)
        if walk is not None and all(map(operator.is_, walk.path, path)):
            _WALKS.move_to_end(key)
            return walk
        walk = _Walk(path, cache if cache is not None else TokenCache())
        _WALKS[key] = walk
        while len(_WALKS) > _MAX_WALKS:
            _WALKS.popitem(last=False)
        return walk


def forget_recordings() -> None:
    """Drop the kept walks and estimates (the next replay of any path walks it again)."""
    with _WALKS_LOCK:
        _WALKS.clear()


on_forget(forget_recordings)


def recording_token_cache(path: Sequence[dict]) -> TokenCache:
    """The per-message estimates of ``path``'s replays, shared by the replays of one path within
    :func:`shared_recordings` (a sweep replays one session under many settings), fresh otherwise."""
    return _walk_of(path).cache


def walk_recording(path: Sequence[dict], cache: TokenCache | None = None) -> tuple[list[float], Calibration]:
    """One walk of the recording: the usage-free estimate of the recorded context before each
    assistant step (NaN at the other steps) and the calibration fitted over them
    (``recorded_input ≈ overhead + r · E_rec``, :mod:`pimem.replays.calibration`). Within
    :func:`shared_recordings`, made once per path and kept (for the last few paths)."""
    walk = _walk_of(path, cache)
    if walk.result is None:
        walk.result = _walk(path, cache if cache is not None else walk.cache)
    return walk.result


# Entry types that add no message to the projection and leave the other entries' messages as they are.
_PROJECTED_TYPES = frozenset(("message", "custom_message", "branch_summary", "compaction", "context_edit"))
# Roles whose message Pi projects as a copy when it has no content.
_REBUILT_ROLES = frozenset(("user", "assistant", "toolResult"))


def _plain_prefix(path: Sequence[dict]) -> int:
    """How many leading entries of ``path`` form a chain (distinct string ids, each the child of the
    one before, the root's parent not among them) in which every entry either adds its own
    non-system message object to the projection, as it is, or adds no message at all. Along such a
    prefix the projection is every message in order, and Pi's usage-free estimate is their sum."""
    ids: set[str] = set()
    previous: Any = None
    for i, entry in enumerate(path):
        eid = entry.get("id")
        if eid.__class__ is not str or not eid or eid in ids or (i and entry.get("parentId") != previous):
            return i
        etype = entry.get("type")
        if etype in _PROJECTED_TYPES:  # only a message entry, holding its own message as it is
            message = entry.get("message")
            if etype != "message" or not isinstance(message, dict):
                return i
            role = message.get("role")
            if role == "system" or (role in _REBUILT_ROLES and message.get("content") is None):
                return i
        ids.add(eid)
        previous = eid
    if path and path[0].get("parentId") in ids:
        return 0
    return len(path)


def _walk(path: Sequence[dict], cache: TokenCache) -> tuple[list[float], Calibration]:
    estimates: list[float] = []
    xs: list[float] = []
    ys: list[float] = []
    nan = float("nan")

    def assistant_step(message: dict, estimate: float) -> None:
        estimates.append(estimate)
        if get_assistant_usage(message) is not None:
            xs.append(estimate)
            ys.append(input_tokens(message))

    # Along the plain prefix the estimate is a running sum (no tracker needed); from its end on
    # the tracker, started from the prefix, walks the rest.
    plain = _plain_prefix(path)
    est = cache.estimate
    running = 0
    for entry in itertools.islice(path, plain):
        if entry.get("type") != "message":
            estimates.append(nan)
            continue
        message = entry["message"]
        if message.get("role") == "assistant":
            assistant_step(message, running)
        else:
            estimates.append(nan)
        running += est(message)
    if plain < len(path):
        recorded = _RecordingTracker(path[:plain], cache=cache)
        for entry in itertools.islice(path, plain, None):
            if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
                assistant_step(entry["message"], recorded.usage_free_estimate())
            else:
                estimates.append(nan)
            recorded.append(entry)
    return estimates, fit_calibration(xs, ys)


def calibrate_recording(path: Sequence[dict], cache: TokenCache | None = None) -> Calibration:
    """The recording's ``recorded_input ≈ overhead + r · E_rec`` (see :mod:`pimem.replays.calibration`)."""
    return walk_recording(path, cache)[1]


def recorded_release(path: Sequence[dict]) -> str | None:
    """The compaction strategy of the Pi release that wrote the compactions on ``path``, when it shows.

    Pi 0.87.1 (and 1.6.0) write ``details`` (the file lists) in every compaction entry; Pi 0.13.2
    wrote none, and its "context checkpoint" prompt makes summaries that open with
    ``# Context Checkpoint``. Returns ``"pi-0.13.2"`` for compactions of that kind, None when the
    path has no compaction or they are the current release's (or cannot be told apart).
    """
    compactions = [e for e in path if e.get("type") == "compaction"]
    if not compactions or any("details" in e or "fromHook" in e for e in compactions):
        return None
    if all(str(e.get("summary") or "").lstrip().startswith("# Context Checkpoint") for e in compactions):
        return "pi-0.13.2"
    return None


def recorded_agent(path: Sequence[dict]) -> str:
    """The agent that wrote the recording: ``"claude-code"`` or ``"codex"`` for an imported transcript
    (its entries name the format they came from), else ``"pi"``."""
    for entry in path[:1]:
        source = entry.get("source")
        if isinstance(source, dict) and source.get("format") in ("claude-code", "codex"):
            return str(source["format"])
    return "pi"
