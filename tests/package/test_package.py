"""The package's public surface and its layering: exports resolve, ``import pimem`` stays light,
the faithful core never depends on the analysis layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pimem

PACKAGE = Path(pimem.__file__).parent
# Modules the core may import: itself, the JavaScript-semantics, error and type modules, the atomic
# file writer and the message previews (pure, no pandas).
CORE_MAY_IMPORT = ("pimem.core", "pimem.base", "pimem.errors", "pimem.text.messages")
# The one hand-over upwards: Session's DataFrame views call pimem.sessions.frames when asked (never at import).
CORE_VIEWS = {("core/session_manager.py", "pimem.sessions")}


def test_every_export_resolves() -> None:
    missing = [name for name in pimem.__all__ if getattr(pimem, name, None) is None]
    assert missing == []


def test_replay_and_sweep_are_functions() -> None:
    assert callable(pimem.replay) and pimem.replay.__name__ == "replay"
    assert callable(pimem.sweep) and pimem.sweep.__name__ == "sweep"


def test_prompt_notice_ships_with_the_package() -> None:
    from importlib.resources import files

    notice = files("pimem.core.prompts").joinpath("NOTICE").read_text(encoding="utf-8")
    assert "Mario Zechner" in notice and "MIT" in notice


def test_import_is_light() -> None:
    heavy = ["pandas", "numpy", "matplotlib", "openai", "tiktoken", "ipywidgets"]
    code = f"import pimem, sys; print(*[m in sys.modules for m in {heavy!r}])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert dict(zip(heavy, out)) == {m: "False" for m in heavy}


def test_core_pipeline_imports_without_pandas() -> None:
    code = (
        "import sys; import pimem; pimem.load_session; pimem.build_session_context; pimem.prepare_compaction;"
        " pimem.ContextTracker; pimem.run_compaction; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]


def _pimem_imports(path: Path) -> list[tuple[int, str]]:
    """Every ``pimem...`` module a file imports (module level or inside functions)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "pimem" else [f"pimem.{a.name}" for a in node.names]
            found += [(node.lineno, n) for n in names if n.startswith("pimem")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("pimem")]
    return found


def test_core_never_imports_the_analysis_layer() -> None:
    offending = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        for line, module in _pimem_imports(path):
            if not module.startswith(CORE_MAY_IMPORT) and (str(path.relative_to(PACKAGE)), module) not in CORE_VIEWS:
                offending.append(f"{path.relative_to(PACKAGE)}:{line} imports {module}")
    assert offending == []


def test_layering_check_sees_imports() -> None:
    """The check above would notice an upward import (it reads function-level imports too)."""
    imports = [m for _, m in _pimem_imports(PACKAGE / "core" / "session_manager.py")]
    assert "pimem.core.messages" in imports
