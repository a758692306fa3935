"""``pimem/__init__.pyi`` declares exactly the names the lazy facade exports, each from its home."""

from __future__ import annotations

import ast
from pathlib import Path

import pimem

STUB = Path(pimem.__file__).with_suffix(".pyi")


def _stub_exports() -> dict[str, str]:
    """name → module (``module:pkg.name`` for a module), as ``_EXPORTS`` writes them."""
    found: dict[str, str] = {}
    for node in ast.parse(STUB.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            for alias in node.names:
                name = alias.asname or alias.name
                assert name not in found, f"{name} is declared twice"
                full = f"{node.module}.{alias.name}"
                is_module = full in {v.removeprefix("module:") for v in pimem._EXPORTS.values()}
                found[name] = f"module:{full}" if is_module else node.module
                assert alias.asname == alias.name or is_module, f"{name}: a stub re-exports with 'as {name}'"
    return found


def test_the_stub_declares_every_export_from_its_home() -> None:
    assert _stub_exports() == pimem._EXPORTS


def test_the_stub_declares_the_version_and_all() -> None:
    names = {t.target.id for t in ast.parse(STUB.read_text(encoding="utf-8")).body
             if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
    assert names == {"__version__", "__all__"}


def test_the_stub_ships_with_the_package() -> None:
    pyproject = (Path(pimem.__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert "__init__.pyi" in pyproject
