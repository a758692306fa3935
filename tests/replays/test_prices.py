"""Prices: genai-prices' maintained data for current models, Pi 0.87.1's own table where genai-prices has
no entry, the caller's prices above both, and a warning wherever the two sources disagree."""

from __future__ import annotations

import json
import warnings

import pytest

from pimem.errors import PimemWarning, UnknownPriceError
from pimem.replays.prices import PRICES, Price, genai_price, price_for, price_table


def _cost(price: Price, inp: int, out: int) -> float:
    return (inp * price.input + out * price.output) * 1e-6


def test_current_claude_models_have_a_price_and_it_is_genai_prices_own() -> None:
    from genai_prices import Usage, calc_price

    for model in ("claude-opus-4-6", "claude-opus-4-5-20251101", "anthropic/claude-sonnet-4-5", "gpt-5.1-codex"):
        price = price_for(model)
        bare = model.rsplit("/", 1)[-1]
        theirs = calc_price(Usage(input_tokens=10_000, output_tokens=2_000), bare)
        assert _cost(price, 10_000, 2_000) == pytest.approx(float(theirs.total_price), rel=1e-12), model
    assert genai_price("claude-opus-4-6")[1] == "claude-opus-4-6"


def test_the_callers_prices_win_and_pi_s_table_fills_what_genai_prices_lacks() -> None:
    mine = Price(1, 2, 0.1, 1.5)
    assert price_for("claude-opus-4-6", {"claude-opus-4-6": mine}) == mine
    assert price_for("claude-opus-4-6-20260101", {"claude-opus-4-6": {"input": 1, "output": 2, "cache_read": 0.1,
                                                                      "cache_write": 1.5}}) == mine
    only_pi = price_table().query("used == 'pi'")["model"].tolist()
    assert only_pi and all(genai_price(m) is None for m in only_pi)
    assert all(price_for(m) == PRICES[m] for m in only_pi)
    assert price_for("free") == Price(0, 0, 0, 0)
    with pytest.raises(UnknownPriceError, match="no price for model 'mystery-1'; neither genai-prices nor Pi"):
        price_for("mystery-1")


def test_a_disagreement_with_pis_table_is_said_not_hidden() -> None:
    from pimem.replays import prices

    table = price_table()
    differing = table[table["differs"]]
    assert len(differing) >= 1
    model = differing["model"].iloc[0]
    prices._warn_once.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = price_for(model)
        price_for("claude-sonnet-4-5")  # the same in both: nothing to say
    messages = [str(w.message) for w in caught if issubclass(w.category, PimemWarning)]
    assert got == genai_price(model)[0] != PRICES[model]
    assert len(messages) == 1 and f"price of {model!r}: genai-prices" in messages[0], messages
    assert "differs from Pi 0.87.1's table" in messages[0] and "prices=pimem.PRICES" in messages[0]
    row = table.set_index("model").loc["claude-sonnet-4-5"]
    assert row["genai_input"] == row["pi_input"] == 3.0 and not row["differs"]
    assert "requests over 200,000 input tokens cost more" in row["note"]


def test_pis_table_is_pi_0_87_1s_catalog() -> None:
    """Differential: PRICES holds every Anthropic, OpenAI and Google model of the installed Pi 0.87.1's
    catalog at its prices (a zero cache price paid at the input price, as pimem bills a request)."""
    from tests.oracle.install import oracle_dir

    data = oracle_dir() / "node_modules" / "@earendil-works" / "pi-ai" / "dist" / "providers" / "data"
    if not data.is_dir():
        pytest.skip(f"the Pi oracle is not installed ({data})")
    seen = 0
    for provider in ("anthropic", "openai", "google"):
        for models in json.loads((data / f"{provider}.json").read_text()).values():
            for model_id, model in models.items():
                c = model["cost"]
                assert PRICES[model_id] == Price(c["input"], c["output"], c["cacheRead"] or c["input"],
                                                 c["cacheWrite"] or c["input"]), model_id
                seen += 1
    assert seen == len(PRICES) - 1  # and "free"


def test_a_replay_with_requests_above_a_long_context_tier_says_its_cost_is_understated() -> None:
    """Sonnet 4.5 costs more per token in requests above 200,000 input tokens; the price is the base tier's,
    so a replay with such requests warns, and one without does not."""
    from types import SimpleNamespace

    import pandas as pd

    from pimem.replays.cost import replay_cost

    assert price_for("claude-sonnet-4-5").long_context_above == 200_000
    assert price_for("claude-opus-4-5").long_context_above is None

    def result(*sizes: int) -> SimpleNamespace:
        calls = pd.DataFrame({"context_tokens": list(sizes), "prefix_tokens": [0] * len(sizes),
                              "timestamp": [1000 * i for i in range(len(sizes))], "output_tokens": [100] * len(sizes),
                              "refused": [False] * len(sizes)})
        return SimpleNamespace(calls=calls, events=pd.DataFrame(columns=["request_tokens", "response_tokens"]))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        small = replay_cost(result(150_000, 190_000), model="claude-sonnet-4-5")
        large = replay_cost(result(150_000, 250_000), model="claude-sonnet-4-5")
    said = [str(w.message) for w in caught if issubclass(w.category, PimemWarning)]
    assert len(said) == 1 and "up to 250,000 input tokens" in said[0] and "above 200,000" in said[0], said
    assert large["cost_total"] > small["cost_total"] > 0
