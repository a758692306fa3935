"""Tables declared once: a Column says what it holds and where it is read; a Table builds the
DataFrame, checks the columns asked for, reports what it could not read, and documents itself."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pimem.base.tables import DATETIME, DTYPES, Column, Table, category_array, typed_array
from pimem.errors import ColumnError, ConfigurationError, PimemError, UnknownColumnError


def _broken(record: dict) -> int:
    if record.get("n") == "boom":
        raise KeyError("boom")
    return len(record["items"])


PEOPLE = Table("people", [
    Column("name", "string", "who", path="person.name"),
    Column("age", "Int64", "years", path="person.age"),
    Column("born", DATETIME, "epoch milliseconds", path="born_ms"),
    Column("items", "Int64", "how many items", path=_broken, na_on=(TypeError,)),
    Column("twice", "float", "age × 2", path=lambda cols: cols["age"].astype("float64") * 2, needs=("age",)),
    Column("tag", "category", "a label"),
    Column("raw", None, "as pandas infers it", path="raw"),
], "One row per person.", locate=lambda r: f"person {r.get('person', {}).get('name')!r}")

ROWS = [
    {"person": {"name": "ann", "age": 31}, "born_ms": 1_700_000_000_123, "items": [1, 2], "tag": "a", "raw": 1},
    {"person": {"name": "bob", "age": "40"}, "born_ms": None, "items": None, "tag": "b", "raw": 2},
    {"person": "not a dict", "born_ms": 5, "items": [], "tag": None, "raw": 3},
]


def test_columns_read_key_paths_functions_and_other_columns() -> None:
    df = PEOPLE.frame(ROWS)
    assert list(df.columns) == PEOPLE.names
    assert df["name"].tolist()[:2] == ["ann", "bob"] and pd.isna(df["name"].iloc[2])  # the path ends early
    assert df["age"].dtype == "Int64" and df["age"].iloc[0] == 31
    assert pd.isna(df["age"].iloc[1])  # "40" is not an Int64
    assert df["born"].iloc[0] == pd.Timestamp(1_700_000_000_123, unit="ms", tz="UTC") and pd.isna(df["born"].iloc[1])
    assert df["items"].tolist()[0] == 2 and pd.isna(df["items"].iloc[1])  # len(None): TypeError, documented
    assert df["twice"].iloc[0] == 62.0 and math.isnan(df["twice"].iloc[1])
    assert isinstance(df["tag"].dtype, pd.CategoricalDtype) and list(df["tag"].cat.categories) == ["a", "b"]
    assert df["raw"].dtype == np.int64  # inferred


def test_strict_false_returns_every_value_that_could_not_be_read() -> None:
    df, errors = PEOPLE.frame(ROWS, strict=False, where="people.jsonl")
    pd.testing.assert_frame_equal(df, PEOPLE.frame(ROWS))
    found = {(e.column, e.row) for e in errors}
    assert found == {("age", 1), ("items", 1)}
    age = next(e for e in errors if e.column == "age")
    assert isinstance(age, ColumnError) and isinstance(age, PimemError) and age.table == "people" and age.value == "40"
    assert str(age).startswith("people.jsonl: row 1, person 'bob': people.age: '40' is not Int64")
    assert "TypeError" in str(next(e for e in errors if e.column == "items"))


def test_an_exception_a_column_does_not_document_raises_naming_the_row_or_is_returned() -> None:
    rows = [*ROWS, {"person": {"name": "cy"}, "n": "boom", "items": [1]}]
    with pytest.raises(ColumnError, match=r"row 3, person 'cy': people\.items: KeyError") as caught:
        PEOPLE.frame(rows)
    assert caught.value.row == 3 and caught.value.column == "items"
    df, errors = PEOPLE.frame(rows, strict=False)
    assert pd.isna(df["items"].iloc[3]) and any(e.row == 3 and e.column == "items" for e in errors)


def test_a_selection_builds_the_columns_named_in_that_order_and_what_they_need() -> None:
    df = PEOPLE.frame(ROWS, ["twice", "name"])
    assert list(df.columns) == ["twice", "name"]  # "age" was built for "twice" and left out
    pd.testing.assert_frame_equal(df, PEOPLE.frame(ROWS)[["twice", "name"]])
    assert list(PEOPLE.frame(ROWS, "tag").columns) == ["tag"]
    with pytest.raises(UnknownColumnError, match="no column 'nope'.*name, age, born"):
        PEOPLE.frame(ROWS, ["name", "nope"])
    with pytest.raises(ConfigurationError, match="named twice"):
        PEOPLE.select(["name", "name"])


def test_a_table_of_inferred_columns_is_built_as_pandas_builds_it() -> None:
    plain = Table("plain", [Column("a"), Column("b"), Column("c")])
    rows = [{"a": 1, "b": None, "c": "x"}, {"a": 2.5, "c": None}]
    pd.testing.assert_frame_equal(plain.frame(rows), pd.DataFrame(rows, columns=["a", "b", "c"]))
    pd.testing.assert_frame_equal(plain.frame([]), pd.DataFrame([], columns=["a", "b", "c"]))
    pd.testing.assert_frame_equal(plain.frame({"a": [1], "b": [2], "c": [3]}), pd.DataFrame({"a": [1], "b": [2], "c": [3]}))
    with pytest.raises(ConfigurationError, match="reads rows"):
        PEOPLE.frame({"name": ["x"]})


def test_a_declaration_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="declares a twice"):
        Table("t", [Column("a"), Column("a")])
    with pytest.raises(ConfigurationError, match="needs unknown columns"):
        Table("t", [Column("a", "float", path=lambda c: c["b"], needs=("b",))])
    with pytest.raises(ConfigurationError, match="not one of"):
        Column("a", "int64")


def test_the_documentation_lists_every_column() -> None:
    def people() -> None:
        """The people.

        Args:
            none: nothing.
        """

    PEOPLE.document(people)
    doc = people.__doc__ or ""
    assert doc.index("Columns:") < doc.index("Args:")
    for c in PEOPLE.columns:
        assert f"- ``{c.name}``" in doc
    assert "- ``age`` (Int64): years" in doc and "- ``raw``: as pandas infers it" in doc
    described = PEOPLE.describe()
    assert described["column"].tolist() == PEOPLE.names
    assert described.set_index("column").loc["name", "source"] == "person.name"
    assert described.set_index("column").loc["twice", "source"] == "from age"
    assert described.set_index("column").loc["tag", "source"] == "tag"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.text(max_size=3) | st.sampled_from(["a", "b", "é", "😀"]), max_size=25))
def test_categories_are_pandas_own(values: list) -> None:
    pd.testing.assert_series_equal(pd.Series(category_array(values)), pd.Series(pd.Categorical(values)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.integers(-(2**64), 2**64) | st.floats() | st.booleans() | st.text(max_size=2),
                max_size=12))
def test_integers_are_read_as_before(values: list) -> None:
    """Int64 columns: integers within int64, whole floats too; anything else is missing."""
    expected = [int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 2**63
                and float(v).is_integer() else None for v in values]
    assert typed_array("Int64", values).tolist() == [pd.NA if v is None else v for v in expected]


def test_every_dtype_builds_a_column_of_its_length() -> None:
    for dtype in DTYPES:
        assert len(typed_array(dtype, [None, 1, "x"])) == 3, dtype
