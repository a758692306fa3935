"""The optional C extension (``pimem.core.compiled``, built from ``compiled.c`` by setup) that speeds up the
token estimates, the cut-point walks, the walk of a path over a session's runs, the context's thinking
level and model, the selection of the context entries after a compaction, the projection of plain
message entries and of context edits, and the file operations of tool calls.

Each of its functions decides only plain JSON data and answers -1 or None otherwise; the pure-Python port,
which is the reference, decides the rest. Where the extension was not built (no C compiler) or
``PIMEM_PURE_PYTHON=1`` is set, :data:`compiled` is None and the port runs alone, with the same answers.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from pimem.core import compiled as _built
except ImportError:
    _built = None  # type: ignore[assignment]

compiled: Any = None if os.environ.get("PIMEM_PURE_PYTHON", "") not in ("", "0") else _built
"""The extension module in use, or None."""
COMPILED: bool = compiled is not None
"""Whether the C extension is in use."""
