"""The package's public surface: exports resolve, ``import pimem`` stays light (the layers:
``test_layers.py``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable

import pimem

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


def test_every_public_error_and_warning_lives_in_errors() -> None:
    import importlib
    import inspect
    import pkgutil

    import pimem.errors

    elsewhere = []
    for info in pkgutil.walk_packages(pimem.__path__, "pimem."):
        if info.name.endswith("__main__") or info.name == "pimem.errors":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, (Exception, Warning)) and not name.startswith("_")
                    and obj.__module__ == info.name):
                elsewhere.append(f"{info.name}.{name}")
    assert elsewhere == []
    assert all(name in pimem.__all__ for name in pimem.errors.__all__)


def _must_document(obj: object) -> list[tuple[str, object, list[str]]] | None:
    """(suffix of the name, docstring owner, the parameters it documents under ``Args:``) for a
    facade name; None for a name not checked.

    The rule: every function and every class of the facade documents what a caller passes it. A
    function: its parameters, in its docstring. A dataclass: its constructor fields, in the class
    docstring. Another class: its ``__init__`` parameters, in the class docstring. A protocol (never
    constructed): each public method's parameters, in the method's docstring. Names starting with
    ``_`` are private and left out; ``*args`` / ``**kwargs`` are documented by name, without stars;
    a callable without parameters needs no ``Args:`` section.
    Not checked, by kind: exceptions and warnings (constructed with a message, documented in
    ``pimem.errors``), modules, constants and type aliases (neither function nor class).
    """
    import dataclasses
    import inspect

    def public(names: Iterable[str]) -> list[str]:
        return [n for n in names if not n.startswith("_")]

    if inspect.isclass(obj):
        if issubclass(obj, (Exception, Warning)):
            return None
        if getattr(obj, "_is_protocol", False):
            return [(f".{name}", method, public(inspect.signature(method).parameters)[1:])
                    for name, method in vars(obj).items() if inspect.isfunction(method) and not name.startswith("_")]
        if dataclasses.is_dataclass(obj):
            return [("", obj, public(f.name for f in dataclasses.fields(obj) if f.init))]
        return [("", obj, public(inspect.signature(obj).parameters))]
    if inspect.isfunction(obj):
        return [("", obj, public(inspect.signature(obj).parameters))]
    return None


def _undocumented(owner: object, parameters: list[str]) -> list[str]:
    import inspect

    args = (inspect.getdoc(owner) or "").partition("\nArgs:\n")[2]
    missing = [p for p in parameters if f"\n    {p}:" not in "\n" + args]
    return missing or ([] if args or not parameters else ["no Args: section"])


def test_every_function_and_class_of_the_facade_documents_its_arguments() -> None:
    checked, undocumented = 0, {}
    for name in pimem.__all__:
        for suffix, owner, parameters in _must_document(getattr(pimem, name)) or []:
            checked += 1
            missing = _undocumented(owner, parameters)
            if missing:
                undocumented[name + suffix] = missing
    assert undocumented == {}
    assert checked >= 100  # the rule must not leave out the facade by accident


def test_the_rule_checks_what_it_should() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Point:
        """A point.

        Args:
            x: across.
        """

        x: int
        y: int = 0
        _cache: int = 0

    def documented(a: int, *rest: int, **options: int) -> None:
        """Do it.

        Args:
            a: one.
            rest: more.
            options: settings.
        """

    def bare(a: int) -> None:
        """No section."""

    assert _must_document(Point) == [("", Point, ["x", "y"])]
    assert _undocumented(Point, ["x", "y"]) == ["y"]
    assert _must_document(documented) == [("", documented, ["a", "rest", "options"])]
    assert _undocumented(documented, ["a", "rest", "options"]) == []
    assert _undocumented(bare, ["a"]) == ["a"]
    assert _undocumented(lambda: None, []) == []
    assert _must_document(pimem.Summarizer) == [(".complete", pimem.Summarizer.complete, ["request"])]
    assert _must_document(pimem.SessionFormatError) is None
    assert _must_document(pimem.SessionLike) is None and _must_document(pimem.PRICES) is None
