"""Fuzz: the hostile value classes — null or non-object messages and blocks, huge numbers, odd
timestamps, control characters, blank-line floods. Every example loads with a warning per
problem (or fails with a clear error naming the file), every view works or raises Pi's own
TypeError / a clear SessionFormatError, terminal output carries no control character, and the
date and summary-text functions never raise and agree with their references."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem import build_session_context, load_session
from pimem.base.js import parse_iso_ms
from pimem.core.session_manager import SessionFormatError
from pimem.errors import JavaScriptTypeError

pytestmark = pytest.mark.fuzz

TS = "2026-03-01T09:00:00.000Z"


def fuzz(max_examples: int) -> Any:
    return settings(max_examples=max_examples, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


controls = st.lists(st.sampled_from(["a", " ", "\x1b[2J", "\x1b]0;t\x07", "\x9b", "\r", "\x00", "\x7f", "\t", "\n",
                                     "é", "\ud800"]), max_size=6).map("".join)
huge = st.sampled_from([1e308, -1e308, 2**63, 2**64 + 1, 1e20, 9.007199254740993e15, -1, 0.5, 10**400])
odd_timestamps = st.one_of(huge, st.sampled_from([
    "Sun, 01 Mar 2026 09:00:00 GMT", "March 1, 2026", "2026/03/01", "12/31/2025", " 2026-03-01T00:00:00Z",
    "2026-03-01T10:00:00,5Z", "garbage", "", "1 March 2026 10:00 UTC", "+275760-09-13T00:00:00.001Z"]), controls)
blocks = st.one_of(st.none(), st.integers(), controls, st.just([None]),
                   st.builds(lambda t: {"type": "text", "text": t}, controls),
                   st.builds(lambda t: {"type": "thinking", "thinking": t}, controls))
messages = st.one_of(
    st.none(), controls, st.integers(), st.just([1]),
    st.builds(lambda c, ts: {"role": "user", "content": c, "timestamp": ts},
              st.one_of(controls, st.lists(blocks, max_size=3)), odd_timestamps),
    st.builds(lambda c, n, p, ts: {"role": "assistant", "content": c, "provider": p, "model": "m", "api": "x",
                                   "stopReason": "stop", "timestamp": ts,
                                   "usage": {"input": n, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                             "totalTokens": n}},
              st.lists(blocks, max_size=3), huge, st.one_of(st.just("p"), st.just(["a", "b"]), st.just({"x": 1})),
              odd_timestamps))


def _write(tmp: Path, body: list[Any], title: str) -> Path:
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/"}]
    parent = None
    for i, message in enumerate(body):
        lines.append({"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": TS, "message": message})
        parent = f"e{i}"
    lines.append({"type": "session_info", "id": "n", "parentId": parent, "timestamp": TS, "name": title})
    path = tmp / "s.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=True) + "\n" for x in lines), encoding="ascii")
    return path


@fuzz(100)
@given(body=st.lists(messages, min_size=1, max_size=6), title=controls)
def test_hostile_values_warn_or_fail_clearly(tmp_path_factory: Any, body: list[Any], title: str) -> None:
    from pimem.cli.main import main

    tmp = tmp_path_factory.mktemp("hostile")
    path = _write(tmp, body, title)
    s = load_session(path)
    assert len(s.entries) == len(body) + 1
    bad = [i for i, m in enumerate(body) if not isinstance(m, dict)]
    warned = {w.entry_id for w in s.warnings if w.reason == "message entry without a message object"}
    assert {f"e{i}" for i in bad} <= warned
    for view in ("entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df"):
        getattr(s, view)()
    try:
        build_session_context(s)
    except JavaScriptTypeError as exc:  # Pi's own TypeError on a null message or block
        assert "Cannot read properties of null" in str(exc) or "not iterable" in str(exc) or "is not" in str(exc)
    except SessionFormatError as exc:  # a message that is a string, number, list
        assert "not an object" in str(exc) and bad
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["show", str(path)])
    assert code == 0, err.getvalue()
    for control in ("\x1b", "\x07", "\x9b", "\r", "\x00", "\x7f"):
        assert control not in out.getvalue() + err.getvalue()


@fuzz(400)
@given(text=st.one_of(odd_timestamps.filter(lambda v: isinstance(v, str)), st.text(max_size=40),
                      st.from_regex(r"\A[ \t]?(Sun, |)[0-9]{1,4}[/ -][0-9A-Za-z]{1,9}[/ -,][0-9]{1,4}( [0-9:]{1,8})?"
                                    r"( (GMT|UTC|EST|Z|[AP]M))?([+-][0-9]{1,4})?[ ]?\Z")))
def test_date_parsing_never_raises_and_stays_in_range(text: str) -> None:
    value = parse_iso_ms(text)
    assert value is None or (isinstance(value, int) and abs(value) <= 8.64e15)


_REFERENCE = re.compile(r"\n*<(read-files|modified-files)>\n?.*?</\1>[ \t]*", re.S)


@fuzz(150)
@given(parts=st.lists(st.sampled_from(["\n", "\n\n\n", "x", " ", "\t", "<read-files>", "</read-files>",
                                       "<modified-files>", "</modified-files>", "a.py", "\r\n"]), max_size=30),
       flood=st.integers(0, 3_000))
def test_blank_line_floods_in_summaries(parts: list[str], flood: int) -> None:
    from pimem.text.sections import _ANY_FILE_BLOCK, section_items, summarizer_text

    text = "".join(parts)
    assert _ANY_FILE_BLOCK.sub("", text) == _REFERENCE.sub("", text)  # the same blocks removed
    flooded = "# Goal\n" + "\n" * flood + text
    assert summarizer_text(flooded) == _REFERENCE.sub("", flooded.replace("\r\n", "\n").replace("\r", "\n")).rstrip()
    section_items(flooded)
