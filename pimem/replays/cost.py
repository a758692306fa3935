"""What a replayed session would cost: prompt-cache-aware prices per model.

Every replayed request (``ReplayResult.calls``) is priced as a provider with prefix prompt
caching bills it (Anthropic's ``cache_control``, which Pi sets; OpenAI's automatic caching):

* **cache read** — the part of the request that repeats the previous request's prefix
  (``prefix_tokens``: system prompt and tools, plus the leading messages both share; see
  :meth:`pimem.replays.engine.Replayer.cached_prefix`), when the previous request is at most
  ``cache_ttl_s`` seconds older (recorded timestamps; Anthropic's default cache lives 5 minutes);
* **cache write** — the rest of the request: written to the cache for the next one. A compaction
  or a context edit changes the context from its position on, so the next request pays a write on
  everything after that position (for a compaction: the whole conversation; the system prompt and
  tool definitions stay cached). Providers without a write premium list ``cache_write`` equal to
  ``input``;
* **refused** — a request the provider refuses as larger than the window costs nothing and caches
  nothing: Pi records it as an error assistant message with zero usage (``ReplayResult.calls``
  marks it ``refused``; the next request's cached prefix is the last answered request's);
* **output** — the recorded response's output tokens (the replay is open-loop: responses are the
  recording's);
* **summarization** — each summary request at the summarizer model's input price (Pi sends them
  with ``cacheRetention: "none"``) and its response at the output price; the token counts are
  what the summarizer reported (the offline extractive summarizer reports Pi's chars/4 estimates).

Prices are US dollars per million tokens, from :mod:`pimem.replays.prices`: the caller's
``prices={"model": Price(...)}`` (or ``{"model": {"input": …, …}}``) first, then genai-prices' maintained
data, then :data:`PRICES` (Pi 0.87.1's own table); an unknown model is a
:class:`~pimem.errors.UnknownPriceError`, never a silent zero.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, TypedDict, cast

import pandas as pd

from pimem.base.tables import Column, Table, as_flag, column_total, is_missing
from pimem.core.incremental.paths import build_session_projection
from pimem.errors import ConfigurationError, PimemWarning
from pimem.replays.prices import PRICES, Price, as_price, price_for

__all__ = ["Price", "PRICES", "price_for", "as_price", "replay_cost", "recorded_cost", "ReplayCost", "COST",
           "COST_COLUMNS", "RECORDED_COST"]


class ReplayCost(TypedDict):
    """What :func:`replay_cost` returns: token counts, then US dollars."""

    cost_model: str
    cache_read_tokens: float
    cache_write_tokens: float
    input_tokens: float
    output_tokens: float
    cost_cache_read: float
    cost_cache_write: float
    cost_input: float
    cost_output: float
    cost_summarization: float
    cost_total: float
    cache_hit_rate: float


COST = Table("cost", [
    Column("cost_model", description="the priced model"),
    Column("cache_read_tokens", description="request tokens read from the prompt cache"),
    Column("cache_write_tokens", description="request tokens written to the prompt cache"),
    Column("input_tokens", description="uncached request tokens (0: every request writes the cache)"),
    Column("output_tokens", description="the recorded responses' output tokens"),
    Column("cost_cache_read", description="US dollars for the cache reads"),
    Column("cost_cache_write", description="US dollars for the cache writes"),
    Column("cost_input", description="US dollars for uncached input"),
    Column("cost_output", description="US dollars for the output"),
    Column("cost_summarization", description="US dollars for the summary requests and responses"),
    Column("cost_total", description="the sum of the costs"),
    Column("cache_hit_rate", description="cache reads / request tokens (NaN without requests)"),
], "What a replay would cost: one value each (a sweep row carries them).")
COST_COLUMNS = COST.names  # the keys of :class:`ReplayCost`, in order

RECORDED_COST = Table("recorded_cost", [
    Column("entry_id", description="the assistant entry"),
    Column("model", description="its model"),
    Column("input", description="recorded usage"),
    Column("output", description="recorded usage"),
    Column("cache_read", description="recorded usage"),
    Column("cache_write", description="recorded usage"),
    Column("cost", description="US dollars by the price table"),
    Column("recorded_cost", description="``usage.cost.total`` as Pi recorded it"),
], "One row per assistant message with usage on the active path, priced.")

def _session_model(result: Any) -> str:
    model = build_session_projection(result.session).model or {}
    return str(model.get("modelId") or "")


def _rows(result: Any, name: str) -> list[dict]:
    """A replay's events or calls as rows: its own (no table made), else its table's."""
    table_rows = getattr(result, "table_rows", None)
    if table_rows is not None:
        return table_rows(name)
    return getattr(result, name).to_dict("records")


def replay_cost(
    result: Any,
    *,
    model: str | None = None,
    summarizer_model: str | None = None,
    prices: Mapping[str, Any] | None = None,
    cache_ttl_s: float | None = 300.0,
) -> ReplayCost:
    """The cost of a replay (:class:`~pimem.replays.engine.ReplayResult`) in US dollars, with its token counts.

    ``model``: the priced model (default: the session's current model); ``summarizer_model``: the
    model that writes summaries (default: ``model``); ``cache_ttl_s``: a request more than this
    after the previous one reads nothing from the cache (None: the cache never expires).
    Returns the values of :data:`COST` (the keys of :class:`ReplayCost`).

    Args:
        result: the replay.
        model: the priced model (default: the session's current model).
        summarizer_model: the model that writes summaries (default: ``model``).
        prices: prices by model name, looked up before :data:`PRICES`.
        cache_ttl_s: seconds a cached prefix lives (None: it never expires).
    """
    model = model or _session_model(result)
    price = price_for(model, prices)
    sprice = price_for(summarizer_model, prices) if summarizer_model else price
    read = write = output = largest = 0.0
    prev_ts: float | None = None
    for call in _rows(result, "calls"):
        tokens: Any = call.get("context_tokens")
        prefix: Any = call.get("prefix_tokens")
        ts: Any = call.get("timestamp")
        if as_flag(call.get("refused")) or not (isinstance(tokens, (int, float)) and math.isfinite(tokens)):
            continue  # a refused request costs nothing (Pi records it with zero usage) and warms no cache
        hit = 0.0 if is_missing(prefix) else float(prefix)
        if cache_ttl_s is not None and prev_ts is not None and not is_missing(ts) and \
                (ts - prev_ts) / 1000.0 > cache_ttl_s:
            hit = 0.0
        read += hit
        write += max(float(tokens) - hit, 0.0)
        largest = max(largest, float(tokens))
        output += float(call.get("output_tokens") or 0)
        if not is_missing(ts):
            prev_ts = ts
    if price.long_context_above is not None and largest > price.long_context_above:
        warnings.warn(f"{model}: requests of up to {largest:,.0f} input tokens are priced at the base tier; "
                      f"above {price.long_context_above:,} tokens the provider charges more (cost understated)",
                      PimemWarning, stacklevel=2)
    events = _rows(result, "events")
    s_in = column_total(events, "request_tokens")
    s_out = column_total(events, "response_tokens")
    m = 1e-6
    costs = {
        "cost_cache_read": read * price.cache_read * m,
        "cost_cache_write": write * price.cache_write * m,
        "cost_input": 0.0,
        "cost_output": output * price.output * m,
        "cost_summarization": (s_in * sprice.input + s_out * sprice.output) * m,
    }
    total_prompt = read + write
    return cast(ReplayCost, {
        "cost_model": model,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "input_tokens": 0.0,
        "output_tokens": output,
        **costs,
        "cost_total": sum(costs.values()),
        "cache_hit_rate": read / total_prompt if total_prompt else math.nan,
    })


def recorded_cost(session: Any, prices: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The recording's own usage priced with the table, beside the cost Pi recorded (a check of
    the table): one row per assistant message with usage."""
    rows = []
    for entry in session.get_branch():
        msg = entry.get("message") if entry.get("type") == "message" else None
        if not msg or msg.get("role") != "assistant" or not isinstance(msg.get("usage"), dict):
            continue
        u = msg["usage"]
        try:
            p = price_for(msg.get("model"), prices)
        except ConfigurationError:
            continue
        ours = ((u.get("input") or 0) * p.input + (u.get("output") or 0) * p.output
                + (u.get("cacheRead") or 0) * p.cache_read + (u.get("cacheWrite") or 0) * p.cache_write) * 1e-6
        rows.append({"entry_id": entry.get("id"), "model": msg.get("model"), "input": u.get("input"),
                     "output": u.get("output"), "cache_read": u.get("cacheRead"), "cache_write": u.get("cacheWrite"),
                     "cost": ours, "recorded_cost": (u.get("cost") or {}).get("total")})
    return RECORDED_COST.frame(rows)


RECORDED_COST.document(recorded_cost)
