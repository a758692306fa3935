"""One error tree: the tree in ``pimem/errors.py``'s docstring is the classes' own, every error pimem
raises on purpose is a ``PimemError`` (or a warning a ``PimemWarning``), and a built-in exception is
raised as it is only where the list below says why."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
from pathlib import Path

import pytest

import pimem
import pimem.errors as errors

PACKAGE = Path(pimem.__file__).parent

# (function, exception) -> why a built-in is right there. Keyed by the name of the function that
# raises, not by file or line, so that moving code keeps its entry.
ALLOWED: dict[tuple[str, str], str] = {
    ("__getattr__", "AttributeError"): "a module's or class's __getattr__ must raise AttributeError for a name it lacks",
    ("__getitem__", "KeyError"): "a mapping's [] must raise KeyError for a key it lacks (replay rows are mappings)",
    ("__setitem__", "KeyError"): "the same for a column a replay row does not have",
    ("bundled_dir", "ValueError"): "pimem's own callers name the bundled folder: another name is a mistake in pimem",
    ("bundled_dir", "FileNotFoundError"): "a data folder the installation lacks: what open() raises for a missing file",
    ("sample_dir", "FileNotFoundError"): "the same, with how to make the samples in a source checkout",
    ("design_study", "FileNotFoundError"): "a session path that does not exist: what open() raises for it",
    ("advise", "FileNotFoundError"): "the same, for the advisor's corpus",
    ("_reject_constant", "ValueError"): "json.loads's contract (as json.JSONDecodeError): the readers of lines and of "
                                        "settings catch it and record the line as Pi does",
    ("_key_at", "ValueError"): "loads_deep is json.loads for deep nesting: the same contract",
    ("loads_deep", "ValueError"): "as above",
    ("_read_settings_file", "ValueError"): "caught at once and recorded as a SettingsFileError, as Pi records it",
    ("_whole_number", "ValueError"): "caught by its caller, which gives argparse's usage error",
    ("_u16", "TypeError"): "its callers pass strings only: another value is a mistake in pimem",
    ("usage_free_estimate", "IndexError"): "the token source walks the recording first: a step past it is a "
                                           "mistake in pimem",
}


@functools.cache
def _builtin_raises() -> list[tuple[str, int, str, str]]:
    """(file, line, qualified name of the function, exception) of every ``raise`` of a built-in exception."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node: ast.AST, scope: list[str]) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(child, scope + [child.name])
                    continue
                if isinstance(child, ast.Raise) and child.exc is not None:
                    exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                    value = getattr(builtins, exc.id, None) if isinstance(exc, ast.Name) else None
                    if isinstance(value, type) and issubclass(value, BaseException):
                        found.append((str(path.relative_to(PACKAGE.parent)), child.lineno, ".".join(scope),
                                      value.__name__))
                visit(child, scope)

        visit(tree, [])
    return found


def test_no_built_in_exception_is_raised_for_bad_input() -> None:
    unexplained = [f"{file}:{line}: {name} raises {exc}" for file, line, name, exc in _builtin_raises()
                   if (name.rpartition(".")[2], exc) not in ALLOWED]
    assert unexplained == []  # raise a PimemError subclass, or add the place to ALLOWED with why


def test_every_allowed_place_still_raises() -> None:
    seen = {(name.rpartition(".")[2], exc) for _, _, name, exc in _builtin_raises()}
    assert sorted(set(ALLOWED) - seen) == []


def test_the_scan_sees_nested_functions_and_methods() -> None:
    found = {(name, exc) for _, _, name, exc in _builtin_raises()}
    assert ("_lazy_index.LazyIndex.__getattr__", "AttributeError") in found
    assert ("RecordedPath.usage_free_estimate", "IndexError") in found


# -- the documented tree -------------------------------------------------------------------------

_LINE = re.compile(r"^(?P<lead>[│├└─ ]*)(?P<name>[A-Z]\w*)(?: \((?P<builtins>[\w, ]+)\))?(?:\s{2,}\S.*)?$")


def _documented_tree() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """name → (parent in the tree, the built-ins in brackets), from the docstring's literal blocks.

    Each level of the tree is four characters (``├── ``, ``│   ``); a line whose text starts in
    lower case carries a description over."""
    tree: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for block in re.findall(r"::\n\n((?:    .*\n|\n)+)", errors.__doc__ or ""):
        stack: list[str] = []
        for line in block.splitlines():
            line = line[4:]
            if not line.strip() or line.lstrip("│ ")[:1].islower():
                continue
            match = _LINE.match(line)
            assert match, f"cannot read the tree line {line!r}"
            depth = len(match["lead"]) // 4
            assert depth <= len(stack), f"{line!r} is deeper than its parent"
            del stack[depth:]
            assert match["name"] not in tree, f"{match['name']} is in the tree twice"
            tree[match["name"]] = (stack[-1] if stack else None,
                                   tuple(b.strip() for b in (match["builtins"] or "").split(",") if b.strip()))
            stack.append(match["name"])
    return tree


def _class_tree() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """name → (the class of pimem.errors it derives from, the built-ins it adds), from the classes."""
    tree = {}
    for name, cls in vars(errors).items():
        if inspect.isclass(cls) and cls.__module__ == errors.__name__:
            ours = [b.__name__ for b in cls.__bases__ if b.__module__ == errors.__name__]
            assert len(ours) <= 1, f"{name} derives from two pimem classes"
            added = tuple(b.__name__ for b in cls.__bases__ if b.__module__ != errors.__name__ and b is not Exception)
            tree[name] = (ours[0] if ours else None, added)
    return tree


def test_the_docstring_tree_is_the_classes_tree() -> None:
    documented = _documented_tree()
    assert len(documented) >= 20  # the reader must not miss the tree
    assert documented == _class_tree()


def test_every_class_is_exported_and_roots_in_pimem_error_or_pimem_warning() -> None:
    classes = {name for name, cls in vars(errors).items() if inspect.isclass(cls) and cls.__module__ == errors.__name__}
    assert classes == set(errors.__all__)
    assert set(errors.__all__) <= set(pimem.__all__)
    for name in classes:
        cls = getattr(errors, name)
        assert issubclass(cls, (errors.PimemError, errors.PimemWarning)), name
        assert issubclass(cls, errors.PimemError) != issubclass(cls, errors.PimemWarning), name


def test_the_tree_reader_sees_depth_and_builtins() -> None:
    match = _LINE.match("│   ├── ConfigurationError (ValueError)   an argument")
    assert match and match["lead"] == "│   ├── " and match["builtins"] == "ValueError"
    documented = _documented_tree()
    assert documented["ArgumentTypeError"] == ("ConfigurationError", ("TypeError",))
    assert documented["ConfigurationError"] == ("PimemError", ("ValueError",))
    assert documented["PimemError"] == (None, ())
    assert documented["PimemWarning"] == (None, ("UserWarning",))


@pytest.mark.parametrize("name", ["EntryNotFoundError", "UnknownColumnError"])
def test_key_errors_print_their_message_unquoted(name: str) -> None:
    assert str(getattr(errors, name)("no column 'x'")) == "no column 'x'"
