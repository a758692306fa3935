"""Reference strategies beside Pi 0.87.1: no split turns, from-scratch summaries, observation
masking, and a hybrid of masking and summaries.

``no-split-turn``
    Pi 0.87.1, but a cut never falls inside a turn: a cut Pi would put inside a turn moves back to
    the turn's start (the whole turn is kept), or, when that leaves nothing to summarize, forward to
    the next turn start (the whole turn is summarized); with no turn start after the cut it stays
    Pi's split cut. No turn-prefix request, so one summary request per compaction.
``from-scratch``
    Pi 0.87.1's trigger and cut, but each summary is written from the raw history (every message
    of the branch before the kept tail, the session's own context edits applied) with the initial
    prompt, instead of updating the previous summary with the newly summarized span. Summaries are
    then not rewritten again and again (no drift through rewrites), at the price of a request
    that grows with the session. ``max_history_tokens`` keeps only the newest messages up to that
    estimate (the head is dropped), for summarizers with a bounded window.
``masking``
    Observation masking (Lindenbauer et al. 2025, "The Complexity Trap"): before each call, tool
    results older than ``keep_turns`` turns are replaced by a one-line placeholder through
    ``context_edit`` entries (Pi's own mechanism: the replayed file opens in Pi with the same
    masked context). Age is counted in assistant responses: the results of the latest response
    have age 0, and a result is masked once ``keep_turns`` responses follow it in the projected
    context. A result is only masked when the placeholder is shorter. No summary at the
    threshold; Pi's overflow recovery (a compaction when a request exceeds the window) stays.
``hybrid``
    Masking first, and Pi 0.87.1's threshold compaction when the masked context is still over
    the threshold.

Token counts see the masked context as it is: Pi's estimate counts the placeholder text; the
calibrated request size (:mod:`pimem.replays.calibration`) shrinks by the estimate of what was removed;
and Pi distrusts usage recorded before a ``context_edit``, so a check right after masking reads
Pi's usage-free chars/4 estimate, as Pi would.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Sequence

from pimem.base.js import UNDEFINED
from pimem.core.compaction.compaction import (
    PI_PROMPTS,
    CompactionPreparation,
    CompactionSettings,
    CutPointResult,
    PromptTemplates,
    estimate_tokens,
)
from pimem.core.compaction.utils import FileOperations, extract_file_ops_from_messages
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.session_manager import edit_target, project_context_entry
from pimem.errors import ConfigurationError
from pimem.replays.strategies.base import CheckPoint, CompactionStrategy, ContextEdit, TurnView, register_strategy

__all__ = ["NoSplitTurn", "FromScratch", "ObservationMasking", "Hybrid", "DEFAULT_PLACEHOLDER"]

DEFAULT_PLACEHOLDER = "Old tool output omitted ({lines} lines)."


@register_strategy("no-split-turn")
@dataclass(frozen=True)
class NoSplitTurn(CompactionStrategy):
    """Pi 0.87.1 without split turns: a cut inside a turn moves to the turn's start (or the next)."""

    prompts: PromptTemplates = PI_PROMPTS

    def prepare(self, tracker: ContextTracker, settings: CompactionSettings) -> CompactionPreparation | None:
        found = tracker.compaction_cut(settings)
        if found is None:
            return None
        start, cut = found
        return tracker.preparation_at(settings, start, whole_turn_cut(tracker, start, cut))


def whole_turn_cut(tracker: ContextTracker, start: int, cut: CutPointResult) -> CutPointResult:
    """``cut`` moved out of its turn: back to the turn's start when messages after ``start`` come
    before it, else forward to the next turn start; unchanged when it does not split a turn or no
    turn starts after it."""
    if not cut.is_split_turn:
        return cut
    if cut.turn_start_index > start and tracker.messages_before(cut.turn_start_index) > tracker.messages_before(start):
        return CutPointResult(cut.turn_start_index, -1, False)
    turns = tracker.turn_starts
    later = turns[bisect_right(turns, cut.first_kept_entry_index):]
    return CutPointResult(later[0], -1, False) if later else cut


def _raw_history(tracker: ContextTracker, before_id: Any) -> list[dict]:
    """Non-system messages of the branch's entries before the first entry with id ``before_id``
    (compaction summaries left out), with the branch's context edits applied."""
    path = tracker.path
    edits = {edit_target(e): e for e in path if e.get("type") == "context_edit"}
    out: list[dict] = []
    for entry in path:
        if entry.get("id") == before_id:
            break
        if entry.get("type") in ("compaction", "context_edit"):
            continue
        for m in project_context_entry(entry, edits.get(entry.get("id", UNDEFINED))):
            if m.get("role") != "system":
                out.append(m)
    return out


@register_strategy("from-scratch")
@dataclass(frozen=True)
class FromScratch(CompactionStrategy):
    """Pi 0.87.1's trigger and cut; every summary from the raw history, never an update."""

    prompts: PromptTemplates = PI_PROMPTS
    max_history_tokens: int | None = None

    def prepare(self, tracker: ContextTracker, settings: CompactionSettings) -> CompactionPreparation | None:
        prep = tracker.prepare(settings)
        if prep is None or prep.previous_summary is None:
            return prep  # the first compaction: already from the raw history
        end_id = prep.first_kept_entry_id
        if prep.is_split_turn and prep.turn_prefix_messages:
            first = prep.turn_prefix_messages[0]
            end_id = next((pe.source_entry.get("id") for pe in tracker.projection.entries
                           if any(m is first for m in pe.messages)), end_id)
        history = _raw_history(tracker, end_id)
        if self.max_history_tokens is not None:
            budget, kept = self.max_history_tokens, []
            for m in reversed(history):
                budget -= tracker.cache.estimate(m)
                if budget < 0:
                    break
                kept.append(m)
            history = kept[::-1]
        file_ops = FileOperations()
        extract_file_ops_from_messages(history + list(prep.turn_prefix_messages), file_ops)
        return CompactionPreparation(
            first_kept_entry_id=prep.first_kept_entry_id, messages_to_summarize=history,
            turn_prefix_messages=prep.turn_prefix_messages, is_split_turn=prep.is_split_turn,
            tokens_before=prep.tokens_before, previous_summary=None, file_ops=file_ops, settings=settings)


def _text_lines(content: Any) -> int:
    if isinstance(content, str):
        return content.count("\n") + 1 if content else 0
    lines = 0
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            lines += block["text"].count("\n") + 1
        elif isinstance(block, dict):
            lines += 1
    return lines


@register_strategy("masking")
@dataclass(frozen=True)
class ObservationMasking(CompactionStrategy):
    """Tool results older than ``keep_turns`` turns replaced by ``placeholder`` (``{lines}``: the
    output's line count); no threshold compaction (Pi's overflow recovery stays)."""

    keep_turns: int = 10
    placeholder: str = DEFAULT_PLACEHOLDER
    prompts: PromptTemplates = PI_PROMPTS

    def __post_init__(self) -> None:
        if not isinstance(self.keep_turns, int) or isinstance(self.keep_turns, bool) or self.keep_turns < 1:
            raise ConfigurationError(f"keep_turns must be a positive integer, not {self.keep_turns!r}")

    def context_edits(self, view: TurnView) -> Sequence[ContextEdit]:
        tracker = view.tracker
        edited = tracker.context_edits
        entries = tracker.projection.entries
        age = 0  # assistant responses after the current position
        out: list[ContextEdit] = []
        for pe in reversed(entries):
            src = pe.source_entry
            if src.get("type") != "message":
                continue
            role = src["message"].get("role")
            if role == "assistant":
                age += 1
                continue
            if role != "toolResult" or age < self.keep_turns or src.get("id") in edited or not pe.messages:
                continue
            message = pe.messages[0]
            text = self.placeholder.format(lines=_text_lines(message.get("content")))
            replaced = {**message, "content": [{"type": "text", "text": text}]}
            if estimate_tokens(replaced) < tracker.cache.estimate(message):
                out.append(ContextEdit(src["id"], {"content": text}))
        return out[::-1]

    def should_compact(self, point: CheckPoint) -> bool:
        return point.reason == "overflow"


@register_strategy("hybrid")
@dataclass(frozen=True)
class Hybrid(ObservationMasking):
    """Masking first; Pi 0.87.1's threshold compaction when the masked context is still over."""


    def should_compact(self, point: CheckPoint) -> bool:
        return CompactionStrategy.should_compact(self, point)
