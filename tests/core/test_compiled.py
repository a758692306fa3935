"""The C extension (``pimem.core.compiled``) against the pure-Python port it speeds up.

Where the extension decides, it must give the port's answer; where it cannot, it must say so (-1 or None) so
that the port decides. The functions built on it (``estimate_chars``, ``estimate_tokens``,
``find_cut_point``, ``prepare_compaction``, ``project_parts``, ``build_session_context``) must return what they return with the extension turned off, errors included. The
differential tests against Pi run through the extension whenever it is built. ``PIMEM_REQUIRE_COMPILED=1``
(set in CI) turns a missing extension from a skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem.base.js import js_stringify_py, utf16_len
from pimem.core import session_manager, speedups
from pimem.core.compaction import compaction, utils
from pimem.core.compaction.compaction import CompactionSettings, estimate_chars_py, find_cut_point, prepare_compaction
from pimem.core.session_manager import load_session
from tests.support.strategies import PIECES, session_trees

compiled = speedups.compiled

def _set(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


if compiled is None:
    if _set("PIMEM_REQUIRE_COMPILED") and not _set("PIMEM_PURE_PYTHON"):
        pytest.fail("PIMEM_REQUIRE_COMPILED=1 but the C extension was not built", pytrace=False)
    pytest.skip("the C extension is not built (or PIMEM_PURE_PYTHON is set)", allow_module_level=True)

TEXTS = st.lists(st.text(max_size=12) | st.sampled_from(PIECES), max_size=5).map("".join) | st.sampled_from(
    ["", '"', "\\", "\b\t\n\f\r", "\x00\x01\x1f\x7f", "a" * 9 + '"', "😀" * 5, "\ud83d\ude00", "é" * 20])
NUMBERS = (st.integers(-10**16, 10**16) | st.sampled_from([0, -1, 10**15 - 1, 10**15, -(10**15) + 1, -(10**15), 2**63, -2**63 - 1,
                                                            99999999999999999, 2**53 + 1])
           | st.floats(allow_nan=True, allow_infinity=True))
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS | st.sampled_from(["0", "12", "x"]), inner, max_size=4),
    max_leaves=12,
)
BLOCK_TYPES = st.sampled_from(["text", "thinking", "toolCall", "image", "other", None, 7])


@st.composite
def blocks(draw: Any) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(JSON)  # not a block object
    block: dict[str, Any] = {}
    btype = draw(BLOCK_TYPES)
    if draw(st.integers(0, 9)):
        block["type"] = btype
    for key, values in (("text", TEXTS), ("thinking", TEXTS), ("name", TEXTS), ("arguments", JSON)):
        if draw(st.integers(0, 3)):
            block[key] = draw(values if draw(st.integers(0, 5)) else JSON)
    return block


@st.composite
def messages(draw: Any) -> Any:
    if draw(st.integers(0, 29)) == 0:
        return draw(JSON)
    role = draw(st.sampled_from(["user", "assistant", "toolResult", "custom", "bashExecution", "branchSummary",
                                 "compactionSummary", "system", "other", None, 3]))
    message: dict[str, Any] = {"role": role} if draw(st.integers(0, 9)) else {}
    content = draw(st.lists(blocks(), max_size=4) | TEXTS | JSON)
    if draw(st.integers(0, 9)):
        message["content"] = content
    for key in ("command", "output", "summary"):
        if draw(st.integers(0, 2)):
            message[key] = draw(TEXTS if draw(st.integers(0, 4)) else JSON)
    if role == "system" and draw(st.booleans()):
        message["sections"] = draw(st.dictionaries(TEXTS, TEXTS | st.sampled_from([None, False, 0, ""]), max_size=3)
                                   | st.sampled_from([None, False]) | JSON)
    if role == "system" and draw(st.booleans()):
        message["toolsAdded"] = draw(st.lists(JSON, max_size=3) | st.sampled_from([None, False, 0, ""]) | JSON)
    return message


def outcome(fn: Any, *args: Any) -> Any:
    """What ``fn(*args)`` returns, or the type of what it raises."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return type(exc)


@settings(max_examples=600, deadline=None)
@given(messages())
def test_the_compiled_estimate_gives_the_ports_answer_or_declines(message: Any) -> None:
    fast = compiled.chars(message)
    exact = outcome(estimate_chars_py, message)
    if fast >= 0:
        assert fast == exact
        assert compiled.tokens(message) == -(-exact // 4)
    else:
        assert compiled.tokens(message) == -1
    assert outcome(compaction.estimate_chars, message) == exact


@settings(max_examples=600, deadline=None)
@given(JSON)
def test_the_compiled_stringify_length_is_javascripts(value: Any) -> None:
    fast = compiled.stringify_length(value)
    if fast >= 0:
        assert fast == utf16_len(js_stringify_py(value))


def test_the_compiled_estimate_decides_the_plain_shapes() -> None:
    # where it answered -1 for these, the extension would speed up nothing
    plain = [
        {"role": "user", "content": "héllo 😀"},
        {"role": "user", "content": [{"type": "text", "text": "a\"b"}, {"type": "image", "data": "x"}]},
        {"role": "toolResult", "content": [{"type": "text", "text": "x" * 100}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "ok"},
                                          {"type": "toolCall", "name": "edit",
                                           "arguments": {"path": "a\n.py", "edits": [{"old": "é", "n": -12}],
                                                         "all": True, "x": None}}]},
        {"role": "bashExecution", "command": "ls", "output": "a\tb"},
        {"role": "compactionSummary", "summary": "## Goal"},
        {"role": "system", "content": "s", "sections": {"a": "xyz1", "b": None, "c": ""}, "toolsAdded": []},
        {"role": "system", "content": [{"type": "text", "text": "é"}], "toolsAdded": [{"name": "read"}]},
        {"role": "other"},
    ]
    for message in plain:
        assert compiled.chars(message) == estimate_chars_py(message) >= 0
    # and leaves to the port what only it decides
    for message in [{"role": "system", "content": "s", "sections": ["a"]}, {"role": "assistant", "content": "text"},
                    {"role": "assistant", "content": [{"type": "toolCall", "name": "f", "arguments": {"x": 1.5}}]},
                    {"role": "user", "content": [{"type": "text", "text": None}]}, {"content": "x"}, ["user"]]:
        assert compiled.chars(message) == -1


def _all_messages(paths: list[Path]) -> list[Any]:
    out = []
    for path in paths:
        for entry in load_session(path).entries:
            message = entry.get("message")
            if message is not None:
                out.append(message)
            for key in ("summary",):
                if key in entry:
                    out.append({"role": "branchSummary", key: entry[key]})
    return out


def test_every_message_of_the_samples_and_real_sessions_is_estimated_alike(
        sample_paths: list[Path], request: pytest.FixtureRequest) -> None:
    paths = _sample_and_real_paths(sample_paths)
    decided = 0
    messages_ = _all_messages(paths)
    for message in messages_:
        fast = compiled.chars(message)
        if fast >= 0:
            decided += 1
            assert fast == estimate_chars_py(message)
    assert decided >= 0.9 * len(messages_) > 0


def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("_fast_chars", "_fast_tokens", "_fast_entries_checked", "_fast_tokens_back", "_fast_parts_tokens_back",
                 "_fast_context_tokens"):
        monkeypatch.setattr(compaction, name, None)
    for name in ("_fast_project", "_fast_project_edited", "_fast_select", "_fast_run_path", "_fast_settings"):
        monkeypatch.setattr(session_manager, name, None)
    monkeypatch.setattr(utils, "_fast_file_ops", None)


KEEPS = (0, 1, 50, 400, 5_000, 20_000, 1e18, float("nan"))


def _projection(path: list[Any]) -> Any:
    """project_parts and context_messages of the path's context entries, as lists and identities."""
    try:
        entries, types = session_manager.context_entries_and_types(path, True)
    except Exception as exc:  # noqa: BLE001
        return type(exc)
    parts = outcome(session_manager.project_parts, entries, types)
    if isinstance(parts, tuple):  # an entry's own message object, not a copy: the entry it is from
        source = {id(e["message"]): i for i, e in enumerate(entries) if isinstance(e, dict) and "message" in e}
        parts = (parts, [[source.get(id(m), -1) for m in msgs] for msgs in parts[1]],
                 [source.get(id(m), -1) for m in parts[2]])
    only = outcome(session_manager.context_messages, entries, types)
    return parts, only


def _cuts(path: list[Any]) -> list[Any]:
    cuts = [outcome(find_cut_point, path, start, len(path), keep) for start in (0, 1, len(path) // 2) for keep in KEEPS]
    preparations = [outcome(prepare_compaction, path, CompactionSettings(True, reserve, keep))
                    for reserve in (0, 16_384) for keep in KEEPS]
    return cuts + preparations + [_projection(path)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_trees(), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(
    ["no type", "no message", "message list", "content none", "not a dict", "type 7", "compaction",
     "float arguments"])), max_size=3))
def test_cut_points_are_the_same_without_the_extension(tree: Any, damage: list[tuple[int, str]]) -> None:
    _, entries = tree
    path = _damaged(entries, damage)  # entries the compiled walk and check must leave to Python
    compiled = _cuts(path)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _pure(monkeypatch)
        assert _cuts(path) == compiled


def test_cut_points_of_real_paths_are_the_same_without_the_extension(
        sample_paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    paths = list(sample_paths)
    real = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "pi-mono"
    if real.is_dir():
        paths += sorted(real.glob("*.jsonl"))
    branches = [load_session(p).get_branch() for p in paths]
    compiled = [_cuts(b) for b in branches]
    _pure(monkeypatch)
    assert [_cuts(b) for b in branches] == compiled


def test_message_entries_checked_answers_as_the_python_check() -> None:
    ok = {"type": "message", "message": {"role": "user", "content": "x"}}
    other = {"type": "model_change"}
    cases = [
        ([ok, other], 0, 2, True), ([ok, {"type": "message"}], 0, 2, False),
        ([ok, {"type": "message", "message": "m"}], 0, 2, False), ([{"id": "x"}], 0, 1, False),
        ([{"type": "message", "message": []}], 1, 1, True), ([ok], 0, 5, None), ((ok,), 0, 1, None),
        ([["not a dict"]], 0, 1, None), ([{"type": 7}], 0, 1, None), ([ok], -1, 1, None),
    ]
    for entries, start, end, expected in cases:
        assert compiled.message_entries_checked(entries, start, end) is expected


class Text(str):
    """A string of another class: only the Python loop decides it."""


@st.composite
def tool_call_messages(draw: Any) -> Any:
    if draw(st.integers(0, 3)) == 0:
        return draw(messages())
    names = st.sampled_from(["read", "edit", "write", "bash", None, 3]) | TEXTS
    paths = st.sampled_from(["a.py", "", "src/ünï.py", None, 7, ["x"]]) | TEXTS
    blocks_ = []
    for _ in range(draw(st.integers(0, 4))):
        block: dict[str, Any] = {"type": draw(st.sampled_from(["toolCall", "toolCall", "text", None, 1]))}
        if draw(st.integers(0, 5)):
            block["name"] = draw(names)
        if draw(st.integers(0, 5)):
            block["arguments"] = {"path": draw(paths)} if draw(st.integers(0, 4)) else draw(JSON)
        blocks_.append(block if draw(st.integers(0, 15)) else draw(st.sampled_from([["block"], "block", None])))
    role = draw(st.sampled_from(["assistant", "assistant", "user", None, 0]))
    return {"role": role, "content": blocks_ if draw(st.integers(0, 9)) else draw(JSON)}


@settings(max_examples=400, deadline=None)
@given(st.lists(tool_call_messages(), max_size=5), st.integers(0, 9))
def test_the_compiled_file_operations_are_the_python_loops(batch: list[Any], odd: int) -> None:
    if odd == 0 and batch and isinstance(batch[0], dict) and isinstance(batch[0].get("content"), list):
        for block in batch[0]["content"]:  # a value only the Python loop decides
            if isinstance(block, dict) and isinstance(block.get("arguments"), dict):
                block["arguments"]["path"] = Text("odd.py")
    ops = [set(), {"seen.py"}, set()]
    answer = compiled.add_file_ops(batch, *ops)
    expected = utils.create_file_ops()
    expected.written.add("seen.py")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(utils, "_fast_file_ops", None)
        done = outcome(utils.add_file_ops, batch, expected)
    if answer is None:  # declined: the sets are as they were
        assert ops == [set(), {"seen.py"}, set()]
    else:
        assert answer is True and done is None
        assert ops == [expected.read, expected.written, expected.edited]
    mine = utils.create_file_ops()
    mine.written.add("seen.py")
    assert outcome(utils.add_file_ops, batch, mine) == done
    if done is None:
        assert (mine.read, mine.written, mine.edited) == (expected.read, expected.written, expected.edited)


def test_the_compiled_file_operations_decide_plain_tool_calls() -> None:
    calls = [{"role": "assistant", "content": [
        {"type": "toolCall", "name": name, "arguments": {"path": path}} for name, path in
        [("read", "a.py"), ("edit", "b.py"), ("write", "c.py"), ("bash", "d.py"), ("read", ""), ("edit", 5)]]},
        {"role": "user", "content": [{"type": "toolCall", "name": "read", "arguments": {"path": "u.py"}}]}]
    ops: list[set] = [set(), set(), set()]
    assert compiled.add_file_ops(calls, *ops) is True
    assert ops == [{"a.py"}, {"c.py"}, {"b.py"}]


def test_project_plain_leaves_to_python_what_it_does_not_decide() -> None:
    ok = {"type": "message", "message": {"role": "user", "content": "x"}}
    to_msgs = session_manager.session_entry_to_context_messages
    for entries, types in [([["not a dict"]], ["message"]), ([{"type": "message"}], ["message"]),
                           ([{"type": "message", "message": "m"}], ["message"]), ((ok,), ["message"]), ([ok], ("message",))]:
        assert compiled.project_plain(entries, types, to_msgs, True) is None
    custom = {"type": "custom_message", "customType": "x", "content": "c"}
    assert compiled.project_plain([ok, custom], ["message", "custom_message"], lambda e: "not a list", True) is None
    with pytest.raises(ZeroDivisionError):  # what to_msgs raises goes through
        compiled.project_plain([custom], ["custom_message"], lambda e: 1 / 0, True)
    # an entry whose own type brings no messages is not given to to_msgs
    assert compiled.project_plain([{"type": "label"}, {"id": "x"}], ["label", None], lambda e: 1 / 0, True) == ([[], []], [])
    compaction_entry = {"type": "compaction", "summary": "s", "tokensBefore": 1, "timestamp": "2025-01-01T00:00:00Z"}
    per_entry, messages = compiled.project_plain([compaction_entry, ok, compaction_entry], ["compaction", "message", "compaction"],
                                                 to_msgs, True)
    assert [len(m) for m in per_entry] == [1, 1, 0] and messages[1] is ok["message"]
    assert messages[0]["role"] == "compactionSummary" and len(messages) == 2


def _sample_and_real_paths(sample_paths: list[Path]) -> list[Path]:
    """The samples, and the real Pi sessions (with ``history/``) where ``../shared`` holds them."""
    real = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "pi-mono"
    extra = sorted(real.glob("*.jsonl")) + sorted((real / "history").glob("*.jsonl")) if real.is_dir() else []
    return list(sample_paths) + extra


def _damaged_paths(tree: Any, damage: list[tuple[int, str]]) -> list[list[Any]]:
    """Every leaf's branch of a generated tree, and its entries in file order, each damaged alike."""
    header, entries = tree
    session = session_manager.Session(header, entries)
    branches = [session.get_branch(e["id"]) for e in session.leaves()]
    return [_damaged(path, damage) for path in [*branches, entries]]


def _damaged(entries: list[Any], damage: list[tuple[int, str]]) -> list[Any]:
    """Copies of the entries with some made into shapes only the Python port decides."""
    path = [dict(e) for e in entries]
    for at, how in damage:
        if not path:
            break
        i = at % len(path)
        entry = path[i]
        if not isinstance(entry, dict):
            continue
        if how == "no type":
            entry.pop("type", None)
        elif how == "type 7":
            entry["type"] = 7
        elif how == "float arguments":  # a message only the port estimates
            entry["type"] = "message"
            entry["message"] = {"role": "assistant", "content": [
                {"type": "toolCall", "name": "f", "arguments": {"x": 1.5 * at, "y": "z" * 400 * at}}]}
        elif how == "compaction":
            path[i] = {"type": "compaction", "summary": "s", "firstKeptEntryId": "x", "tokensBefore": 1}
        elif how == "no message":
            entry.pop("message", None)
        elif how == "message list":
            entry["message"] = [entry.get("message")]
        elif how == "content none" and isinstance(entry.get("message"), dict):
            entry["message"] = {**entry["message"], "content": None}
        elif how == "not a dict":
            path[i] = ["entry"]
        elif how == "odd id":
            entry["id"] = [Text("x"), 7, None, ["x"], {"x": 1}][at % 5]
        elif how == "odd target" and entry.get("type") == "context_edit":
            entry["targetId"] = [Text(entry["targetId"]), 7, None, ["x"]][at % 4]
        elif how == "odd kept":
            entry["firstKeptEntryId"] = [Text("x"), "", 7, None][at % 4]
        elif how == "odd role" and isinstance(entry.get("message"), dict):
            entry["message"] = {**entry["message"], "role": [Text("system"), 7, ["system"], Text("assistant")][at % 4]}
        elif how == "odd type":
            entry["type"] = [Text("message"), Text("compaction"), 7, None, Text("model_change"),
                             Text("thinking_level_change")][at % 6]
        elif how == "system":
            path[i] = {**entry, "type": "message", "message": {"role": "system", "content": "s"}}
    return path


def _tagged(parts: Any, entries: list[Any]) -> Any:
    """An answer with each message that is an entry's own message object named by that entry's index."""
    if not isinstance(parts, tuple):
        return parts
    own = {id(e["message"]): i for i, e in enumerate(entries) if isinstance(e, dict) and "message" in e}
    per_entry, messages = parts
    return (per_entry, messages, None if per_entry is None else [[own.get(id(m), -1) for m in ms] for ms in per_entry],
            [own.get(id(m), -1) for m in messages])


def _compare_selection_and_edits(path: list[Any]) -> tuple[bool, bool]:
    """select_context and project_edited against the port on one path: (selection decided, edits decided)."""
    types = [e.get("type") if isinstance(e, dict) else None for e in path]
    with pytest.MonkeyPatch.context() as monkeypatch:
        _pure(monkeypatch)
        port = outcome(session_manager.context_entries_and_types, path, True, list(types))
    fast = compiled.select_context(path, types) if "compaction" in types else None
    if fast is not None:
        assert port == fast and [a is b for a, b in zip(port[0], fast[0])] == [True] * len(fast[0])
    ids = [e.get("id") if isinstance(e, dict) else None for e in path]
    if all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids):  # ids known to be distinct
        with_ids = outcome(session_manager.context_entries_and_types, path, False, list(types), ids)
        with pytest.MonkeyPatch.context() as monkeypatch:
            _pure(monkeypatch)
            assert outcome(session_manager.context_entries_and_types, path, False, list(types), ids) == with_ids
    if not isinstance(port, tuple):
        return fast is not None, False
    entries, entry_types = port
    entry_types = list(entry_types)
    decided = False
    for with_lists in (True, False):
        with pytest.MonkeyPatch.context() as monkeypatch:
            _pure(monkeypatch)
            done = outcome(session_manager.project_parts, entries, entry_types)
            expected = _tagged(done if not isinstance(done, tuple) else (done[1] if with_lists else None, done[2]),
                               entries)
        answer = outcome(compiled.project_edited, entries, entry_types, session_manager.project_context_entry,
                         with_lists)
        if answer is not None:
            decided = "context_edit" in entry_types
            assert _tagged(answer, entries) == expected
    return fast is not None, decided


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_trees(), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(
    ["no message", "message list", "content none", "not a dict", "odd id", "odd target", "odd kept", "odd role",
     "odd type", "system"])), max_size=3))
def test_the_compiled_selection_and_edits_give_the_ports_answer_or_decline(
        tree: Any, damage: list[tuple[int, str]]) -> None:
    for path in _damaged_paths(tree, damage):
        _compare_selection_and_edits(path)


def test_the_compiled_selection_and_edits_of_every_sample_and_real_path(sample_paths: list[Path]) -> None:
    paths = _sample_and_real_paths(sample_paths)
    selections = edits = 0
    for file in paths:
        session = load_session(file)
        for leaf in session.leaves():
            branch = session.get_branch(leaf["id"])
            ends = range(1, len(branch) + 1) if file in sample_paths else [len(branch)]
            for end in ends:  # every entry of a sample's path as the leaf
                selected, edited = _compare_selection_and_edits(branch[:end])
                selections += selected
                edits += edited
    assert selections > 0 and edits > 0  # the samples hold compactions and context edits


def test_select_context_leaves_to_python_what_it_does_not_decide() -> None:
    kept = {"type": "message", "id": "k", "message": {"role": "user", "content": "x"}}
    system = {"type": "message", "id": "s", "message": {"role": "system", "content": "x"}}
    compaction_entry = {"type": "compaction", "id": "c", "firstKeptEntryId": "k", "summary": "s"}
    after = {"type": "label", "id": "l"}
    entries, types = compiled.select_context([kept, system, compaction_entry, after],
                                             ["message", "message", "compaction", "label"])
    assert entries == [compaction_entry, kept, after] and types == ["compaction", "message", "label"]
    for path in ([kept, {**compaction_entry, "firstKeptEntryId": ""}], [kept, {**compaction_entry, "firstKeptEntryId": 7}],
                 [kept, [compaction_entry]], [{**kept, "id": Text("k")}, compaction_entry],
                 [{**kept, "message": "m"}, compaction_entry], [{**kept, "message": {"role": Text("system")}}, compaction_entry]):
        assert compiled.select_context(path, ["message", "compaction"]) is None
    assert compiled.select_context([kept, compaction_entry], ["message", Text("compaction")]) is None
    assert compiled.select_context([kept], ["message"]) is None  # no compaction: Python answers
    assert compiled.select_context((kept, compaction_entry), ["message", "compaction"]) is None
    assert compiled.select_context([kept, compaction_entry], ["message"]) is None


def test_project_edited_leaves_to_python_what_it_does_not_decide() -> None:
    ok = {"type": "message", "id": "a", "message": {"role": "user", "content": "x"}}
    edit = {"type": "context_edit", "id": "e", "targetId": "a", "replacement": {"content": "y"}}
    project = session_manager.project_context_entry
    per_entry, messages = compiled.project_edited([ok, edit], ["message", "context_edit"], project, True)
    assert messages == [{"role": "user", "content": "y"}] and per_entry == [messages, []]
    dropped = {**edit, "id": "f", "replacement": None}  # the last edit of an entry wins
    assert compiled.project_edited([ok, edit, dropped], ["message", "context_edit", "context_edit"], project, False) == (
        None, [])
    for entries in ([ok, {**edit, "targetId": 7}], [ok, {**edit, "targetId": Text("a")}], [["x"], edit],
                    [{**ok, "id": ["a"]}, edit], [{**ok, "id": Text("a")}, edit], [{**ok, "id": "b", "message": "m"}, edit]):
        assert compiled.project_edited(entries, ["message", "context_edit"], project, True) is None
    assert compiled.project_edited([ok, edit], ["message", "context_edit"], lambda e, x: "not a list", True) is None
    with pytest.raises(ZeroDivisionError):  # what project_entry raises goes through
        compiled.project_edited([ok, edit], ["message", "context_edit"], lambda e, x: 1 / 0, True)
    plain = {**ok, "id": "b"}  # no edit: its own message, project_entry not called
    assert compiled.project_edited([plain, edit], ["message", "context_edit"], lambda e, x: 1 / 0, False) == (
        None, [plain["message"]])


def _run_paths(session: Any, leaves: list[Any]) -> list[Any]:
    """_run_path from each leaf, as entry positions (the same objects) and types."""
    at = {id(e): i for i, e in enumerate(session.entries)}
    out = []
    for leaf in leaves:
        found = outcome(session_manager._run_path, session, leaf)
        out.append(found if not isinstance(found, tuple) else ([at[id(e)] for e in found[0]], found[1]))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_trees(), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(
    ["cycle", "odd parent", "empty parent", "not a dict", "late parent"])), max_size=3))
def test_the_compiled_run_walk_gives_the_ports_answer_or_declines(tree: Any, damage: list[tuple[int, str]]) -> None:
    header, entries = tree
    entries = [dict(e) for e in entries]
    for at, how in damage:
        i = at % len(entries)
        if how == "cycle":  # an entry's parent is an entry after it: a walk from there goes round
            entries[i]["parentId"] = entries[-1]["id"]
        elif how == "odd parent":
            entries[i]["parentId"] = [Text(entries[i - 1]["id"]), 7, None, [entries[i - 1]["id"]]][at % 4]
        elif how == "empty parent":
            entries[i]["parentId"] = ""
        elif how == "late parent":  # a parent found by a later position than the run before
            entries[i]["parentId"] = entries[(at * 7) % len(entries)]["id"]
    session = session_manager.Session(header, entries)
    for at, how in damage:
        if how == "not a dict" and session.entries:  # only the port decides (and raises)
            session.entries[at % len(session.entries)] = ["entry"]  # type: ignore[call-overload]
    leaves = [e.get("id") if isinstance(e, dict) else None for e in session.entries] + [None, "absent", ["x"]]
    fast = _run_paths(session, leaves)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _pure(monkeypatch)
        assert _run_paths(session, leaves) == fast


def test_the_compiled_run_walk_of_every_sample_and_real_session(sample_paths: list[Path]) -> None:
    paths = _sample_and_real_paths(sample_paths)
    for file in paths:
        session = load_session(file)
        ids = [e.get("id") for e in session.entries]
        leaves = [e["id"] for e in session.leaves()] + (ids if file in sample_paths else ids[::50])
        fast = _run_paths(session, leaves)
        assert all(isinstance(f, tuple) for f in fast) or not session._runs_valid
        with pytest.MonkeyPatch.context() as monkeypatch:
            _pure(monkeypatch)
            assert _run_paths(session, leaves) == fast


def test_run_path_leaves_to_python_what_it_does_not_decide() -> None:
    a, b, c = {"id": "a", "parentId": None}, {"id": "b", "parentId": "a"}, {"id": "c", "parentId": "a"}
    entries, run_start, positions = [a, b, c], [0, 0, 2], {"a": 0, "b": 1, "c": 2}
    types = ["message", "label", "message"]
    assert compiled.run_path(entries, run_start, positions, types, 2) == ([a, c], ["message", "message"])
    assert compiled.run_path(entries, run_start, positions, types, 1) == ([a, b], ["message", "label"])
    cycle = [{"id": "a", "parentId": "b"}, {"id": "b", "parentId": "a"}]
    assert compiled.run_path(cycle, [0, 0], {"a": 0, "b": 1}, types[:2], 1) is None
    for odd in (Text("a"), {"k": 1}.keys()):
        assert compiled.run_path([a, {"id": "b", "parentId": odd}], [0, 1], positions, types[:2], 1) is None
    assert compiled.run_path([a, ["b"]], [0, 1], positions, types[:2], 1) is None
    assert compiled.run_path(entries, run_start, positions, types, 3) is None
    assert compiled.run_path(entries, run_start, {"a": "0"}, types, 2) is None
    assert compiled.run_path(entries, [0, 0, 2.0], positions, types, 2) is None
    assert compiled.run_path(entries, run_start, positions, types[:2], 2) is None
    assert compiled.run_path(tuple(entries), run_start, positions, types, 2) is None


def _compare_settings(path: list[Any]) -> bool:
    """context_settings against the port on one path: whether it decided."""
    types = [e.get("type") if isinstance(e, dict) else None for e in path]
    fast = compiled.context_settings(path, types)
    with_extension = [outcome(session_manager.context_settings_of, path, types, checked) for checked in (False, True)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        _pure(monkeypatch)
        port = outcome(session_manager.context_settings_of, path, types, True)
        assert [outcome(session_manager.context_settings_of, path, types, checked) for checked in (False, True)] == (
            with_extension)
    if fast is not None:
        assert fast == port
    return fast is not None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_trees(), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(
    ["no message", "message list", "not a dict", "odd role", "odd type"])), max_size=3))
def test_the_compiled_settings_give_the_ports_answer_or_decline(tree: Any, damage: list[tuple[int, str]]) -> None:
    for path in _damaged_paths(tree, damage):
        _compare_settings(path)


def test_the_compiled_settings_of_every_sample_and_real_path(sample_paths: list[Path]) -> None:
    paths = _sample_and_real_paths(sample_paths)
    for file in paths:
        session = load_session(file)
        for leaf in session.leaves():
            branch = session.get_branch(leaf["id"])
            ends = range(1, len(branch) + 1) if file in sample_paths else [len(branch)]
            for end in ends:
                assert _compare_settings(branch[:end])


def test_context_settings_leaves_to_python_what_it_does_not_decide() -> None:
    assistant = {"type": "message", "message": {"role": "assistant", "provider": "p", "model": "m", "content": []}}
    change = {"type": "model_change", "provider": "q", "modelId": "n"}
    level = {"type": "thinking_level_change", "thinkingLevel": "high"}
    assert compiled.context_settings([level, change, assistant], ["thinking_level_change", "model_change", "message"]) == (
        "high", {"provider": "p", "modelId": "m"})
    assert compiled.context_settings([assistant, change], ["message", "model_change"]) == ("off", {"provider": "q", "modelId": "n"})
    assert compiled.context_settings([{"type": "thinking_level_change"}], ["thinking_level_change"]) == (None, None)
    assert compiled.context_settings([{"type": "model_change"}], ["model_change"]) == ("off", {})
    for path, types in [([{"type": "message", "message": "m"}], ["message"]), ([["x"]], ["model_change"]),
                        ([assistant], [Text("message")]), ([{**assistant, "message": {"role": Text("assistant")}}], ["message"]),
                        ((assistant,), ["message"]), ([assistant], ["message", "message"])]:
        assert compiled.context_settings(path, types) is None


USAGE_NUMBERS = st.sampled_from([0, 1, 7, -3, 10**15, 10**15 - 1, 2.5, float("nan"), True, None, "12"]) | st.integers(0, 10**6)


@st.composite
def usage_messages(draw: Any) -> Any:
    if draw(st.integers(0, 2)) == 0:
        return draw(messages())
    message: dict[str, Any] = {"role": draw(st.sampled_from(["assistant", "assistant", "user", Text("assistant")])),
                               "content": [{"type": "text", "text": draw(TEXTS)}]}
    if draw(st.integers(0, 4)):
        usage = {key: draw(USAGE_NUMBERS) for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
                 if draw(st.integers(0, 5))}
        message["usage"] = usage if draw(st.integers(0, 6)) else draw(st.sampled_from([None, False, 0, "", [1], "u"]))
    if draw(st.integers(0, 2)) == 0:
        message["stopReason"] = draw(st.sampled_from(["stop", "aborted", "error", None, 3, Text("error")]))
    return message


def _estimate(messages_: list[Any]) -> Any:
    done = outcome(compaction.estimate_context_tokens, messages_)
    if isinstance(done, compaction.ContextUsageEstimate):
        return done.tokens, done.usage_tokens, done.trailing_tokens, done.last_usage_index
    return done


@settings(max_examples=600, deadline=None)
@given(st.lists(usage_messages(), max_size=6))
def test_the_compiled_context_estimate_gives_the_ports_answer_or_declines(messages_: list[Any]) -> None:
    fast = compiled.context_tokens(messages_)
    with_extension = _estimate(messages_)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _pure(monkeypatch)
        port = _estimate(messages_)
    assert repr(with_extension) == repr(port)
    if fast is not None:
        assert fast == port and [type(v) for v in fast] == [type(v) for v in port]


def test_the_compiled_context_estimate_of_every_sample_and_real_context(sample_paths: list[Path]) -> None:
    paths = _sample_and_real_paths(sample_paths)
    decided = 0
    for file in paths:
        session = load_session(file)
        contexts = [session_manager.build_session_context(session, leaf["id"]).messages for leaf in session.leaves()]
        for messages_ in contexts:
            fast = compiled.context_tokens(messages_)
            with pytest.MonkeyPatch.context() as monkeypatch:
                _pure(monkeypatch)
                port = _estimate(messages_)
            if fast is not None:
                decided += 1
                assert fast == port
    assert decided > 0


def test_context_tokens_leaves_to_python_what_it_does_not_decide() -> None:
    used = {"role": "assistant", "content": [], "usage": {"totalTokens": 50}}
    user = {"role": "user", "content": "abcdefgh"}
    assert compiled.context_tokens([user, used, user]) == (52, 50, 2, 1)
    assert compiled.context_tokens([user, {**used, "stopReason": "aborted"}]) == (2, 0, 2, None)
    parts = {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "totalTokens": 0}
    assert compiled.context_tokens([{**used, "usage": parts}]) == (10, 10, 0, 0)
    nothing = dict.fromkeys(("input", "output", "cacheRead", "cacheWrite"), 0)  # no tokens: not a valid usage
    assert compiled.context_tokens([user, {**used, "usage": nothing}]) == (2, 0, 2, None)
    for odd in ({"totalTokens": 1.5}, {"totalTokens": True}, {"input": 1}, [1], 0, {"totalTokens": 10**16}):
        assert compiled.context_tokens([user, {**used, "usage": odd}]) is None
    assert compiled.context_tokens([["m"]]) is None and compiled.context_tokens((user,)) is None
    assert compiled.context_tokens([{**used, "role": Text("assistant")}]) is None
    assert compiled.context_tokens([{**used, "stopReason": Text("error")}]) is None


def test_pure_python_can_be_chosen_from_the_environment() -> None:
    code = ("from pimem.core import speedups, session_manager as s; from pimem.core.compaction import compaction as c; "
            "print(speedups.COMPILED, c._fast_chars, s._fast_project)")
    env = {**os.environ, "PIMEM_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "None", "None"]
    assert speedups.COMPILED is True
