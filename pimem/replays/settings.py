"""Compaction settings checked against a context window before a replay (:func:`check_settings`)."""

from __future__ import annotations

import math
from typing import Any

from pimem.errors import ConfigurationError

__all__ = ["check_settings", "check_room"]


def check_settings(settings: Any, context_window: int | float | None) -> list[str]:
    """Validate compaction settings against a context window before a replay.

    Raises :class:`~pimem.errors.ConfigurationError` for settings that leave no room for any
    context: a negative or non-numeric value, or ``reserve_tokens`` at or above the window (the
    threshold ``window − reserve`` is then ≤ 0 and every check compacts; the replay would report
    overflows and contexts above the window). Returns warnings for settings Pi accepts but whose
    result is degenerate: ``keep_recent_tokens`` at or above the threshold (each compaction keeps
    at least a threshold's worth, so the next check compacts again or finds nothing to compact).
    A window of ``None`` or 0 (unknown) is not checked against.

    Args:
        settings: the :class:`~pimem.CompactionSettings` to check.
        context_window: the model's context window in tokens (None or 0: unknown).
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


def check_room(settings: Any, context_window: int | float, overhead: float) -> list[str]:
    """Settings checked against what every request of the session carries (``overhead`` tokens:
    system prompt and tool definitions, the token calibration's fit).

    Raises :class:`~pimem.errors.ConfigurationError` when the window is 0 or not above the
    overhead (the provider would refuse every request). Returns warnings when the threshold
    ``window − reserve`` is at or below the overhead (every check compacts) or when the overhead
    plus ``keep_recent_tokens`` reaches the threshold (each compaction keeps more than the
    threshold allows, so the next check compacts again or finds nothing to compact).
    """
    if not isinstance(context_window, (int, float)) or context_window <= 0:
        raise ConfigurationError(f"context window must be a positive number of tokens, not {context_window!r}")
    if not overhead or overhead != overhead:
        return []
    if context_window <= overhead:
        raise ConfigurationError(
            f"the context window {context_window:,} is not above the {overhead:,.0f} tokens every request of this "
            f"session carries (system prompt and tools, from its token calibration): the provider would refuse "
            f"every request. Choose a window above {overhead:,.0f}")
    if not getattr(settings, "enabled", True):
        return []
    threshold = context_window - settings.reserve_tokens
    if threshold <= overhead:
        return [f"the threshold window − reserve = {threshold:,} is not above the {overhead:,.0f} tokens every "
                f"request carries: every check compacts"]
    if overhead + settings.keep_recent_tokens >= threshold:
        return [f"the {overhead:,.0f} tokens every request carries plus keep_recent_tokens "
                f"{settings.keep_recent_tokens:,} reach the threshold window − reserve = {threshold:,}: each "
                f"compaction keeps the threshold's worth, so the next check compacts again or finds nothing to "
                f"compact"]
    return []
