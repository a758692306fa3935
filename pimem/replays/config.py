"""What a replay is asked to do (:class:`ReplayConfig`), and the recording and model it runs on."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Union

from pimem.core.agent_session import Hooks
from pimem.core.compaction.compaction import CompactionSettings, ModelInfo
from pimem.core.llm import Summarizer
from pimem.core.settings_manager import lookup_model
from pimem.errors import ConfigurationError
from pimem.replays.strategies.base import CompactionStrategy
from pimem.replays.tokens import TokenSourceName, get_token_source

__all__ = ["ReplayConfig", "StrategySpec", "Trigger", "TRIGGERS", "resolve_model", "with_window"]

Trigger = Literal["threshold", "recorded", "none"]
TRIGGERS = ("threshold", "recorded", "none")

StrategySpec = Union[CompactionStrategy, str, Mapping[str, Any], None]
"""What names a compaction strategy: a strategy, a name or spec string (``"masking:keep_turns=5"``),
a mapping (``{"name": "masking", "keep_turns": 5}``), or None (Pi 0.87.1); see
:func:`~pimem.replays.strategies.get_strategy`."""


@dataclass(frozen=True)
class ReplayConfig:
    """The settings of one replay (the keyword arguments of :func:`pimem.replay`).

    ``model``/``context_window``: the model whose window the checks use (default: the session's
    model; ``context_window`` overrides its window). ``summarizer``: what writes the summaries.
    ``leaf_id``: the end of the recorded path (default: the session's leaf). ``token_source``
    and ``triggers``: see ``docs/replay.md``. ``hooks``: Pi's extension events. ``seed``: ids of
    the replayed session. ``stop_on_error``: a failing summarizer raises instead of recording a
    ``compact_failed`` event. ``progress``: a progress bar. ``strategy``: the compaction strategy
    (a name or a :class:`~pimem.replays.strategies.CompactionStrategy`; default Pi 0.87.1).
    """

    settings: CompactionSettings = dataclasses.field(default_factory=CompactionSettings)
    summarizer: Summarizer | None = None
    model: ModelInfo | None = None
    context_window: int | None = None
    leaf_id: str | None = None
    token_source: TokenSourceName = "calibrated"
    triggers: Trigger = "threshold"
    hooks: Hooks | None = None
    seed: int = 0
    stop_on_error: bool = False
    progress: bool = False
    strategy: StrategySpec = None

    def __post_init__(self) -> None:
        get_token_source(self.token_source)  # raises for an unknown name
        if self.triggers not in TRIGGERS:
            raise ConfigurationError(f"triggers must be one of {TRIGGERS}, not {self.triggers!r}")

    @property
    def window(self) -> int | None:
        """The window given (``context_window``, else the given model's), or None: the session's."""
        if self.context_window is not None:
            return self.context_window
        return getattr(self.model, "context_window", None)


def resolve_model(model: ModelInfo | None, context_window: int | None, current: dict | None) -> ModelInfo:
    """``model``, or the session's current model from the table in ``pimem.core.settings_manager``
    (a 200k-token, 32k-output model when it is not listed); ``context_window`` overrides the window."""
    info = model
    if info is None and current:
        info = lookup_model(current.get("provider"), current.get("modelId"))
    if info is None:
        info = ModelInfo(context_window=context_window or 200000, max_tokens=32000, reasoning=False)
    if context_window is not None:
        info = with_window(info, context_window)
    return info


def with_window(info: ModelInfo, window: int) -> ModelInfo:
    """``info`` with another context window."""
    return dataclasses.replace(info, context_window=window)
