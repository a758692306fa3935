"""Tables and numbers as a person reads them: pandas columns that keep any Python string
(lone surrogates included), and number formatting for tables, figures and pages."""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from pimem.base.js import parse_iso_ms
from pimem.errors import ColumnError, ConfigurationError, UnknownColumnError


def format_number(value: Any, digits: int = 3) -> str:
    """A number as a person reads it: integers with thousands separators, other values to
    ``digits`` significant digits (``0.30000000000000004`` → ``0.3``, ``12385.4`` → ``12,385``).

    Whole floats print as integers, NaN and None as ``–``; anything that is not a number is
    returned as ``str(value)``.
    """
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            item = getattr(value, "item", None)
            return format_number(item(), digits) if callable(item) and getattr(value, "ndim", None) == 0 else str(value)
        except (AttributeError, TypeError, ValueError):
            return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    v = float(value)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    if abs(v) >= 10 ** (digits - 1) or v.is_integer():
        return f"{round(v):,}"
    text = f"{v:.{digits}g}"
    if "e" in text:  # very small values: keep the exponent readable
        mantissa, exp = text.split("e")
        return f"{mantissa}e{int(exp)}"
    return text



# ------------------------------------------------------------------------------------------
# DataFrames that hold session text
# ------------------------------------------------------------------------------------------
# Pi's strings are UTF-16: JSON.parse keeps lone surrogates ("\ud800") and Pi's own slicing can
# cut a pair in two. pandas 3 stores strings in Arrow, which holds UTF-8 only and refuses them;
# a column holding one keeps the same string semantics with Python storage instead.


def _python_str_dtype(na: bool) -> Any:
    import numpy as np
    import pandas as pd

    if na:
        return pd.StringDtype("python")
    try:
        return pd.StringDtype("python", na_value=np.nan)  # pandas 3's ``str``, Python-stored
    except TypeError:  # pandas 2: no na_value (and strings are objects anyway)
        return object


def str_array(values: Any) -> Any:
    """``pd.array(values, dtype="string")``, also for text with lone surrogates."""
    import pandas as pd

    try:
        return pd.array(values, dtype="string")
    except UnicodeEncodeError:
        return pd.array(values, dtype=_python_str_dtype(True))


def _column(values: list[Any], index: Any) -> Any:
    import pandas as pd

    try:
        return pd.Series(values, index=index)
    except UnicodeEncodeError:
        return pd.Series(values, index=index, dtype=_python_str_dtype(False))


def frame(data: Any = None, **kwargs: Any) -> Any:
    """``pd.DataFrame(data, **kwargs)``, also when strings hold lone surrogates (a column with
    one is stored as Python strings; every other column is inferred as usual)."""
    import pandas as pd

    try:
        return pd.DataFrame(data, **kwargs)
    except UnicodeEncodeError:
        pass
    df = pd.DataFrame(data, **{**kwargs, "dtype": object})
    for i in range(df.shape[1]):
        col = df.iloc[:, i]
        df.isetitem(i, _column(col.tolist(), df.index))
    return df


def is_missing(value: Any) -> bool:
    """Whether a cell is missing: None or NaN."""
    return value is None or (isinstance(value, float) and value != value)


def as_flag(value: Any) -> bool:
    """A cell as a column's ``fillna(False).astype(bool)`` reads it."""
    return False if is_missing(value) else bool(value)


def number_array(values: Any) -> Any:
    """The values as a float array, None as NaN."""
    import numpy as np

    return np.array(list(values), dtype=float)


def column_total(rows: list[dict], key: str) -> float:
    """``frame(rows)[key].fillna(0).sum()`` without the frame: numpy's pairwise sum, as pandas sums
    a column (a missing key or None counts 0)."""
    import numpy as np

    return float(np.nansum(number_array(r.get(key) for r in rows))) if rows else 0.0


def category_array(values: Any) -> Any:
    """``pd.Categorical(values)``, also for text with lone surrogates (categories as objects)."""
    import pandas as pd

    values = list(values)
    categories = sorted({v for v in values if v is not None})
    if not categories or not all(type(v) is str for v in categories):  # pandas' own inference
        return pd.Categorical(values)
    code = {v: i for i, v in enumerate(categories)}
    codes = [-1 if v is None else code[v] for v in values]
    try:  # the categories pandas' factorizing would find, sorted as it sorts strings (by code point)
        index = pd.Index(categories)
    except UnicodeEncodeError:  # lone surrogates: the categories as Python strings
        index = pd.Index(categories, dtype=object)
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(index))


def as_string(series: Any) -> Any:
    """``series.astype("string")``, also for text with lone surrogates."""
    try:
        return series.astype("string")
    except UnicodeEncodeError:
        return series.astype(_python_str_dtype(True))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_lone_surrogates(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate written as ``\\udXXX`` (as JSON.stringify escapes
    it), for outputs that hold valid Unicode only (UTF-8 files, rendered fonts)."""
    if not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


# ------------------------------------------------------------------------------------------
# Tables declared once: what each column is called, its dtype, what it holds, where it is read
# ------------------------------------------------------------------------------------------

DATETIME = "datetime64[ns, UTC]"

_NS_RANGE_MS = (2**63 - 1) // 1_000_000  # datetime64[ns] holds about ±292 years around 1970


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_float(value: Any) -> float:
    """``float(value)``; an integer beyond the double range is infinite (as JavaScript reads it),
    not an error."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def ms_times(values: Any) -> Any:
    """Epoch milliseconds (numbers or None) → a ``datetime64[ns, UTC]`` Series; NaT outside its range.

    Whole milliseconds and their fraction are converted separately: ``ms * 1e6`` as a double
    is off by up to 128 ns at today's dates (1.7e18 is beyond a double's exact integers).
    """
    import numpy as np
    import pandas as pd

    arr = _float_array(values)
    valid = np.isfinite(arr) & (np.abs(arr) < _NS_RANGE_MS)
    ms = np.where(valid, arr, 0.0)
    whole = np.floor(ms)
    ns = whole.astype(np.int64) * 1_000_000 + np.round((ms - whole) * 1_000_000).astype(np.int64)
    out = pd.Series(pd.arrays.IntegerArray(ns, ~valid))
    return pd.to_datetime(out, unit="ns", utc=True).astype(DATETIME)


def _int_array(values: list[Any]) -> Any:
    import numpy as np
    import pandas as pd

    if all(type(v) is int or v is None for v in values):  # the common case, fast
        try:
            if None not in values:
                return pd.array(values, dtype="Int64")
            n = len(values)  # mostly missing (most columns of most rows): the mask and the numbers apart
            mask = np.fromiter((v is None for v in values), bool, n)
            return pd.arrays.IntegerArray(np.fromiter((0 if v is None else v for v in values), np.int64, n), mask)
        except (OverflowError, TypeError, ValueError):  # an integer beyond int64: read below as unknown
            pass
    # beyond int64 (usage of 1e308 in a damaged file; the loader warns) is unknown, not an OverflowError
    return pd.array([int(v) if _is_number(v) and abs(v) < 2**63 and float(v).is_integer() else None for v in values],
                    dtype="Int64")


def _float_array(values: Any) -> Any:
    """Numbers as float64, anything else NaN (bool is no number; an integer beyond the double range infinite)."""
    import numpy as np

    nan = math.nan
    try:  # plain ints and floats as they are: numpy converts them at once
        return np.array([v if (c := v.__class__) is float or c is int else as_float(v) if _is_number(v) else nan
                         for v in values], dtype="float64")
    except OverflowError:  # an integer beyond the double range
        return np.array([as_float(v) if _is_number(v) else nan for v in values], dtype="float64")


def _boolean_array(values: list[Any]) -> Any:
    import pandas as pd

    return pd.array([v if isinstance(v, bool) else None for v in values], dtype="boolean")


def _bool_array(values: list[Any]) -> Any:
    import numpy as np

    return np.array(values, dtype=bool)


def _string_array(values: list[Any]) -> Any:
    return str_array([v if isinstance(v, str) else None for v in values])


def _category_array(values: list[Any]) -> Any:
    return category_array([v if isinstance(v, str) else None for v in values])


def _object_array(values: list[Any]) -> Any:
    import pandas as pd

    return pd.Series(values, dtype=object)


# dtype → how a column's values become it; a value that is not of the type is missing
# (``bool`` columns take every value as a truth value and are never missing)
_BUILDERS: dict[str, Callable[[list[Any]], Any]] = {
    "string": _string_array, "category": _category_array, "Int64": _int_array, "float": _float_array,
    "boolean": _boolean_array, "bool": _bool_array, DATETIME: ms_times, "object": _object_array,
}
DTYPES = tuple(_BUILDERS)


def typed_array(dtype: str, values: Any) -> Any:
    """``values`` as a column of ``dtype`` (one of :data:`DTYPES`; datetimes from epoch milliseconds)."""
    return _BUILDERS[dtype](list(values))


def iso_times(values: Any) -> Any:
    """ISO strings → ``datetime64[ns, UTC]`` as ``new Date(iso)`` parses them (NaT if invalid)."""
    return ms_times([parse_iso_ms(v) for v in values])


def _path_getter(path: str) -> Callable[[Any], Any]:
    """A function reading the dotted key path ``a.b.c`` from nested dicts (None where it ends early)."""
    keys = path.split(".")
    if len(keys) == 1:
        key = keys[0]
        return lambda record: record.get(key) if isinstance(record, dict) else None

    def get(record: Any) -> Any:
        for key in keys:
            if not isinstance(record, dict):
                return None
            record = record.get(key)
        return record

    return get


@dataclass(frozen=True)
class Column:
    """One column of a table, declared once: its name, dtype and meaning, and where each row's
    value is read.

    Args:
        name: the column's name.
        dtype: one of :data:`DTYPES` (a value not of the type is missing); None: as pandas infers
            it from the values.
        description: what the column holds (the tables' documentation is made from it).
        path: where a row's value is read: a dotted key path into the row's record
            (``"usage.input"``), or a function of the record; default: the record's key ``name``.
            With ``needs``, a function of the columns it names instead (a mapping of name to
            built column), computed once for the whole table.
        value: applied to what ``path`` read (``parse_iso_ms`` for ISO timestamps).
        na_on: exceptions of ``path`` or ``value`` that mean the value cannot be read on this
            row (Pi's own function throws there): the cell is missing.
        needs: the other columns ``path`` is computed from.
    """

    name: str
    dtype: str | None = None
    description: str = ""
    path: str | Callable[[Any], Any] | None = None
    value: Callable[[Any], Any] | None = field(default=None, repr=False)
    na_on: tuple[type[Exception], ...] = field(default=(), repr=False)
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in _BUILDERS:
            raise ConfigurationError(f"column {self.name!r}: dtype {self.dtype!r} is not one of {list(DTYPES)}")
        if self.needs and not callable(self.path):
            raise ConfigurationError(f"column {self.name!r} reads other columns: its path must be a function")

    @property
    def source(self) -> str | None:
        """Where the value is read, as the documentation shows it: the key path, the columns it is
        computed from, or None for a function of the record (its description says what it reads)."""
        if self.needs:
            return "from " + ", ".join(self.needs)
        if isinstance(self.path, str):
            return self.path
        return self.name if self.path is None else None

    def getter(self) -> Callable[[Any], Any]:
        """The function giving a record's value (``path`` then ``value``)."""
        path = self.path
        get: Callable[[Any], Any]
        if path is None:
            get = _path_getter(self.name)
        elif isinstance(path, str):
            get = _path_getter(path)
        else:
            get = path
        value = self.value
        if value is None:
            return get
        return lambda record: value(get(record))

    def extract(self, record: Any) -> Any:
        """This column's value of one record (raises what ``path`` or ``value`` raise)."""
        return self.getter()(record)


class Table:
    """A table's columns, declared once: they build its DataFrame from records and document it.

    Args:
        name: the table's name (``"entries"``, ``"events"``, …).
        columns: its columns, in order.
        description: what one row is.
        locate: a record → where it comes from, for error messages (``"entry 'a1' (line 12)"``).
    """

    def __init__(self, name: str, columns: Sequence[Column], description: str = "",
                 locate: Callable[[Any], str] | None = None) -> None:
        self.name = name
        self.columns: tuple[Column, ...] = tuple(columns)
        self.description = description
        self.locate = locate
        self._by_name = {c.name: c for c in self.columns}
        if len(self._by_name) != len(self.columns):
            twice = sorted({c.name for c in self.columns if sum(d.name == c.name for d in self.columns) > 1})
            raise ConfigurationError(f"table {name!r} declares {', '.join(twice)} twice")
        for c in self.columns:
            unknown = [n for n in c.needs if n not in self._by_name]
            if unknown:
                raise ConfigurationError(f"table {name!r}: column {c.name!r} needs unknown columns {unknown}")
        self._getters = {c.name: c.getter() for c in self.columns if not c.needs}
        # every column inferred and read by its own name: rows that are dicts build as pandas builds them
        self._plain = all(c.dtype is None and c.path is None and c.value is None for c in self.columns)

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {len(self.columns)} columns)"

    def __getitem__(self, name: str) -> Column:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [c.name for c in self.columns]

    def select(self, columns: Iterable[str] | None = None) -> list[Column]:
        """The columns named (all by default, in the order given); an unknown name is an
        :class:`~pimem.errors.UnknownColumnError` listing the table's columns."""
        if columns is None:
            return list(self.columns)
        if isinstance(columns, str):
            columns = [columns]
        names = list(columns)
        unknown = [n for n in names if n not in self._by_name]
        if unknown:
            raise UnknownColumnError(f"the {self.name} table has no column {', '.join(map(repr, unknown))}; "
                                     f"its columns: {', '.join(self.names)}")
        if len(set(names)) != len(names):
            raise ConfigurationError(f"a column is named twice in {names}")
        return [self._by_name[n] for n in names]

    def frame(self, records: Iterable[Any] | Mapping[str, Any], columns: Iterable[str] | None = None, *,
              strict: bool = True, where: str = "") -> Any:
        """The DataFrame of ``records``, one row each, with the ``columns`` named (default: all).
        A table whose columns are all inferred and read by name also takes a mapping of column
        name to values.

        A value ``na_on`` names as unreadable is missing. Any other exception of a column's path
        raises a :class:`~pimem.errors.ColumnError` naming the table, column and row; with
        ``strict=False`` nothing raises: the value is missing, and ``(DataFrame, errors)`` is
        returned, ``errors`` listing each value that could not be read (documented or not) and
        each value that is not of its column's dtype. ``where`` names the source in errors (a file).
        """
        chosen = self.select(columns)
        errors: list[ColumnError] | None = None if strict else []
        if self._plain:  # rows of dicts (or a mapping of column to values), built as pandas builds them
            df = frame(records if isinstance(records, Mapping) else list(records), columns=[c.name for c in chosen])
            return df if errors is None else (df, errors)
        if isinstance(records, Mapping):
            raise ConfigurationError(f"the {self.name} table reads rows, not a mapping of columns")
        records = records if isinstance(records, list) else list(records)
        built: dict[str, Any] = {}
        for c in self._in_build_order(chosen):
            if c.needs:
                built[c.name] = c.path(built)  # type: ignore[misc,operator]
                continue
            values = self._values(c, records, errors, where)
            built[c.name] = self._typed(c, values, records, errors, where)
        df = frame({c.name: built[c.name] for c in chosen})  # columns built only for others are left out
        return df if errors is None else (df, errors)

    def _in_build_order(self, chosen: list[Column]) -> list[Column]:
        """The chosen columns and those they need, each after what it needs."""
        order: list[Column] = []
        seen: set[str] = set()

        def add(c: Column) -> None:
            if c.name in seen:
                return
            seen.add(c.name)
            for n in c.needs:
                add(self._by_name[n])
            order.append(c)

        for c in chosen:
            add(c)
        return order

    def _error(self, column: Column, row: int, record: Any, message: str, value: Any, where: str) -> "ColumnError":
        place = f"row {row}"
        if self.locate is not None:
            try:
                place += f", {self.locate(record)}"
            except Exception:  # the record is what broke the column: its place is best effort
                pass
        if where:
            place = f"{where}: {place}"
        return ColumnError(f"{place}: {self.name}.{column.name}: {message}", table=self.name,
                           column=column.name, row=row, value=value)

    def _values(self, column: Column, records: list[Any], errors: list["ColumnError"] | None, where: str) -> list[Any]:
        get = self._getters[column.name]
        if errors is None:
            try:
                return [get(r) for r in records]
            except Exception:  # read again row by row below, to say which row broke
                pass
        out: list[Any] = []
        for i, r in enumerate(records):
            try:
                out.append(get(r))
            except Exception as exc:
                if errors is None and not isinstance(exc, column.na_on):
                    raise self._error(column, i, r, f"{type(exc).__name__}: {exc}", None, where) from exc
                out.append(None)
                if errors is not None:
                    errors.append(self._error(column, i, r, f"cannot be read ({type(exc).__name__}: {exc})", None,
                                              where))
        return out

    def _typed(self, column: Column, values: list[Any], records: list[Any], errors: list["ColumnError"] | None,
               where: str) -> Any:
        if column.dtype is None:
            return frame({column.name: values})[column.name]
        out = _BUILDERS[column.dtype](values)
        if errors is not None and column.dtype != "bool":
            import numpy as np
            import pandas as pd

            missing = np.asarray(pd.isna(out))
            for i, v in enumerate(values):
                if missing[i] and not is_missing(v):
                    errors.append(self._error(column, i, records[i], f"{v!r} is not {column.dtype}", v, where))
        return out

    def describe(self) -> Any:
        """The columns as a DataFrame: ``column``, ``dtype`` (None: as pandas infers it), ``description``,
        ``source`` (:attr:`Column.source`)."""
        import pandas as pd

        return pd.DataFrame({"column": self.names, "dtype": [c.dtype for c in self.columns],
                             "description": [c.description for c in self.columns],
                             "source": [c.source for c in self.columns]})

    def doc(self, width: int = 100, indent: str = "    ") -> str:
        """The ``Columns:`` list of a docstring: one item per column, ``name`` (dtype): description."""
        import textwrap

        lines = [indent + "Columns:", ""]
        for c in self.columns:
            text = f"- ``{c.name}``" + (f" ({c.dtype})" if c.dtype else "") + (f": {c.description}" if c.description else "")
            lines.extend(textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                                       break_long_words=False, break_on_hyphens=False))
        return "\n".join(lines)

    def document(self, function: Any) -> Any:
        """Add :meth:`doc` to ``function``'s docstring, before its ``Args:`` section; returns ``function``."""
        text = (function.__doc__ or "").rstrip()
        lines = text.splitlines()[1:]
        indent = " " * min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=4)
        head, args, rest = text.partition(f"\n\n{indent}Args:\n")
        function.__doc__ = head + "\n\n" + self.doc(indent=indent) + (args + rest if args else "") + "\n" + indent
        return function
