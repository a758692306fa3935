"""Fuzz: sessions built from the input classes real files hold, which Pi accepts or machines produce.

Lone surrogates in every text, ids and parent ids that are numbers/objects/null/duplicates,
summaries, contents and usage fields of the wrong JSON type, parent cycles (also by the
thousand) and lines nested past any recursion limit. Each example must load (a warning per
problem, the entry kept) or fail with a clear error; every view must work; writing the session
and loading it again must give back every entry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem import build_session_context, load_session
from pimem.base.js import js_stringify, loads_deep, loads_line
from pimem.core.session_manager import SessionFormatError
from pimem.errors import JavaScriptTypeError

pytestmark = pytest.mark.fuzz

TS = "2025-01-01T00:00:00.000Z"
def fuzz(max_examples: int) -> Any:
    return settings(max_examples=max_examples, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

texts = st.lists(st.sampled_from(["a", "é", "😀", "\ud800", "\udfff", "\ud83d", "\ude00", " ", "\n", '"', "\\"]),
                 max_size=6).map("".join)
odd_values = st.one_of(st.none(), st.integers(-5, 5), st.booleans(), texts, st.just({"a": 1}), st.just([1]))
ids = st.one_of(st.sampled_from([f"e{i}" for i in range(12)]), odd_values)


def deep(depth: int, leaf: Any) -> str:
    return "[" * depth + json.dumps(leaf, ensure_ascii=True) + "]" * depth


@st.composite
def entries(draw: Any) -> dict[str, Any]:
    eid, parent = draw(ids), draw(ids)
    kind = draw(st.sampled_from(["user", "assistant", "tool", "compaction", "branch_summary", "custom"]))
    base = {"id": eid, "parentId": parent, "timestamp": TS}
    if kind == "user":
        content = draw(st.one_of(texts, st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), max_size=2),
                                 odd_values))
        return {"type": "message", **base, "message": {"role": "user", "content": content, "timestamp": 1}}
    if kind == "assistant":
        number = st.one_of(st.integers(0, 10**6), odd_values)
        usage = draw(st.one_of(st.fixed_dictionaries({k: number for k in ("input", "output", "cacheRead",
                                                                           "cacheWrite", "totalTokens")}),
                               odd_values))
        blocks = st.lists(st.one_of(st.builds(lambda t: {"type": "text", "text": t}, texts),
                                    st.builds(lambda t, a: {"type": "toolCall", "id": "t", "name": t, "arguments": a},
                                              texts, st.dictionaries(texts, odd_values, max_size=2))), max_size=3)
        return {"type": "message", **base, "message": {
            "role": "assistant", "content": draw(st.one_of(blocks, odd_values)), "usage": usage, "api": "x",
            "provider": "p", "model": "m", "stopReason": draw(st.sampled_from(["stop", "toolUse", "error"])),
            "timestamp": 1}}
    if kind == "tool":
        return {"type": "message", **base, "message": {"role": "toolResult", "toolCallId": "t", "toolName": "bash",
                                                       "content": draw(st.one_of(texts, odd_values)), "isError": False,
                                                       "timestamp": 1}}
    if kind in ("compaction", "branch_summary"):
        extra = {"firstKeptEntryId": draw(ids), "tokensBefore": draw(st.one_of(st.integers(0, 10**5), odd_values))} \
            if kind == "compaction" else {"fromId": draw(ids)}
        return {"type": kind, **base, "summary": draw(st.one_of(texts, odd_values)), **extra}
    return {"type": "custom", **base, "customType": draw(texts), "data": draw(odd_values)}


def check_views(s: Any) -> None:
    from pimem.viz.data import projection_table, tree_layout

    for w in s.warnings:
        assert w.reason
    for view in ("entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df"):
        assert len(getattr(s, view)()) <= len(s.entries) * 4 + 1
    s.render_tree()
    build_session_context(s)
    assert len(tree_layout(s)) == len(s.entries)
    try:
        projection_table(s)
    except JavaScriptTypeError:  # Pi's own estimate throws on this content: the loader warned
        assert any("Pi's code throws" in w.reason for w in s.warnings)


def round_trip(s: Any, tmp: Path) -> None:
    out = s.write(tmp / "out.jsonl")
    again = load_session(out)
    assert [js_stringify(e) for e in again.entries] == [js_stringify(e) for e in s.entries]  # nothing lost


@fuzz(150)
@given(body=st.lists(entries(), min_size=1, max_size=12), deep_at=st.one_of(st.none(), st.integers(0, 11)),
       depth=st.integers(1000, 2500))
def test_odd_sessions_load_warn_and_round_trip(tmp_path_factory: Any, body: list[dict], deep_at: int | None,
                                               depth: int) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/"}
    lines = [json.dumps(header)] + [json.dumps(e, ensure_ascii=True) for e in body]
    if deep_at is not None and deep_at < len(body):  # a line nested deeper than orjson and json go
        lines[deep_at + 1] = lines[deep_at + 1][:-1] + ',"deep":' + deep(depth, "\ud800") + "}"
    tmp = tmp_path_factory.mktemp("fuzz")
    path = tmp / "s.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    try:
        s = load_session(path)
    except SessionFormatError as exc:
        assert str(path) in str(exc)
        return
    assert len(s.entries) == len(body)  # every line kept, as Pi keeps it
    check_views(s)
    round_trip(s, tmp)


@fuzz(6)
@given(n=st.integers(500, 4000), size=st.integers(2, 4), dup=st.booleans())
def test_cycles_at_scale(tmp_path_factory: Any, n: int, size: int, dup: bool) -> None:
    """``n`` parent cycles of ``size`` entries (closed by a duplicate id when ``dup``)."""
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/"}]
    for i in range(n):
        names = [f"c{i}_{k}" for k in range(size)]
        for k, name in enumerate(names):
            parent = names[k - 1] if (k or not dup) else None
            lines.append({"type": "message", "id": name, "parentId": parent, "timestamp": TS,
                          "message": {"role": "user", "content": f"m\ud800{i}", "timestamp": 1}})
        if dup:
            lines.append({"type": "message", "id": names[0], "parentId": names[-1], "timestamp": TS,
                          "message": {"role": "user", "content": "dup", "timestamp": 1}})
    path = tmp_path_factory.mktemp("cyc") / "c.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="ascii")
    s = load_session(path)
    assert any("more warnings of kind 'cycle'" in w.reason for w in s.warnings)
    check_views(s)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)), max_leaves=12)


@fuzz(300)
@given(value=json_values, depth=st.integers(0, 1500), indent=st.sampled_from([None, 1]))
def test_deep_parser_agrees_with_json_parse(value: Any, depth: int, indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    assert loads_deep(text) == json.loads(text)
    wrapped = "[" * depth + text + "]" * depth
    parsed = loads_line(wrapped)
    assert js_stringify(parsed) == "[" * depth + js_stringify(value) + "]" * depth
