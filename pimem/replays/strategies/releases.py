"""Other Pi releases as compaction strategies: ``pi-1.6.0`` and ``pi-0.13.2``.

``pi-1.6.0``
    Pi 1.6.0 (:mod:`pimem.releases.pi_1_6_0`): 0.87.1's trigger and cut, file lists that include
    the calls tools made themselves (``nestedCalls``), a conversation text without thinking, no
    output cap on the summary requests and custom instructions on the turn-prefix request too.
``pi-0.13.2``
    Pi 0.13.2 (:mod:`pimem.releases.pi_0_13_2`), the release that wrote the real sessions'
    compactions: the same threshold (no overflow recovery), a cut only at a user message found
    from recorded usage, the old "context checkpoint" request made of the conversation itself (a
    :class:`~pimem.releases.pi_0_13_2.MessagesSummaryRequest`), no file lists, and the next
    compaction summarizing what follows the previous compaction entry (messages kept by it are
    not summarized again). Pi 0.13.2 measured sizes with the provider's usage; a replayed context
    is not the recorded one (after a recorded compaction the recorded usage drops although the
    replayed context did not), so with ``sizes="replayed"`` (the default) the cut reads the
    context size at each assistant message from Pi's estimate of the replayed messages, and
    ``tokensBefore`` is the replayed context's size as for Pi 0.87.1. ``sizes="recorded"`` is
    Pi 0.13.2 to the letter on the replayed file's recorded usage (what the release computes on a
    session without recorded compactions).

The compaction entry is written by pimem's Pi 0.87.1 pipeline, so a replayed file is a Pi 0.87.1
session: after a ``pi-0.13.2`` compaction the context is Pi 0.87.1's projection of it (the summary
in 0.87.1's compaction-summary message, then the kept entries), not 0.13.2's plain user message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pimem.core.compaction.compaction import (
    PI_PROMPTS,
    CompactionPreparation,
    CompactionResult,
    CompactionSettings,
    ModelInfo,
    PromptTemplates,
    estimate_tokens,
)
from pimem.core.compaction.utils import FileOperations
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.llm import Summarizer
from pimem.releases import pi_0_13_2
from pimem.releases import pi_1_6_0
from pimem.errors import ConfigurationError
from pimem.replays.strategies.base import CheckPoint, CompactionStrategy, register_strategy

__all__ = ["Pi160", "Pi0132"]


@register_strategy("pi-1.6.0")
@dataclass(frozen=True)
class Pi160(CompactionStrategy):
    """Pi 1.6.0's compaction (its prompt texts are Pi 0.87.1's)."""

    prompts: PromptTemplates = PI_PROMPTS

    def prepare(self, tracker: ContextTracker, settings: CompactionSettings) -> CompactionPreparation | None:
        prep = tracker.prepare(settings)
        if prep is not None:
            fo = prep.file_ops
            prep.file_ops = FileOperations(set(fo.read), set(fo.written), set(fo.edited))
            pi_1_6_0.add_nested_file_ops(prep.messages_to_summarize, prep.file_ops)
            if prep.is_split_turn:
                pi_1_6_0.add_nested_file_ops(prep.turn_prefix_messages, prep.file_ops)
        return prep

    def summarize(self, preparation: CompactionPreparation, summarizer: Summarizer, *, model: ModelInfo,
                  custom_instructions: str | None = None, thinking_level: str | None = None,
                  session_id: str | None = None) -> CompactionResult:
        return pi_1_6_0.compact(preparation, summarizer, model=model, custom_instructions=custom_instructions,
                                thinking_level=thinking_level, session_id=session_id, prompts=self.prompts)


@register_strategy("pi-0.13.2")
@dataclass(frozen=True)
class Pi0132(CompactionStrategy):
    """Pi 0.13.2's compaction: turn-boundary cuts from recorded usage, the old request format."""

    sizes: str = "replayed"

    def __post_init__(self) -> None:
        if self.sizes not in ("replayed", "recorded"):
            raise ConfigurationError(f"pi-0.13.2: sizes must be 'replayed' or 'recorded', not {self.sizes!r}")

    def should_compact(self, point: CheckPoint) -> bool:
        if point.reason == "overflow":
            return False  # Pi 0.13.2 had no overflow recovery
        return super().should_compact(point)

    def prepare(self, tracker: ContextTracker, settings: CompactionSettings) -> CompactionPreparation | None:
        path = list(tracker.path)
        if not path or path[-1].get("type") == "compaction":
            return None  # Pi 0.13.2: "Already compacted"
        entries = [{"type": "session"}, *path]
        sizes = None
        if self.sizes == "replayed":
            sizes, total = {}, 0
            for i, entry in enumerate(entries):
                if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
                    total += estimate_tokens(entry["message"])
                    if pi_0_13_2.get_assistant_usage(entry["message"]) is not None:
                        sizes[i] = total
        p = pi_0_13_2.prepare_compaction(entries, settings, sizes)
        first = p.first_kept_entry_index
        if first >= len(entries):
            return None
        tokens_before = tracker.context_estimate().tokens if self.sizes == "replayed" else p.tokens_before
        first_kept_id: Any = entries[first].get("id")
        return CompactionPreparation(
            first_kept_entry_id=first_kept_id,
            messages_to_summarize=p.messages_to_summarize,
            turn_prefix_messages=[],
            is_split_turn=False,
            tokens_before=tokens_before,
            previous_summary=p.previous_summary if p.previous_compaction_index >= 0 else None,
            file_ops=FileOperations(),
            settings=settings,
        )

    def summarize(self, preparation: CompactionPreparation, summarizer: Summarizer, *, model: ModelInfo,
                  custom_instructions: str | None = None, thinking_level: str | None = None,
                  session_id: str | None = None) -> CompactionResult:
        p = preparation
        prep = pi_0_13_2.Preparation(
            previous_compaction_index=0 if p.previous_summary is not None else -1,
            first_kept_entry_index=-1,
            tokens_before=p.tokens_before,
            messages_to_summarize=list(p.messages_to_summarize),
            previous_summary=p.previous_summary,
            settings=p.settings,
        )
        request = pi_0_13_2.summary_request(prep, custom_instructions, model=model.id or "")
        response = summarizer.complete(request)
        return CompactionResult(
            summary=response.text,
            first_kept_entry_id=p.first_kept_entry_id,
            tokens_before=p.tokens_before,
            usage=response.usage,
            details=None,
        )
