"""Replay a recorded session under other compaction settings, as Pi 0.87.1's agent loop would.

Where Pi 0.87.1 checks for compaction
-------------------------------------
Read from ``core/agent-session.js`` and ``@earendil-works/pi-agent-core``'s ``agent-loop.js``:

``next_turn``
    ``runLoop`` calls ``prepareNextTurn`` whenever a turn has completed inside a run and another
    assistant response is about to be requested (after the tool results of a ``toolUse`` turn were
    appended; also before steering messages are appended). ``AgentSession`` installs
    ``_compactBeforeNextAssistantResponse`` there: it compacts (reason ``threshold``, no retry)
    when ``shouldCompact(estimateProjectedContextTokens(projection, branch).tokens, window,
    settings)``. That estimate trusts the last valid assistant usage in the projected context
    only if its entry comes after the latest ``compaction``/``context_edit`` on the branch, and
    adds chars/4 estimates of the messages after it; otherwise it is chars/4 of the current
    system message plus every non-system message. There is no overflow test here.
``agent_end``
    After a run ends, ``_handlePostAgentRun`` calls ``_checkCompaction(lastAssistant,
    skipAborted=true, toolResults)``. Skipped when compaction is disabled, the assistant was
    aborted, or the assistant's ``timestamp`` is ``<=`` the latest compaction entry's timestamp.
    Overflow first: an error matching pi-ai's overflow patterns, or a ``stop`` response whose
    ``usage.input + usage.cacheRead`` exceeds the window (same model only) → reason
    ``overflow``. Otherwise threshold with ``calculateContextTokens(lastAssistant.usage)`` —
    the *direct* usage of that one message, no trailing estimate; when the projection holds a
    ``context_edit`` it uses ``estimateProjectedContextTokens``; when the message errored or
    has zero usage it uses ``estimateContextTokens(agent messages)`` (and gives up if the usage
    it anchors on predates the latest compaction).
``before_prompt``
    ``prompt()`` calls ``_checkCompaction(lastAssistant, skipAborted=false)`` before sending a new
    user prompt: the same computation, but aborted assistants are checked too. After an
    ``agent_end`` check on the same assistant it gives the same answer, unless that check
    compacted (then the timestamp guard skips it) or the assistant was aborted.
``before_call``
    Not a Pi check: the provider rejects a request larger than the window, Pi records the error,
    omits it with a ``context_edit`` and compacts with reason ``overflow`` and ``willRetry``.
    The recording has no such failed attempt, so the replay models it at the point of the call:
    if the context about to be sent exceeds the window it compacts (``overflow``, will_retry)
    and then appends the recorded response. Unlike Pi, the failed attempt and its
    ``context_edit`` are not written (the replayed file stays a clean sequence of responses).

Run boundaries come from the recording: an assistant message without tool calls (or one that
errored or was aborted) ends a run; the next ``user`` message is a new prompt. A follow-up
message that Pi delivered inside the same run looks the same in the file, so it is treated as a
new prompt (Pi checks at ``next_turn`` there instead; both checks happen at the same place).

Compaction strategies
---------------------
What happens at the check points is the strategy's (``strategy=``, :mod:`pimem.replays.strategies.base`):
whether a check compacts, what the compaction summarizes and how, and which ``context_edit`` entries
to write before each assistant call. The default, ``"pi-0.87.1"``, is everything above exactly.

The replayed session
--------------------
A new session (new header id from ``seed``, the recording's header timestamp and cwd). Every
entry of the recorded path is appended in order **with its original id** (so entries compare
one to one with the recording), re-linked so that ``parentId`` is the previous replayed entry.
Compaction entries made by the replay get fresh 8-hex ids from a generator seeded by ``seed``
and the timestamp of the entry they follow, so the same inputs give the same file byte for byte.
Recorded ``compaction`` entries are dropped with ``triggers="threshold"`` or ``"none"`` (the
replay decides where to compact); with ``triggers="recorded"`` the replay compacts exactly there
(reason ``manual``, no threshold checks acted on). Branch summaries on the path are content of
the path and are kept. ``label`` entries whose target is not in the replayed session (a
dropped compaction) are dropped.

What a replay cannot know: it is open-loop
------------------------------------------
The replay re-runs Pi's pipeline, not the agent. After a replayed compaction the recorded
assistant turns are appended unchanged, although the recorded agent never saw the replayed
context: a real agent given that summary and kept tail might have re-read a file, asked again,
or done something else, and every later size, check and compaction would then differ. Results
after the first replayed compaction assume the conversation would have continued as recorded.
:meth:`ReplayResult.orphan_references` measures how far that is stretched: per compaction, the
share of the recorded agent's later uses of facts from the summarized span that the context it
would have had does not hold (``orphan_reference_rate`` in :meth:`ReplayResult.summary`; see
:mod:`pimem.drift.orphans`). On ``before-compaction.jsonl`` at a 50k window (reserve 4096, keep
8000) it is 17.5% (17 of 97 facts used later), against 0% for the recording's own two
compactions, which the agent did act on. The optional resume probe
(:func:`pimem.drift.resume_probe.resume_probe`) asks a real model for the next action from the
replayed context and compares it with the recorded one.

Token sources
-------------
Recorded usage in replayed assistant messages stays as recorded: the file is a recording. But
Pi reads that usage (``calculateContextTokens``, ``estimateContextTokens``), and after the
replay compacted differently from the recording it describes a context the replay never sent.
The token source decides what the checks read:

``"estimate"``
    Exactly what Pi computes on the replayed session, recorded usage included, at every check
    point (the formulas above). This is the differential-testing mode: Pi given the written file
    decides the same. It over-counts after a replayed compaction that the recording did not make
    (the next response's recorded usage still holds the uncompacted context).
``"calibrated"`` (default)
    Pi's formulas, with each assistant's usage replaced by a simulated usage of the replayed
    request: ``recorded_input(a) + k · (E_rep(a) − E_rec(a))`` plus the recorded output, where
    ``E_rec(a)`` is Pi's chars/4 estimate of the context the recording sent for ``a`` (its own
    projection, with its own compactions) and ``E_rep(a)`` the same estimate of the replayed
    context for ``a``. Content both share cancels out, so ``E_rep − E_rec`` is the estimate of
    what the replay added (its summaries, or messages the recording had summarized away) minus
    what it removed (summarized messages, or the recording's own summaries). System prompt and
    tool definitions, which no estimate sees, stay counted as the provider counted them.
    ``k`` converts estimate tokens to provider tokens, from a fit over the recording
    (:mod:`pimem.replays.calibration`): ``recorded_input ≈ overhead + r · E_rec`` on relative residuals
    with ``overhead ≥ 0`` and ``r`` in [0.5, 4] (1.29–1.34 on the Claude sessions of the corpus).
    Additions are converted at ``r``; removals at ``min(r, (recorded_input − overhead) / E_rec)``,
    never more than the request's own average rate, so a simulated usage never drops below
    the overhead; a floor (``overhead`` + the recording's 5th-percentile rate × ``E_rep``) catches
    requests recorded unusually cheap. A poor fit (few points, low R², large residuals, an
    impossible unconstrained fit) is a :class:`~pimem.errors.ReplayWarning` and the
    ``calibration_warning`` of :meth:`ReplayResult.summary`. Checked for continuity at the
    recorded compactions of ``before-compaction.jsonl`` (``tests/test_calibration.py``): compacting
    there with the recorded summaries gives exactly the recorded sizes. Overflow uses the
    simulated request size the same way.
``"chars"``
    chars/4 over the replayed projected context, no usage at all.
``"tiktoken"``
    cl100k_base counts of each projected message's text (images count 1200, Pi's 4800 chars/4),
    cached per message.

Tree navigation
---------------
:func:`navigate` is ``/tree`` on a copy of a session, step for step as ``AgentSession.navigateTree``
(see its docstring: old leaf, ``before_tree`` hooks, summary, the leaf moving to the parent of a
user message whose text goes to the editor, labels). It is checked against a real
``AgentSession`` of Pi 0.87.1 in ``tests/test_replay_navigate_oracle.py``.

Tokens before / after in compaction rows are Pi's: ``tokensBefore`` from ``prepareCompaction``
(``estimateProjectedContextTokens`` of the replayed session) and ``estimatedTokensAfter`` =
``estimateMessagesTokens`` of the projected messages after the compaction. They are not the token
source's count. ``tokensBefore`` is what Pi writes in the file: it trusts the recorded usage of
the last response, which after a replayed compaction still describes the recording's larger
context, so it can be many times the context the check read (``context_tokens`` of the check row
that fired, the line of :func:`pimem.viz.plot_context_over_time`). On ``large-session.jsonl`` at
window 16000 it climbs past 140k while the calibrated context stays under the window.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

import pandas as pd

from pimem.core.compaction.compaction import (
    ModelInfo,
    TokenCache,
    calculate_context_tokens,
    estimate_tokens,
    get_assistant_usage,
)
from pimem.core.context_tracker import ContextTracker
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import is_context_overflow
from pimem.core.session_manager import (
    build_session_projection,
    require_message_objects,
)
from pimem.core.settings_manager import lookup_model
from pimem.replays.calibration import Calibration, fit_calibration
from pimem.errors import ConfigurationError, JavaScriptTypeError, ReplayWarning, SummarizationError
from pimem.text.tokenizers import TiktokenCounter
from pimem.base.tables import frame

if TYPE_CHECKING:
    from pimem.core.agent_session import CompactionReason

__all__ = ["replay", "ReplayResult", "navigate", "check_settings", "EVENT_COLUMNS", "CALL_COLUMNS", "TOKEN_SOURCES",
           "TRIGGERS"]

TokenSource = Literal["estimate", "calibrated", "chars", "tiktoken"]
Trigger = Literal["threshold", "recorded", "none"]
TOKEN_SOURCES = ("estimate", "calibrated", "chars", "tiktoken")
CALL_COLUMNS = ["step", "entry_id", "context_tokens", "recorded_tokens", "prefix_tokens", "output_tokens", "timestamp"]
TRIGGERS = ("threshold", "recorded", "none")

EVENT_COLUMNS = [
    "step", "entry_id", "leaf_id", "kind", "check", "reason", "context_tokens", "threshold", "context_window",
    "should_compact", "fired", "will_retry", "note", "compaction_id", "first_kept_entry_id",
    "messages_summarized", "turn_prefix_messages", "split_turn", "tokens_before", "tokens_after",
    "summary_tokens", "request_tokens", "response_tokens", "summary_calls", "latency_s", "error",
    "from_hook", "recorded_first_kept_entry_id", "recorded_tokens_before", "context_edits",
]


# ---------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------


@dataclass
class ReplayResult:
    """What a replay produced: the new session, one event row per check and per compaction."""

    session: Any
    events: pd.DataFrame
    compactions: list[dict]
    settings: Any
    token_source: str
    triggers: str
    context_window: int
    calls: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    calibration_slope: float = 1.0
    calibration: Calibration = field(repr=False, default_factory=Calibration)
    floored_calls: int = 0
    warnings: list[str] = field(repr=False, default_factory=list)
    strategy: str = "pi-0.87.1"
    context_edit_ids: list[str] = field(repr=False, default_factory=list)
    _leaf_at: list[Any] = field(repr=False, default_factory=list)
    _orphans: Any = field(repr=False, default=None)

    def orphan_references(self) -> pd.DataFrame:
        """Per replayed compaction, the recorded agent's later uses of summarized facts that the
        replayed context did not hold (:func:`pimem.drift.orphans.orphan_references`; computed once)."""
        if self._orphans is None:
            from pimem.drift.orphans import orphan_references

            self._orphans = orphan_references(self)
        return self._orphans

    def summary(self) -> dict[str, Any]:
        """Counts, summarization tokens, peak and mean context, tokens re-sent per call, the
        calibration and its warnings, and the orphan-reference rate (the replay is open-loop:
        see :mod:`pimem.drift.orphans`)."""
        from pimem.drift.orphans import orphan_rate

        ev = self.events
        comp = ev[ev["kind"] == "compaction"] if len(ev) else ev
        failed = ev[ev["kind"] == "compact_failed"] if len(ev) else ev
        checks = ev[ev["kind"] == "check"] if len(ev) else ev
        ctx = self.calls["context_tokens"] if len(self.calls) else pd.Series(dtype=float)
        by_reason = comp["reason"].value_counts().to_dict() if len(comp) else {}
        return {
            "entries": len(self._leaf_at),
            "assistant_calls": int(len(self.calls)),
            "checks": int(len(checks)),
            "compactions": int(len(comp)),
            "context_edits": int(ev["context_edits"].fillna(0).sum()) if len(ev) else 0,
            "threshold_compactions": int(by_reason.get("threshold", 0)),
            "overflow_compactions": int(by_reason.get("overflow", 0)),
            "manual_compactions": int(by_reason.get("manual", 0)),
            "failed_compactions": int((failed["note"] == "failed").sum()) if len(failed) else 0,
            "cancelled_compactions": int(failed["note"].isin(["cancelled", "aborted"]).sum()) if len(failed) else 0,
            "split_turns": int(comp["split_turn"].fillna(False).astype(bool).sum()) if len(comp) else 0,
            "summary_calls": int(ev["summary_calls"].fillna(0).sum()) if len(ev) else 0,
            "summarization_request_tokens": float(ev["request_tokens"].fillna(0).sum()) if len(ev) else 0.0,
            "summarization_response_tokens": float(ev["response_tokens"].fillna(0).sum()) if len(ev) else 0.0,
            "summary_tokens": float(comp["summary_tokens"].fillna(0).sum()) if len(comp) else 0.0,
            "peak_context_tokens": float(ctx.max()) if len(ctx) else 0.0,
            "mean_context_tokens": float(ctx.mean()) if len(ctx) else 0.0,
            "total_context_tokens_sent": float(ctx.sum()) if len(ctx) else 0.0,
            "tokens_resent_per_call": float(ctx.mean()) if len(ctx) else 0.0,
            "final_context_tokens": float(self.final_context_tokens()),
            "context_window": self.context_window,
            "calibration_slope": self.calibration_slope,
            **({k: v for k, v in self.calibration.as_dict().items() if k != "calibration_slope"}
               if self.token_source == "calibrated" else {}),
            "floored_calls": self.floored_calls,
            "references_checked": int(self.orphan_references()["references"].sum()),
            "orphans": int(self.orphan_references()["orphans"].sum()),
            "orphan_reference_rate": orphan_rate(self.orphan_references()),
            "token_source": self.token_source,
            "triggers": self.triggers,
            "strategy": self.strategy,
            "warnings": "; ".join(self.warnings) or None,
        }

    def final_context_tokens(self) -> int:
        """Pi's usage-free estimate of the replayed session's final projected context."""
        msgs = build_session_projection(self.session).messages
        return sum(estimate_tokens(m) for m in msgs)

    def context_at(self, step: int, *, llm: bool = True) -> list[dict]:
        """The projected messages at ``step`` (after recorded entry ``step`` was replayed).

        ``llm=True`` gives what the model is sent (``convert_to_llm``); else the agent messages.
        """
        if not self._leaf_at:
            return []
        leaf = self._leaf_at[step]
        if leaf is None:
            return []
        messages = build_session_projection(self.session, leaf).messages
        return convert_to_llm(messages) if llm else messages

    def write(self, path: str | Path) -> Path:
        """Write the replayed session (JSONL) atomically; returns the path."""
        self.session.write(path)
        return Path(path)


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------


def _load(session: Any) -> Any:
    from pimem.core.session_manager import Session
    from pimem.sessions.load import load_session

    if isinstance(session, Session):
        return session
    return load_session(session)


def _resolve_model(model: ModelInfo | None, context_window: int | None, current: dict | None) -> ModelInfo:
    """``model``, or the session's current model from the table in ``pimem.core.settings_manager``
    (a 200k-token, 32k-output model when it is not listed); ``context_window`` overrides the window."""
    info = model
    if info is None and current:
        info = lookup_model(current.get("provider"), current.get("modelId"))
    if info is None:
        info = ModelInfo(context_window=context_window or 200000, max_tokens=32000, reasoning=False)
    if context_window is not None:
        info = _with_window(info, context_window)
    return info


def _with_window(info: ModelInfo, window: int) -> ModelInfo:
    return dataclasses.replace(info, context_window=window)


def _seeded_session(original: Any, seed: int) -> tuple[Any, random.Random]:
    from pimem.core.session_manager import Session

    header = original.header or {}
    # bytes: the same seed as the str for every valid id, and no failure on a lone surrogate
    rng = random.Random(f"pimem-replay:{seed}:{header.get('id')}".encode("utf-8", "surrogatepass"))
    # session_id=None: Pi's UUIDv7 for the header timestamp, random bits from the seeded rng
    new = Session.new(header.get("cwd", ""), session_id=None, timestamp=header.get("timestamp"), rng=rng)
    return new, rng


def _calibrate(path: Sequence[dict], cache: TokenCache | None = None) -> Calibration:
    """The recording's ``recorded_input ≈ overhead + r · E_rec`` (see :mod:`pimem.replays.calibration`)."""
    recorded = _RecordedPath(cache=cache)
    xs: list[float] = []
    ys: list[float] = []
    for entry in path:
        if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
            message = entry["message"]
            if get_assistant_usage(message) is not None:
                xs.append(recorded.usage_free_estimate())
                ys.append(_input_tokens(message))
        recorded.append(entry)
    return fit_calibration(xs, ys)


class _RecordedPath(ContextTracker):
    """The recording's own projection along its path (the path's root may name a lost parent)."""

    def append(self, entry: dict) -> None:
        if self.path:
            super().append(entry)
        else:
            self.reset([entry])


def _usage_tokens(message: dict) -> float:
    usage = message.get("usage")
    return calculate_context_tokens(usage) if usage else 0


def _input_tokens(message: dict) -> float:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return 0
    parts = [usage.get(k) or 0 for k in ("input", "cacheRead", "cacheWrite")]
    if any(type(p) not in (int, float) for p in parts):
        return float("nan")
    return parts[0] + parts[1] + parts[2]


def _output_tokens(message: dict) -> float:
    usage = message.get("usage")
    value = usage.get("output") if isinstance(usage, dict) else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _has_tool_calls(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "toolCall" for b in content)


def _ts_ms(value: Any) -> float | None:
    from pimem.base.js import parse_iso_ms

    if isinstance(value, (int, float)):
        return value
    return parse_iso_ms(value) if isinstance(value, str) else None


def check_settings(settings: Any, context_window: int | float | None) -> list[str]:
    """Validate compaction settings against a context window before a replay.

    Raises :class:`~pimem.errors.ConfigurationError` for settings that leave no room for any
    context: a negative or non-numeric value, or ``reserve_tokens`` at or above the window (the
    threshold ``window − reserve`` is then ≤ 0 and every check compacts; the replay would report
    overflows and contexts above the window). Returns warnings for settings Pi accepts but whose
    result is degenerate: ``keep_recent_tokens`` at or above the threshold (each compaction keeps
    at least a threshold's worth, so the next check compacts again or finds nothing to compact).
    A window of ``None`` or 0 (unknown) is not checked against.
    """
    reserve: Any = getattr(settings, "reserve_tokens", None)
    keep: Any = getattr(settings, "keep_recent_tokens", None)
    for name, value in (("reserve_tokens", reserve), ("keep_recent_tokens", keep)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise ConfigurationError(f"{name} must be a non-negative number, not {value!r}")
    if not context_window or not getattr(settings, "enabled", True):
        return []
    if not isinstance(context_window, (int, float)) or context_window < 0:
        raise ConfigurationError(f"context window must be a positive number, not {context_window!r}")
    threshold = context_window - reserve
    if threshold <= 0:
        raise ConfigurationError(
            f"reserve_tokens {reserve:,} is not below the context window {context_window:,}: the threshold "
            f"window − reserve is {threshold:,}, so every check would compact. Choose a reserve below the "
            f"window (Pi's default 16,384 is 8% of a 200k window; {int(context_window * 0.08):,} here)")
    if keep >= threshold:
        return [f"keep_recent_tokens {keep:,} is not below the threshold window − reserve = {threshold:,}: each "
                f"compaction keeps at least the threshold's worth of recent context, so the next check compacts "
                f"again or finds nothing to compact"]
    return []


class _Replayer:
    def __init__(self, original, settings, model, context_window, summarizer, leaf_id, token_source,
                 triggers, hooks, seed, stop_on_error, progress, strategy=None):
        from pimem.replays.strategies.base import get_strategy

        if token_source not in TOKEN_SOURCES:
            raise ConfigurationError(f"token_source must be one of {TOKEN_SOURCES}, not {token_source!r}")
        if triggers not in TRIGGERS:
            raise ConfigurationError(f"triggers must be one of {TRIGGERS}, not {triggers!r}")
        # settings that do not fit a given window fail before any work (warnings come with the result)
        check_settings(settings, context_window if context_window is not None else getattr(model, "context_window", None))
        self.original = original
        self.settings = settings
        self.model_arg = model
        self.window_arg = context_window
        self.summarizer = summarizer
        self.token_source = token_source
        self.triggers = triggers
        self.hooks = hooks
        self.strategy = get_strategy(strategy)
        self.turn = 0
        self.edit_ids: list[str] = []
        self.stop_on_error = stop_on_error
        self.progress = progress
        self.path = original.get_branch(leaf_id)
        self.new, self.rng = _seeded_session(original, seed)
        # The recording's projection and the replay's, kept incrementally; estimates by message
        # identity are shared (the replayed entries hold the recorded message objects).
        est_cache = TokenCache()
        self.rec = _RecordedPath(cache=est_cache)
        counter = TiktokenCounter() if token_source == "tiktoken" else None
        self.rep = ContextTracker(cache=est_cache, counter=counter)
        require_message_objects(self.path)  # a clear error, before any walk reads a message
        self.calibration = _calibrate(self.path, est_cache) if token_source == "calibrated" else Calibration()
        self.slope = self.calibration.slope
        self.simulated: dict[int, float] = {}  # id(message) -> simulated total
        self.simulated_input: dict[int, float] = {}
        self.floored_calls = 0
        self.warnings: list[str] = []
        self.events: list[dict] = []
        self.calls: list[dict] = []
        self.compactions: list[dict] = []
        self.leaf_at: list[Any] = []
        self.last_assistant: dict | None = None
        self.last_tool_results: list[dict] = []
        self.in_run = False
        self.overflow_attempted = False
        self._models: dict[Any, Any] = {}
        self.step = 0
        self._checked_windows: set[Any] = set()
        self._prev_request: tuple[list[dict] | None, float] = (None, 0.0)
        if context_window is not None or model is not None:
            self.model_info()

    # -- measures ----------------------------------------------------------------------------------

    def model_info(self) -> Any:
        key = None if self.model_arg is not None else (
            (self.rep.projection.model or {}).get("provider"), (self.rep.projection.model or {}).get("modelId"))
        try:
            hash(key)
        except TypeError:  # a provider or model id that is a list or an object (a damaged file)
            from pimem.base.js import js_stringify

            key = js_stringify(list(key))
        info = self._models.get(key)
        if info is None:
            info = _resolve_model(self.model_arg, self.window_arg, self.rep.projection.model)
            self._models[key] = info
            self._check_window(info.context_window)
        return info

    def _check_window(self, window: int) -> None:
        """:func:`check_settings` once per distinct window (errors raise; warnings are recorded)."""
        if window in self._checked_windows:
            return
        self._checked_windows.add(window)
        for problem in check_settings(self.settings, window):
            self.warn(problem)

    def usage_total(self, message: dict) -> float:
        if self.token_source == "calibrated":
            sim = self.simulated.get(id(message))
            if sim is not None:
                return sim
        return _usage_tokens(message)

    def projected_tokens(self) -> float:
        """The tokens Pi's ``next_turn`` check reads (per token source)."""
        if self.token_source == "chars":
            return self.rep.usage_free_estimate()
        if self.token_source == "tiktoken":
            return self.rep.counted_total
        return self.rep.context_estimate(self.usage_total).tokens

    # -- events ------------------------------------------------------------------------------------

    def _row(self, **values: Any) -> dict:
        row: dict[str, Any] = {c: None for c in EVENT_COLUMNS}
        row["step"] = self.step
        row["entry_id"] = self.path[self.step].get("id") if self.step < len(self.path) else None
        row["leaf_id"] = self.new.leaf_id
        row.update(values)
        self.events.append(row)
        return row

    def threshold(self) -> float:
        return self.model_info().context_window - self.settings.reserve_tokens

    def warn(self, message: str) -> None:
        """Record a warning on the result and issue it (once per message)."""
        if message not in self.warnings:
            self.warnings.append(message)
            warnings.warn(message, ReplayWarning, stacklevel=4)

    def known_tokens(self, tokens: float, what: str) -> float:
        """``tokens``, or NaN with a warning when it is negative: no impossible count is reported."""
        if isinstance(tokens, (int, float)) and tokens < 0:
            self.warn(f"a negative {what} token count ({tokens:,.0f}) at step {self.step} was replaced by NaN")
            return float("nan")
        return tokens

    def check_point(self, check: str, reason: str, tokens: float, will_retry: bool = False) -> Any:
        from pimem.replays.strategies.base import CheckPoint

        window = self.model_info().context_window
        return CheckPoint(check=check, reason=reason, tokens=tokens, context_window=window,
                          threshold=window - self.settings.reserve_tokens, settings=self.settings,
                          tracker=self.rep, will_retry=will_retry)

    def check_row(self, check: str, tokens: float, note: str | None = None) -> dict:
        tokens = self.known_tokens(tokens, "check")
        window = self.model_info().context_window
        decision = bool(note is None and window > 0
                        and self.strategy.should_compact(self.check_point(check, "threshold", tokens)))
        return self._row(kind="check", check=check, reason="threshold", context_tokens=tokens,
                         threshold=window - self.settings.reserve_tokens, context_window=window,
                         should_compact=decision, fired=False, note=note)

    # -- check points ------------------------------------------------------------------------------

    def acting(self) -> bool:
        return self.triggers == "threshold"

    def check_next_turn(self) -> None:
        if not self.settings.enabled:
            return
        row = self.check_row("next_turn", self.projected_tokens())
        if row["should_compact"] and self.acting():
            row["fired"] = self.run_compaction("threshold", False, "next_turn")

    def check_after_assistant(self, check: str, skip_aborted: bool) -> None:
        """``_checkCompaction`` (``agent_end`` and ``before_prompt``)."""
        message = self.last_assistant
        if message is None or not self.settings.enabled:
            return
        if skip_aborted and message.get("stopReason") == "aborted":
            return
        compaction = self.rep.latest_compaction
        if compaction is not None:
            ts = _ts_ms(message.get("timestamp"))
            cts = _ts_ms(compaction.get("timestamp"))
            if ts is not None and cts is not None and ts <= cts:
                self.check_row(check, float("nan"), note="assistant predates the latest compaction")
                return
        info = self.model_info()
        window = info.context_window
        same_model = self.model_arg is not None or (
            message.get("provider") == (self.rep.projection.model or {}).get("provider"))
        overflow = False
        if self.token_source == "estimate" and same_model:
            overflow = (message.get("stopReason") == "error" and is_context_overflow(message)) or (
                not self.rep.has_context_edit and is_context_overflow(message, window))
        elif same_model and message.get("stopReason") == "error" and is_context_overflow(message):
            overflow = True
        if overflow:
            decision = self.strategy.should_compact(self.check_point(check, "overflow", _input_tokens(message)))
            row = self._row(kind="check", check=check, reason="overflow", context_tokens=_input_tokens(message),
                            threshold=window - self.settings.reserve_tokens, context_window=window,
                            should_compact=bool(decision), fired=False)
            if self.acting() and decision:
                row["fired"] = self.run_compaction("overflow", False, check)
            return
        if self.token_source == "chars":
            tokens: float = self.rep.usage_free_estimate()
        elif self.token_source == "tiktoken":
            tokens = self.rep.counted_total
        elif self.rep.has_context_edit:
            tokens = self.rep.context_estimate(self.usage_total).tokens
        else:
            direct = self.usage_total(message) if message.get("usage") else 0
            if message.get("stopReason") == "error" or not direct:
                tokens = self.rep.context_usage_estimate(self.usage_total).tokens
                usage_msg = self.rep.usage_message()
                if usage_msg is not None and compaction is not None:
                    uts, cts = _ts_ms(usage_msg.get("timestamp")), _ts_ms(compaction.get("timestamp"))
                    if uts is not None and cts is not None and uts <= cts:
                        self.check_row(check, tokens, note="usage predates the latest compaction")
                        return
            else:
                tokens = direct
        row = self.check_row(check, tokens)
        if row["should_compact"] and self.acting():
            row["fired"] = self.run_compaction("threshold", False, check)

    def check_before_call(self, message: dict) -> None:
        """Overflow of the request about to be sent (see module docs, ``before_call``)."""
        info = self.model_info()
        window = info.context_window
        if window <= 0 or not self.settings.enabled:
            return
        tokens = self.call_tokens(message)
        if tokens > window:
            decision = self.strategy.should_compact(self.check_point("before_call", "overflow", tokens, True))
            row = self._row(kind="check", check="before_call", reason="overflow", context_tokens=tokens,
                            threshold=window - self.settings.reserve_tokens, context_window=window,
                            should_compact=bool(decision), fired=False, will_retry=True)
            if not self.acting() or not decision:
                return
            if self.overflow_attempted:
                row["note"] = "overflow recovery already attempted in this run"
                message_text = ("Context overflow recovery failed after one compact-and-retry attempt. "
                                "Try reducing context or switching to a larger-context model.")
                self._row(kind="compact_failed", check="before_call", reason="overflow", error=message_text,
                          fired=False, note="failed", from_hook=False)
                if self.hooks is not None:
                    from pimem.core.agent_session import CompactFailedEvent

                    self.hooks.emit("compact_failed", CompactFailedEvent(
                        reason="overflow", error_message=message_text, aborted=False, will_retry=False,
                        from_extension=False))
                return
            self.overflow_attempted = True
            row["fired"] = self.run_compaction("overflow", True, "before_call")

    def call_tokens(self, message: dict) -> float:
        """The size of the request for the recorded response ``message`` (per token source)."""
        if self.token_source == "chars":
            return self.rep.usage_free_estimate()
        if self.token_source == "tiktoken":
            return self.rep.counted_total
        if self.token_source == "calibrated" and get_assistant_usage(message) is not None:
            return self.simulate_input(message)[0]
        return self.rep.context_estimate(self.usage_total).tokens

    def simulate_input(self, message: dict) -> tuple[float, bool]:
        """The calibrated request size for ``message`` in the replayed context, and whether it was floored."""
        return self.calibration.simulate(_input_tokens(message), self.rec.usage_free_estimate(),
                                         self.rep.usage_free_estimate())

    def cached_prefix(self, tokens: float) -> float:
        """The tokens of this request that repeat the previous request's prefix (a prompt cache can
        read them): system prompt and tools (the calibration's overhead) plus the leading projected
        messages both requests share, converted to the request's units by its own rate. A
        compaction or a context edit changes the projected messages from its position on, so the
        prefix stops there. Capped by both requests' sizes; 0 for the first request."""
        messages = self.rep.projection.messages
        prev, prev_tokens = self._prev_request
        self._prev_request = (list(messages), tokens)
        if prev is None or not (tokens == tokens) or not (prev_tokens == prev_tokens):
            return 0.0
        est = self.rep.cache.estimate
        shared = 0
        for a, b in zip(prev, messages):
            if a is not b and a != b:
                break
            shared += est(a)
        overhead = self.calibration.overhead if self.token_source == "calibrated" else 0.0
        total = self.rep.total_estimate
        variable = max(tokens - overhead, 0.0)
        prefix = min(overhead, tokens) + (variable * shared / total if total else 0.0)
        return float(min(prefix, tokens, prev_tokens))

    # -- compaction --------------------------------------------------------------------------------

    def run_compaction(self, reason: CompactionReason, will_retry: bool, check: str, recorded: dict | None = None) -> bool:
        """Pi's ``_runAutoCompaction`` (``compact()`` for ``manual``) via ``pimem.core.agent_session.run_compaction``."""
        from pimem.core.agent_session import run_compaction

        extra: dict[str, Any] = {}
        if recorded is not None:
            extra = {"recorded_first_kept_entry_id": recorded.get("firstKeptEntryId"),
                     "recorded_tokens_before": recorded.get("tokensBefore")}
        info = self.model_info()
        branch = self.rep.path
        leaf = self.new.leaf_id
        window = dict(context_window=info.context_window,
                      threshold=info.context_window - self.settings.reserve_tokens)
        # The tracker holds the replayed branch: its preparation and system message spare
        # run_compaction two walks of the branch.
        try:
            preparation = self.strategy.prepare(self.rep, self.settings)
        except JavaScriptTypeError as exc:
            if reason == "manual" or self.stop_on_error:
                raise
            # Pi's _runAutoCompaction prepares inside its try: the error is caught before the
            # compaction starts (no event, no message) and the agent goes on.
            self._row(kind="compact_failed", check=check, reason=reason, error=str(exc), fired=False,
                      will_retry=will_retry, note="failed", leaf_id=self.new.leaf_id, **window, **extra)
            return False
        if reason != "manual" and preparation is None:
            # Pi's automatic compaction returns at once when prepareCompaction finds nothing
            # (no hook, no event).
            self._row(kind="compact_skipped", check=check, reason=reason, note="nothing to compact",
                      **window, **extra)
            return False
        anchor_ts = branch[-1].get("timestamp") if branch else None
        counting = _CountingSummarizer(self.summarizer)
        start = time.perf_counter()
        outcome = run_compaction(self.new, self.settings, counting, model=info, reason=reason, hooks=self.hooks,
                                 thinking_level=self.rep.projection.thinking_level, will_retry=will_retry,
                                 timestamp=anchor_ts, preparation=preparation, path_entries=list(self.rep.path),
                                 system_message=self.rep.current_system_message(),
                                 compactor=self.strategy.summarize)
        latency = time.perf_counter() - start
        usage_cols = dict(summary_calls=counting.calls, request_tokens=counting.request_tokens,
                          response_tokens=counting.response_tokens, latency_s=latency)
        if outcome.status == "skipped":
            self._row(kind="compact_skipped", check=check, reason=reason, note="nothing to compact",
                      **window, **extra)
            return False
        if outcome.status != "compacted":
            if self.stop_on_error and outcome.status == "failed":
                raise SummarizationError(outcome.error_message)
            prep = outcome.preparation
            prep_cols = {} if prep is None else dict(
                first_kept_entry_id=prep.first_kept_entry_id, tokens_before=prep.tokens_before,
                messages_summarized=len(prep.messages_to_summarize),
                turn_prefix_messages=len(prep.turn_prefix_messages), split_turn=bool(prep.is_split_turn))
            self._row(kind="compact_failed", check=check, reason=reason, error=outcome.error_message,
                      fired=False, will_retry=will_retry, note=outcome.status, from_hook=outcome.from_extension,
                      leaf_id=leaf, **prep_cols, **usage_cols, **window, **extra)
            return False
        entry, preparation = outcome.entry, outcome.preparation
        assert entry is not None and preparation is not None  # a compacted outcome carries both
        self._append_replayed(entry)
        self.compactions.append(entry)
        summary = entry.get("summary") or ""
        self._row(kind="compaction", check=check, reason=reason, fired=True, will_retry=will_retry,
                  leaf_id=leaf, compaction_id=entry.get("id"), first_kept_entry_id=entry.get("firstKeptEntryId"),
                  messages_summarized=len(preparation.messages_to_summarize),
                  turn_prefix_messages=len(preparation.turn_prefix_messages),
                  split_turn=bool(preparation.is_split_turn), tokens_before=entry.get("tokensBefore"),
                  tokens_after=self.rep.total_estimate, summary_tokens=math.ceil(_utf16(summary) / 4),
                  from_hook=outcome.from_extension, **usage_cols, **window, **extra)
        return True

    def apply_context_edits(self, entry: dict) -> None:
        """Append the strategy's context edits before the assistant call of ``entry``."""
        from pimem.replays.strategies.base import TurnView

        if not self.acting():
            return
        edits = self.strategy.context_edits(TurnView(turn=self.turn, context_window=self.model_info().context_window,
                                                     settings=self.settings, tracker=self.rep))
        if not edits:
            return
        before = self.rep.total_estimate
        anchor_ts = self.rep.path[-1].get("timestamp") if self.rep.path else entry.get("timestamp")
        for edit in edits:
            appended = self.new.append_context_edit(edit.target_id, edit.replacement, timestamp=anchor_ts)
            self._append_replayed(appended)
            self.edit_ids.append(appended["id"])
        self._row(kind="context_edit", check="turn", reason="strategy", fired=True, tokens_before=before,
                  tokens_after=self.rep.total_estimate, context_edits=len(edits),
                  context_window=self.model_info().context_window)

    # -- walk --------------------------------------------------------------------------------------

    def _append_replayed(self, entry: dict) -> None:
        """Track an entry just appended to the new session."""
        self.rep.append(entry)

    def append(self, entry: dict) -> None:
        new_entry = dict(entry)
        new_entry["parentId"] = self.new.leaf_id
        self.new.append_entry(new_entry)
        self._append_replayed(new_entry)

    def run(self) -> ReplayResult:
        path = self.path
        problem = self.calibration.warning() if self.token_source == "calibrated" else None
        if problem:
            self.warn(problem)
        iterator: Iterable[int] = range(len(path))
        if self.progress:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, total=len(path), desc="replay", leave=False)
        for i in iterator:
            self.step = i
            entry = path[i]
            etype = entry.get("type")
            if etype == "compaction":
                self.rec.append(entry)
                if self.triggers == "recorded":
                    self.run_compaction("manual", False, "recorded", recorded=entry)
                self.leaf_at.append(self.new.leaf_id)
                continue
            if etype == "label" and self.new.get_entry(entry.get("targetId")) is None:
                self.rec.append(entry)
                self.leaf_at.append(self.new.leaf_id)
                continue
            message: Any = entry.get("message") if etype == "message" else None
            role = message.get("role") if message else None
            if role == "assistant":
                self.apply_context_edits(entry)
                if self.last_tool_results and self.in_run:
                    self.check_next_turn()
                self.check_before_call(message)
                if self.token_source == "calibrated" and get_assistant_usage(message) is not None:
                    simulated_input, floored = self.simulate_input(message)
                    self.floored_calls += floored
                    self.simulated_input[id(message)] = simulated_input
                    self.simulated[id(message)] = _usage_tokens(message) - _input_tokens(message) + simulated_input
                tokens = self.known_tokens(self.call_tokens(message), "call")
                self.calls.append({"step": i, "entry_id": entry.get("id"), "context_tokens": tokens,
                                   "recorded_tokens": _input_tokens(message),
                                   "prefix_tokens": self.cached_prefix(tokens),
                                   "output_tokens": _output_tokens(message),
                                   "timestamp": _ts_ms(message.get("timestamp", entry.get("timestamp")))})
            elif role == "user":
                if self.in_run and self.last_tool_results:
                    self.check_next_turn()  # a steering message inside the run
                elif self.last_assistant is not None:
                    self.check_after_assistant("before_prompt", skip_aborted=False)
                    self.overflow_attempted = False
                    self.in_run = True
                else:
                    self.in_run = True
            self.rec.append(entry)
            self.append(entry)
            if role == "assistant":
                self.turn += 1
                self.last_assistant = message
                self.last_tool_results = []
                if message.get("stopReason") not in ("error", "length"):
                    self.overflow_attempted = False
                ends_run = message.get("stopReason") in ("error", "aborted") or not _has_tool_calls(message)
                if ends_run:
                    self.in_run = False
                    self.check_after_assistant("agent_end", skip_aborted=True)
                else:
                    self.in_run = True
            elif role == "toolResult":
                self.last_tool_results.append(message)
            self.leaf_at.append(self.new.leaf_id)
        events = frame(self.events, columns=EVENT_COLUMNS)
        calls = frame(self.calls, columns=CALL_COLUMNS)
        return ReplayResult(
            session=self.new, events=events, compactions=self.compactions, settings=self.settings,
            token_source=self.token_source, triggers=self.triggers,
            context_window=self.model_info().context_window, calls=calls, _leaf_at=self.leaf_at,
            calibration_slope=self.slope, calibration=self.calibration, floored_calls=self.floored_calls,
            warnings=self.warnings, strategy=self.strategy.spec(), context_edit_ids=self.edit_ids,
        )


def _utf16(text: str) -> int:
    from pimem.base.js import utf16_len

    return utf16_len(text)


class _CountingSummarizer:
    """Wraps a summarizer to count calls and the tokens its responses report."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.request_tokens = 0.0
        self.response_tokens = 0.0
        self.model = getattr(inner, "model", "")

    def complete(self, request: Any) -> Any:
        self.calls += 1
        response = self.inner.complete(request)
        usage = getattr(response, "usage", None) or {}
        self.request_tokens += (usage.get("input") or 0) + (usage.get("cacheRead") or 0) + (usage.get("cacheWrite") or 0)
        self.response_tokens += usage.get("output") or 0
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _SampledSummarizer:
    """Numbers every request as draw ``sample`` before passing it on (caches key on it)."""

    def __init__(self, inner: Any, sample: int) -> None:
        self.inner = inner
        self.sample = sample
        self.model = getattr(inner, "model", "")

    def complete(self, request: Any) -> Any:
        return self.inner.complete(dataclasses.replace(request, sample=self.sample))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def replay(
    session: Any,
    settings: Any = None,
    *,
    model: Any = None,
    context_window: int | None = None,
    summarizer: Any = None,
    leaf_id: str | None = None,
    token_source: TokenSource = "calibrated",
    triggers: Trigger = "threshold",
    hooks: Any = None,
    seed: int = 0,
    progress: bool = False,
    stop_on_error: bool = False,
    sample: int = 0,
    strategy: Any = None,
) -> ReplayResult:
    """Replay the recorded path of ``session`` (a ``Session`` or a path) into a new session.

    Compacts where Pi 0.87.1's agent loop would have under ``settings`` (a
    ``CompactionSettings``) and the model's context window (``model`` a ``ModelInfo``, default
    from the session's model via the table in ``pimem.core.settings_manager``; ``context_window``
    overrides). ``triggers``: ``"threshold"`` (Pi's automatic checks), ``"recorded"`` (compact
    where the recording did, reason ``manual``), ``"none"`` (measure only). ``token_source``:
    ``"calibrated"``, ``"estimate"``, ``"chars"`` or ``"tiktoken"`` (see the module docs). The
    default summarizer is the offline ``ExtractiveSummarizer``. A failing summarizer records a
    ``compact_failed`` event and the replay continues, unless ``stop_on_error``. ``sample``
    numbers the draw of every summary request (``SummaryRequest.sample``): with a model at
    temperature > 0 behind a cache, ``sample=0, 1, …`` give distinct cached draws. Settings that
    leave no room in the window raise :class:`~pimem.errors.ConfigurationError`
    (:func:`check_settings`). ``strategy``: the compaction strategy (a name such as
    ``"masking:keep_turns=5"`` or a :class:`~pimem.replays.strategies.CompactionStrategy`; default Pi
    0.87.1, see :mod:`pimem.replays.strategies.base`).
    """
    from pimem.core.compaction.compaction import CompactionSettings

    original = _load(session)
    if settings is None:
        settings = CompactionSettings()
    elif isinstance(settings, dict):
        settings = CompactionSettings(**settings)
    if summarizer is None:
        from pimem.summarizers.extractive import ExtractiveSummarizer

        summarizer = ExtractiveSummarizer()
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
        raise ConfigurationError(f"sample must be a non-negative integer, not {sample!r}")
    if sample:
        summarizer = _SampledSummarizer(summarizer, sample)
    return _Replayer(original, settings, model, context_window, summarizer, leaf_id, token_source,
                     triggers, hooks, seed, stop_on_error, progress, strategy).run()


def navigate(
    session: Any,
    target_id: str,
    summarize: bool = True,
    summarizer: Any = None,
    hooks: Any = None,
    *,
    model: Any = None,
    context_window: int | None = None,
    reserve_tokens: int = 16384,
    custom_instructions: str | None = None,
    replace_instructions: bool | None = None,
    label: str | None = None,
    old_leaf_id: str | None = None,
    timestamp: Any = None,
    with_outcome: bool = False,
) -> Any:
    """A copy of ``session`` after Pi 0.87.1's ``/tree`` navigation to ``target_id``.

    Follows ``AgentSession.navigateTree`` step by step (through
    :func:`pimem.core.agent_session.run_tree_navigation`): collect the entries from the old leaf (the
    session's leaf, or ``old_leaf_id``) back to the common ancestor; fire ``before_tree``
    (a hook may cancel, supply the summary — the entry then gets ``fromHook: true`` — or
    override ``custom_instructions`` / ``replace_instructions`` / ``label``); summarize with
    ``summarizer`` (default: the offline extractive one) when ``summarize`` and there is
    something to summarize; then move the leaf:

    * target a ``user`` message or a ``custom_message``: the leaf goes to its **parent**
      (``None`` for a root entry) and the message text is what Pi puts in the editor for the
      user to edit and resend. It is returned as ``outcome.editor_text`` (``with_outcome``);
      nothing is appended for it — in Pi it only becomes an entry if the user sends it.
    * any other entry: the leaf goes to the entry itself.

    With a summary, a ``branch_summary`` entry (``fromId`` = old leaf, or ``"root"``) is
    appended at that new leaf position and a ``label`` entry naming the summary entry follows
    when ``label`` is set; without one, a ``label`` names the target itself. ``model`` (a
    ``ModelInfo``; default from the session's current model, ``context_window`` overrides)
    gives the budget ``context_window − reserve_tokens`` (Pi's ``branchSummary.reserveTokens``)
    and ``maxTokens = min(4096, model.max_tokens)``. A summarizer failure raises
    ``RuntimeError`` with Pi's message, as Pi's ``navigateTree`` throws. New entries get ids
    from the copy's generator and ``timestamp`` (default: now, as Pi).

    The source session is not modified. Returns the new ``Session``, or ``(session,
    TreeOutcome)`` with ``with_outcome`` (``cancelled``, ``aborted``, ``editor_text``,
    ``summary_entry``, ``entries_to_summarize``, ``common_ancestor_id``).
    """
    from pimem.core.agent_session import run_tree_navigation

    original = _load(session)
    copied = original.copy()
    if old_leaf_id is not None:
        copied.leaf_id = old_leaf_id
    if summarizer is None and summarize:
        from pimem.summarizers.extractive import ExtractiveSummarizer

        summarizer = ExtractiveSummarizer()
    if model is None:
        ctx_model = build_session_projection(copied).model
        model = _resolve_model(None, context_window, ctx_model)
    elif context_window is not None:
        model = _with_window(model, context_window)
    outcome = run_tree_navigation(
        copied, target_id, summarizer, summarize=summarize, hooks=hooks, model=model,
        reserve_tokens=reserve_tokens, custom_instructions=custom_instructions,
        replace_instructions=replace_instructions, label=label, timestamp=timestamp,
    )
    return (copied, outcome) if with_outcome else copied
