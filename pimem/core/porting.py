"""The port map: which Pi 0.87.1 function each part of the core stands for.

Every function of :mod:`pimem.core` with a Pi counterpart declares it where it is defined:

* ``@port(file, name)`` on the function (or class, or method) that is the port of Pi's ``name`` in
  ``file`` (a path under ``dist/core/`` of ``@earendil-works/pi-coding-agent@0.87.1``, or ``pi-ai:`` and a
  path of ``@earendil-works/pi-ai``). Each Pi function has exactly one port, its **home**; a change to
  the Pi function is made there.
* ``@port(file, name, part=True)`` on a helper that holds a piece of that function (the characters
  :func:`~pimem.core.compaction.compaction.estimate_tokens` counts, one message's text of
  ``serializeConversation``): the home calls it, nothing decides the same case twice.
* ``@derived(file, name, port=...)`` on a fast path of the incremental engine
  (:mod:`pimem.core.incremental`) that gives the same answer as the port from what it keeps;
  ``tests/core/test_porting.py`` checks each against its port on the samples, the real sessions and
  generated trees.
* :func:`not_ported` lists a Pi function pimem deliberately leaves out, with the reason.

``docs/porting.md`` is generated from these declarations (``scripts/porting-map``; a test fails when
the committed file is stale).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal, TypeVar

__all__ = ["PI_RELEASE", "PiName", "Declaration", "port", "derived", "not_ported", "declarations", "render_map"]

PI_RELEASE = "@earendil-works/pi-coding-agent@0.87.1"
F = TypeVar("F", bound=Callable[..., Any])

# The modules holding declarations: importing them runs their decorators.
MODULES = (
    "pimem.core.pi_ai",
    "pimem.core.messages",
    "pimem.core.session_manager",
    "pimem.core.compaction.utils",
    "pimem.core.compaction.compaction",
    "pimem.core.compaction.branch_summarization",
    "pimem.core.settings_manager",
    "pimem.core.agent_session",
    "pimem.core.incremental.paths",
    "pimem.core.incremental.caches",
    "pimem.core.incremental.tracker",
)


@dataclass(frozen=True)
class PiName:
    """A Pi function: its file (under ``dist/core/``, or ``pi-ai:…``) and name (``Class.method`` for a method)."""

    file: str
    name: str

    def __str__(self) -> str:
        return f"{self.file}: {self.name}"


@dataclass(frozen=True)
class Declaration:
    """One declaration of the map.

    Args:
        pi: the Pi function.
        kind: ``"port"`` (its home), ``"part"`` (a piece of the home), ``"derived"`` (a fast path of the
            incremental engine) or ``"not ported"``.
        where: the dotted name of the pimem function (empty for ``"not ported"``).
        port: for a derived path, the dotted name of the port it is tested against.
        note: for ``"not ported"``, the reason.
    """

    pi: PiName
    kind: Literal["port", "part", "derived", "not ported"]
    where: str = ""
    port: str = ""
    note: str = ""


_DECLARATIONS: list[Declaration] = []


def _dotted(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def port(file: str, name: str, *, part: bool = False) -> Callable[[F], F]:
    """Declare the decorated function the port of Pi's ``name`` in ``file`` (``part=True``: a piece of it)."""

    def mark(fn: F) -> F:
        _DECLARATIONS.append(Declaration(PiName(file, name), "part" if part else "port", _dotted(fn)))
        return fn

    return mark


def derived(file: str, name: str, *, port: Callable[..., Any] | str) -> Callable[[F], F]:
    """Declare the decorated function a fast path for Pi's ``name`` in ``file``, tested against ``port``
    (the port function, or its dotted name where it cannot be imported here)."""

    def mark(fn: F) -> F:
        against = port if isinstance(port, str) else _dotted(port)
        _DECLARATIONS.append(Declaration(PiName(file, name), "derived", _dotted(fn), against))
        return fn

    return mark


def not_ported(file: str, name: str, reason: str) -> None:
    """Declare Pi's ``name`` in ``file`` deliberately left out of pimem, and why."""
    _DECLARATIONS.append(Declaration(PiName(file, name), "not ported", note=reason))


def declarations() -> list[Declaration]:
    """Every declaration of the core, after importing the modules that hold them."""
    for module in MODULES:
        importlib.import_module(module)
    return list(_DECLARATIONS)


def _file_order(file: str) -> tuple[int, str]:
    order = ["session-manager.js", "messages.js", "compaction/compaction.js", "compaction/branch-summarization.js",
             "compaction/utils.js", "settings-manager.js", "agent-session.js"]
    return (order.index(file) if file in order else len(order), file)


def render_map() -> str:
    """The text of ``docs/porting.md``: per Pi file, each function's home, its parts and its derived paths."""
    items = declarations()
    by_pi: dict[PiName, list[Declaration]] = {}
    for item in items:
        by_pi.setdefault(item.pi, []).append(item)
    lines = [
        "# Porting map: Pi 0.87.1 in pimem",
        "",
        "<!-- Generated by scripts/porting-map from the declarations in pimem/core (pimem.core.porting); "
        "do not edit. -->",
        "",
        f"Each function of `{PI_RELEASE}` (`dist/core/…`, and the parts of `@earendil-works/pi-ai` the pipeline "
        "uses) that pimem mirrors has exactly one **home**, the port, in the file of the same name under "
        "`pimem/core/` (`compaction/compaction.js` → `pimem/core/compaction/compaction.py`), named as Pi names it "
        "in snake_case. A change to a Pi function is made in its home, and only there: the **parts** listed "
        "beside it are pieces of it that it calls, and the **derived** paths of the incremental engine "
        "(`pimem/core/incremental/`) compute the same answers from what they keep, through the port's own "
        "functions, and are checked against the port they name (`tests/core/test_porting.py`: samples, real "
        "sessions, generated trees). Functions pimem leaves out are listed with the reason.",
        "",
        "Each row comes from a declaration beside the code (`@port`, `@derived`, `not_ported` in "
        "`pimem.core.porting`); `scripts/porting-map` writes this file and a test fails when it is stale.",
    ]
    for file in sorted({pi.file for pi in by_pi}, key=_file_order):
        lines += ["", f"## `{file}`", "", "| Pi 0.87.1 | home in pimem | parts | derived (tested against the home) |",
                  "| --- | --- | --- | --- |"]
        # in the order the homes are defined in their module (declarations of other modules after them)
        names = sorted((pi for pi in by_pi if pi.file == file),
                       key=lambda pi: min(items.index(d) for d in by_pi[pi] if d.kind in ("port", "not ported"))
                       if any(d.kind in ("port", "not ported") for d in by_pi[pi]) else len(items))
        for pi in names:
            group = by_pi[pi]
            if any(d.kind == "not ported" for d in group):
                continue
            homes = [f"`{d.where}`" for d in group if d.kind == "port"]
            parts = sorted(f"`{d.where}`" for d in group if d.kind == "part")
            fast = sorted(f"`{d.where}`" + ("" if d.port in (g.where for g in group if g.kind == "port")
                                             else f" (against `{d.port}`)") for d in group if d.kind == "derived")
            lines.append(f"| `{pi.name}` | {', '.join(homes) or '—'} | {', '.join(parts)} | {', '.join(fast)} |")
        reasons: dict[str, list[str]] = {}
        for pi in names:
            for d in by_pi[pi]:
                if d.kind == "not ported":
                    reasons.setdefault(d.note, []).append(f"`{pi.name}`")
        if reasons:
            lines += ["", "Not ported:", ""]
            lines += [f"* {', '.join(which)}: {note}" for note, which in reasons.items()]
    lines += ["", "## Other releases", "",
              "`pimem/releases/pi_1_6_0.py` and `pimem/releases/pi_0_13_2.py` port those releases where they differ "
              "from 0.87.1 (each checked against its own release in Node); they change with their release, not "
              "with 0.87.1, and call the 0.87.1 homes above for everything they share."]
    return "\n".join(lines) + "\n"
