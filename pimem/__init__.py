"""pimem: a research toolkit for the session memory of the Pi coding agent.

Sessions load into pandas, Pi's context projection, compaction and branch-summary
pipeline is reimplemented exactly (Pi 0.87.1), and recorded sessions can be replayed
under other settings and measured.

Public names are imported lazily so that ``import pimem`` stays fast. Their one list is the
stub beside this file (``__init__.pyi``): each ``from HOME import NAME as NAME`` line there is a
``pimem.NAME`` here, loaded from HOME on first use, so the facade and what type checkers see
cannot disagree.
"""

from __future__ import annotations

import ast
import importlib
import os
from typing import Any

__version__ = "0.1.0"


def _read_stub() -> dict[str, str]:
    """name → the module the stub imports it from (``tests/package/test_exported_members.py`` checks
    that no name is declared twice or renamed)."""
    stub = os.path.splitext(__file__)[0] + ".pyi"
    with open(stub, encoding="utf-8") as f:
        tree = ast.parse(f.read(), stub)
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            found.update((alias.asname or alias.name, node.module) for alias in node.names)
    return found


# name -> module it is imported from (a name that is itself a module: its package)
_EXPORTS: dict[str, str] = _read_stub()

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module 'pimem' has no attribute {name!r}")
    module = importlib.import_module(home)
    try:
        value = getattr(module, name)
    except AttributeError:  # a module not yet imported by its package
        value = importlib.import_module(f"{home}.{name}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
