"""DataFrame views: hand-built sessions with known answers, and the real Pi sessions."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pimem.base.tables import iso_times, typed_array
from pimem.sessions import frames
from pimem.core.compaction.compaction import calculate_context_tokens, estimate_tokens
from pimem.sessions.session import Session
from pimem.sessions.load import load_session

T0 = pd.Timestamp("2025-01-01T00:00:00Z")


def iso(seconds: float) -> str:
    return (T0 + pd.Timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def ms(seconds: float) -> int:
    return int((T0 + pd.Timedelta(seconds=seconds)).value // 1_000_000)


def usage(inp: int, out: int, cr: int = 0, cw: int = 0, total: int | None = None, cost: float = 0.0) -> dict:
    u = {"input": inp, "output": out, "cacheRead": cr, "cacheWrite": cw, "cost": {"total": cost}}
    if total is not None:
        u["totalTokens"] = total
    return u


def message(eid: str, parent: str | None, t: float, msg: dict) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": iso(t), "message": msg}


def build_session() -> Session:
    """A small tree with two branches, two compactions, tool calls with and without results.

    u1 ─ a1 ─ r1 ─ r2 ─ a2 ┬ lbl ─ u2
                           └ u3 ─ cmp ─ a3 ─ use1 ─ cmp2   (leaf: cmp2)
    """
    header = {"type": "session", "version": 3, "id": "sess-1", "timestamp": iso(0), "cwd": "/p"}
    entries = [
        message("u1", None, 1, {"role": "user", "content": "read a.py please", "timestamp": ms(1)}),
        message("a1", "u1", 5, {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "ok"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}},
                {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "ls -la"}},
            ],
            "usage": usage(100, 20, 5, 0, total=125, cost=0.01),
            "stopReason": "toolUse", "provider": "anthropic", "model": "claude-x", "timestamp": ms(2),
        }),
        message("r1", "a1", 5.25, {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                                   "content": [{"type": "text", "text": "print('hé')"}], "isError": False, "timestamp": ms(5.2)}),
        message("r2", "r1", 6.5, {"role": "toolResult", "toolCallId": "c2", "toolName": "bash",
                                  "content": [{"type": "text", "text": "😀 file"}], "isError": True, "timestamp": ms(6.4)}),
        message("a2", "r2", 8, {"role": "assistant", "content": [{"type": "text", "text": "done"}],
                                "usage": usage(200, 10, cost=0.02), "stopReason": "stop",
                                "provider": "anthropic", "model": "claude-x", "timestamp": ms(7)}),
        {"type": "label", "id": "lbl", "parentId": "a2", "timestamp": iso(9), "targetId": "u1", "label": "start"},
        message("u2", "lbl", 10, {"role": "user", "content": [{"type": "text", "text": "branch A"}], "timestamp": ms(10)}),
        message("u3", "a2", 11, {"role": "user", "content": [{"type": "text", "text": "branch B"},
                                                             {"type": "image", "data": "AA==", "mimeType": "image/png"}], "timestamp": ms(11)}),
        {"type": "compaction", "id": "cmp", "parentId": "u3", "timestamp": iso(12), "summary": "Sum 😀",
         "firstKeptEntryId": "a2", "tokensBefore": 500, "details": {"readFiles": ["a.py"], "modifiedFiles": []}},
        message("a3", "cmp", 13, {"role": "assistant",
                                  "content": [{"type": "toolCall", "id": "c3", "name": "edit",
                                               "arguments": {"path": "b.py", "oldText": "x", "newText": "y"}}],
                                  "usage": usage(0, 0), "stopReason": "aborted", "provider": "openai", "model": "gpt-y",
                                  "timestamp": ms(12.5)}),
        {"type": "usage", "id": "use1", "parentId": "a3", "timestamp": iso(14), "kind": "cache_warm",
         "provider": "openai", "model": "gpt-y", "usage": usage(50, 0, cost=0.5)},
        {"type": "compaction", "id": "cmp2", "parentId": "use1", "timestamp": iso(15), "summary": "again",
         "firstKeptEntryId": "a3", "tokensBefore": 300, "fromHook": True,
         "details": {"readFiles": ["a.py", "c.py"], "modifiedFiles": ["b.py"]}},
    ]
    return Session(header, entries)


@pytest.fixture()
def session() -> Session:
    return build_session()


# --------------------------------------------------------------------------- entries


def test_entries_tree_columns(session: Session) -> None:
    df = frames.entries_df(session).set_index("id")
    assert len(df) == 12
    depth = {"u1": 0, "a1": 1, "r1": 2, "r2": 3, "a2": 4, "lbl": 5, "u2": 6, "u3": 5, "cmp": 6, "a3": 7, "use1": 8, "cmp2": 9}
    assert df["depth"].to_dict() == depth
    children = {"u1": 1, "a1": 1, "r1": 1, "r2": 1, "a2": 2, "lbl": 1, "u2": 0, "u3": 1, "cmp": 1, "a3": 1, "use1": 1, "cmp2": 0}
    assert df["child_count"].to_dict() == children
    off_path = {"lbl", "u2"}
    assert df["on_active_path"].to_dict() == {k: k not in off_path for k in depth}
    assert df.loc["u1", "label"] == "start" and pd.isna(df.loc["a1", "label"])
    assert df.loc["lbl", "target_id"] == "u1"
    assert df.loc["a1", "parent_id"] == "u1" and pd.isna(df.loc["u1", "parent_id"])


def test_entries_content_columns(session: Session) -> None:
    df = frames.entries_df(session).set_index("id")
    # thinking 3 + text 2 + "read" 4 + '{"path":"a.py"}' 15 + "bash" 4 + '{"command":"ls -la"}' 20
    assert df.loc["a1", "message_chars"] == 48 and df.loc["a1", "est_tokens"] == 12
    assert df.loc["r2", "message_chars"] == 7  # the emoji is two UTF-16 units
    assert df.loc["u3", "message_chars"] == 8 + 4800  # images count 4800
    assert df.loc["cmp", "summary_chars"] == 6
    assert df.loc["lbl", "message_chars"] == 0 and df.loc["lbl", "est_tokens"] == 0
    assert df.loc["a1", "tool_names"] == "read,bash" and df.loc["r1", "tool_names"] == "read"
    assert df.loc["r2", "is_error"] is True or df.loc["r2", "is_error"] == True  # noqa: E712
    assert df.loc["r1", "is_error"] == False  # noqa: E712
    assert pd.isna(df.loc["a1", "is_error"])
    assert df.loc["a1", "stop_reason"] == "toolUse"
    assert (df.loc["a1", ["input", "output", "cache_read", "cache_write", "total_tokens"]].tolist() == [100, 20, 5, 0, 125])
    assert pd.isna(df.loc["a2", "total_tokens"])
    assert df.loc["a1", "cost_total"] == pytest.approx(0.01)
    assert df.loc["use1", "input"] == 50 and df.loc["use1", "model"] == "gpt-y"
    assert df.loc["cmp", "first_kept_entry_id"] == "a2" and df.loc["cmp", "tokens_before"] == 500
    assert df.loc["cmp2", "from_hook"] == True and pd.isna(df.loc["cmp", "from_hook"])  # noqa: E712
    assert df.loc["a1", "role"] == "assistant" and pd.isna(df.loc["cmp", "role"])
    assert df.loc["u1", "timestamp"] == T0 + pd.Timedelta(seconds=1)


def test_entries_dtypes(session: Session) -> None:
    df = frames.entries_df(session)
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"
    for col in ("type", "role", "stop_reason", "provider", "model"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    for col in ("depth", "child_count", "message_chars", "est_tokens", "input", "total_tokens", "tokens_before"):
        assert str(df[col].dtype) == "Int64", col
    assert str(df["is_error"].dtype) == "boolean" and str(df["from_hook"].dtype) == "boolean"
    assert df["on_active_path"].dtype == bool
    assert df["cost_total"].dtype == "float64"


def test_est_tokens_are_pi_estimates_and_chars_agree(session: Session) -> None:
    df = frames.entries_df(session).set_index("id")
    for entry in session.entries:
        if entry["type"] == "message":
            assert df.loc[entry["id"], "est_tokens"] == estimate_tokens(entry["message"])
            assert df.loc[entry["id"], "est_tokens"] == math.ceil(df.loc[entry["id"], "message_chars"] / 4)


def test_broken_message_gives_na_not_an_exception() -> None:
    header = {"type": "session", "version": 3, "id": "b", "timestamp": iso(0), "cwd": "/"}
    entries = [
        message("x1", None, 1, {"role": "assistant", "content": [{"type": "text"}]}),  # text missing: Pi throws
        {"type": "message", "id": "x2", "parentId": "x1", "timestamp": "garbage", "message": {"role": "user", "content": None}},
        {"type": "mystery", "id": "x3", "parentId": "x9"},  # unknown type, dangling parent
    ]
    df = frames.entries_df(Session(header, entries)).set_index("id")
    assert pd.isna(df.loc["x1", "est_tokens"]) and pd.isna(df.loc["x1", "message_chars"])
    assert df.loc["x2", "est_tokens"] == 0  # null content projects to [] as in Pi
    assert pd.isna(df.loc["x2", "timestamp"])
    assert df.loc["x3", "type"] == "mystery" and df.loc["x3", "depth"] == 0
    messages = frames.messages_df(Session(header, entries))
    assert len(messages) == 2 and pd.isna(messages["est_tokens"].iloc[0])


def test_entries_line_numbers_from_file(tmp_path: Path, session: Session) -> None:
    path = tmp_path / "s.jsonl"
    session.write(path)
    loaded = load_session(path)
    df = frames.entries_df(loaded)
    if df["line"].isna().all():
        pytest.skip("the loader does not record line numbers")
    assert df["line"].tolist() == list(range(2, 2 + len(loaded.entries)))
    n = len(loaded.entries)
    first = loaded.append_message({"role": "user", "content": "appended", "timestamp": 1})
    loaded.append_message({"role": "user", "content": "again", "timestamp": 2})
    loaded.branch(first["id"])  # a branch: the entries after it are still numbered, in order
    loaded.append_message({"role": "user", "content": "on a branch", "timestamp": 3})
    lines = frames.entries_df(loaded)["line"].tolist()
    assert lines[:n] == list(range(2, 2 + n)) and len(lines) == n + 3 and all(pd.isna(x) for x in lines[n:])


# --------------------------------------------------------------------------- messages


def test_messages_df(session: Session) -> None:
    df = frames.messages_df(session).set_index("entry_id")
    assert list(df.index) == ["u1", "a1", "r1", "r2", "a2", "u2", "u3", "a3"]
    assert df.loc["a1", ["content_blocks", "text_blocks", "thinking_blocks", "tool_call_blocks", "image_blocks"]].tolist() == [4, 1, 1, 2, 0]
    assert df.loc["u1", ["content_blocks", "text_blocks"]].tolist() == [1, 1]  # a string content
    assert df.loc["u3", "image_blocks"] == 1
    assert df.loc["u1", "preview"] == "read a.py please"
    assert df.loc["r2", "tool_call_id"] == "c2" and df.loc["r2", "tool_name"] == "bash"
    assert df.loc["a1", "message_timestamp"] == T0 + pd.Timedelta(seconds=2)
    assert df.loc["a1", "timestamp"] == T0 + pd.Timedelta(seconds=5)
    assert df.loc["a1", "chars"] == 48 and df.loc["a1", "est_tokens"] == 12
    assert not df.loc["u2", "on_active_path"] and df.loc["u3", "on_active_path"]
    assert isinstance(df["role"].dtype, pd.CategoricalDtype)


# --------------------------------------------------------------------------- tool calls


def test_tool_calls_join_results(session: Session) -> None:
    df = frames.tool_calls_df(session).set_index("call_id")
    assert list(df.index) == ["c1", "c2", "c3"]
    assert df["name"].tolist() == ["read", "bash", "edit"]
    assert df.loc["c1", "file_path"] == "a.py" and pd.isna(df.loc["c2", "file_path"]) and df.loc["c3", "file_path"] == "b.py"
    assert df.loc["c2", "command"] == "ls -la" and pd.isna(df.loc["c1", "command"])
    assert df.loc["c3", "arguments"] == {"path": "b.py", "oldText": "x", "newText": "y"}
    assert df.loc["c1", "result_entry_id"] == "r1" and df.loc["c2", "result_entry_id"] == "r2"
    assert df.loc["c1", "call_entry_id"] == "a1" and df.loc["c2", "call_index"] == 1
    assert df.loc["c1", "is_error"] == False and df.loc["c2", "is_error"] == True  # noqa: E712
    assert df.loc["c1", "latency_s"] == pytest.approx(0.25)
    assert df.loc["c2", "latency_s"] == pytest.approx(1.5)
    assert df.loc["c1", "since_request_s"] == pytest.approx(3.2)
    assert df.loc["c1", "result_chars"] == 11 and df.loc["c2", "result_chars"] == 7
    assert df.loc["c2", "result_est_tokens"] == 2
    # A call without a result keeps NA result columns.
    assert pd.isna(df.loc["c3", "result_entry_id"]) and pd.isna(df.loc["c3", "latency_s"]) and pd.isna(df.loc["c3", "is_error"])
    assert df["on_active_path"].tolist() == [True, True, True]
    assert str(df["latency_s"].dtype) == "float64" and isinstance(df["name"].dtype, pd.CategoricalDtype)


def test_tool_result_on_another_branch_prefers_the_descendant() -> None:
    header = {"type": "session", "version": 3, "id": "t", "timestamp": iso(0), "cwd": "/"}
    call = {"type": "toolCall", "id": "dup", "name": "read", "arguments": {"path": "x"}}
    entries = [
        message("a", None, 1, {"role": "assistant", "content": [call]}),
        message("b", None, 2, {"role": "assistant", "content": [call]}),
        message("rb", "b", 3, {"role": "toolResult", "toolCallId": "dup", "toolName": "read", "content": "B", "isError": False}),
        message("ra", "a", 4, {"role": "toolResult", "toolCallId": "dup", "toolName": "read", "content": "AA", "isError": False}),
    ]
    df = frames.tool_calls_df(Session(header, entries))
    assert df["result_entry_id"].tolist() == ["ra", "rb"]
    assert df["result_chars"].tolist() == [2, 1]


# --------------------------------------------------------------------------- usage


def test_usage_df(session: Session) -> None:
    df = frames.usage_df(session)
    assert df["entry_id"].tolist() == ["a1", "a2", "a3", "use1"]
    assert df["kind"].tolist() == ["assistant", "assistant", "assistant", "cache_warm"]
    assert df["context_tokens"].iloc[0] == 125 and df["context_tokens"].iloc[1] == 210  # no totalTokens: the sum
    assert df["context_tokens"].iloc[2] == 0 and pd.isna(df["context_tokens"].iloc[3])
    assert df["valid_for_context"].tolist() == [True, True, False, False]
    assert df["cumulative_cost"].tolist() == pytest.approx([0.01, 0.03, 0.03, 0.53])
    assert df["model"].tolist() == ["claude-x", "claude-x", "gpt-y", "gpt-y"]
    assert str(df["input"].dtype) == "Int64" and str(df["timestamp"].dtype) == "datetime64[ns, UTC]"


# --------------------------------------------------------------------------- compactions


def test_compactions_df(session: Session) -> None:
    df = frames.compactions_df(session).set_index("id")
    assert list(df.index) == ["cmp", "cmp2"]
    assert df.loc["cmp", "summary_chars"] == 6 and df.loc["cmp", "tokens_before"] == 500
    assert df.loc["cmp", "summary_est_tokens"] == 2  # ceil(6 / 4)
    assert df.loc["cmp", "read_files"] == 1 and df.loc["cmp", "modified_files"] == 0
    assert df.loc["cmp2", "read_files"] == 2 and df.loc["cmp2", "modified_files"] == 1
    assert df.loc["cmp2", "from_hook"] == True and pd.isna(df.loc["cmp", "from_hook"])  # noqa: E712
    # cmp: path u1 a1 r1 r2 a2 u3, first kept a2 → 4 summarized, 2 kept.
    assert df.loc["cmp", "path_length"] == 6
    assert (df.loc["cmp", "entries_summarized"], df.loc["cmp", "entries_kept"]) == (4, 2)
    assert pd.isna(df.loc["cmp", "previous_compaction_id"])
    # cmp2: context [cmp, a2, u3, a3, use1]; from after cmp's summary up to a3 → 2, kept 2.
    assert df.loc["cmp2", "previous_compaction_id"] == "cmp"
    assert (df.loc["cmp2", "entries_summarized"], df.loc["cmp2", "entries_kept"]) == (2, 2)
    assert df["on_active_path"].all() and df["first_kept_found"].all()


def test_compaction_with_missing_first_kept() -> None:
    header = {"type": "session", "version": 3, "id": "m", "timestamp": iso(0), "cwd": "/"}
    entries = [
        message("u", None, 1, {"role": "user", "content": "x"}),
        {"type": "compaction", "id": "c", "parentId": "u", "timestamp": iso(2), "summary": "s",
         "firstKeptEntryId": "gone", "tokensBefore": 9},
    ]
    row = frames.compactions_df(Session(header, entries)).iloc[0]
    assert not row["first_kept_found"] and pd.isna(row["entries_kept"]) and pd.isna(row["entries_summarized"])


def test_empty_session_frames_have_columns() -> None:
    empty = Session({"type": "session", "version": 3, "id": "e", "timestamp": iso(0), "cwd": "/"}, [])
    for name in ("entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df"):
        df = getattr(frames, name)(empty)
        assert len(df) == 0 and len(df.columns) > 3, name


def test_session_methods_delegate_to_frames(session: Session) -> None:
    pd.testing.assert_frame_equal(session.entries_df(), frames.entries_df(session))
    pd.testing.assert_frame_equal(session.tool_calls_df(), frames.tool_calls_df(session))


# --------------------------------------------------------------------------- real sessions


def _tool_call_blocks(session: Session) -> list[dict]:
    return [
        b
        for e in session.entries
        if e["type"] == "message" and e["message"].get("role") == "assistant"
        for b in (e["message"].get("content") or [])
        if b.get("type") == "toolCall"
    ]


def test_real_sessions_frames(real_v3_paths: list[Path]) -> None:
    for path in real_v3_paths:
        s = load_session(path)
        entries = frames.entries_df(s)
        assert len(entries) == len(s.entries)
        assert entries["id"].tolist() == [e["id"] for e in s.entries]
        assert int(entries["on_active_path"].sum()) == len(s.get_branch())
        assert int(entries["child_count"].sum()) == sum(1 for e in s.entries if e.get("parentId") is not None)
        # Depth is one more than the parent's.
        depth = dict(zip(entries["id"], entries["depth"]))
        for e in s.entries:
            if e.get("parentId") in depth:
                assert depth[e["id"]] == depth[e["parentId"]] + 1
        for e, tokens, chars in zip(s.entries, entries["est_tokens"], entries["message_chars"]):
            if e["type"] == "message":
                assert tokens == estimate_tokens(e["message"])
                assert tokens == math.ceil(chars / 4)

        calls = frames.tool_calls_df(s)
        blocks = _tool_call_blocks(s)
        assert len(calls) == len(blocks)
        assert calls["call_id"].tolist() == [b["id"] for b in blocks]
        results = [e for e in s.entries if e["type"] == "message" and e["message"]["role"] == "toolResult"]
        call_ids = set(calls["call_id"])
        for r in results:  # every tool result joins to its call
            assert r["message"]["toolCallId"] in call_ids
        joined = calls["result_entry_id"].dropna()
        assert sorted(joined) == sorted(r["id"] for r in results)
        assert (calls["latency_s"].dropna() >= 0).all()

        usage = frames.usage_df(s)
        assistant_usage = [e for e in s.entries if e["type"] == "message" and e["message"]["role"] == "assistant" and "usage" in e["message"]]
        assert len(usage) == len(assistant_usage)
        for e, ctx in zip(assistant_usage, usage["context_tokens"]):
            assert ctx == calculate_context_tokens(e["message"]["usage"])
        assert usage["cumulative_cost"].is_monotonic_increasing

        messages = frames.messages_df(s)
        assert len(messages) == sum(e["type"] == "message" for e in s.entries)
        assert int(messages["tool_call_blocks"].sum()) == len(blocks)


def test_sample_sessions_compactions(sample_paths: list[Path]) -> None:
    seen = 0
    for path in sample_paths:
        s = load_session(path)
        comps = frames.compactions_df(s)
        expected = [e["id"] for e in s.entries if e["type"] == "compaction"]
        assert comps["id"].tolist() == expected
        for _, row in comps.iterrows():
            if row["first_kept_found"]:
                seen += 1
                assert row["entries_summarized"] >= 0 and row["entries_kept"] >= 1
    assert seen > 0


# --------------------------------------------------------------------------- chars vs Pi's estimate

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30) | st.sampled_from(["😀x", "é", ""])
_odd = st.none() | st.integers(-2, 2) | st.lists(st.integers(), max_size=3) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text | _odd}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _text | _odd}),
    st.fixed_dictionaries({"type": st.just("image"), "data": st.just("AA==")}),
    st.fixed_dictionaries({"type": st.just("toolCall"), "name": _text | _odd,
                           "arguments": st.dictionaries(st.text(max_size=4), _text | st.integers() | st.floats(allow_nan=False), max_size=3)}),
    st.fixed_dictionaries({"type": st.sampled_from(["other", "toolCall"])}),
    _text,
)
_content = _text | st.lists(_block, max_size=4) | _odd
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "toolResult", "custom", "system", "weird"]), "content": _content}),
    st.fixed_dictionaries({"role": st.just("bashExecution"), "command": _text | _odd, "output": _text | _odd}),
    st.fixed_dictionaries({"role": st.sampled_from(["branchSummary", "compactionSummary"]), "summary": _text | _odd}),
    st.fixed_dictionaries({"role": st.just("system"), "content": _content,
                           "sections": st.dictionaries(st.text(max_size=3), _text | st.none(), max_size=3) | _odd,
                           "toolsAdded": st.lists(st.dictionaries(st.text(max_size=3), _text, max_size=2), max_size=2) | st.none()}),
)


@settings(max_examples=400, deadline=None)
@given(_message)
def test_message_chars_matches_pi_estimate(msg: dict) -> None:
    """ceil(message_chars / 4) is estimate_tokens, and both fail on the same broken messages."""
    try:
        expected = estimate_tokens(msg)
    except (TypeError, AttributeError, KeyError, ValueError):
        expected = None
    try:
        chars = frames.message_chars(msg)
    except (TypeError, AttributeError, KeyError, ValueError):
        chars = None
    if expected is None:
        assert chars is None
    else:
        assert chars is not None and math.ceil(chars / 4) == expected


def test_times_are_exact_to_the_millisecond() -> None:
    """Epoch milliseconds become datetimes without float noise in the nanoseconds."""
    stamp = "2023-11-14T22:13:20.123Z"
    header = {"type": "session", "version": 3, "id": "s", "timestamp": stamp, "cwd": "/"}
    entry = {"type": "message", "id": "u1", "parentId": None, "timestamp": stamp,
             "message": {"role": "user", "content": "hi", "timestamp": 1700000000123}}
    df = frames.messages_df(Session(header, [entry]))
    expected = pd.Timestamp(stamp)
    assert df["timestamp"].iloc[0] == expected
    assert df["message_timestamp"].iloc[0] == expected
    assert df["message_timestamp"].iloc[0].nanosecond == 0
    assert df["message_timestamp"].iloc[0].microsecond == 123000


# --------------------------------------------------------------------------- compaction spans against a slow reference


def slow_compactions_df(session: Session) -> pd.DataFrame:
    """``compactions_df`` as first written: one path and context build per compaction."""
    from pimem.core.compaction.compaction import estimate_tokens
    from pimem.core.messages import create_compaction_summary_message

    tree = frames._Tree(session)
    keys = (
        "id", "timestamp", "first_kept_entry_id", "first_kept_found", "tokens_before",
        "summary_chars", "summary_est_tokens", "read_files", "modified_files", "from_hook",
        "has_system_message", "on_active_path", "previous_compaction_id", "path_length",
        "entries_summarized", "entries_kept", "summary_input", "summary_output",
    )  # fmt: skip
    rows: dict[str, list[Any]] = {k: [] for k in keys}
    for e in session.entries:
        if e.get("type") != "compaction":
            continue
        eid = e.get("id")
        summary = e.get("summary")
        first_kept = e.get("firstKeptEntryId")
        details = e.get("details") if isinstance(e.get("details"), dict) else {}
        branch = session.get_branch(eid)
        path = branch[:-1] if branch and branch[-1] is e else [x for x in branch if x is not e]
        context, previous = frames._context_entries(path)
        start = 1 if previous is not None else 0
        kept_index = next((j for j in range(start, len(context)) if context[j].get("id") == first_kept), None)
        try:
            est = estimate_tokens(create_compaction_summary_message(summary, e.get("tokensBefore"), e.get("timestamp")))
        except (TypeError, AttributeError, ValueError):
            est = None
        usage = e.get("usage") if isinstance(e.get("usage"), dict) else {}
        rows["id"].append(eid)
        rows["timestamp"].append(e.get("timestamp"))
        rows["first_kept_entry_id"].append(first_kept)
        rows["first_kept_found"].append(kept_index is not None)
        rows["tokens_before"].append(e.get("tokensBefore"))
        rows["summary_chars"].append(frames._u16(summary) if isinstance(summary, str) else None)
        rows["summary_est_tokens"].append(est)
        rf, mf = details.get("readFiles"), details.get("modifiedFiles")
        rows["read_files"].append(len(rf) if isinstance(rf, list) else None)
        rows["modified_files"].append(len(mf) if isinstance(mf, list) else None)
        rows["from_hook"].append(e.get("fromHook"))
        rows["has_system_message"].append(bool(e.get("systemMessage")))
        rows["on_active_path"].append(eid in tree.active)
        rows["previous_compaction_id"].append(previous.get("id") if previous is not None else None)
        rows["path_length"].append(len(path))
        rows["entries_summarized"].append(None if kept_index is None else kept_index - start)
        rows["entries_kept"].append(None if kept_index is None else len(context) - kept_index)
        rows["summary_input"].append(usage.get("input"))
        rows["summary_output"].append(usage.get("output"))
    return pd.DataFrame(
        {
            "id": typed_array("string", rows["id"]),
            "timestamp": iso_times(rows["timestamp"]),
            "first_kept_entry_id": typed_array("string", rows["first_kept_entry_id"]),
            "first_kept_found": np.array(rows["first_kept_found"], dtype=bool),
            "tokens_before": typed_array("Int64", rows["tokens_before"]),
            "summary_chars": typed_array("Int64", rows["summary_chars"]),
            "summary_est_tokens": typed_array("Int64", rows["summary_est_tokens"]),
            "read_files": typed_array("Int64", rows["read_files"]),
            "modified_files": typed_array("Int64", rows["modified_files"]),
            "from_hook": typed_array("boolean", rows["from_hook"]),
            "has_system_message": np.array(rows["has_system_message"], dtype=bool),
            "on_active_path": np.array(rows["on_active_path"], dtype=bool),
            "previous_compaction_id": typed_array("string", rows["previous_compaction_id"]),
            "path_length": typed_array("Int64", rows["path_length"]),
            "entries_summarized": typed_array("Int64", rows["entries_summarized"]),
            "entries_kept": typed_array("Int64", rows["entries_kept"]),
            "summary_input": typed_array("Int64", rows["summary_input"]),
            "summary_output": typed_array("Int64", rows["summary_output"]),
        }
    )


def compaction(eid: str, parent: str | None, t: float, first_kept: str | None, summary: str = "s") -> dict:
    entry = {"type": "compaction", "id": eid, "parentId": parent, "timestamp": iso(t), "summary": summary, "tokensBefore": 100}
    if first_kept is not None:
        entry["firstKeptEntryId"] = first_kept
    return entry


def user(eid: str, parent: str | None, t: float, role: str = "user") -> dict:
    return message(eid, parent, t, {"role": role, "content": f"text {eid}", "timestamp": ms(t)})


def test_compaction_spans_on_a_branching_tree_match_the_slow_reference() -> None:
    header = {"type": "session", "version": 3, "id": "t", "timestamp": iso(0), "cwd": "/"}
    entries = [
        user("u1", None, 1), user("u2", "u1", 2), user("sys", "u2", 3, role="system"), user("u3", "sys", 4),
        compaction("c1", "u3", 5, "u2"),  # keeps u2, drops the system message, keeps u3
        user("u4", "c1", 6), user("u5", "u4", 7),
        compaction("c2", "u5", 8, "u3"),  # first kept inside c1's kept span, after a system message
        user("u6", "c2", 9),
        compaction("c3", "u6", 10, "u2"),  # u2 is before c2's kept span: not found
        compaction("c4", "u6", 11, "c2"),  # the previous compaction itself: not found
        compaction("c5", "u6", 12, None),  # no firstKeptEntryId
        user("b1", "u3", 13),  # a second branch under u3, without c1
        compaction("c6", "b1", 14, "sys"),  # a system message as first kept, no previous compaction
        compaction("c7", "b1", 15, "u1"),
        compaction("c8", "c7", 16, "b1"),  # directly under a compaction
        compaction("c5", "u6", 17, "u4"),  # the id c5 again: the lookup now finds this entry
        user("x1", "x2", 18), user("x2", "x1", 19), compaction("cx", "x2", 20, "x1"),  # a parent cycle
        compaction("dangling", "missing", 21, "u1"),
    ]
    s = Session(header, entries)
    fast = frames.compactions_df(s)
    pd.testing.assert_frame_equal(fast, slow_compactions_df(s))
    row = fast.set_index("id").loc["c2"]
    assert row["previous_compaction_id"] == "c1" and row["entries_summarized"] == 1 and row["entries_kept"] == 3
    assert fast.set_index("id").loc["c6", "entries_summarized"] == 2  # u1, u2 before the system message
    assert int(fast["first_kept_found"].sum()) >= 4 and not fast["first_kept_found"].all()


def test_compaction_spans_match_the_slow_reference_on_samples_and_real_sessions(sample_paths: list[Path], real_v3_paths: list[Path]) -> None:
    compared = 0
    for path in [*sample_paths, *real_v3_paths]:
        s = load_session(path)
        pd.testing.assert_frame_equal(frames.compactions_df(s), slow_compactions_df(s))
        compared += len(frames.compactions_df(s))
    assert compared > 0


def test_compaction_spans_match_the_slow_reference_on_a_replay_with_many_compactions(real_dir: Path) -> None:
    import pimem
    from pimem.core.compaction.compaction import CompactionSettings

    settings = CompactionSettings(reserve_tokens=2048, keep_recent_tokens=2000)
    # a window that holds the session's largest steps: few turns fail, so the run goes on compacting
    s = pimem.replay(load_session(real_dir / "before-compaction.jsonl"), settings, context_window=20000).session
    fast = frames.compactions_df(s)
    assert len(fast) >= 30
    pd.testing.assert_frame_equal(fast, slow_compactions_df(s))


# --------------------------------------------------------------------------- tool-call join against a slow reference


def slow_tool_calls_df(session: Session) -> pd.DataFrame:
    """``tool_calls_df`` as first written: a parent walk per call and candidate result."""
    tree = frames._Tree(session)
    entries = session.entries
    results: dict[Any, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("type") != "message":
            continue
        m = e.get("message")
        if isinstance(m, dict) and m.get("role") == "toolResult":
            results.setdefault(m.get("toolCallId"), []).append(e)

    keys = (
        "call_entry_id", "call_index", "call_id", "name", "arguments", "file_path", "command",
        "call_timestamp", "call_message_ms", "result_entry_id", "result_timestamp",
        "result_message_ms", "result_chars", "result_est_tokens", "is_error", "model",
        "on_active_path", "result_on_active_path",
    )  # fmt: skip
    rows: dict[str, list[Any]] = {k: [] for k in keys}
    for e in entries:
        if e.get("type") != "message":
            continue
        m = e.get("message")
        if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        eid = e.get("id")
        index = 0
        for block in m["content"]:
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            call_id = block.get("id")
            args = block.get("arguments")
            name = block.get("name")
            candidates = results.get(call_id, []) if call_id is not None else []
            result = next((r for r in candidates if tree.is_descendant(r.get("id"), eid)), None)
            if result is None and candidates:
                result = candidates[0]
            rows["call_entry_id"].append(eid)
            rows["call_index"].append(index)
            rows["call_id"].append(call_id)
            rows["name"].append(name)
            rows["arguments"].append(args)
            rows["file_path"].append(args.get("path") if isinstance(args, dict) else None)
            rows["command"].append(args.get("command") if name == "bash" and isinstance(args, dict) else None)
            rows["call_timestamp"].append(e.get("timestamp"))
            rows["call_message_ms"].append(m.get("timestamp"))
            rows["model"].append(m.get("model"))
            rows["on_active_path"].append(eid in tree.active)
            if result is None:
                for k in ("result_entry_id", "result_timestamp", "result_message_ms", "result_chars",
                          "result_est_tokens", "is_error", "result_on_active_path"):  # fmt: skip
                    rows[k].append(None)
            else:
                rm = result["message"]
                rows["result_entry_id"].append(result.get("id"))
                rows["result_timestamp"].append(result.get("timestamp"))
                rows["result_message_ms"].append(rm.get("timestamp"))
                try:
                    chars, tokens = frames.message_chars(rm), estimate_tokens(rm)
                except (TypeError, AttributeError, KeyError, ValueError):
                    chars, tokens = None, None
                rows["result_chars"].append(chars)
                rows["result_est_tokens"].append(tokens)
                rows["is_error"].append(rm.get("isError"))
                rows["result_on_active_path"].append(result.get("id") in tree.active)
            index += 1

    call_ts = iso_times(rows["call_timestamp"])
    result_ts = iso_times(rows["result_timestamp"])
    call_ms = typed_array("float", rows["call_message_ms"])
    result_ms = typed_array("float", rows["result_message_ms"])
    return pd.DataFrame(
        {
            "call_entry_id": typed_array("string", rows["call_entry_id"]),
            "call_index": typed_array("Int64", rows["call_index"]),
            "call_id": typed_array("string", rows["call_id"]),
            "name": typed_array("category", rows["name"]),
            "arguments": pd.Series(rows["arguments"], dtype=object),
            "file_path": typed_array("string", rows["file_path"]),
            "command": typed_array("string", rows["command"]),
            "call_timestamp": call_ts,
            "result_entry_id": typed_array("string", rows["result_entry_id"]),
            "result_timestamp": result_ts,
            "result_chars": typed_array("Int64", rows["result_chars"]),
            "result_est_tokens": typed_array("Int64", rows["result_est_tokens"]),
            "is_error": typed_array("boolean", rows["is_error"]),
            "latency_s": (result_ts - call_ts).dt.total_seconds().astype("float64"),
            "since_request_s": (result_ms - call_ms) / 1000.0,
            "model": typed_array("category", rows["model"]),
            "on_active_path": np.array(rows["on_active_path"], dtype=bool),
            "result_on_active_path": typed_array("boolean", rows["result_on_active_path"]),
        }
    )


def test_tool_results_with_ids_repeated_on_many_branches_match_the_slow_reference() -> None:
    header = {"type": "session", "version": 3, "id": "t", "timestamp": iso(0), "cwd": "/"}

    def call(eid: str, parent: str | None, t: float, *call_ids: str) -> dict:
        blocks = [{"type": "toolCall", "id": c, "name": "read", "arguments": {"path": c}} for c in call_ids]
        return message(eid, parent, t, {"role": "assistant", "content": blocks, "timestamp": ms(t)})

    def result(eid: str, parent: str | None, t: float, call_id: str, text: str) -> dict:
        return message(eid, parent, t, {"role": "toolResult", "toolCallId": call_id, "toolName": "read", "content": text, "isError": False, "timestamp": ms(t)})

    entries = [call("root", None, 1, "dup")]
    for b in range(30):  # 30 branches, each calling "dup" and answering it further down
        entries.append(call(f"a{b}", "root", 2 + b, "dup", "other"))
        entries.append(message(f"m{b}", f"a{b}", 40 + b, {"role": "user", "content": "go"}))
        entries.append(result(f"r{b}", f"m{b}", 80 + b, "dup", "x" * (b + 1)))
    entries.append(call("nested", "r5", 120, "dup"))  # a second "dup" call under branch 5's result
    entries.append(result("rn", "nested", 121, "dup", "nested"))
    entries.append(result("late", "a7", 122, "dup", "later on branch 7"))  # a second answer on branch 7
    entries.append(call("lonely", "root", 123, "dup", "unanswered"))  # no result below: the first anywhere
    entries.append(call("cy1", "cy2", 124, "dup"))  # a parent cycle
    entries.append(result("cy2", "cy1", 125, "dup", "cycle"))
    entries.append(result("r_other", "a3", 126, "other", "o"))
    s = Session(header, entries)
    fast = frames.tool_calls_df(s)
    pd.testing.assert_frame_equal(fast, slow_tool_calls_df(s))
    dup = fast[fast["call_id"] == "dup"].set_index("call_entry_id")["result_entry_id"]
    assert dup["a0"] == "r0" and dup["a29"] == "r29" and dup["a7"] == "r7"
    assert dup["root"] == "r0" and dup["nested"] == "rn" and dup["lonely"] == "r0" and dup["cy1"] == "cy2"
    other = fast[fast["call_id"] == "other"].set_index("call_entry_id")["result_entry_id"]
    assert other["a3"] == "r_other" and other["a4"] == "r_other"


def test_tool_call_join_matches_the_slow_reference_on_samples_and_real_sessions(sample_paths: list[Path], real_v3_paths: list[Path]) -> None:
    joined = 0
    for path in [*sample_paths, *real_v3_paths]:
        s = load_session(path)
        fast = frames.tool_calls_df(s)
        pd.testing.assert_frame_equal(fast, slow_tool_calls_df(s))
        joined += int(fast["result_entry_id"].notna().sum())
    assert joined > 0


# --------------------------------------------------------------------------- declared columns: selection, errors, docs

_FRAMES = {"entries_df": frames.ENTRIES, "messages_df": frames.MESSAGES, "tool_calls_df": frames.TOOL_CALLS,
           "usage_df": frames.USAGE, "compactions_df": frames.COMPACTIONS}


def _selections(table: Any) -> list[list[str]]:
    names = table.names
    derived = [c.name for c in table.columns if c.needs]
    return [names[::-1], names[::3], names[1::4], *([d] for d in derived), [names[-1], names[0]]]


def test_a_selection_of_columns_is_those_columns_of_the_whole_table(session: Session, sample_paths: list[Path]) -> None:
    compared = 0
    for s in [session, *(load_session(p) for p in sample_paths)]:
        for name, table in _FRAMES.items():
            whole = getattr(frames, name)(s)
            assert list(whole.columns) == table.names
            for chosen in _selections(table):
                pd.testing.assert_frame_equal(getattr(frames, name)(s, chosen), whole[chosen])
                compared += 1
    assert compared > 30


def test_a_selection_without_the_tree_or_the_results_does_not_build_them(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_tree(*args: Any) -> Any:
        raise AssertionError("the tree was built")

    monkeypatch.setattr(frames, "_Tree", no_tree)
    assert frames.entries_df(session, ["id", "type", "timestamp", "est_tokens"])["type"].tolist()[:2] == ["message"] * 2
    assert frames.tool_calls_df(session, ["name", "file_path"])["name"].tolist() == ["read", "bash", "edit"]
    with pytest.raises(AssertionError, match="the tree was built"):
        frames.tool_calls_df(session, ["result_entry_id"])


def test_an_unknown_column_names_the_known_ones(session: Session) -> None:
    from pimem.errors import UnknownColumnError

    with pytest.raises(UnknownColumnError, match="no column 'tokens'.*est_tokens"):
        frames.entries_df(session, ["id", "tokens"])


def test_strict_false_names_each_value_that_could_not_be_read(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "b", "timestamp": iso(0), "cwd": "/"}
    bad_usage = usage(10, 2)
    bad_usage["input"] = "12"  # a count written as text
    entries = [
        message("x1", None, 1, {"role": "assistant", "content": [{"type": "text"}], "usage": bad_usage,
                                "stopReason": "stop", "timestamp": ms(1)}),  # text missing: Pi's estimator throws
        message("x2", "x1", 2, {"role": "user", "content": "fine", "timestamp": ms(2)}),
    ]
    path = tmp_path / "bad.jsonl"
    Session(header, entries).write(path)
    loaded = load_session(path)
    df, errors = frames.entries_df(loaded, strict=False)
    pd.testing.assert_frame_equal(df, frames.entries_df(loaded))
    assert pd.isna(df["est_tokens"].iloc[0]) and pd.isna(df["input"].iloc[0]) and df["est_tokens"].iloc[1] > 0
    found = {(e.column, e.row) for e in errors}
    assert found == {("message_chars", 0), ("est_tokens", 0), ("input", 0)}
    text = str(next(e for e in errors if e.column == "input"))
    assert str(path) in text and "entry 'x1' (line 2)" in text and "'12' is not Int64" in text
    usage_df, usage_errors = frames.usage_df(loaded, strict=False)
    assert pd.isna(usage_df["input"].iloc[0]) and [e.column for e in usage_errors] == ["input"]
    messages, message_errors = frames.messages_df(loaded, ["entry_id", "chars"], strict=False)
    assert [(e.column, e.row) for e in message_errors] == [("chars", 0)]


def test_each_frame_function_documents_its_declared_columns() -> None:
    for name, table in _FRAMES.items():
        doc = getattr(frames, name).__doc__ or ""
        assert all(f"- ``{c}``" in doc for c in table.names), name
        assert doc.index("Columns:") < doc.index("Args:")


def test_the_corpus_frames_take_a_selection(sample_paths: list[Path]) -> None:
    from pimem.sessions.discover import load_sessions

    corpus = load_sessions(sample_paths, progress=False, workers=1)
    whole = corpus.compactions_df()
    picked = corpus.compactions_df(["tokens_before", "summary_chars"])
    assert list(picked.columns) == ["session_id", "path", "source_format", "tokens_before", "summary_chars"]
    pd.testing.assert_frame_equal(picked, whole[list(picked.columns)])
    assert list(corpus.entries_df(["type"]).columns) == ["session_id", "path", "source_format", "type"]
