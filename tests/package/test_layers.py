"""The package's layers: each folder of ``pimem/`` is one layer and may import only its own layer and
those below it; no module imports another in a cycle; a module imports another only at module level,
except where loading late is the point (a heavy library); no private name crosses a module."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pimem

PACKAGE = Path(pimem.__file__).parent

# Bottom → top. ``pimem.errors`` is usable by all; the facade (``pimem/__init__.py``) names every
# layer lazily and is imported by none but the command line (for ``__version__``).
LAYERS = ["base", "core", "releases", "text", "sessions", "summarizers", "replays", "drift", "experiments",
          "viz", "cli"]

# What each layer may import (besides ``pimem.errors``).
ALLOWED: dict[str, set[str]] = {
    "base": {"base"},
    "core": {"base", "core"},
    "releases": {"base", "core", "releases"},
    "text": {"base", "core", "releases", "text"},
    "sessions": {"base", "core", "releases", "text", "sessions"},
    "summarizers": {"base", "core", "releases", "text", "sessions", "summarizers"},
    "replays": {"base", "core", "releases", "text", "sessions", "summarizers", "replays"},
    "drift": {"base", "core", "releases", "text", "sessions", "summarizers", "replays", "drift"},
    "experiments": {"base", "core", "releases", "text", "sessions", "summarizers", "replays", "drift",
                    "experiments"},
    "viz": {"base", "core", "releases", "text", "sessions", "summarizers", "replays", "drift", "experiments",
            "viz"},
    "cli": {"base", "core", "releases", "text", "sessions", "summarizers", "replays", "drift", "experiments",
            "viz", "cli", "facade"},
}

# Third-party libraries that make an import slow or pull in an optional stack; an import inside a
# function is right when it spares its module one of these.
HEAVY = {"pandas", "numpy", "matplotlib", "openai", "httpx", "tiktoken", "ipywidgets", "dask", "distributed",
         "tqdm", "IPython", "scipy", "sklearn"}
IMPLIES = {"pandas": {"numpy"}, "matplotlib": {"numpy"}, "openai": {"httpx"}, "dask": {"numpy", "pandas"}}

# Every import of a pimem module inside a function: (importing module, imported module) → why late.
LAZY: dict[tuple[str, str], str] = {
    **{("pimem.sessions.session", "pimem.sessions.frames"):
       "a session loads without pandas; its DataFrame views bring pandas when first asked for"},
    ("pimem.summarizers.registry", "pimem.summarizers.openai_compat"):
        "the openai client loads only when a model is named",
    ("pimem.summarizers.registry", "pimem.summarizers.local"): "the openai client loads only when the local model is named",
    ("pimem.summarizers.baselines", "pimem.text.facts"): "only the fact-dump baseline reads facts (pandas)",
    ("pimem.drift.chat", "pimem.summarizers.openai_compat"): "the openai client loads only when a judge is asked",
    ("pimem.experiments.model_summaries", "pimem.summarizers.local"):
        "the openai client loads only when the local model is asked",
    **{("pimem.cli.main", module):
       "`pimem --help`, `ls` and `show` start without pandas or matplotlib; each command loads its own stack"
       for module in ("pimem.replays.engine", "pimem.replays.cost", "pimem.sessions.discover",
                      "pimem.experiments.sweep", "pimem.experiments.uncertainty", "pimem.viz.report",
                      "pimem.experiments.model_summaries", "pimem.viz.notebooks",
                      "pimem.experiments.advise")},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TYPE_ONLY: set[tuple[str, int]] = set()  # (module, line) of the imports made for the type checker only


def _resolve(name: str) -> str | None:
    """The pimem module an imported dotted name lives in (a module, or a name in one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "facade"
    return {"errors": "errors", "__main__": "cli"}.get(parts[1], parts[1])


@cache
def _imports(module: str) -> list[tuple[int, str, list[str], bool]]:
    """(line, imported base module, names, at module level) for every import in ``module``; imports
    under ``if TYPE_CHECKING:`` count as module level (for the layers) but load nothing (``_loads``)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top: set[int] = set()

    def mark(nodes: list[ast.stmt]) -> None:  # module level: also inside if / try at module level
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                top.add(id(node))
            elif isinstance(node, ast.If):
                mark(node.body)
                mark(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    mark(block)

    mark(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            TYPE_ONLY.update((module, sub.lineno) for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom)))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node.lineno, alias.name, [], id(node) in top))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            found.append((node.lineno, base, [a.name for a in node.names], id(node) in top))
    return found


def _edges(module: str, *, module_level_only: bool = False) -> list[tuple[int, str, bool]]:
    """(line, imported pimem module, at module level) for every pimem module ``module`` imports."""
    out = []
    for line, base, names, at_top in _imports(module):
        if not base.startswith("pimem") or (module_level_only and not at_top):
            continue
        targets = {_resolve(f"{base}.{n}") or _resolve(base) for n in names} if names else {_resolve(base)}
        if base == "pimem":
            targets = {_resolve(f"pimem.{n}") or "pimem" for n in names}
        out += [(line, t, at_top) for t in sorted(t for t in targets if t and t != module)]
    return out


def _heavy(module: str) -> set[str]:
    """The heavy libraries importing ``module`` loads (through its module-level imports)."""
    seen: set[str] = set()
    heavy: set[str] = set()
    stack = [module]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.split(".")
        stack += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES]
        for line, base, _, at_top in _imports(current):
            if at_top and base.split(".")[0] in HEAVY and (current, line) not in TYPE_ONLY:
                heavy.add(base.split(".")[0])
        stack += [t for line, t, _ in _edges(current, module_level_only=True) if (current, line) not in TYPE_ONLY]
    for name in list(heavy):
        heavy |= IMPLIES.get(name, set())
    return heavy


def test_every_folder_is_a_layer_of_the_table() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS)
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == {"__init__", "__main__", "errors"}


def test_the_table_lets_each_layer_import_itself_and_those_below() -> None:
    for i, layer in enumerate(LAYERS):
        assert ALLOWED[layer] - {"facade"} == set(LAYERS[: i + 1]), layer


def test_every_import_keeps_to_the_layers() -> None:
    offending = []
    for module in MODULES:
        source = _layer(module)
        if source in ("facade", "errors"):
            continue
        for line, target, _ in _edges(module):
            if _layer(target) != "errors" and _layer(target) not in ALLOWED[source]:
                offending.append(f"{module}:{line} ({source}) imports {target} ({_layer(target)})")
    assert offending == []


def test_errors_and_base_import_no_other_layer() -> None:
    assert [t for _, t, _ in _edges("pimem.errors")] == []
    for module in (m for m in MODULES if _layer(m) == "base"):
        assert {_layer(t) for _, t, _ in _edges(module)} <= {"base", "errors"}, module


def test_no_import_cycle() -> None:
    """Imports for the type checker only load nothing and may point back (a class named in a hint)."""
    graph = {m: {t for line, t, _ in _edges(m) if (m, line) not in TYPE_ONLY} for m in MODULES}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        trail.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail)
        trail.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert cycles == []


def test_imports_inside_functions_are_only_the_listed_lazy_ones() -> None:
    found = {(m, t) for m in MODULES for _, t, at_top in _edges(m) if not at_top}
    assert sorted(found - set(LAZY)) == []  # a late import not in the table: import it at module level
    assert sorted(set(LAZY) - found) == []  # a table row no import needs any more


def test_each_lazy_import_spares_its_module_a_heavy_library() -> None:
    pointless = []
    for importer, imported in LAZY:
        if not _heavy(imported) - _heavy(importer):
            pointless.append(f"{importer} imports {imported} late but gains nothing ({LAZY[importer, imported]})")
    assert pointless == []


def test_the_package_facades_stay_lazy() -> None:
    for package in ("pimem", "pimem.summarizers", "pimem.drift"):
        at_top = [t for _, t, top in _edges(package) if top and t.startswith(package + ".")]
        assert at_top == [], package


def test_no_private_name_crosses_a_module() -> None:
    crossing = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_aliases: dict[str, str] = {}
        for line, base, names, _ in _imports(module):
            if not base.startswith("pimem"):
                continue
            for name in names:
                if name.startswith("_") and not name.endswith("__"):
                    crossing.append(f"{module}:{line} imports {base}.{name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pimem"):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        module_aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                module_aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in module_aliases and node.attr.startswith("_")
                    and not node.attr.endswith("__")):
                crossing.append(f"{module}:{node.lineno} uses {module_aliases[node.value.id]}.{node.attr}")
    assert crossing == []


def test_the_checks_see_what_they_check() -> None:
    """The readers above see function-level imports, module aliases and relative imports."""
    late = {t for _, t, top in _edges("pimem.sessions.session") if not top}
    assert late == {"pimem.sessions.frames"}
    assert "pimem.core.session_manager" in {t for _, t, _ in _edges("pimem.sessions.session")}
    assert _heavy("pimem.sessions.frames") >= {"pandas", "numpy"} and "pandas" not in _heavy("pimem.sessions.session")
    assert _layer("pimem.replays.engine") == "replays" and _layer("pimem.errors") == "errors"
