"""Atomic output files: all or nothing, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from pimem.base.files import atomic_open, atomic_write_text, write_table


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "a.txt"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second ✓")
    assert target.read_text(encoding="utf-8") == "second ✓"
    assert [p.name for p in target.parent.iterdir()] == ["a.txt"]


def test_failure_leaves_previous_content_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("keep me")
    with pytest.raises(RuntimeError):
        with atomic_open(target) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_files_get_the_mode_open_would_give(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.html", "<p>x</p>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o644


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_write_table_round_trips(tmp_path: Path, suffix: str) -> None:
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "é"], "c": [{"k": 1}, None]})
    path = tmp_path / f"t{suffix}"
    write_table(df, path)
    back = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert list(back["a"]) == [1, 2] and list(back["b"]) == ["x", "é"]


def test_write_table_rejects_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="xlsx"):
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "t.xlsx")
