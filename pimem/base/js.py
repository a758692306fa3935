"""JavaScript value semantics, in one place: JSON, strings, numbers, dates, truthiness.

Pi is written in TypeScript, so byte-for-byte fidelity needs JavaScript semantics:

* :func:`js_stringify` is ``JSON.stringify(value)`` for JSON-parsed data (compact, non-ASCII
  unescaped, lone surrogates escaped, JS number formatting, integer-like object keys first).
* :func:`utf16_len` / :func:`js_slice` measure and cut strings in UTF-16 code units.
* :func:`parse_iso_ms` is ``new Date(s).getTime()`` (``None`` for NaN), :func:`to_iso` is
  ``Date.prototype.toISOString``.
* :func:`loads_line` parses one JSON text the way ``JSON.parse`` accepts it.
* :func:`js_truthy`, :func:`js_string` (``String(v)``), :func:`js_to_number` (``Number(v)``),
  :func:`js_keys` / :func:`js_entries` (``Object.keys`` / ``Object.entries`` order),
  :func:`js_sorted` (``Array.prototype.sort()``) and :func:`date_ms` (``new Date(v).getTime()``).

A JavaScript ``undefined`` is :data:`UNDEFINED`: as a property value it is dropped by
:func:`js_stringify`, and ``dict.get(key, UNDEFINED)`` reads a missing key as JavaScript does.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime as _datetime
from datetime import timedelta as _timedelta
from datetime import timezone as _timezone
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, missing from the stubs
from typing import Any, Iterable

import orjson

from pimem.base.memo import on_forget
from pimem.errors import ArgumentTypeError, ConfigurationError, JavaScriptTypeError

__all__ = [
    "js_stringify",
    "js_number",
    "js_stringify_py",
    "js_stringify_length",
    "UNDEFINED",
    "utf16_len",
    "js_slice",
    "parse_iso_ms",
    "to_iso",
    "iso_now",
    "loads_line",
    "js_truthy",
    "js_string",
    "js_to_number",
    "js_keys",
    "js_entries",
    "js_sorted",
    "date_ms",
    "js_trim",
]

_MAX_SAFE_DIGITS = 15  # every integer with at most 15 digits is exact as a double
_MAX_ARRAY_INDEX = 2**32 - 2

# --------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------


def js_number(x: float | int) -> str:
    """Format a number as JavaScript's ``Number.prototype.toString`` / ``JSON.stringify``.

    Non-finite values give ``"null"`` (what ``JSON.stringify`` writes). Python ints are
    treated as the double JavaScript would hold.
    """
    if isinstance(x, int):
        if -(10**_MAX_SAFE_DIGITS) < x < 10**_MAX_SAFE_DIGITS:
            return str(x)
        try:
            x = float(x)
        except OverflowError:
            return "null"
    if x != x or x in (math.inf, -math.inf):
        return "null"
    if x == 0:
        return "0"
    r = repr(x)
    sign = ""
    if r[0] == "-":
        sign = "-"
        r = r[1:]
    mantissa, _, exp_text = r.partition("e")
    exp = int(exp_text) if exp_text else 0
    int_part, _, frac = mantissa.partition(".")
    all_digits = int_part + frac
    stripped = all_digits.lstrip("0")
    n = len(int_part) + exp - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        e_text = ("+" if e >= 0 else "-") + str(abs(e))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + e_text
    return sign + body


# --------------------------------------------------------------------------------------
# JSON.stringify
# --------------------------------------------------------------------------------------

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_STRING_ESCAPE_RE = re.compile(r'[\ud800-\udbff][\udc00-\udfff]|["\\\x00-\x1f\ud800-\udfff]')


def _escape_char(m: re.Match[str]) -> str:
    s = m.group()
    if len(s) == 2:  # a well-formed surrogate pair held as two code points: one astral char
        return chr(0x10000 + ((ord(s[0]) - 0xD800) << 10) + (ord(s[1]) - 0xDC00))
    esc = _ESCAPES.get(s)
    return esc if esc is not None else "\\u%04x" % ord(s)


def _quote(s: str) -> str:
    return '"' + _STRING_ESCAPE_RE.sub(_escape_char, s) + '"'


def _is_array_index(key: str) -> bool:
    return (
        key.isdigit()
        and key.isascii()
        and (key == "0" or key[0] != "0")
        and len(key) <= 10
        and int(key) <= _MAX_ARRAY_INDEX
    )


def _ordered_keys(obj: dict[str, Any]) -> list[str]:
    """Property order of a JS object: array-index keys ascending, then insertion order."""
    index_keys = [k for k in obj if _is_array_index(k)]
    if not index_keys:
        return list(obj)
    index_keys.sort(key=int)
    return index_keys + [k for k in obj if not _is_array_index(k)]


class _Raw(str):
    """Text :func:`_encode` writes as is (punctuation queued between values)."""


class _Close:
    """The end of an array or object :func:`_encode` writes: its bracket, and the container, which is
    no longer open."""

    __slots__ = ("bracket", "container")

    def __init__(self, bracket: str, container: int) -> None:
        self.bracket, self.container = bracket, container


def _circular(value: Any) -> JavaScriptTypeError:
    kind = "Object" if isinstance(value, dict) else "Array"
    return JavaScriptTypeError(f"Converting circular structure to JSON (starting at object with constructor '{kind}')")


def _encode(value: Any, out: list[str]) -> None:
    """Append ``JSON.stringify(value)`` to ``out``; iterative, so any nesting depth works. A value
    that holds itself raises JavaScript's TypeError at once (:class:`JavaScriptTypeError`)."""
    work: list[Any] = [value]
    pop, push = work.pop, work.append
    open_containers: set[int] = set()  # the arrays and objects being written: their ids
    while work:
        value = pop()
        if value.__class__ is _Raw:
            out.append(value)
        elif value.__class__ is _Close:
            out.append(value.bracket)
            open_containers.discard(value.container)
        elif value is None or value is True or value is False:
            out.append("null" if value is None else ("true" if value else "false"))
        elif isinstance(value, str):
            out.append(_quote(value))
        elif isinstance(value, (int, float)):
            out.append(js_number(value))
        elif isinstance(value, dict):
            if id(value) in open_containers:
                raise _circular(value)
            open_containers.add(id(value))
            items = []
            for key in _ordered_keys(value):
                if not isinstance(key, str):
                    raise ArgumentTypeError(f"object keys must be str, not {type(key).__name__}")
                item = value[key]
                if item is not _UNDEFINED:
                    items.append((key, item))
            out.append("{")
            push(_Close("}", id(value)))
            for i in range(len(items) - 1, -1, -1):
                key, item = items[i]
                push(item)
                push(_Raw(("," if i else "") + _quote(key) + ":"))
        elif isinstance(value, (list, tuple)):
            if id(value) in open_containers:
                raise _circular(value)
            open_containers.add(id(value))
            out.append("[")
            push(_Close("]", id(value)))
            for i in range(len(value) - 1, -1, -1):
                item = value[i]
                push(None if item is _UNDEFINED else item)
                if i:
                    push(_Raw(","))
        elif hasattr(value, "__index__"):  # e.g. numpy integers
            out.append(js_number(int(value.__index__())))
        else:
            raise ArgumentTypeError(f"value of type {type(value).__name__} is not JSON serializable")


class _Undefined:
    """Type of :data:`UNDEFINED`."""

    _instance: "_Undefined | None" = None

    def __new__(cls) -> "_Undefined":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __reduce__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Any = _Undefined()
"""JavaScript's ``undefined``: a missing property (``d.get(k, UNDEFINED)``); dropped by ``js_stringify``."""
_UNDEFINED = UNDEFINED

_Fragment = orjson.Fragment
_SAFE_INT = 10**_MAX_SAFE_DIGITS


def _prepare(value: Any) -> Any:
    """``value`` ready for orjson: the same object when orjson already writes it as JavaScript
    would, else a copy where such numbers are pre-formatted fragments and objects with
    array-index keys are reordered (JavaScript lists those keys first, ascending).

    orjson writes non-integral floats in [1e-4, 1e15) with the shortest round-trip digits in
    plain notation, exactly like JavaScript; other floats (``1.0``, ``1e+16``, ``1e-6``...) and
    integers beyond 15 digits are formatted by :func:`js_number`.
    """
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is dict:
        changed = None
        reorder = False
        for key, item in value.items():
            if key.__class__ is str and key and "0" <= key[0] <= "9" and _is_array_index(key):
                reorder = True
            ti = type(item)
            if ti is str or ti is bool or item is None:
                continue
            if ti is int:
                if -_SAFE_INT < item < _SAFE_INT:
                    continue
            elif ti is float:
                if 1e-4 <= abs(item) < 1e15 and not item.is_integer():
                    continue
            new = _prepare(item)
            if new is not item:
                if changed is None:
                    changed = {}
                changed[key] = new
        if changed is None and not reorder:
            return value
        keys = _ordered_keys(value) if reorder else value
        if changed is None:
            return {k: value[k] for k in keys}
        return {k: changed[k] if k in changed else value[k] for k in keys}
    if t is list or t is tuple:
        out = None
        for i, item in enumerate(value):
            ti = type(item)
            if ti is str or ti is bool or item is None:
                continue
            if ti is int and -_SAFE_INT < item < _SAFE_INT:
                continue
            new = _prepare(item)
            if new is not item:
                if out is None:
                    out = list(value)
                out[i] = new
        return value if out is None else out
    if t is float:
        if value.is_integer() or not (1e-4 <= abs(value) < 1e15):
            return _Fragment(js_number(value))
        return value
    if t is int:
        if -_SAFE_INT < value < _SAFE_INT:
            return value
        return _Fragment(js_number(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _Fragment(js_number(value))
    return value


def js_stringify(value: Any) -> str:
    """Return exactly what JavaScript's ``JSON.stringify(value)`` returns for JSON data.

    Accepts dicts (str keys), lists/tuples, str, int, float, bool and None. One pass over
    the value fixes what orjson would write differently (see :func:`_prepare`), then orjson
    writes it; a pure-Python encoder handles what orjson refuses (lone surrogates, nesting
    deeper than 254 levels).

    Args:
        value: JSON data.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return js_number(value)
    try:
        return orjson.dumps(_prepare(value)).decode("utf-8")
    except (TypeError, RecursionError):  # lone surrogates; nesting deeper than orjson writes
        out: list[str] = []
        _encode(value, out)
        return "".join(out)


def js_stringify_length(value: Any) -> int:
    """``JSON.stringify(value).length`` (UTF-16 code units) for JSON data, without building the string
    where orjson's bytes are ASCII (their length then is the text's).

    Args:
        value: JSON data.
    """
    if value.__class__ is dict:
        for item in value.values():
            if item.__class__ not in _STRINGS_AND_INTEGERS:
                break
        else:
            # an object of strings and integers (most tool-call arguments): orjson writes them as JavaScript
            # does, the integers within 2**53 (it raises beyond); it may keep an order of the keys where
            # JavaScript lists array indices first, which does not change the length
            try:
                data = _dumps(value, None, _STRICT_INTEGER)
            except TypeError:  # an integer beyond 2**53, a key not a string, a lone surrogate
                return utf16_len(js_stringify(value))
            return len(data) if data.isascii() else utf16_len(data.decode("utf-8"))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return len(js_number(value))
    try:
        # orjson writes what JavaScript writes unless a number or a key starting with a digit is in it
        # (see _prepare; NaN and infinities come out as null): where none can be, take its length.
        # (Below 512 bytes the check costs more than the pass.)
        data = orjson.dumps(value)
        if len(data) < 512:
            data = orjson.dumps(_prepare(value))
        else:
            marked = data.translate(_VALUE_STARTS)
            if b":0" in marked or b":n" in marked or b':"0' in marked:
                data = orjson.dumps(_prepare(value))
    except (TypeError, RecursionError):
        return utf16_len(js_stringify(value))
    if data.isascii():
        return len(data)
    return utf16_len(data.decode("utf-8"))


_STRINGS_AND_INTEGERS = frozenset((str, int))
_dumps = orjson.dumps
_STRICT_INTEGER = orjson.OPT_STRICT_INTEGER
# orjson's compact output with ``: , [ {`` as ``:`` and digits and ``-`` as ``0``: a number then shows as
# ``:0``, a null as ``:n``, a key led by a digit as ``:"0`` (a string holding such text only takes the exact way)
_VALUE_STARTS = bytes.maketrans(b":,[{0123456789-", b"::::00000000000")


def js_stringify_py(value: Any) -> str:
    """Pure-Python ``JSON.stringify`` (reference implementation of :func:`js_stringify`)."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


# --------------------------------------------------------------------------------------
# UTF-16 strings
# --------------------------------------------------------------------------------------


def utf16_len(s: str) -> int:
    """JavaScript ``s.length``: the number of UTF-16 code units.

    Args:
        s: the string.
    """
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


def js_trim(s: str) -> str:
    """JavaScript ``s.trim()`` (its WhiteSpace and LineTerminator: Python's ``str.strip()`` takes others).

    Args:
        s: the string.
    """
    return s.strip(_JS_WHITESPACE)


def _clamp_index(i: int | float | None, length: int, default: int) -> int:
    if i is None:
        return default
    if isinstance(i, float):
        if i != i:
            return 0
        if i in (math.inf, -math.inf):
            return length if i > 0 else 0
        i = int(i)  # ToIntegerOrInfinity truncates toward zero
    if i < 0:
        return max(length + i, 0)
    return min(i, length)


def js_slice(s: str, start: int | float = 0, end: int | float | None = None) -> str:
    """JavaScript ``s.slice(start, end)`` in UTF-16 code units.

    Cutting through a surrogate pair leaves a lone surrogate, as JavaScript does.

    Args:
        s: the string.
        start: the first code unit (negative: from the end).
        end: the code unit after the last (None: the end; negative: from the end).
    """
    if s.isascii():
        n = len(s)
        a = _clamp_index(start, n, 0)
        b = _clamp_index(end, n, n)
        return s[a:b] if a < b else ""
    units = s.encode("utf-16-le", "surrogatepass")
    n = len(units) >> 1
    a = _clamp_index(start, n, 0)
    b = _clamp_index(end, n, n)
    if a >= b:
        return ""
    return units[2 * a : 2 * b].decode("utf-16-le", "surrogatepass")


# --------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------

_ISO_RE = re.compile(
    r"""^(?P<year>[+-]\d{6}|\d{4})
        (?:-(?P<month>\d{2})(?:-(?P<day>\d{2}))?)?
        (?:[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})
           (?::(?P<second>\d{2})(?:\.(?P<frac>\d+))?)?
           (?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?
        )?$""",
    re.VERBOSE,
)
_MAX_TIME_MS = 8.64e15


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 for a proleptic Gregorian date (any year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _local_offset_ms(utc_guess_ms: int) -> int:
    """Offset of local time from UTC (ms) for a wall-clock time given as if it were UTC."""
    secs = utc_guess_ms // 1000
    try:
        # Resolve the local wall time like JavaScript: interpret fields in local time.
        st = time.gmtime(secs)
        local = time.mktime(st[:8] + (-1,))
        return int((local - secs) * 1000)
    except (OverflowError, ValueError):
        return 0


_TO_ISO_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
_EPOCH = _datetime(1970, 1, 1, tzinfo=_timezone.utc)
_ONE_MS = _timedelta(milliseconds=1)


def parse_iso_ms(s: Any) -> int | None:
    """``new Date(s).getTime()`` for ISO 8601 strings; ``None`` where JavaScript gives NaN.

    Accepts the ECMAScript date-time format and the variants V8 also accepts (space
    instead of ``T``, any number of fraction digits, ``+HHMM`` offsets). Date-only forms
    are UTC; date-times without an offset are local time, as in JavaScript. Other strings go
    through V8's legacy parser (:func:`_legacy_parse_ms`): RFC 2822 dates, month names,
    ``2026/03/01``, ``12/31/2025``; a padded ISO string is not ISO there (V8 reads
    ``" 2026-03-01"`` as local midnight and ``" 2026-03-01T00:00Z"`` as NaN).
    """
    if s.__class__ is str:
        ms = _ISO_MS_MEMO.get(s)
        if ms is not None:
            return ms
    elif not isinstance(s, str):
        return None
    if len(s) == 24 and s[23] == "Z" and s.isascii() and _TO_ISO_FORM.fullmatch(s) is not None:
        # ``toISOString``'s own form (what Pi writes): where it names a real UTC time, that time
        try:
            ms = (_datetime.fromisoformat(s[:23] + "+00:00") - _EPOCH) // _ONE_MS
        except ValueError:  # year 0, day past the month's end, hour 24: the full rules
            pass
        else:
            if s.__class__ is str:
                if len(_ISO_MS_MEMO) >= _ISO_MS_MEMO_SIZE:
                    _ISO_MS_MEMO.clear()
                _ISO_MS_MEMO[s] = ms
            return ms
    return _parse_date_text(s)


_ISO_MS_MEMO: dict[str, int] = {}
""":func:`parse_iso_ms` of strings in ``toISOString``'s form (UTC: the same in every time zone)."""
_ISO_MS_MEMO_SIZE = 4096
on_forget(_ISO_MS_MEMO.clear)


def _parse_date_text(s: str) -> int | None:
    """:func:`parse_iso_ms` by the full rules (every form, the legacy parser's too)."""
    m = _ISO_RE.match(s)
    if m is None:
        return _legacy_parse_ms(s)
    year_text = m.group("year")
    if year_text == "-000000":
        return None
    year = int(year_text)
    month = int(m.group("month") or 1)
    day = int(m.group("day") or 1)
    hour_text = m.group("hour")
    hour = int(hour_text or 0)
    minute = int(m.group("minute") or 0)
    second = int(m.group("second") or 0)
    frac = m.group("frac") or ""
    ms = int((frac + "00")[:3]) if frac else 0
    if not 1 <= month <= 12:
        return None
    if not 1 <= day <= 31:  # V8 lets days past the month's end roll over
        return None
    if hour > 24 or minute > 59 or second > 59:
        return None
    if hour == 24 and (minute or second or ms):
        return None
    value = (
        _days_from_civil(year, month, day) * 86400000
        + hour * 3600000
        + minute * 60000
        + second * 1000
        + ms
    )
    tz = m.group("tz")
    if tz:
        if tz in ("Z", "z"):
            pass
        else:
            digits = tz[1:].replace(":", "")
            oh, om = int(digits[:2]), int(digits[2:] or 0)
            if oh > 23 or om > 59:
                return None
            offset = (oh * 60 + om) * 60000
            value = value - offset if tz[0] == "+" else value + offset
    elif hour_text is not None:
        value += _local_offset_ms(value)
    if abs(value) > _MAX_TIME_MS:
        return None
    return value


def to_iso(ms: int | float) -> str:
    """``new Date(ms).toISOString()``; raises :class:`~pimem.errors.ConfigurationError` (a ``ValueError``)
    where JavaScript throws RangeError."""
    if ms != ms or ms in (math.inf, -math.inf) or abs(ms) > _MAX_TIME_MS:
        raise ConfigurationError(f"Invalid time value: {ms!r}")
    t = int(ms)  # TimeClip truncates toward zero
    days, rem = divmod(t, 86400000)
    # civil_from_days
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    mo = mp + (3 if mp < 10 else -9)
    y += mo <= 2
    hh, rem = divmod(rem, 3600000)
    mi, rem = divmod(rem, 60000)
    ss, mss = divmod(rem, 1000)
    if 0 <= y <= 9999:
        year = "%04d" % y
    else:
        year = ("+" if y > 0 else "-") + "%06d" % abs(y)
    return "%s-%02d-%02dT%02d:%02d:%02d.%03dZ" % (year, mo, d, hh, mi, ss, mss)


def iso_now() -> str:
    """``new Date().toISOString()`` for the current time."""
    return to_iso(int(time.time() * 1000))


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_MAX_INT_DIGITS = 4000  # below Python's int-conversion limit (4300 digits)


def _parse_int(text: str) -> int | float:
    """An integer literal; one too long for ``int()`` is read as the double JavaScript reads."""
    return int(text) if len(text) <= _MAX_INT_DIGITS else float(text)


#: The standard library's decoder with ``JSON.parse``'s rules (no NaN or Infinity; integers of any length).
JS_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_parse_int)


def loads_line(text: str | bytes) -> Any:
    """Parse one JSON text as ``JSON.parse`` would (raises ValueError when it would throw).

    orjson first; the standard library handles what orjson refuses but JavaScript accepts
    (lone surrogate escapes, numbers beyond the double range, which become infinities,
    integers of thousands of digits); nesting deeper than either goes (``JSON.parse`` has no
    depth limit) is parsed by :func:`loads_deep`.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    try:
        return JS_DECODER.decode(text)
    except RecursionError:
        return loads_deep(text)


_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, i: int) -> int:
    """The index of the first non-whitespace character at or after ``i``."""
    return _WS.match(text, i).end()  # type: ignore[union-attr]  # the pattern matches the empty string


_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def _key_at(text: str, i: int) -> tuple[str, int]:
    """An object key and its colon at ``i``: (key, index of the value)."""
    if not text.startswith('"', i):
        raise ValueError(f"expected a property name at position {i}")
    key, i = scanstring(text, i + 1, True)
    i = _skip_ws(text, i)
    if not text.startswith(":", i):
        raise ValueError(f"expected ':' at position {i}")
    return key, _skip_ws(text, i + 1)


def loads_deep(text: str) -> Any:
    """``JSON.parse`` without recursion: any nesting depth (slower than :func:`loads_line`)."""
    ws = _skip_ws
    stack: list[Any] = []  # the open arrays and objects, outermost first
    keys: list[Any] = []  # for each open object, the key its next value goes to
    n = len(text)
    i = ws(text, 0)
    while True:
        c = text[i] if i < n else ""
        if c == "{" or c == "[":
            i = ws(text, i + 1)
            if text.startswith("}" if c == "{" else "]", i):
                value: Any = {} if c == "{" else []
                i += 1
            else:
                if c == "{":
                    key, i = _key_at(text, i)
                    stack.append({})
                    keys.append(key)
                else:
                    stack.append([])
                    keys.append(None)
                continue
        elif c == '"':
            value, i = scanstring(text, i + 1, True)
        elif text.startswith("true", i):
            value, i = True, i + 4
        elif text.startswith("false", i):
            value, i = False, i + 5
        elif text.startswith("null", i):
            value, i = None, i + 4
        else:
            m = _NUMBER.match(text, i)
            if m is None:
                raise ValueError(f"unexpected {'end of input' if i >= n else repr(c)} at position {i}")
            integer, frac, exp = m.groups()
            value = float(m.group()) if frac or exp else _parse_int(integer)
            i = m.end()
        while True:  # hand the value to its container; close the containers that end here
            i = ws(text, i)
            if not stack:
                if i != n:
                    raise ValueError(f"unexpected data after the JSON value at position {i}")
                return value
            top = stack[-1]
            is_list = top.__class__ is list
            if is_list:
                top.append(value)
            else:
                top[keys[-1]] = value
            if text.startswith(",", i):
                i = ws(text, i + 1)
                if not is_list:
                    keys[-1], i = _key_at(text, i)
                break
            if text.startswith("]" if is_list else "}", i):
                i += 1
                value = stack.pop()
                keys.pop()
                continue
            raise ValueError(f"expected ',' or '{']' if is_list else '}'}' at position {i}")


# --------------------------------------------------------------------------------------
# Values: truthiness, String(), Number(), keys, sorting, dates
# --------------------------------------------------------------------------------------


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness: ``[]`` and ``{}`` are true, ``0``, ``""``, NaN, null are false."""
    if value is None or value is False or value is UNDEFINED:
        return False
    if value is True:
        return True
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (int, float)):
        return value == value and value != 0
    return True


def js_string(value: Any) -> str:
    """``String(value)`` for JSON-shaped values (``UNDEFINED`` prints ``undefined``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float):
            if math.isnan(value):
                return "NaN"
            if math.isinf(value):
                return "Infinity" if value > 0 else "-Infinity"
        return js_stringify(value)
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"




def js_keys(obj: dict) -> list:
    """``Object.keys`` order: array-index keys ascending first, then insertion order."""
    keys = list(obj)
    if any(_is_array_index(k) for k in keys if isinstance(k, str)):
        index_keys = sorted((k for k in keys if _is_array_index(k)), key=int)
        return index_keys + [k for k in keys if not _is_array_index(k)]
    return keys


def js_entries(value: Any) -> list[tuple[str, Any]]:
    """``Object.entries(value)`` for JSON-shaped values (raises TypeError for null)."""
    if isinstance(value, dict):
        return [(k, value[k]) for k in js_keys(value)]
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    if isinstance(value, str):
        # Object.entries iterates UTF-16 code units of a string.
        units = value.encode("utf-16-le", "surrogatepass")
        return [
            (str(i), units[2 * i : 2 * i + 2].decode("utf-16-le", "surrogatepass"))
            for i in range(len(units) // 2)
        ]
    if value is None or value is UNDEFINED:
        raise JavaScriptTypeError("Cannot convert undefined or null to object")
    return []


def date_ms(value: Any = UNDEFINED) -> Any:
    """``new Date(value).getTime()``: epoch milliseconds; NaN is returned as ``None``.

    ``None`` (JSON null) gives 0 and a missing value gives NaN, as in JavaScript.
    """
    if value is UNDEFINED:
        return None
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    if isinstance(value, (int, float)):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return None
        if abs(value) > 8.64e15:
            return None
        t = int(value)  # TimeClip truncates toward zero
        return t
    if isinstance(value, str):
        ms = parse_iso_ms(value)
        if ms is None:
            return None
        if isinstance(ms, float) and float.is_integer(ms):
            return int(ms)
        return ms
    return None


_JS_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_JS_RADIX = {"x": 16, "X": 16, "o": 8, "O": 8, "b": 2, "B": 2}
_JS_WHITESPACE = "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
                 "\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_to_number(value: Any) -> float:
    """``Number(value)`` for JSON-shaped values (also what ``<``/``>=`` compare a value as).

    Strings follow JavaScript's grammar (``"0x1"`` is 1, ``"1_0"`` and ``"inf"`` are NaN);
    an array becomes its ``String()`` first (``[1]`` is 1, ``[]`` is 0); null is 0, objects NaN.
    """
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, list):
        return js_to_number(js_string(value))
    if isinstance(value, str):
        text = value.strip(_JS_WHITESPACE)
        if not text:
            return 0.0
        if _JS_DECIMAL.fullmatch(text):
            return float(text.replace("Infinity", "inf"))
        if len(text) > 2 and text[0] == "0" and text[1] in _JS_RADIX:
            try:
                return float(int(text[2:], _JS_RADIX[text[1]])) if "_" not in text else math.nan
            except (ValueError, OverflowError):
                return math.inf if not text[2:].strip("0123456789abcdefABCDEF") else math.nan
        return math.nan
    return math.nan


def _utf16_key(value: Any) -> tuple[int, bytes]:
    text = js_string(value)
    return (0, text.encode("utf-16-be", "surrogatepass"))


def js_sorted(values: Iterable[Any]) -> list:
    """``Array.prototype.sort()`` without a comparator: by ``String(v)`` in UTF-16 code units."""
    return sorted(values, key=_utf16_key)


def js_prop(value: Any, name: str) -> Any:
    """``value[name]`` as JavaScript reads a property: a dict's key (None when absent), None for
    primitives and arrays (undefined), and a TypeError for null or undefined, as Pi's code throws."""
    if value.__class__ is dict:
        return value.get(name)
    if value is None or value is UNDEFINED:

        kind = "null" if value is None else "undefined"
        raise JavaScriptTypeError(f"Cannot read properties of {kind} (reading '{name}')")
    return None


# --------------------------------------------------------------------------- V8's legacy date parser

_KEYWORDS = {  # V8 dateparser.cc KeywordTable: (type, value) by the first three letters, lower case
    **{m: ("month", i + 1) for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])},
    "am": ("ampm", 0), "pm": ("ampm", 12),
    "ut": ("tz", 0), "utc": ("tz", 0), "z": ("tz", 0), "gmt": ("tz", 0),
    "cdt": ("tz", -5), "cst": ("tz", -6), "edt": ("tz", -4), "est": ("tz", -5),
    "mdt": ("tz", -6), "mst": ("tz", -7), "pdt": ("tz", -7), "pst": ("tz", -8),
    "t": ("sep", 0),
}
_JS_SPACE = "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000\ufeff"
_MAX_INT = 2**31 - 1


def _date_tokens(s: str) -> list[tuple[str, Any, int]]:
    """V8's ``DateStringTokenizer``: (kind, value, length) with kinds number, symbol, word, space, unknown."""
    out: list[tuple[str, Any, int]] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if "0" <= c <= "9":
            j, value = i, 0
            while j < n and "0" <= s[j] <= "9":
                if value <= _MAX_INT // 10 - 10:  # V8 stops accumulating near kMaxInt
                    value = value * 10 + ord(s[j]) - 48
                j += 1
            out.append(("number", value, j - i))
            i = j
        elif c in ":-+.)":
            out.append(("symbol", c, 1))
            i += 1
        elif c >= "A" and c not in _JS_SPACE:  # V8: IsAsciiAlphaOrAbove, not white space
            j = i
            while j < n and s[j] >= "A" and s[j] not in _JS_SPACE:
                j += 1
            word = s[i:j]
            prefix = word[:3].lower()
            kw = _KEYWORDS.get(prefix)
            if kw is not None and (j - i > 3 and kw[0] != "month"):
                kw = None  # a longer word matches only a month name
            out.append(("word", kw, j - i))
            i = j
        elif c in _JS_SPACE:
            j = i
            while j < n and s[j] in _JS_SPACE:
                j += 1
            out.append(("space", None, j - i))
            i = j
        elif c == "(":  # a parenthesised comment (nested), skipped
            depth = 0
            while i < n:
                if s[i] == "(":
                    depth += 1
                elif s[i] == ")":
                    depth -= 1
                    if depth == 0:
                        i += 1
                        break
                i += 1
            out.append(("unknown", None, 0))
        else:
            out.append(("unknown", None, 1))
            i += 1
    return out


def _legacy_parse_ms(s: str) -> int | None:
    """V8's legacy ``Date`` parser (``DateParser::Parse`` after its ISO attempt), for strings the
    ISO grammar does not take: "Sun, 01 Mar 2026 09:00:00 GMT", "March 1, 2026", "2026/03/01",
    "12/31/2025", "1 March 2026 10:00 UTC". None where V8 gives NaN."""
    tokens = _date_tokens(s)
    day: list[int] = []
    named_month: int | None = None
    time_: list[int] = []
    hour_offset: int | None = None
    tz_sign: int | None = None
    tz_hour: int | None = None
    tz_minute: int | None = None

    def time_expecting(n: int) -> bool:
        k = len(time_)
        return (k == 1 and 0 <= n <= 59) or (k == 2 and 0 <= n <= 59) or (k == 3 and 0 <= n <= 999)

    def time_final(n: int) -> bool:
        if len(time_) >= 4:
            return False
        time_.append(n)
        while len(time_) < 4:
            time_.append(0)
        return True

    def ms_of(value: int, length: int) -> int:
        if length == 1:
            return value * 100
        if length == 2:
            return value * 10
        if length > 3:
            return value // 10 ** (min(length, 9) - 3)
        return value

    k, nt = 0, len(tokens)

    def peek() -> tuple[str, Any, int]:
        return tokens[k] if k < nt else ("end", None, 0)

    has_read_number = False
    while k < nt:
        kind, value, length = tokens[k]
        k += 1
        if kind == "number":
            has_read_number = True
            if peek()[:2] == ("symbol", ":"):
                k += 1
                if peek()[:2] == ("symbol", ":"):
                    k += 1
                    if time_:
                        return None
                    time_ += [value, 0]
                else:
                    if len(time_) >= 4:
                        return None
                    time_.append(value)
                    if peek()[:2] == ("symbol", "."):
                        k += 1
            elif peek()[:2] == ("symbol", ".") and time_expecting(value):
                k += 1
                time_.append(value)
                if peek()[0] != "number":
                    return None
                _, ms_value, ms_length = tokens[k]
                k += 1
                if not time_final(ms_of(ms_value, ms_length)):
                    return None
            elif tz_hour is not None and tz_minute is None and 0 <= value <= 59:
                tz_minute = value
            elif time_expecting(value):
                if not time_final(value):
                    return None
                nxt = peek()
                if not (nxt[0] in ("end", "space") or (nxt[0] == "word" and nxt[1] == ("tz", 0) and nxt[2] == 1)
                        or nxt[:2] in (("symbol", "+"), ("symbol", "-"))):
                    return None
            else:
                if len(day) >= 3:
                    return None
                day.append(value)
                if peek()[:2] == ("symbol", "-"):
                    k += 1
        elif kind == "word" and value is not None:
            wtype, wvalue = value
            if wtype == "ampm" and time_:
                hour_offset = wvalue
            elif wtype == "month":
                named_month = wvalue
                if peek()[:2] == ("symbol", "-"):
                    k += 1
            elif wtype == "tz" and has_read_number:
                tz_sign, tz_hour, tz_minute = (-1 if wvalue < 0 else 1), abs(wvalue), 0
            else:
                if has_read_number or peek()[0] == "number":
                    return None
        elif kind == "word":  # a word that is no keyword: allowed only before the first number
            if has_read_number or peek()[0] == "number":
                return None
        elif kind == "symbol" and value in "+-" and ((tz_hour == 0 and tz_minute == 0) or time_):
            tz_sign = -1 if value == "-" else 1
            n, nlen = 0, 0
            if peek()[0] == "number":
                _, n, nlen = tokens[k]
                k += 1
            has_read_number = True
            if peek()[:2] == ("symbol", ":"):
                tz_hour, tz_minute = n, None
            elif nlen in (1, 2):
                tz_hour, tz_minute = n, 0
            elif nlen in (3, 4):
                tz_hour, tz_minute = n // 100, n % 100
            else:
                return None
        elif kind == "symbol" and value in "+-)" and has_read_number:
            return None
    # DayComposer::Write
    if not day:
        return None
    comp = day + [1] * (3 - len(day))
    year = 0
    if named_month is None:
        if not 1 <= comp[0] <= 31:
            year, month, mday = comp
        else:
            month, mday = comp[0], comp[1]
            year = comp[2]
    else:
        month = named_month
        if not 1 <= comp[0] <= 31:
            year, mday = comp[0], comp[1]
        else:
            mday, year = comp[0], comp[1]
    if 0 <= year <= 49:
        year += 2000
    elif 50 <= year <= 99:
        year += 1900
    if not (1 <= month <= 12 and 1 <= mday <= 31):
        return None
    # TimeComposer::Write
    t = time_ + [0] * (4 - len(time_))
    hour, minute, second, milli = t
    if hour_offset is not None:
        if not 0 <= hour <= 12:
            return None
        hour = hour % 12 + hour_offset
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59 and 0 <= milli <= 999):
        if not (hour == 24 and minute == 0 and second == 0 and milli == 0):
            return None
    # MakeDay rolls days past the month's end over
    value = (_days_from_civil(year, month, 1) + mday - 1) * 86400000 + hour * 3600000 + minute * 60000 \
        + second * 1000 + milli
    if tz_sign is None:
        if abs(value) > _MAX_TIME_MS + 864e5:
            return None
        value += _local_offset_ms(value)
    else:
        value -= tz_sign * ((tz_hour or 0) * 3600 + (tz_minute or 0) * 60) * 1000
    if abs(value) > _MAX_TIME_MS:
        return None
    return int(value)
