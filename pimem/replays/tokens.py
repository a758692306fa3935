"""Token sources: what a replay's checks read and what size its requests are.

Recorded usage in replayed assistant messages stays as recorded, but after the replay compacted
differently from the recording it describes a context the replay never sent. A token source
decides how the replay counts instead (``docs/replay.md``, "Token sources"):

* :class:`EstimateTokens` (``"estimate"``): exactly Pi's formulas on the replayed session,
  recorded usage included; the differential-testing mode.
* :class:`CalibratedTokens` (``"calibrated"``, the default): Pi's formulas with each assistant's
  usage replaced by a simulated usage of the replayed request (:mod:`pimem.replays.calibration`).
* :class:`CharsTokens` (``"chars"``): chars/4 of the replayed projected context, no usage.
* :class:`TiktokenTokens` (``"tiktoken"``): cl100k_base counts of the projected messages.

A replay makes one instance per run (:func:`make_token_source`); the calibrated one holds the fit
and the simulated usage of every replayed call.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Sequence

from pimem.core.compaction.compaction import get_assistant_usage
from pimem.core.incremental.caches import TokenCache
from pimem.core.incremental.tracker import ContextTracker
from pimem.errors import ConfigurationError
from pimem.replays.calibration import Calibration
from pimem.replays.recording import RecordedPath, input_tokens, timestamp_ms, usage_tokens, walk_recording
from pimem.text.tokenizers import TiktokenCounter

__all__ = ["TokenSource", "EstimateTokens", "CalibratedTokens", "CharsTokens", "TiktokenTokens", "TOKEN_SOURCES",
           "TokenSourceName", "get_token_source", "make_token_source"]

TokenSourceName = Literal["estimate", "calibrated", "chars", "tiktoken"]


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

    def check_tokens(self, rep: ContextTracker, message: dict, compaction: dict | None) -> tuple[float, str | None]:
        """What ``agent_end``/``before_prompt`` read after ``message``, and why the check gives up (or None).

        Pi's ``_checkCompaction``: with a ``context_edit`` in the projection,
        ``estimateProjectedContextTokens``; for an errored or zero-usage message,
        ``estimateContextTokens`` (giving up when its usage predates the latest compaction);
        otherwise the message's own usage.
        """
        if rep.has_context_edit:
            return rep.context_estimate(self.usage).tokens, None
        direct = self.usage(message) if message.get("usage") else 0
        if message.get("stopReason") == "error" or not direct:
            tokens = rep.context_usage_estimate(self.usage).tokens
            usage_msg = rep.usage_message()
            if usage_msg is not None and compaction is not None:
                uts, cts = timestamp_ms(usage_msg.get("timestamp")), timestamp_ms(compaction.get("timestamp"))
                if uts is not None and cts is not None and uts <= cts:
                    return tokens, "usage predates the latest compaction"
            return tokens, None
        return direct, None

    def call_tokens(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> float:
        """The size of the request the recorded response ``message`` answers, in the replayed context."""
        return rep.context_estimate(self.usage).tokens


class EstimateTokens(TokenSource):
    """``"estimate"``: exactly what Pi computes on the replayed session, recorded usage included."""

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
        self.recorded_estimates: list[float] = []  # E_rec before each step of the path

    def start(self, path: Sequence[dict], cache: TokenCache) -> None:
        self.recorded_estimates, self.calibration = walk_recording(path, cache)

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

    def simulate_input(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> tuple[float, bool]:
        """The calibrated request size for ``message`` in the replayed context, and whether it was floored."""
        return self.calibration.simulate(input_tokens(message), rec.usage_free_estimate(), rep.usage_free_estimate())

    def record_call(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> None:
        if get_assistant_usage(message) is None:
            return
        simulated_input, floored = self.simulate_input(message, rec, rep)
        self.floored_calls += floored
        self.simulated[id(message)] = usage_tokens(message) - input_tokens(message) + simulated_input

    def call_tokens(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> float:
        if get_assistant_usage(message) is not None:
            return self.simulate_input(message, rec, rep)[0]
        # no recorded usage to shift (an errored or aborted call): the fit's own model of the request,
        # never below the overhead every request carries
        return self.calibration.overhead + self.calibration.slope * rep.usage_free_estimate()


class CharsTokens(TokenSource):
    """``"chars"``: chars/4 over the replayed projected context, no usage at all."""

    name = "chars"
    silent_overflow = False

    def count(self, rep: ContextTracker) -> float:
        """The replayed context's size by this source."""
        return rep.usage_free_estimate()

    def next_turn_tokens(self, rep: ContextTracker) -> float:
        return self.count(rep)

    def check_tokens(self, rep: ContextTracker, message: dict, compaction: dict | None) -> tuple[float, str | None]:
        return self.count(rep), None

    def call_tokens(self, message: dict, rec: RecordedPath, rep: ContextTracker) -> float:
        return self.count(rep)


class TiktokenTokens(CharsTokens):
    """``"tiktoken"``: cl100k_base counts of each projected message's text (images 1200), cached per message."""

    name = "tiktoken"

    def counter(self) -> Any:
        return TiktokenCounter()

    def count(self, rep: ContextTracker) -> float:
        return rep.counted_total


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

