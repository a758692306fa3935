"""The models a story can switch to, with prices and limits as in Pi 0.87.1's model catalog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Model:
    """A model entry: provider, API, id, prices per million tokens, context window, output limit."""

    provider: str
    api: str
    id: str
    cost: dict[str, float]
    context_window: int
    max_tokens: int
    reasoning: bool = True


MODELS: dict[str, Model] = {
    "claude-sonnet-4-5": Model(
        "anthropic", "anthropic-messages", "claude-sonnet-4-5",
        {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}, 1000000, 64000,
    ),
    "claude-opus-4-5": Model(
        "anthropic", "anthropic-messages", "claude-opus-4-5",
        {"input": 5, "output": 25, "cacheRead": 0.5, "cacheWrite": 6.25}, 200000, 64000,
    ),
    "claude-haiku-4-5": Model(
        "anthropic", "anthropic-messages", "claude-haiku-4-5",
        {"input": 1, "output": 5, "cacheRead": 0.1, "cacheWrite": 1.25}, 200000, 64000,
    ),
    "gpt-5.1": Model(
        "openai", "openai-responses", "gpt-5.1",
        {"input": 1.25, "output": 10, "cacheRead": 0.125, "cacheWrite": 0}, 400000, 128000,
    ),
}

# Tokens of system prompt + tool definitions sent with every request (not in the session file).
SYSTEM_PROMPT_TOKENS = 3184


def calculate_cost(model: Model, usage: dict[str, Any]) -> None:
    """Fill ``usage['cost']`` exactly as pi-ai's ``calculateCost`` does (no tiers, no 1h writes)."""
    rates = model.cost
    cost = usage["cost"]
    cost["input"] = (rates["input"] / 1000000) * usage["input"]
    cost["output"] = (rates["output"] / 1000000) * usage["output"]
    cost["cacheRead"] = (rates["cacheRead"] / 1000000) * usage["cacheRead"]
    cost["cacheWrite"] = (rates["cacheWrite"] * usage["cacheWrite"] + rates["input"] * 2 * 0) / 1000000
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
