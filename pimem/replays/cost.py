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

Prices are US dollars per million tokens, :data:`PRICES` (providers' list prices; override per
call with ``prices={"model": Price(...)}`` or ``{"model": {"input": …, …}}``, or edit a copy).
A model is found by its id with a date suffix or provider prefix removed (``claude-sonnet-4-5-20250929``
→ ``claude-sonnet-4-5``); an unknown model is a :class:`~pimem.errors.UnknownPriceError` naming the
known ones, never a silent zero.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, TypedDict, cast

import pandas as pd

from pimem.base.tables import as_flag, column_total, is_missing
from pimem.core.incremental.paths import build_session_projection
from pimem.errors import ConfigurationError, UnknownPriceError

__all__ = ["Price", "PRICES", "price_for", "replay_cost", "recorded_cost", "ReplayCost", "COST_COLUMNS"]


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens.

    Args:
        input: per million uncached input tokens.
        output: per million output tokens.
        cache_read: per million input tokens read from the prompt cache.
        cache_write: per million input tokens written to the prompt cache.
    """

    input: float
    output: float
    cache_read: float
    cache_write: float


# Providers' list prices (per million tokens; Anthropic cache writes at the 5-minute rate).
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-1": Price(15.0, 75.0, 1.50, 18.75),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "gpt-5.1": Price(1.25, 10.0, 0.125, 1.25),
    "gpt-5": Price(1.25, 10.0, 0.125, 1.25),
    "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.25),
    "gpt-4.1": Price(2.0, 8.0, 0.50, 2.0),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10, 0.40),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075, 0.15),
    "free": Price(0.0, 0.0, 0.0, 0.0),  # a local model
}

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


COST_COLUMNS = list(ReplayCost.__annotations__)

_DATE = re.compile(r"-(20\d{6}|\d{4}-\d{2}-\d{2}|latest)$")


def as_price(value: Any) -> Price:
    """A :class:`Price` from a ``Price`` or a mapping of its four fields."""
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        try:
            fields = {k: float(v) for k, v in value.items()}
            price = Price(**fields)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"a price needs input, output, cache_read, cache_write: {exc}") from None
        bad = {k: v for k, v in fields.items() if not (math.isfinite(v) and v >= 0)}
        if bad:
            raise ConfigurationError("a price is a finite number of dollars per million tokens, at least 0; got "
                                     + ", ".join(f"{k}={v}" for k, v in bad.items()))
        return price
    raise ConfigurationError(f"a price is a Price or a mapping, not {value!r}")


def price_for(model: str, prices: Mapping[str, Any] | None = None) -> Price:
    """The price of ``model`` (``prices`` first, then :data:`PRICES`); see the module docs."""
    table = dict(PRICES)
    table.update({k: as_price(v) for k, v in (prices or {}).items()})
    name = str(model or "").strip()
    candidates = [name, name.rsplit("/", 1)[-1]]
    candidates += [_DATE.sub("", c) for c in candidates]
    for c in candidates:
        if c in table:
            return table[c]
    raise UnknownPriceError(f"no price for model {model!r}; pass prices={{{model!r}: Price(...)}}. "
                             f"Known: {', '.join(sorted(table))}")


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
    Returns the :data:`COST_COLUMNS`.

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
    read = write = output = 0.0
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
        output += float(call.get("output_tokens") or 0)
        if not is_missing(ts):
            prev_ts = ts
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
    return pd.DataFrame(rows, columns=["entry_id", "model", "input", "output", "cache_read", "cache_write", "cost",
                                       "recorded_cost"])
