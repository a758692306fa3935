"""Tables and numbers as a person reads them: pandas columns that keep any Python string
(lone surrogates included), and number formatting for tables, figures and pages."""

from __future__ import annotations

import math
import re
import numbers
from typing import Any


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
    try:
        return pd.Categorical(values)
    except UnicodeEncodeError:
        pass
    categories = sorted({v for v in values if v is not None})
    code = {v: i for i, v in enumerate(categories)}
    codes = [-1 if v is None else code[v] for v in values]
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


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
