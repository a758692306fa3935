"""One home per Pi function: every function Pi 0.87.1 exports from ``core/compaction/`` is named in the
docstring of exactly one function or class of ``pimem/core/``, in the file of the same name, and
``docs/porting.md`` maps it to that home and its fast twins."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import pimem
from tests.oracle.install import pi_dist

PACKAGE = Path(pimem.__file__).parent
COMMITTED = Path(__file__).parents[1] / "goldens" / "pi-0.87.1" / "compaction-exports.txt"
PORTING = PACKAGE.parent / "docs" / "porting.md"
PI_FILES = {"compaction": "compaction.py", "branch-summarization": "branch_summarization.py", "utils": "utils.py"}


def _committed() -> list[tuple[str, str]]:
    rows = [line.split(":") for line in COMMITTED.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return [(file.strip(), name.strip()) for file, name in rows]


def _exports() -> list[tuple[str, str]]:
    """(Pi file, function) of every exported function: from the installed release, else the committed list."""
    folder = pi_dist() / "core" / "compaction"
    if not folder.is_dir():
        return _committed()
    return [(path.name.removesuffix(".d.ts"), name) for path in sorted(folder.glob("*.d.ts"))
            for name in re.findall(r"^export declare function (\w+)", path.read_text(encoding="utf-8"), re.M)]


def _homes(name: str) -> list[str]:
    """``file.py:qualified name`` of every core function or class whose docstring names ``name``."""
    found = []
    pattern = re.compile(rf"``{name}[`(]")
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if pattern.search(ast.get_docstring(node) or ""):
                    found.append(f"{path.name}:{node.name}")
    return found


def _porting_rows() -> dict[str, list[str]]:
    """Pi name → the dotted pimem names of its row in docs/porting.md (home first)."""
    rows: dict[str, list[str]] = {}
    for line in PORTING.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[1].startswith("`pimem."):
            pi = cells[0].split("`")[1]
            assert pi not in rows, f"{pi} has two rows in docs/porting.md"
            rows[pi] = re.findall(r"`(pimem\.[\w.]+)`", cells[1] + " " + cells[2])
    return rows


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_the_committed_list_is_the_installed_release() -> None:
    if not (pi_dist() / "core" / "compaction").is_dir():
        pytest.skip("Pi 0.87.1 is not installed (the committed list stands in)")
    assert _exports() == _committed()


def test_the_list_is_not_empty() -> None:
    names = [n for _, n in _exports()]
    assert len(names) >= 20 and {"prepareCompaction", "findCutPoint", "serializeConversation"} <= set(names)


@pytest.mark.parametrize("pi_file,name", _committed())
def test_each_pi_function_has_one_home_in_the_core(pi_file: str, name: str) -> None:
    homes = _homes(name)
    assert len(homes) == 1, f"{name} is named in {len(homes)} core docstrings: {homes}"
    assert homes[0].startswith(PI_FILES[pi_file] + ":"), f"{name} (Pi's {pi_file}.ts) lives in {homes[0]}"


def test_the_porting_map_names_each_home_and_its_twins() -> None:
    rows = _porting_rows()
    missing = [name for _, name in _exports() if name not in rows]
    assert missing == []
    for pi_name, (home, *twins) in ((k, v) for k, v in rows.items() if k in dict((n, f) for f, n in _exports())):
        function = _resolve(home)
        assert re.search(rf"``{pi_name}[`(]", function.__doc__ or ""), f"{home} does not name {pi_name}"
        for twin in twins:
            _resolve(twin)  # every name in the map exists


def test_the_home_check_sees_twins() -> None:
    """A twin that named the Pi function would make two homes: the check counts every docstring."""
    assert _homes("prepareCompaction") == ["compaction.py:prepare_compaction"]
    assert _homes("noSuchPiFunction") == []
