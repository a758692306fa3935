"""Token sources: what a replay's checks read and what size its requests are.

Recorded usage in replayed assistant messages stays as recorded, but after the replay compacted
differently from the recording it describes a context the replay never sent. A token source
decides how the replay counts instead (``docs/replay.md``, "Token sources"):

* :class:`EstimateTokens` (``"estimate"``): Pi's literal arithmetic on the replayed file, recorded
  usage included. After a replayed compaction that usage describes the *uncompacted* recording's
  requests (stale): it is what Pi itself would compute on that file, the differential-testing mode
  (``tests/replays/test_replay_loop_oracle.py``), not a model of the replayed request.
* :class:`CalibratedTokens` (``"calibrated"``, the default): Pi's formulas with each assistant's
  usage replaced by a simulated usage of the replayed request (:mod:`pimem.replays.calibration`);
  after a compaction the replay made in a Claude Code recording, :class:`AfterCompaction` (what
  Claude Code re-attaches included).
* :class:`CharsTokens` (``"chars"``): chars/4 of the replayed projected context plus what every
  request carries that no estimate sees (the calibration's overhead: system prompt and tools), no usage.
* :class:`TiktokenTokens` (``"tiktoken"``): cl100k_base counts of the projected messages plus that
  overhead.

How well each predicts what the provider counted right after a real compaction, out of sample:
:mod:`pimem.replays.validation`.

A replay makes one instance per run (:func:`make_token_source`); the calibrated one holds the fit
and the simulated usage of every replayed call.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import statistics
from typing import Any, Callable, ClassVar, Iterator, Literal, Sequence

from pimem.core.compaction.compaction import get_assistant_usage
from pimem.core.incremental.caches import TokenCache
from pimem.core.incremental.tracker import ContextTracker
from pimem.errors import ConfigurationError
from pimem.replays.calibration import MAX_PLAUSIBLE_OVERHEAD, SLOPE_RANGE, Calibration, fit_calibration
from pimem.replays.reattach import Reattacher
from pimem.replays.recording import (RecordedPath, input_tokens, output_tokens, recorded_agent, usage_tokens,
                                     walk_recording)
from pimem.text.tokenizers import TiktokenCounter

__all__ = ["modelled_sizes_scaled", "partial_recording", "anchored_model", "RECENT_REQUESTS", "AfterCompaction",
           "IMPLAUSIBLE_FIRST_EXCESS", "TokenSource", "EstimateTokens", "CalibratedTokens", "CharsTokens", "TiktokenTokens", "TOKEN_SOURCES",
           "TokenSourceName", "get_token_source", "make_token_source"]

TokenSourceName = Literal["estimate", "calibrated", "chars", "tiktoken"]


# No agent's per-request overhead comes near this (Pi 2-3k, Claude Code 25-50k tokens): a first
# request that much above its estimate carries context the file does not hold.
IMPLAUSIBLE_FIRST_EXCESS = 80_000

_MODELLED_SCALE: contextvars.ContextVar[float] = contextvars.ContextVar("pimem_modelled_scale", default=1.0)


@contextlib.contextmanager
def modelled_sizes_scaled(scale: float) -> Iterator[None]:
    """Within this block calibrated replays multiply every request size they model (a request whose
    context differs from the recording's) by ``scale``: a replay under a validated error
    (:func:`pimem.replays.validation.replay_intervals`)."""
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ConfigurationError(f"scale must be a positive finite number, not {scale!r}")
    token = _MODELLED_SCALE.set(float(scale))
    try:
        yield
    finally:
        _MODELLED_SCALE.reset(token)


class TokenSource:
    """How a replay counts: the base reads Pi's formulas with the recorded usage (``"estimate"``).

    ``rec`` is the recording's own context along the path (:class:`RecordedPath`), ``rep`` the replay's
    (a :class:`~pimem.core.incremental.tracker.ContextTracker`), both at the entry being replayed.
    """

    name: ClassVar[str] = "estimate"
    #: Whether the summary carries the calibration's fit.
    calibrated: ClassVar[bool] = False
    #: Whether ``agent_end``/``before_prompt`` also detect a ``stop`` response whose recorded usage
    #: exceeds the window (Pi's silent overflow). Only the recorded usage can say so.
    silent_overflow: ClassVar[bool] = True

    def __init__(self) -> None:
        self.calibration = Calibration()
        self.floored_calls = 0

    def start(self, path: Sequence[dict], cache: TokenCache) -> None:
        """Prepare for a replay of ``path`` (the calibrated source fits its calibration here)."""

    def recording(self) -> RecordedPath:
        """The recording's context along the path, as this source reads it (the base reads none)."""
        return RecordedPath()

    def counter(self) -> Any:
        """The per-message counter the replay's tracker keeps a total of (None: none)."""
        return None

    @property
    def overhead(self) -> float:
        """Tokens every request carries that no estimate sees (the calibration's overhead)."""
        return 0.0

    def warning(self) -> str | None:
        """Why this source's counts should not be trusted for this recording, or None."""
        return None

    def usage(self, message: dict) -> float:
        """The usage total Pi's formulas read for ``message``."""
        return usage_tokens(message)

    def record_call(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> None:
        """Note the replayed call of ``message`` before it is appended (its usage as the replay sees it)."""

    def next_turn_tokens(self, rep: ContextTracker) -> float:
        """What the ``next_turn`` check reads: ``estimateProjectedContextTokens``."""
        return rep.context_estimate(self.usage).tokens

    def check_tokens(self, rep: ContextTracker, message: dict,
                     predates: Callable[[dict], bool]) -> tuple[float, str | None]:
        """What ``agent_end``/``before_prompt`` read after ``message``, and why the check gives up (or None).

        Pi's ``_checkCompaction``: with a ``context_edit`` in the projection,
        ``estimateProjectedContextTokens``; for an errored or zero-usage message,
        ``estimateContextTokens`` (giving up when its usage predates the latest compaction:
        ``predates(message)``); otherwise the message's own usage.
        """
        if rep.has_context_edit:
            return rep.context_estimate(self.usage).tokens, None
        direct = self.usage(message) if message.get("usage") else 0
        if message.get("stopReason") == "error" or not direct:
            tokens = rep.context_usage_estimate(self.usage).tokens
            usage_msg = rep.usage_message()
            if usage_msg is not None and predates(usage_msg):
                return tokens, "usage predates the latest compaction"
            return tokens, None
        return direct, None

    def call_tokens(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> float:
        """The size of the request the recorded response ``message`` answers, in the replayed context."""
        return rep.context_estimate(self.usage).tokens


def partial_recording(path_entries: Sequence[dict]) -> str | None:
    """Why the recorded path does not start at its conversation's start, or None.

    A partial recording (a transcript that starts mid-conversation) sent context the file does not
    hold: its first entry names a parent that is not in the file, or its first request is far larger
    than its estimate (more than :data:`IMPLAUSIBLE_FIRST_EXCESS` tokens above it). The Claude Code
    importer makes a record whose parent is missing a root (with a warning) and marks it
    (``source.parentMissing``), also when the records between are ones it skips.
    """
    if not path_entries:
        return None
    first = path_entries[0]
    source = first.get("source")
    if first.get("parentId") is not None or (isinstance(source, dict) and source.get("parentMissing") is True):
        return "its first entry's parent is not in the file"
    cache = TokenCache()
    estimate = 0.0
    for entry in path_entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant" and get_assistant_usage(message) is not None:
            recorded = input_tokens(message)
            if recorded - estimate > IMPLAUSIBLE_FIRST_EXCESS:
                return (f"its first request counted {recorded:,.0f} tokens for {estimate:,.0f} estimated (more than "
                        f"{IMPLAUSIBLE_FIRST_EXCESS:,} above: context the file does not hold)")
            return None
        estimate += cache.estimate(message)
    return None


def calibrated_walk(path: Sequence[dict], cache: TokenCache) -> tuple[Sequence[float], Calibration]:
    """The recording's estimates and calibration (:func:`~pimem.replays.recording.walk_recording`), the
    fit restricted for a partial recording (:func:`restricted_fit`)."""
    estimates, calibration = walk_recording(path, cache)
    partial = partial_recording(path)
    return estimates, restricted_fit(path, estimates, partial) if partial else calibration


def restricted_fit(path: Sequence[dict], estimates: Sequence[float], partial: str) -> Calibration:
    """The calibration of a partial recording: fitted only on the requests after its first compaction
    (before it every request also carried context the file does not hold); none without one."""
    first = next((i for i, e in enumerate(path) if e.get("type") == "compaction"), len(path))
    xs, ys = [], []
    for i in range(first + 1, len(path)):
        entry = path[i]
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and get_assistant_usage(message) is not None:
            xs.append(estimates[i])
            ys.append(input_tokens(message))
    return dataclasses.replace(fit_calibration(xs, ys), partial=partial)


RECENT_REQUESTS = 10  # the requests before a compaction whose rate :func:`anchored_model` takes


def anchored_model(estimates: Sequence[float], recorded: Sequence[float], slope: float) -> tuple[float, float]:
    """``(overhead, rate)`` of the requests after a compaction, from the requests before it (in order).

    The overhead is what the first request carried beyond ``slope`` times its estimate (it holds
    little else: the system prompt, tools and instructions the session starts with), kept within
    ``[0, last recorded]``; the rate is the median ``(recorded − overhead) / estimate`` of the last
    :data:`RECENT_REQUESTS` requests (the conversion the conversation reached), within
    :data:`~pimem.replays.calibration.SLOPE_RANGE` (0.96 to 2.88 on the 66 real Claude Code compactions).
    """
    if not len(estimates):
        return 0.0, slope
    overhead = min(max(0.0, recorded[0] - slope * estimates[0]), recorded[-1])
    rate = statistics.median((r - overhead) / max(e, 1.0) for e, r in zip(estimates[-RECENT_REQUESTS:],
                                                                         recorded[-RECENT_REQUESTS:]))
    return overhead, min(SLOPE_RANGE[1], max(SLOPE_RANGE[0], rate))


class AfterCompaction:
    """Claude Code's requests after a compaction the replay made where the recording did not.

    After compacting, Claude Code sends the summary, the system prompt and tools it always sends, and
    attaches what the transcript does not show as messages: the 5 files it touched last, each read again
    whole unless above 5,000 tokens, the todo list, the plan file and the skills invoked
    (:class:`~pimem.replays.reattach.Reattacher`). Such a request is sized
    ``overhead + rate · (E_rep + attached)`` (:func:`anchored_model` over the recorded requests before
    the compaction; ``attached`` rebuilt from the recording before it). Out of sample on 64 real Claude
    Code compactions (``anchored+files``, :mod:`pimem.replays.validation`) it has 4.4%, p90 14.7%,
    bias −1.7% (the calibrated shift: 13.0%, −10.6%); converting
    by what the text is (cl100k_base counts, the summary at a rate learnt on the other sessions) or by
    the session's previous compaction does no better by a point of median
    (:func:`~pimem.replays.validation.sources_head_to_head`). Pi attaches nothing: its replays keep the
    calibrated shift.
    """

    def __init__(self, path: Sequence[dict], estimates: Sequence[float], calibration: Calibration) -> None:
        self.path = path
        self.slope = calibration.slope
        start = 0
        if calibration.partial:  # fitted after the first compaction only: so is this
            start = next((i + 1 for i, e in enumerate(path) if e.get("type") == "compaction"), len(path))
        self.requests: list[tuple[int, float, float]] = []
        for step in range(start, len(path)):
            entry = path[step]
            message = entry.get("message") if entry.get("type") == "message" else None
            if isinstance(message, dict) and get_assistant_usage(message) is not None:
                recorded = input_tokens(message)
                if math.isfinite(recorded) and recorded > 0 and estimates[step] > 0:
                    self.requests.append((step, float(estimates[step]), float(recorded)))
        self._models: dict[int, tuple[float, float, float]] = {}
        self._attached = Reattacher(path)

    def model(self, step: int) -> tuple[float, float, float] | None:
        """``(overhead, rate, files)`` for a compaction made at recorded step ``step`` (None: no
        recorded request before it)."""
        if step not in self._models:
            before = [(e, r) for s, e, r in self.requests if s < step]
            if not before:
                return None
            overhead, rate = anchored_model([e for e, _ in before], [r for _, r in before], self.slope)
            self._models[step] = (overhead, rate, self._attached.at(step).tokens())
        return self._models[step]


class EstimateTokens(TokenSource):
    """``"estimate"``: Pi's literal arithmetic on the replayed file, recorded usage included (stale after a
    replayed compaction): the differential-testing mode, no model of the replayed request."""

    name = "estimate"


class CalibratedTokens(TokenSource):
    """``"calibrated"``: Pi's formulas over a simulated usage of each replayed request.

    ``recorded_input(a) + k · (E_rep(a) − E_rec(a))`` plus the recorded output, from a fit over the
    recording (:mod:`pimem.replays.calibration`).
    """

    name = "calibrated"
    calibrated = True
    silent_overflow = False

    def __init__(self) -> None:
        super().__init__()
        self.simulated: dict[int, float] = {}  # id(message) -> simulated usage total
        self.scale = _MODELLED_SCALE.get()
        self.recorded_estimates: Sequence[float] = []  # E_rec before each step of the path
        self.after_compaction: AfterCompaction | None = None
        # id(replayed compaction) -> (it, the recorded step it was first seen at, the recording's latest
        # compaction then, whether the recording compacted in the same gap between two calls)
        self._compacted_at: dict[int, tuple[dict, int, int, bool]] = {}
        self._last_call_step = -1

    def start(self, path: Sequence[dict], cache: TokenCache) -> None:
        self.recorded_estimates, self.calibration = calibrated_walk(path, cache)
        self.after_compaction, self._compacted_at, self._last_call_step = None, {}, -1
        if recorded_agent(path) == "claude-code":
            self.after_compaction = AfterCompaction(path, self.recorded_estimates, self.calibration)

    def _after_replayed_compaction(self, rec: RecordedPath, rep: ContextTracker) -> int | None:
        """The recorded step of the first request after the replay's latest compaction, when the
        recording made none in the same place (between the same two requests) nor since (None otherwise)."""
        compaction = rep.latest_compaction
        last_call, self._last_call_step = self._last_call_step, rec.step
        if compaction is None:
            return None
        seen = self._compacted_at.get(id(compaction))
        if seen is None or seen[0] is not compaction:
            seen = (compaction, rec.step, rec.compacted_at, rec.compacted_at > last_call)
            self._compacted_at[id(compaction)] = seen
        _, step, recorded_then, same_place = seen
        return step if not same_place and rec.compacted_at == recorded_then else None

    def recording(self) -> RecordedPath:
        return RecordedPath(self.recorded_estimates)

    @property
    def overhead(self) -> float:
        return self.calibration.overhead

    def warning(self) -> str | None:
        return self.calibration.warning()

    def usage(self, message: dict) -> float:
        sim = self.simulated.get(id(message))
        return sim if sim is not None else usage_tokens(message)

    def request_size(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> tuple[float, bool]:
        """The one rule for the size of the request ``message`` answers, and whether it was floored.

        The request the recording sent keeps its recorded size. After a compaction the replay made
        where the recording had not, a Claude Code request is sized by :class:`AfterCompaction`
        (what Claude Code re-attaches included). Otherwise a response with recorded input (aborted
        and errored ones included) has it shifted by what the replay changed
        (:meth:`Calibration.simulate`); one without (a refusal, a call that failed before the provider
        counted it) gets the fit's own model of the request, never below the overhead.
        """
        compacted = self._after_replayed_compaction(rec, rep) if self.after_compaction is not None else None
        recorded = input_tokens(message)
        e_rep = rep.usage_free_estimate()
        e_rec = rec.usage_free_estimate() if recorded > 0 else math.nan
        if e_rep == e_rec:
            return self.calibration.simulate(recorded, e_rec, e_rep)
        model = self.after_compaction.model(compacted) if self.after_compaction and compacted is not None else None
        if model is not None:
            overhead, rate, files = model
            return (overhead + rate * (e_rep + files)) * self.scale, False
        if recorded > 0:
            size, floored = self.calibration.simulate(recorded, e_rec, e_rep)
        else:
            size, floored = self.calibration.overhead + self.calibration.slope * e_rep, False
        return size * self.scale, floored

    def record_call(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> None:
        # the usage every later check reads for this response: its request as the call row sizes it,
        # plus what it wrote; a response without recorded usage keeps none (Pi's checks then estimate)
        if not usage_tokens(message):
            return
        size, floored = self.request_size(message, rec, rep)
        self.floored_calls += floored
        written = usage_tokens(message) - input_tokens(message)
        self.simulated[id(message)] = (written if math.isfinite(written) else output_tokens(message)) + size

    def call_tokens(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> float:
        return self.request_size(message, rec, rep)[0]


class CharsTokens(TokenSource):
    """``"chars"``: the overhead every request carries plus chars/4 over the replayed projected
    context, no usage at all. The overhead is the calibration's (fitted over the recording; 0 when
    it cannot be fitted, with its warning)."""

    name = "chars"
    silent_overflow = False
    _overhead = 0.0

    def start(self, path: Sequence[dict], cache: TokenCache) -> None:
        self.calibration = calibrated_walk(path, cache)[1]
        plausible = self.calibration.overhead <= MAX_PLAUSIBLE_OVERHEAD
        self._overhead = self.calibration.overhead if plausible else 0.0

    @property
    def overhead(self) -> float:
        return self._overhead

    def warning(self) -> str | None:
        problem = self.calibration.warning()
        if problem and self._overhead != self.calibration.overhead:
            problem += f"; {self.name} counts no overhead"
        return problem

    def count(self, rep: ContextTracker) -> float:
        """The replayed context's size by this source."""
        return self._overhead + rep.usage_free_estimate()

    def next_turn_tokens(self, rep: ContextTracker) -> float:
        return self.count(rep)

    def check_tokens(self, rep: ContextTracker, message: dict,
                     predates: Callable[[dict], bool]) -> tuple[float, str | None]:
        return self.count(rep), None

    def call_tokens(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> float:
        return self.count(rep)


class TiktokenTokens(CharsTokens):
    """``"tiktoken"``: cl100k_base counts of each projected message's text (images 1200), cached per message."""

    name = "tiktoken"

    def counter(self) -> Any:
        return TiktokenCounter()

    def count(self, rep: ContextTracker) -> float:
        return self._overhead + rep.counted_total


_SOURCES: dict[str, type[TokenSource]] = {cls.name: cls for cls in (EstimateTokens, CalibratedTokens, CharsTokens,
                                                                      TiktokenTokens)}
TOKEN_SOURCES = tuple(_SOURCES)


def get_token_source(name: str) -> type[TokenSource]:
    """The token-source class named ``name`` (one of :data:`TOKEN_SOURCES`)."""
    cls = _SOURCES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ConfigurationError(f"token_source must be one of {TOKEN_SOURCES}, not {name!r}")
    return cls


def make_token_source(name: str) -> TokenSource:
    """A fresh token source named ``name`` for one replay."""
    return get_token_source(name)()

