"""A hypothesis fuzz of the importers, beside the Pi loader's (``test_fuzz_load.py``): Claude Code and
Codex transcripts with any field of any record deleted or given any JSON value (huge and negative
numbers, numbers past the double range, lone surrogates, deep nesting, the wrong container), written
plain or gzip'd, with a byte order mark, CRLF line ends, a line cut short or repeated.

Every file either is refused with a SessionFormatError naming it, or imports as a session whose
every field has the JSON type Pi's code reads, whose every record is counted as imported or
skipped, whose warnings name the file, and which, written as a Pi file, loads back without a
warning and projects at every leaf."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem.core.session_manager import build_session_context
from pimem.core.session_manager import load_session as load_pi_session
from pimem.errors import SessionFormatError
from pimem.sessions.load import load_session
from tests.support.pi_shapes import shape_errors

pytestmark = pytest.mark.fuzz

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
SOURCES = {"claude-code": FIXTURES / "claude-code-demo.jsonl", "codex": FIXTURES / "codex-demo.jsonl"}
CASES = 200  # per format


def _records(fmt: str) -> list[dict]:
    out = []
    for line in SOURCES[fmt].read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue  # the fixture's truncated last line
        if isinstance(value, dict):
            out.append(value)
    return out


RECORDS = {fmt: _records(fmt) for fmt in SOURCES}

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 2**53 + 1, 1e308, -0.0, 0.5, 10**30]),
)
texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "\ud800", "\u2028", "\ufeff", "x" * 3000]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(texts, inner, max_size=3)),
                           max_leaves=8)
# what json.dumps cannot write: a number past the double range, nesting past orjson's depth
raw_values = st.sampled_from(["1e400", "-1e400", "1" + "0" * 400, "[" * 900 + "]" * 900,
                              '{"type": "text", "text": ' + "[" * 1100 + "]" * 1100 + "}"])


@st.composite
def mutations(draw: st.DrawFn, fmt: str) -> list[tuple[int, int, str, Any]]:
    """(record, which of its fields (any depth), operation, value) for up to 6 changes."""
    out = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        record = draw(st.integers(min_value=0, max_value=len(RECORDS[fmt]) - 1))
        field = draw(st.integers(min_value=0, max_value=10_000))
        op = draw(st.sampled_from(["delete", "value", "value", "raw", "wrap"]))
        value = draw(raw_values) if op == "raw" else draw(json_values)
        out.append((record, field, op, value))
    return out


def _fields(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of a record, at any depth, in document order."""
    found: list[tuple[Any, Any]] = []
    work = [value]
    while work:
        container = work.pop()
        keys = list(container) if isinstance(container, dict) else range(len(container))
        for key in keys:
            found.append((container, key))
            if isinstance(container[key], (dict, list)):
                work.append(container[key])
    return found


def _apply(records: list[dict], record: int, field: int, op: str, value: Any, raws: dict[str, str]) -> None:
    fields = _fields(records[record])
    if not fields:
        return
    container, key = fields[field % len(fields)]
    if op == "delete":
        del container[key]
    elif op == "raw":
        marker = f"@@raw{len(raws)}@@"
        raws[marker] = value
        container[key] = marker
    elif op == "wrap":
        container[key] = [container[key]] if field % 2 else {"value": container[key]}
    else:
        container[key] = value


def _file_bytes(records: list[dict], raws: dict[str, str], shape: dict[str, bool]) -> bytes:
    lines = [json.dumps(r) for r in records]
    text = "\n".join(lines)
    for marker, raw in raws.items():
        text = text.replace(json.dumps(marker), raw)
    lines = text.split("\n")
    if shape["repeat"] and lines:
        lines.insert(len(lines) // 2, lines[len(lines) // 2])
    data = ("\r\n" if shape["crlf"] else "\n").join(lines) + "\n"
    if shape["bom"]:
        data = "\ufeff" + data
    raw = data.encode("utf-8", "surrogatepass")
    if shape["cut"]:
        raw = raw[: len(raw) - 7]
    return gzip.compress(raw, mtime=0) if shape["gzip"] else raw


shapes = st.fixed_dictionaries({k: st.booleans() for k in ("gzip", "bom", "crlf", "repeat", "cut")})


def _check(path: Path, fmt: str, tmp: Path) -> None:
    try:
        session = load_session(path, format=fmt)  # type: ignore[arg-type]
    except SessionFormatError as exc:
        assert str(exc).startswith(f"{path}:"), exc
        return
    assert session.source_format == fmt
    assert shape_errors(session.entries) == []
    report = session.import_report
    assert report.n_records == report.n_imported + report.n_skipped
    assert all(w.file == str(path) and w.reason for w in session.warnings)
    back = load_pi_session(session.write(tmp / "back.jsonl"))
    assert not back.warnings, [str(w) for w in back.warnings][:3]
    for leaf in back.leaves():
        build_session_context(back, leaf["id"])


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_damaged_transcripts_import_as_sessions_pi_reads_or_fail_clearly(tmp_path_factory, fmt: str) -> None:
    seen = []

    @settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(changes=mutations(fmt), shape=shapes)
    def case(changes: list[tuple[int, int, str, Any]], shape: dict[str, bool]) -> None:
        records = json.loads(json.dumps(RECORDS[fmt]))
        raws: dict[str, str] = {}
        for change in changes:
            _apply(records, *change, raws)
        tmp = tmp_path_factory.mktemp("fuzz")
        path = tmp / ("t.jsonl.gz" if shape["gzip"] else "t.jsonl")
        path.write_bytes(_file_bytes(records, raws, shape))
        _check(path, fmt, tmp)
        seen.append(1)

    case()
    assert len(seen) == CASES
