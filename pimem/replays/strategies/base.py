"""The compaction-strategy protocol: when to act, and what to produce (a compaction and/or context edits).

A replay (:func:`pimem.replay`) walks a recorded path as Pi's agent loop would. Where Pi checks
for compaction, and what size the check reads, belong to the loop and the token source
(:mod:`pimem.replays.engine`); what happens there belongs to a :class:`CompactionStrategy`:

``context_edits(view)``
    Before every replayed assistant call (before the loop's checks for that call). Returns
    :class:`ContextEdit` s, each written to the replayed session as a real ``context_edit``
    entry (Pi's ``appendContextEdit``): the target's content is replaced in the projected
    context (or omitted, ``replacement=None``), token estimates and the calibrated request
    sizes see the replaced content, and Pi 0.87.1 opening the replayed file projects the same
    context. Per-turn pruning (observation masking) lives here. Pi 0.87.1: none.
``should_compact(point)``
    At each check point (:class:`CheckPoint`: ``next_turn``, ``agent_end``, ``before_prompt``
    with reason ``threshold``; ``agent_end``/``before_prompt``/``before_call`` with reason
    ``overflow``). Pi 0.87.1: ``shouldCompact(tokens, window, settings)`` for threshold,
    always for overflow.
``prepare(tracker, settings)``
    What to summarize and where the kept tail starts (a ``CompactionPreparation``, or None for
    nothing to compact). Pi 0.87.1: ``prepareCompaction`` (``tracker.prepare``).
``summarize(preparation, summarizer, *, model, custom_instructions, thinking_level)``
    The summary requests and the result (a ``CompactionResult``: summary, first kept entry,
    details). Pi 0.87.1: ``compact`` with the strategy's :class:`PromptTemplates` (``prompts``).

The compaction itself runs through Pi's pipeline (:func:`pimem.core.agent_session.run_compaction`:
``before_compact`` hooks, ``compact_failed``, the ``CompactionEntry`` exactly as Pi writes it), so
every strategy's replayed file is a Pi 0.87.1 session file.

Strategies are looked up by name (:func:`get_strategy`): ``"pi-0.87.1"`` (the default,
:class:`Pi0871`), and the names in :func:`strategy_names`. A spec string passes parameters:
``"masking:keep_turns=5"``, ``"hybrid:keep_turns=10,placeholder=[omitted]"``. New strategies
register with :func:`register_strategy`; every module of the ``pimem.replays.strategies`` package is
imported on the first look-up, so a new module registers itself by being there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pimem.core.compaction.compaction import (
    PI_PROMPTS,
    CompactionPreparation,
    CompactionResult,
    CompactionSettings,
    ModelInfo,
    PromptTemplates,
    compact,
    should_compact,
)
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.llm import Summarizer
from pimem.errors import ConfigurationError

__all__ = [
    "CheckPoint", "TurnView", "ContextEdit", "CompactionStrategy", "Pi0871", "PromptTemplates", "PI_PROMPTS",
    "register_strategy", "get_strategy", "strategy_names", "strategy_spec", "DEFAULT_STRATEGY",
]

DEFAULT_STRATEGY = "pi-0.87.1"


@dataclass(frozen=True)
class CheckPoint:
    """One check of the replayed agent loop, as a strategy sees it.

    ``check``: ``"next_turn"``, ``"agent_end"``, ``"before_prompt"`` or ``"before_call"``;
    ``reason``: ``"threshold"`` or ``"overflow"``; ``tokens``: the context size the check read
    (per token source; for ``overflow`` the request size); ``threshold``: ``window − reserve``.
    ``tracker``: the replayed branch (projection, estimates, ``prepare``); read it, never append.
    """

    check: str
    reason: str
    tokens: float
    context_window: int
    threshold: float
    settings: CompactionSettings
    tracker: ContextTracker
    will_retry: bool = False


@dataclass(frozen=True)
class TurnView:
    """The replayed branch just before an assistant call: ``turn`` responses were replayed so far
    (the call about to be made is number ``turn``, from 0)."""

    turn: int
    context_window: int
    settings: CompactionSettings
    tracker: ContextTracker


@dataclass(frozen=True)
class ContextEdit:
    """A ``context_edit`` to append: the target entry's content replaced by ``replacement``
    (``{"content": str | list}``; a string for an assistant or tool result becomes one text
    block, as Pi stores it) or omitted from the context (``None``)."""

    target_id: str
    replacement: dict | None


class CompactionStrategy:
    """Base class and protocol of a compaction strategy; its defaults are Pi 0.87.1's.

    Subclasses override any of :meth:`context_edits`, :meth:`should_compact`, :meth:`prepare`,
    :meth:`summarize`; ``name`` is the registry name; ``prompts`` the summary instruction texts.
    A strategy holds parameters only: one instance may serve many replays, in any order.
    Parameters are the dataclass fields of a subclass (or :meth:`params`), and appear in
    :meth:`identity` (sweep cache keys) and :meth:`spec`.
    """

    name: str = DEFAULT_STRATEGY
    prompts: PromptTemplates = PI_PROMPTS

    # -- protocol ------------------------------------------------------------------------------

    def context_edits(self, view: TurnView) -> Sequence[ContextEdit]:
        """Edits to append before the assistant call of ``view.turn`` (Pi 0.87.1: none)."""
        return ()

    def should_compact(self, point: CheckPoint) -> bool:
        """Whether to compact at this check (Pi 0.87.1's ``shouldCompact``; overflow always)."""
        if point.reason == "overflow":
            return True
        return bool(point.context_window > 0 and should_compact(point.tokens, point.context_window, point.settings))

    def prepare(self, tracker: ContextTracker, settings: CompactionSettings) -> CompactionPreparation | None:
        """What to summarize (Pi 0.87.1's ``prepareCompaction`` on the replayed branch)."""
        return tracker.prepare(settings)

    def summarize(self, preparation: CompactionPreparation, summarizer: Summarizer, *, model: ModelInfo,
                  custom_instructions: str | None = None, thinking_level: str | None = None,
                  session_id: str | None = None) -> CompactionResult:
        """The summary requests and the compaction result (Pi 0.87.1's ``compact`` with ``prompts``)."""
        return compact(preparation, summarizer, model=model, custom_instructions=custom_instructions,
                       thinking_level=thinking_level, session_id=session_id, prompts=self.prompts)

    # -- identity ------------------------------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """The strategy's parameters (dataclass fields other than ``prompts``)."""
        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "prompts"}
        return {}

    def identity(self) -> dict[str, Any]:
        """Name, parameters and (when not Pi's) a hash of the prompt templates: what a cache key needs."""
        out: dict[str, Any] = {"strategy": self.name, **self.params()}
        if self.prompts != PI_PROMPTS:
            text = "\x00".join(dataclasses.astuple(self.prompts)).encode()
            out["prompts"] = hashlib.sha256(text).hexdigest()[:16]
        return out

    def spec(self) -> str:
        """The spec string that :func:`get_strategy` turns back into this strategy (prompts aside)."""
        defaults: dict[str, Any] = type(self)().params() if dataclasses.is_dataclass(self) else {}
        changed = {k: v for k, v in self.params().items() if defaults.get(k, object()) != v}
        return self.name + (":" + ",".join(f"{k}={v}" for k, v in changed.items()) if changed else "")

    def __str__(self) -> str:
        return self.spec()


@dataclass(frozen=True)
class Pi0871(CompactionStrategy):
    """Pi 0.87.1 exactly: threshold ``window − reserve``, ``prepareCompaction``, iterative summaries."""

    prompts: PromptTemplates = PI_PROMPTS
    name = DEFAULT_STRATEGY


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

_REGISTRY: dict[str, Callable[..., CompactionStrategy]] = {DEFAULT_STRATEGY: Pi0871}
_DISCOVERED = False


def register_strategy(name: str, factory: Callable[..., CompactionStrategy] | None = None) -> Any:
    """Register ``factory`` (a class or a function of keyword parameters) under ``name``.

    Used as a decorator (``@register_strategy("masking")``) or called directly. A name taken
    by another factory is an error. A registered class's ``name`` is the name it is registered under.

    Args:
        name: the name a spec gives.
        factory: the class or function (None: the decorator form).
    """

    def add(f: Callable[..., CompactionStrategy]) -> Callable[..., CompactionStrategy]:
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not f and getattr(existing, "__qualname__", None) != getattr(
                f, "__qualname__", None):
            raise ConfigurationError(f"compaction strategy {name!r} is already registered")
        if isinstance(f, type):
            f.name = name  # type: ignore[attr-defined]
        _REGISTRY[name] = f
        return f

    return add(factory) if factory is not None else add


def _discover() -> None:
    """Import every module of the ``pimem.replays.strategies`` package once (they register themselves)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not info.name.startswith("_"):
            importlib.import_module(f"pimem.replays.strategies.{info.name}")


def strategy_names() -> list[str]:
    """The registered strategy names, the default first."""
    _discover()
    return [DEFAULT_STRATEGY] + sorted(n for n in _REGISTRY if n != DEFAULT_STRATEGY)


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text in ("true", "false", "True", "False"):
        return text.lower() == "true"
    if text in ("none", "None"):
        return None
    return text


def strategy_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"name:key=value,key=value"`` → (name, parameters); numbers and booleans are converted."""
    name, _, rest = spec.partition(":")
    params: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise ConfigurationError(f"strategy parameter {part!r} in {spec!r} is not key=value")
        params[key.strip()] = _value(value.strip())
    return name.strip(), params


def get_strategy(spec: str | CompactionStrategy | Mapping[str, Any] | None = None, **params: Any) -> CompactionStrategy:
    """A strategy from a name or spec string (``"masking:keep_turns=5"``), a mapping
    (``{"name": "masking", "keep_turns": 5}``), or a strategy (returned as is); None is Pi 0.87.1.
    ``params`` add to (and override) the spec's parameters. Unknown names and parameters are
    :class:`~pimem.errors.ConfigurationError` s naming the known ones.

    Args:
        spec: a name, spec string, mapping or strategy (None: Pi 0.87.1).
        params: parameters added to (and overriding) the spec's.
    """
    if isinstance(spec, CompactionStrategy):
        if params:
            return dataclasses.replace(spec, **params)  # type: ignore[type-var]
        return spec
    if spec is None:
        name, given = DEFAULT_STRATEGY, {}
    elif isinstance(spec, Mapping):
        given = dict(spec)
        name = given.pop("name", given.pop("strategy", DEFAULT_STRATEGY))
    elif isinstance(spec, str):
        name, given = strategy_spec(spec)
    else:
        raise ConfigurationError(f"a compaction strategy is a name, a mapping or a CompactionStrategy, not {spec!r}")
    given.update(params)
    _discover()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigurationError(f"unknown compaction strategy {name!r}; known: {', '.join(strategy_names())}")
    try:
        strategy = factory(**given)
    except TypeError as exc:
        raise ConfigurationError(f"compaction strategy {name!r}: {exc}") from None
    if not isinstance(strategy, CompactionStrategy):
        raise ConfigurationError(f"compaction strategy {name!r} made a {type(strategy).__name__}, "
                                 "not a CompactionStrategy")
    return strategy
