"""The port map (``pimem.core.porting``): one home per Pi function, and every fast path equal to its port.

* Every function Pi 0.87.1 exports from the five files of the session memory (``session-manager.js``,
  ``messages.js``, ``compaction/compaction.js``, ``compaction/utils.js``,
  ``compaction/branch-summarization.js``), and every public method of ``SessionManager``, has exactly one
  port in the file of the same name, or is declared not ported with a reason.
* Every declaration names something that exists; a home's docstring names its Pi function; a core
  function whose docstring opens with a Pi function's name is declared (no undeclared twin).
* ``docs/porting.md`` is what ``scripts/porting-map`` writes from the declarations.
* Every derived path of the incremental engine has a check here, and each check compares it with its
  port on the samples, the real sessions and generated trees.
* The port is what runs: a changed port function changes what the public calls answer.
"""

from __future__ import annotations

import ast
import importlib
import random
import re
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

import pimem
from pimem.core import porting
from pimem.core import session_manager as sm
from pimem.core.compaction import compaction as cp
from pimem.core.compaction import utils
from pimem.core.incremental import caches, paths
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.messages import convert_to_llm
from pimem.core.session_manager import NULL_LEAF, Session
from tests.oracle.install import pi_dist
from tests.support.strategies import session_trees

PACKAGE = Path(pimem.__file__).parent
REPO = PACKAGE.parent
COMMITTED = REPO / "tests" / "goldens" / "pi-0.87.1" / "exports.txt"
PORTING = REPO / "docs" / "porting.md"
FILES = ["session-manager.js", "messages.js", "compaction/compaction.js", "compaction/utils.js",
         "compaction/branch-summarization.js"]
MODULES = {"session-manager.js": "pimem.core.session_manager", "messages.js": "pimem.core.messages",
           "compaction/compaction.js": "pimem.core.compaction.compaction",
           "compaction/utils.js": "pimem.core.compaction.utils",
           "compaction/branch-summarization.js": "pimem.core.compaction.branch_summarization",
           "settings-manager.js": "pimem.core.settings_manager", "agent-session.js": "pimem.core.agent_session"}
DECLARATIONS = porting.declarations()


def installed_exports(core: Path) -> list[tuple[str, str]]:
    """(file, name) of every exported function of the five files and every public SessionManager method."""
    found = []
    for file in FILES:
        text = (core / file.replace(".js", ".d.ts")).read_text(encoding="utf-8")
        found += [(file, name) for name in re.findall(r"^export declare function (\w+)", text, re.M)]
        for cls, body in re.findall(r"^export declare class (\w+) \{\n(.*?)^\}", text, re.M | re.S):
            methods = re.findall(r"^    (?:static )?(\w+)\(", body, re.M)
            found += [(file, f"{cls}.{name}") for name in dict.fromkeys(methods) if name != "constructor"]
    return found


def committed_exports() -> list[tuple[str, str]]:
    rows = [line.split(": ") for line in COMMITTED.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return [(file, name) for file, name in rows]


def resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def of_kind(*kinds: str) -> list[porting.Declaration]:
    return [d for d in DECLARATIONS if d.kind in kinds]


# -- the map ------------------------------------------------------------------------------------------


def test_the_committed_list_is_the_installed_release() -> None:
    core = pi_dist() / "core"
    if not core.is_dir():
        pytest.skip("Pi 0.87.1 is not installed (the committed list stands in)")
    assert installed_exports(core) == committed_exports()


def test_every_exported_pi_function_has_one_home_or_a_reason() -> None:
    exports = committed_exports()
    assert len(exports) > 60 and ("compaction/compaction.js", "prepareCompaction") in exports
    problems = []
    for file, name in exports:
        group = [d for d in DECLARATIONS if d.pi == porting.PiName(file, name)]
        homes = [d for d in group if d.kind == "port"]
        reasons = [d for d in group if d.kind == "not ported"]
        if len(homes) + len(reasons) != 1:
            problems.append(f"{file}: {name}: {len(homes)} homes, {len(reasons)} reasons")
        if reasons and not reasons[0].note.strip():
            problems.append(f"{file}: {name}: not ported without a reason")
    assert problems == []


def test_no_pi_function_has_two_homes_and_every_part_has_one() -> None:
    homes: dict[porting.PiName, list[str]] = {}
    for d in of_kind("port"):
        homes.setdefault(d.pi, []).append(d.where)
    assert {pi: where for pi, where in homes.items() if len(where) > 1} == {}
    left_out = {d.pi for d in of_kind("not ported")}
    assert {d.pi for d in of_kind("port")} & left_out == set()
    assert [d for d in of_kind("part", "derived") if d.pi not in homes] == []  # a piece of nothing


def test_every_declaration_names_something_that_exists_in_its_place() -> None:
    for d in of_kind("port", "part"):
        resolve(d.where)
        module = MODULES.get(d.pi.file, "pimem.core.pi_ai" if d.pi.file.startswith("pi-ai:") else "")
        assert d.where.startswith(module + "."), f"{d.pi} lives in {d.where}, not in {module}"
    for d in of_kind("derived"):
        resolve(d.where)
        assert d.where.startswith("pimem.core.incremental."), d.where
        assert resolve(d.port) is not None and d.port in {h.where for h in of_kind("port", "part")}, d


def test_each_home_names_its_pi_function() -> None:
    missing = []
    for d in of_kind("port"):
        name = d.pi.name.split(".")[-1]
        doc = resolve(d.where).__doc__ or ""
        if f"``{name}" not in doc and f"``{d.pi.name}" not in doc:
            missing.append(f"{d.where}: {name}")
    assert missing == []


def test_no_undeclared_core_function_opens_with_a_pi_name() -> None:
    """A docstring opening with ````piName````: presents a function as Pi's: it must be declared."""
    pi_names = {d.pi.name.split(".")[-1] for d in DECLARATIONS}
    declared = {d.where for d in DECLARATIONS}
    undeclared = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            members = [node] + (list(node.body) if isinstance(node, ast.ClassDef) else [])
            for member in members:
                if not isinstance(member, (ast.FunctionDef, ast.ClassDef)):
                    continue
                opening = re.match(r"``(\w+)``", ast.get_docstring(member) or "")
                dotted = f"{module}.{member.name}" if member is node else f"{module}.{node.name}.{member.name}"
                if opening and opening.group(1) in pi_names and dotted not in declared:
                    undeclared.append(dotted)
    assert undeclared == []


def test_the_porting_map_is_current() -> None:
    assert PORTING.read_text(encoding="utf-8") == porting.render_map(), "run scripts/porting-map"


def test_the_map_lists_each_home_and_its_derived_paths() -> None:
    text = porting.render_map()
    row = next(line for line in text.splitlines() if line.startswith("| `prepareCompaction` |"))
    assert "`pimem.core.compaction.compaction.prepare_compaction`" in row
    assert "`pimem.core.incremental.tracker.ContextTracker.prepare`" in row
    row = next(line for line in text.splitlines() if line.startswith("| `buildSessionContext` |"))
    assert "`pimem.core.incremental.paths.build_session_context`" in row
    assert "## `session-manager.js`" in text and "Not ported:" in text


# -- the port is what runs ------------------------------------------------------------------------------


def test_a_changed_port_changes_what_the_public_calls_answer(monkeypatch: pytest.MonkeyPatch,
                                                                sample_paths: list[Path]) -> None:
    session = pimem.load_session(sample_paths[0])
    before = pimem.build_session_context(session)
    assert pimem.estimate_tokens({"role": "user", "content": "hi"}) == 1
    monkeypatch.setattr(cp, "estimate_chars", lambda message: 999)
    assert pimem.estimate_tokens({"role": "user", "content": "hi"}) == 250
    assert pimem.estimate_context_tokens([{"role": "user", "content": "hi"}]).tokens == 250
    monkeypatch.setattr(sm, "session_entry_to_context_messages_of",
                        lambda entries, types=None: sm.EntryMessages(([], dict.fromkeys(range(len(entries)), []))))
    assert before.messages and pimem.build_session_context(session).messages == []
    path = session.get_branch()
    monkeypatch.setattr(utils, "extract_file_ops_from_messages", lambda messages, file_ops: file_ops.read.add("x"))
    prep = pimem.prepare_compaction(path, pimem.CompactionSettings(keep_recent_tokens=0))
    assert prep is None or "x" in prep.file_ops.read


# -- every derived path against its port -------------------------------------------------------------

Check = Callable[[Session, list], int]
CHECKS: dict[str, Check] = {}
KEEPS = (0, 100, 2000, 20000)


def check(*names: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        for name in names:
            CHECKS[name] = fn
        return fn
    return register


def ids(entries: list) -> list[int]:
    return [id(e) for e in entries]


@check("pimem.core.incremental.paths.build_session_path", "pimem.core.incremental.paths.build_context_entries")
def _paths(session: Session, leaves: list) -> int:
    for leaf in leaves:
        assert ids(paths.build_session_path(session, leaf)) == ids(sm.build_session_path(session, leaf)), leaf
        assert ids(paths.build_context_entries(session, leaf)) == ids(sm.build_context_entries(session, leaf)), leaf
    return len(leaves)


@check("pimem.core.incremental.paths.build_session_context", "pimem.core.incremental.paths.build_session_projection")
def _contexts(session: Session, leaves: list) -> int:
    for leaf in leaves:
        assert paths.build_session_context(session, leaf) == sm.build_session_context(session, leaf), leaf
        mine, port = paths.build_session_projection(session, leaf), sm.build_session_projection(session, leaf)
        assert mine == port, leaf
        assert ids([e.source_entry for e in mine.entries]) == ids([e.source_entry for e in port.entries]), leaf
    return len(leaves)


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    """What a call returns, or the class and text of what it raises."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return (type(exc), str(exc))


@check("pimem.core.incremental.paths.find_cut_point", "pimem.core.incremental.paths.prepare_compaction")
def _cuts(session: Session, leaves: list) -> int:
    n = 0
    for leaf in leaves[:: max(1, len(leaves) // 10)]:
        branch = session.get_branch() if leaf in (None, NULL_LEAF) else session.get_branch(leaf)
        for path in (branch, branch[: len(branch) // 2], list(reversed(branch))):
            for keep in KEEPS:
                for start in {0, len(path) // 3}:
                    assert outcome(paths.find_cut_point, path, start, len(path), keep) == outcome(
                        cp.find_cut_point, path, start, len(path), keep), (leaf, keep, start)
                s = cp.CompactionSettings(keep_recent_tokens=keep)
                assert outcome(paths.prepare_compaction, path, s) == outcome(cp.prepare_compaction, path, s), (
                    leaf, keep)
                n += 1
    return n


@check("pimem.core.incremental.caches.TokenCache.estimate", "pimem.core.incremental.caches.serialize_messages")
def _caches(session: Session, leaves: list) -> int:
    tokens, texts, n = caches.TokenCache(), caches.SerializationCache(), 0
    for leaf in leaves[:: max(1, len(leaves) // 20)]:
        messages = sm.build_session_context(session, leaf).messages
        for m in messages:
            assert tokens.estimate(m) == cp.estimate_tokens(m) == tokens.estimate(m)
        for end in sorted({0, len(messages) // 3, len(messages) // 2, len(messages)}):
            assert caches.serialize_messages(messages[:end], texts) == utils.serialize_conversation(
                convert_to_llm(messages[:end]))
            n += 1
    return n


TRACKER = [f"pimem.core.incremental.tracker.ContextTracker{m}" for m in (
    "", ".context_usage_estimate", ".context_estimate", ".should_compact", ".cut_point", ".prepare", ".serialize")]


@check(*TRACKER)
def _tracker(session: Session, leaves: list) -> int:
    n = 0
    for leaf in leaves[:: max(1, len(leaves) // 3)]:
        path = session.get_branch(leaf) if leaf not in (None, NULL_LEAF) else session.get_branch()
        stride = max(1, len(path) // 40)
        tracker = ContextTracker()
        for i, entry in enumerate(path):
            tracker.append(entry)
            if i % stride and i != len(path) - 1:
                continue
            prefix = path[: i + 1]
            port = sm.build_session_projection(prefix)
            proj = tracker.projection
            assert (proj.messages, proj.thinking_level, proj.model) == (port.messages, port.thinking_level, port.model)
            assert proj.entries == port.entries
            assert ids([e.source_entry for e in proj.entries]) == ids([e.source_entry for e in port.entries])
            assert tracker.context_usage_estimate() == cp.estimate_context_tokens(port.messages)
            estimate = cp.estimate_projected_context_tokens(port, prefix)
            assert tracker.context_estimate() == estimate
            for window in (0, estimate.tokens, estimate.tokens + 20000):
                assert tracker.should_compact(window, cp.DEFAULT_COMPACTION_SETTINGS) == cp.should_compact(
                    estimate.tokens, window, cp.DEFAULT_COMPACTION_SETTINGS)
            entries = port.entries
            start = 1 if entries and entries[0].source_entry.get("type") == "compaction" and entries[0].messages else 0
            for keep in KEEPS:
                assert tracker.cut_point(start, len(entries), keep) == cp.find_projected_cut_point(
                    entries, start, len(entries), keep), (i, keep)
                s = cp.CompactionSettings(keep_recent_tokens=keep)
                mine, want = tracker.prepare(s), cp.prepare_compaction(prefix, s)
                assert (mine is None) == (want is None), (i, keep)
                if want is not None:
                    assert mine == want, (i, keep)
                    assert tracker.serialize(mine.messages_to_summarize) == utils.serialize_conversation(
                        convert_to_llm(want.messages_to_summarize))
                n += 1
    return n


def test_every_derived_path_has_a_check() -> None:
    assert {d.where for d in of_kind("derived")} == set(CHECKS)


def _leaves(session: Session) -> list:
    return [None, NULL_LEAF, "no-such-id"] + [e.get("id") for e in session.entries]


def _check_all(session: Session, leaves: list | None = None) -> dict[str, int]:
    leaves = _leaves(session) if leaves is None else leaves
    done: dict[Check, int] = {}
    for fn in CHECKS.values():
        if fn not in done:
            done[fn] = fn(session, leaves)
    return {fn.__name__: n for fn, n in done.items()}


def test_derived_paths_equal_their_ports_on_the_samples(sample_paths: list[Path]) -> None:
    for p in sample_paths:
        counts = _check_all(pimem.load_session(p))
        assert all(counts.values()), (p.name, counts)


@pytest.mark.slow
def test_derived_paths_equal_their_ports_on_the_real_sessions(real_v3_paths: list[Path]) -> None:
    for p in real_v3_paths:
        session = pimem.load_session(p)
        leaves = _leaves(session)
        counts = _check_all(session, leaves[:3] + leaves[3::25] + leaves[-3:])
        assert all(counts.values()), (p.name, counts)


def test_derived_paths_equal_their_ports_on_random_sessions() -> None:
    from tests.core.test_compaction import random_tree

    rng = random.Random(31)
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
    for _ in range(25):
        _check_all(Session(header, random_tree(rng, 60)))


@seed(41)
@settings(max_examples=60, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(tree=session_trees())
def test_derived_paths_equal_their_ports_on_generated_trees(tree: Any) -> None:
    header, entries = tree
    _check_all(Session(header, entries))
