"""pimem's public names: the stub (``pimem/__init__.pyi``) is their one list, the lazy facade reads it,
every name resolves to what its home defines, and every name the README and the docs show exists."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import pimem

STUB = Path(pimem.__file__).with_suffix(".pyi")
REPO = Path(pimem.__file__).parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _stub_imports() -> list[tuple[int, str, ast.alias]]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    return [(node.lineno, node.module or "", alias) for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module != "__future__" for alias in node.names]


def test_the_stub_declares_each_name_once_as_itself_from_pimem() -> None:
    seen: dict[str, int] = {}
    problems = []
    for line, module, alias in _stub_imports():
        name = alias.asname or alias.name
        if name in seen:
            problems.append(f"{STUB.name}:{line}: {name} again (first on line {seen[name]})")
        if alias.asname != alias.name:
            problems.append(f"{STUB.name}:{line}: {alias.name} must be re-exported as 'as {alias.name}'")
        if not module.startswith("pimem."):
            problems.append(f"{STUB.name}:{line}: {name} from {module}, outside pimem")
        seen.setdefault(name, line)
    assert problems == []
    assert len(seen) >= 130  # the reader must not miss the stub's names


def test_the_facade_exports_exactly_the_stub() -> None:
    declared = {alias.name for _, _, alias in _stub_imports()}
    assert set(pimem._EXPORTS) == declared
    assert pimem.__all__ == sorted(declared) + ["__version__"]
    assert dir(pimem) == sorted(pimem.__all__)


def test_the_stub_declares_the_version_and_all() -> None:
    names = {t.target.id for t in ast.parse(STUB.read_text(encoding="utf-8")).body
             if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
    assert names == {"__version__", "__all__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", pimem.__version__)


@pytest.mark.parametrize("line,module,alias", _stub_imports(), ids=lambda v: getattr(v, "name", None) or "")
def test_every_name_is_what_its_home_defines(line: int, module: str, alias: ast.alias) -> None:
    value = getattr(pimem, alias.name)
    home = importlib.import_module(module)
    if inspect.ismodule(value):
        assert value is importlib.import_module(f"{module}.{alias.name}")
    else:
        assert getattr(home, alias.name) is value
    if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ != module:
        # a package facade that re-exports it (pimem.drift, pimem.summarizers): it lists the name
        assert alias.name in getattr(home, "__all__", ()), f"{STUB.name}:{line}: {alias.name} is not {module}'s"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        pimem.no_such_name  # noqa: B018


def test_every_error_and_warning_is_exported() -> None:
    import pimem.errors

    assert set(pimem.errors.__all__) <= set(pimem.__all__)


def test_the_stub_ships_with_the_package() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert "__init__.pyi" in pyproject


# -- what the README and the docs show -------------------------------------------------------------


def _resolves(dotted: str) -> bool:
    """``pimem.a.b``: a module, or a name in the longest module of its prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for part in parts[cut:]:
                value = getattr(value, part)
        except AttributeError:
            return False
        return True
    return False


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


GUIDE = ["getting-started", "what-it-does", "strategies", "data", "models", "other-agents", "testing", "layout"]


def _readme_and_guide() -> str:
    """The README and the guide pages its reference moved to."""
    pages = [REPO / "README.md", *(REPO / "docs" / f"{name}.md" for name in GUIDE)]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_the_readme_python_blocks_use_only_names_pimem_has() -> None:
    blocks = _python_blocks(_readme_and_guide())
    assert blocks  # the README and its guide pages show code
    used: set[str] = set()
    for block in blocks:
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pimem":
                used.add(node.attr)
            elif isinstance(node, ast.ImportFrom) and node.module == "pimem":
                used.update(alias.name for alias in node.names)
    assert used >= {"load_session", "replay", "sweep"}
    assert sorted(name for name in used if name not in pimem.__all__) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_pimem_name_the_docs_mention_exists(doc: Path) -> None:
    mentioned = set(re.findall(r"\bpimem(?:\.[A-Za-z_]\w*)+", doc.read_text(encoding="utf-8")))
    assert sorted(name for name in mentioned if not _resolves(name)) == []


def test_the_functions_the_readme_names_bare_are_on_the_facade() -> None:
    """``compare_sources(session, {...})`` in the README's (and its guide's) prose is ``pimem.compare_sources``: every
    backticked call is a facade name or a method of a facade class, and every backticked name that a
    pimem module exports is on the facade."""
    text = _readme_and_guide()
    classes = [getattr(pimem, n) for n in pimem.__all__ if inspect.isclass(getattr(pimem, n))]
    calls = set(re.findall(r"`([A-Za-z_]\w*)\(", text))
    assert {"compare_sources", "drift_report", "replay", "sweep"} <= calls
    assert sorted(c for c in calls if c not in pimem.__all__ and not any(hasattr(k, c) for k in classes)) == []
    exported = {name for module in ("pimem.drift", "pimem.summarizers", "pimem.replays.engine", "pimem.sessions.load")
                for name in importlib.import_module(module).__all__}
    bare = set(re.findall(r"`([A-Za-z_]\w*)`", text)) & exported
    assert sorted(bare - set(pimem.__all__)) == []


def test_the_readers_see_what_they_check() -> None:
    assert _resolves("pimem.drift.intervals") and _resolves("pimem.replay") and _resolves("pimem.errors.PimemError")
    assert not _resolves("pimem.no_such_name") and not _resolves("pimem.drift.no_such_name")
    assert _python_blocks("x\n```python\nimport pimem\n```\n") == ["import pimem\n"]
