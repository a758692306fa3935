"""Compaction strategies: the protocol (:mod:`pimem.replays.strategies.base`), Pi 0.87.1 (the default)
and the reference strategies, looked up by name with :func:`get_strategy`."""

from pimem.replays.strategies.base import (
    DEFAULT_STRATEGY,
    PI_PROMPTS,
    CheckPoint,
    CompactionStrategy,
    ContextEdit,
    Pi0871,
    PromptTemplates,
    TurnView,
    get_strategy,
    register_strategy,
    strategy_names,
    strategy_spec,
)

__all__ = [
    "CheckPoint", "TurnView", "ContextEdit", "CompactionStrategy", "Pi0871", "PromptTemplates", "PI_PROMPTS",
    "register_strategy", "get_strategy", "strategy_names", "strategy_spec", "DEFAULT_STRATEGY",
]
