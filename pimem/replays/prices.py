"""Model prices for :mod:`pimem.replays.cost`: US dollars per million tokens, looked up in this order:

1. ``prices=`` given by the caller (``{"model": Price(...)}`` or ``{"model": {"input": …, …}}``;
   ``pimem sweep --prices FILE.json``), which always wins;
2. `genai-prices <https://pypi.org/project/genai-prices/>`_, the maintained price data of current models
   (offline: the snapshot the installed package carries; it is never updated over the network), at the
   prices in force today and at the base tier (``Price.long_context_above`` says where a dearer tier starts;
   a replay with larger requests warns);
3. :data:`PRICES`, Pi 0.87.1's own table (pi-ai's model catalog: Anthropic, OpenAI and Google models, and
   ``free`` for a local model), for a model genai-prices does not know.

Where genai-prices and Pi's table both price a model and differ, the cost uses genai-prices and a
:class:`~pimem.errors.PimemWarning` says so once; pass ``prices=pimem.PRICES`` to bill as Pi does (Pi
records ``usage.cost`` with its own table). :func:`price_table` lists both side by side.
A model is found by its id with a date suffix or provider prefix removed (``claude-sonnet-4-5-20250929``
→ ``claude-sonnet-4-5``); a model neither source knows is an :class:`~pimem.errors.UnknownPriceError`,
never a silent zero.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

import pandas as pd

from pimem.errors import ConfigurationError, PimemWarning, UnknownPriceError

__all__ = ["Price", "PRICES", "price_for", "as_price", "genai_price", "price_table"]


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens.

    Args:
        input: per million uncached input tokens.
        output: per million output tokens.
        cache_read: per million input tokens read from the prompt cache.
        cache_write: per million input tokens written to the prompt cache (equal to ``input`` where the
            provider charges no write premium).
        long_context_above: a request with more input tokens than this costs more (a tier this price does
            not hold); :func:`~pimem.replays.cost.replay_cost` warns when a replay has such requests.
    """

    input: float
    output: float
    cache_read: float
    cache_write: float
    #: input tokens above which a request costs more (a long-context tier), or None; not part of the price
    long_context_above: int | None = field(default=None, compare=False)


# Pi 0.87.1's own table: pi-ai's catalog (dist/providers/data/{anthropic,openai,google}.json), as
# (input, output, cacheRead, cacheWrite) per million tokens; see _pi_price for the zeros.
_PI_0_87_1: dict[str, tuple[float, float, float, float]] = {
    "claude-fable-5": (10, 50, 1, 12.5),
    "claude-fable-5-1": (10, 50, 0.25, 12.5),
    "claude-haiku-4-5": (1, 5, 0.1, 1.25),
    "claude-haiku-4-5-20251001": (1, 5, 0.1, 1.25),
    "claude-opus-4-5": (5, 25, 0.5, 6.25),
    "claude-opus-4-5-20251101": (5, 25, 0.5, 6.25),
    "claude-opus-4-6": (5, 25, 0.5, 6.25),
    "claude-opus-4-7": (5, 25, 0.5, 6.25),
    "claude-opus-4-8": (5, 25, 0.5, 6.25),
    "claude-opus-5": (5, 25, 0.5, 6.25),
    "claude-opus-5-5": (4, 20, 0.2, 5),
    "claude-sonnet-4-5": (3, 15, 0.3, 3.75),
    "claude-sonnet-4-5-20250929": (3, 15, 0.3, 3.75),
    "claude-sonnet-4-6": (3, 15, 0.3, 3.75),
    "claude-sonnet-5": (2, 10, 0.2, 2.5),
    "gpt-4": (30, 60, 0, 0),
    "gpt-4-turbo": (10, 30, 0, 0),
    "gpt-4.1": (2, 8, 0.5, 0),
    "gpt-4.1-mini": (0.4, 1.6, 0.1, 0),
    "gpt-4.1-nano": (0.1, 0.4, 0.025, 0),
    "gpt-4o": (2.5, 10, 1.25, 0),
    "gpt-4o-2024-05-13": (5, 15, 0, 0),
    "gpt-4o-2024-08-06": (2.5, 10, 1.25, 0),
    "gpt-4o-2024-11-20": (2.5, 10, 1.25, 0),
    "gpt-4o-mini": (0.15, 0.6, 0.075, 0),
    "gpt-5": (1.25, 10, 0.125, 0),
    "gpt-5-chat-latest": (1.25, 10, 0.125, 0),
    "gpt-5-mini": (0.25, 2, 0.025, 0),
    "gpt-5-nano": (0.05, 0.4, 0.005, 0),
    "gpt-5-pro": (15, 120, 0, 0),
    "gpt-5.1": (1.25, 10, 0.125, 0),
    "gpt-5.2": (1.75, 14, 0.175, 0),
    "gpt-5.2-chat-latest": (1.75, 14, 0.175, 0),
    "gpt-5.2-pro": (21, 168, 0, 0),
    "gpt-5.3-chat-latest": (1.75, 14, 0.175, 0),
    "gpt-5.3-codex": (1.75, 14, 0.175, 0),
    "gpt-5.3-codex-spark": (1.75, 14, 0.175, 0),
    "gpt-5.4": (2.5, 15, 0.25, 0),
    "gpt-5.4-mini": (0.75, 4.5, 0.075, 0),
    "gpt-5.4-nano": (0.2, 1.25, 0.02, 0),
    "gpt-5.4-pro": (30, 180, 0, 0),
    "gpt-5.5": (5, 30, 0.5, 0),
    "gpt-5.5-pro": (30, 180, 0, 0),
    "gpt-5.6-luna": (0.2, 1.2, 0.02, 0.25),
    "gpt-5.6-sol": (4, 20, 0.4, 5),
    "gpt-5.6-terra": (2, 12, 0.2, 2.5),
    "gpt-6-astra": (10, 50, 1, 12.5),
    "gpt-6-luna": (0.1, 0.5, 0.01, 0.125),
    "gpt-6-sol": (2, 10, 0.2, 2.5),
    "gpt-realtime-2.1": (4, 24, 0.4, 0),
    "o1": (15, 60, 7.5, 0),
    "o1-pro": (150, 600, 0, 0),
    "o3": (2, 8, 0.5, 0),
    "o3-mini": (1.1, 4.4, 0.55, 0),
    "o3-pro": (20, 80, 0, 0),
    "o4-mini": (1.1, 4.4, 0.275, 0),
    "deep-research-max-preview-04-2026": (2, 12, 0.2, 0),
    "deep-research-preview-04-2026": (2, 12, 0.2, 0),
    "gemini-2.5-computer-use-preview-10-2025": (1.25, 10, 0, 0),
    "gemini-2.5-flash": (0.3, 2.5, 0.03, 0),
    "gemini-2.5-flash-lite": (0.1, 0.4, 0.01, 0),
    "gemini-2.5-pro": (1.25, 10, 0.125, 0),
    "gemini-3-flash-preview": (0.5, 3, 0.05, 0),
    "gemini-3.1-flash-lite": (0.25, 1.5, 0.025, 0),
    "gemini-3.1-flash-lite-image": (0.25, 30, 0, 0),
    "gemini-3.1-flash-lite-preview": (0.25, 1.5, 0.025, 0),
    "gemini-3.1-flash-live-preview": (0.75, 4.5, 0, 0),
    "gemini-3.1-pro-preview": (2, 12, 0.2, 0),
    "gemini-3.1-pro-preview-customtools": (2, 12, 0.2, 0),
    "gemini-3.5-flash": (1.5, 9, 0.15, 0),
    "gemini-3.5-flash-lite": (0.3, 2.5, 0.03, 0),
    "gemini-3.6-flash": (0.75, 3.75, 0.075, 0),
    "gemini-3.7-flash": (0.75, 3.75, 0.075, 0),
    "gemini-3.8-flash": (0.75, 3.75, 0.075, 0),
    "gemini-flash-latest": (1.5, 9, 0.15, 0),
    "gemini-flash-lite-latest": (0.25, 1.5, 0.025, 0),
    "gemma-4-26b-a4b-it": (0, 0, 0, 0),
    "gemma-4-31b-it": (0, 0, 0, 0),
}


def _pi_price(row: tuple[float, float, float, float]) -> Price:
    """Pi's row as pimem prices a request: a cache read or write Pi lists at 0 (the model caches nothing,
    or charges no write premium) is paid at the input price, as genai-prices has it."""
    inp, out, read, write = (float(v) for v in row)
    return Price(inp, out, read if read > 0 else inp, write if write > 0 else inp)


#: Pi 0.87.1's own price table (see the module docs), and ``free`` for a local model.
PRICES: dict[str, Price] = {**{k: _pi_price(v) for k, v in _PI_0_87_1.items()}, "free": Price(0.0, 0.0, 0.0, 0.0)}

_DATE = re.compile(r"-(20\d{6}|\d{4}-\d{2}-\d{2}|latest)$")


_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")


def as_price(value: Any) -> Price:
    """A :class:`Price` from a ``Price`` or a mapping of its four fields."""
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        try:
            fields = {str(k): float(v) for k, v in value.items()}
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"a price needs input, output, cache_read, cache_write: {exc}") from None
        missing = [k for k in _PRICE_FIELDS if k not in fields]
        unknown = sorted(set(fields) - set(_PRICE_FIELDS))
        if missing or unknown:
            raise ConfigurationError("a price needs input, output, cache_read, cache_write: "
                                     + "; ".join(x for x in (f"missing {', '.join(missing)}" if missing else "",
                                                             f"unknown {', '.join(unknown)}" if unknown else "") if x))
        price = Price(fields["input"], fields["output"], fields["cache_read"], fields["cache_write"])
        bad = {k: v for k, v in fields.items() if not (math.isfinite(v) and v >= 0)}
        if bad:
            raise ConfigurationError("a price is a finite number of dollars per million tokens, at least 0; got "
                                     + ", ".join(f"{k}={v}" for k, v in bad.items()))
        return price
    raise ConfigurationError(f"a price is a Price or a mapping, not {value!r}")


def _names(model: str) -> list[str]:
    """``model`` and its forms without a provider prefix or a date suffix, most specific first."""
    name = str(model or "").strip()
    candidates = [name, name.rsplit("/", 1)[-1]]
    candidates += [_DATE.sub("", c) for c in candidates]
    return list(dict.fromkeys(c for c in candidates if c))


def _base(value: Any) -> tuple[float | None, int | None]:
    """A genai-prices price field as (base dollars per million, the first tier's start or None)."""
    if value is None:
        return None, None
    tiers = getattr(value, "tiers", None)
    if tiers is not None:
        return float(value.base), min(int(t.start) for t in tiers) if tiers else None
    return float(value), None


@functools.lru_cache(maxsize=256)
def genai_price(model: str) -> tuple[Price, str, str] | None:
    """genai-prices' price of ``model`` today, as (price, the model id it matched, a note), or None when it
    knows no such model. Long-context tiers are named in the note; the price is the base tier's."""
    try:
        from genai_prices import data_snapshot
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    snapshot = data_snapshot.get_snapshot()
    for name in _names(model):
        try:
            _, info = snapshot.find_provider_model(name, None, None, None)
        except LookupError:
            continue
        mp = info.get_prices(datetime.now(timezone.utc))
        (inp, t1), (out, t2), (read, t3), (write, t4) = (
            _base(mp.input_mtok), _base(mp.output_mtok), _base(mp.cache_read_mtok), _base(mp.cache_write_mtok))
        if inp is None or out is None:
            continue
        tier = min((t for t in (t1, t2, t3, t4) if t is not None), default=None)
        note = f"priced at the base tier; requests over {tier:,} input tokens cost more" if tier else ""
        price = Price(inp, out, read if read is not None else inp, write if write is not None else inp, tier)
        return price, str(info.id), note
    return None


def _pi_entry(model: str) -> tuple[str, Price] | None:
    for name in _names(model):
        if name in PRICES:
            return name, PRICES[name]
    return None


@functools.lru_cache(maxsize=256)
def _warn_once(message: str) -> None:
    warnings.warn(message, PimemWarning, stacklevel=4)


def price_for(model: str, prices: Mapping[str, Any] | None = None) -> Price:
    """The price of ``model``: ``prices`` first, then genai-prices, then :data:`PRICES` (see the module docs).

    Raises :class:`~pimem.errors.UnknownPriceError` when none of them knows the model.
    """
    own = {k: as_price(v) for k, v in (prices or {}).items()}
    for name in _names(model):
        if name in own:
            return own[name]
    found = genai_price(str(model or ""))
    pi = _pi_entry(model)
    if found is not None:
        price = found[0]
        if pi is not None and pi[1] != price:
            _warn_once(f"price of {model!r}: genai-prices ({_show(price)}) differs from Pi 0.87.1's table "
                       f"({_show(pi[1])}); costs use genai-prices (pass prices=pimem.PRICES to bill as Pi does)")
        return price
    if pi is not None:
        return pi[1]
    raise UnknownPriceError(f"no price for model {model!r}; neither genai-prices nor Pi 0.87.1's table knows it: "
                            f"pass prices={{{model!r}: Price(...)}} (dollars per million tokens: input, output, "
                            "cache_read, cache_write)")


def _show(p: Price) -> str:
    return f"${p.input:g}/${p.output:g} in/out, ${p.cache_read:g} cache read, ${p.cache_write:g} cache write"


def price_table(models: Iterable[str] | None = None) -> pd.DataFrame:
    """genai-prices' and Pi 0.87.1's prices side by side, one row per model (default: Pi's table):
    ``model``, ``genai_model`` (the id genai-prices matched), the four prices of each source
    (``genai_input`` …, ``pi_input`` …), ``used`` (the source :func:`price_for` uses), ``differs``
    and ``note``."""
    names = list(models) if models is not None else [k for k in PRICES if k != "free"]
    rows = []
    fields = ("input", "output", "cache_read", "cache_write")
    for m in names:
        found = genai_price(m)
        pi = _pi_entry(m)
        row: dict[str, Any] = {"model": m, "genai_model": found[1] if found else None}
        for source, price in (("genai", found[0] if found else None), ("pi", pi[1] if pi else None)):
            for f in fields:
                row[f"{source}_{f}"] = getattr(price, f) if price else math.nan
        row["used"] = "genai-prices" if found else ("pi" if pi else None)
        row["differs"] = bool(found and pi and found[0] != pi[1])
        row["note"] = found[2] if found else ""
        rows.append(row)
    return pd.DataFrame(rows)
