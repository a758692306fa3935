"""The TypedDicts in pimem.base.types describe what Pi writes: every entry and message of the samples
and of the real sessions has the required keys of its type, with values of the declared kinds. Each
of them is named by a public signature (none is left unused)."""

from __future__ import annotations

import typing
from typing import Any, Literal, Union, get_args, get_origin

import pytest

from pimem.base import types as t
from pimem.core.session_manager import load_session
from pimem.sessions.samples import sample_session_paths

BY_ENTRY_TYPE = {typing.get_type_hints(c)["type"].__args__[0]: c for c in get_args(t.SessionEntry)}
BY_ROLE = {typing.get_type_hints(c)["role"].__args__[0]: c for c in get_args(t.AgentMessage)}
BY_BLOCK = {typing.get_type_hints(c)["type"].__args__[0]: c for c in (t.TextContent, t.ThinkingContent,
                                                                       t.ImageContent, t.ToolCall)}


def _matches(value: Any, hint: Any) -> bool:
    """A shallow check of ``value`` against a type hint (TypedDicts by their required keys)."""
    origin = get_origin(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return value in get_args(hint)
    if origin in (Union, getattr(__import__("types"), "UnionType")):
        return any(_matches(value, h) for h in get_args(hint))
    if origin is list:
        return isinstance(value, list)
    if origin is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type) and typing.is_typeddict(hint):
        return isinstance(value, dict) and hint.__required_keys__ <= value.keys()
    return isinstance(value, hint)


def _problems(obj: dict, cls: type, where: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    out = [f"{where}: missing {k!r}" for k in sorted(cls.__required_keys__ - obj.keys())]
    for key, hint in hints.items():
        if key in obj and not _matches(obj[key], hint):
            out.append(f"{where}: {key}={obj[key]!r:.60} is not {hint}")
    return out


def _check_session(path) -> list[str]:
    session = load_session(path)
    problems = _problems(session.header, t.SessionHeader, f"{path.name}:header")
    for entry in session.entries:
        where = f"{path.name}:{entry.get('id')}"
        cls = BY_ENTRY_TYPE.get(entry.get("type"))
        assert cls is not None, f"{where}: entry type {entry.get('type')!r} has no TypedDict"
        problems += _problems(entry, cls, where)
        message = entry.get("message")
        if entry.get("type") == "message":
            problems += _problems(message, BY_ROLE[message.get("role")], where + ":message")
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                problems += _problems(block, BY_BLOCK[block["type"]], where + ":block")
    return problems


def test_the_samples_are_described_by_the_types() -> None:
    problems = [p for path in sample_session_paths() for p in _check_session(path)]
    assert problems == []


def test_the_real_sessions_are_described_by_the_types(real_v3_paths) -> None:
    problems = [p for path in real_v3_paths for p in _check_session(path)]
    assert problems == []


def test_the_checker_sees_a_wrong_entry() -> None:
    bad = {"type": "compaction", "id": "a", "parentId": None, "timestamp": "x", "summary": 3}
    found = _problems(bad, t.CompactionEntry, "bad")
    assert any("firstKeptEntryId" in p for p in found) and any("summary=3" in p for p in found)


def _hints(obj: Any) -> list[Any]:
    try:
        return list(typing.get_type_hints(obj).values())
    except Exception:  # noqa: BLE001 - a name imported for type checking only (pandas): nothing of ours
        return []


def _reachable_typeddicts() -> set[type]:
    """The TypedDicts named, directly or inside another type, by a signature or field of the facade."""
    import inspect

    import pimem

    todo: list[Any] = []
    for name in pimem.__all__:
        obj = getattr(pimem, name)
        if inspect.isfunction(obj):
            todo += _hints(obj)
        elif inspect.isclass(obj):
            todo += _hints(obj) + [h for _, f in inspect.getmembers(obj, inspect.isfunction) for h in _hints(f)]
    seen: dict[int, Any] = {}  # holds each hint, so that no id is reused
    found: set[type] = set()
    while todo:
        hint = todo.pop()
        if id(hint) in seen:
            continue
        seen[id(hint)] = hint
        if isinstance(hint, type) and typing.is_typeddict(hint):
            found.add(hint)
            todo += _hints(hint)
        todo += list(get_args(hint))
    return found


def test_every_typeddict_is_named_by_a_public_signature() -> None:
    declared = {getattr(t, n) for n in t.__all__ if typing.is_typeddict(getattr(t, n))}
    assert {c.__name__ for c in declared - _reachable_typeddicts()} == set()


def test_the_pipeline_returns_the_types() -> None:
    import pimem

    assert typing.get_type_hints(pimem.convert_to_llm)["return"] == list[t.Message]
    assert typing.get_type_hints(pimem.SessionContext)["messages"] == list[t.AgentMessage]
    assert typing.get_type_hints(pimem.get_current_system_message)["return"] == t.SystemMessage | None
    assert typing.get_type_hints(pimem.Session.append_compaction)["return"] is t.CompactionEntry
