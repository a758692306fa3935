"""Gzip'd session files (``.jsonl.gz``) of every format, hostile ones included: read as a bounded
stream with the limits of plain files; a damaged archive is one clear error naming the file, also
in the folder commands, which go on with the rest."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from pathlib import Path

import pandas as pd
import pytest

import pimem.base.files as files
from pimem.cli.main import main
from pimem.errors import SessionFormatError
from pimem.sessions.discover import discover_sessions, scan_session_file
from pimem.sessions.load import load_session, sniff_format
from tests.support.tiny import tiny_session_lines

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
PLAIN = {"pi": None, "claude-code": FIXTURES / "claude-code-demo.jsonl", "codex": FIXTURES / "codex-demo.jsonl"}


def _plain_bytes(fmt: str) -> bytes:
    source = PLAIN[fmt]
    if source is None:
        return "".join(json.dumps(x) + "\n" for x in tiny_session_lines(12)).encode()
    return source.read_bytes()


def _gzip(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data, mtime=0))
    return path


def _bomb(path: Path, head: bytes, mib: int) -> Path:
    """``head``, then ``mib`` MiB of newlines: one gzip member of 1 MiB of newlines repeated
    (a gzip file may hold several members, read one after the other), about 1 KB per MiB."""
    member = gzip.compress(b"\n" * (1 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(head, mtime=0))
        for _ in range(mib):
            f.write(member)
    return path


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- bombs


def _traced_peak(call) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["pi", "claude-code", "codex"])
def test_a_gzip_bomb_of_newlines_is_read_in_small_bounded_memory(tmp_path: Path, fmt: str) -> None:
    head = _plain_bytes(fmt)
    path = _bomb(tmp_path / f"bomb.{fmt}.jsonl.gz", head, 128)
    assert path.stat().st_size < 160_000  # 128 MiB of content in ~130 KB
    expected = load_session(_gzip(tmp_path / f"small.{fmt}.jsonl.gz", head))
    session, peak = _traced_peak(lambda: load_session(path))
    assert peak < 24 << 20, peak  # the content is 128 MiB: it was never held (before: all of it and its lines)
    assert session.entries == expected.entries and session.source_format == fmt
    row, peak = _traced_peak(lambda: scan_session_file(path))
    assert peak < 24 << 20 and row["error"] is None and row["entry_count"] == len(expected.entries)
    assert sniff_format(path) == fmt


@pytest.mark.slow
def test_a_gzip_bomb_of_one_gib_is_read_in_small_bounded_memory(tmp_path: Path) -> None:
    path = _bomb(tmp_path / "bomb.jsonl.gz", _plain_bytes("claude-code"), 1024)
    assert path.stat().st_size < 1_200_000  # 1 GiB of content in ~1 MB
    session, peak = _traced_peak(lambda: load_session(path))
    assert peak < 24 << 20, peak
    assert session.source_format == "claude-code" and session.entries


@pytest.mark.parametrize("fmt", ["pi", "claude-code", "codex"])
def test_a_gzipd_line_has_the_limit_of_a_plain_one(tmp_path: Path, monkeypatch, fmt: str) -> None:
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 1 << 16)
    head = _plain_bytes(fmt)
    data = head + b'{"x": "' + b"y" * (1 << 17)  # a line that never ends, past the limit
    for path in (tmp_path / "long.jsonl", _gzip(tmp_path / "long.jsonl.gz", data)):
        if path.suffix == ".jsonl":
            path.write_bytes(data)
        line = head.count(b"\n") + 1
        with pytest.raises(SessionFormatError, match=f"{path}:{line}: line longer than 65536 bytes"):
            load_session(path, format=fmt)  # type: ignore[arg-type]
        assert f"line {line}: line longer than 65536 bytes" in scan_session_file(path)["error"]


# --------------------------------------------------------------------------- damaged archives


def _damaged(tmp_path: Path, fmt: str) -> list[Path]:
    data = gzip.compress(_plain_bytes(fmt) * 40, mtime=0)
    cut_early = tmp_path / f"{fmt}-cut-early.jsonl.gz"
    cut_early.write_bytes(data[:40])  # inside the first block: even the format probe fails
    cut_late = tmp_path / f"{fmt}-cut-late.jsonl.gz"
    cut_late.write_bytes(data[: len(data) - 9])  # all content, the trailer cut
    flipped = tmp_path / f"{fmt}-flipped.jsonl.gz"
    middle = len(data) // 2
    flipped.write_bytes(data[:middle] + bytes([data[middle] ^ 0x55]) + data[middle + 1:])
    header_only = tmp_path / f"{fmt}-header-only.jsonl.gz"
    header_only.write_bytes(data[:8 + len(fmt)])  # (of its own length: no two files alike)
    return [cut_early, cut_late, flipped, header_only]


@pytest.mark.parametrize("fmt", ["pi", "claude-code", "codex"])
def test_a_damaged_archive_is_a_format_error_naming_the_file(tmp_path: Path, fmt: str) -> None:
    for path in _damaged(tmp_path, fmt):
        for given in ("auto", fmt):
            with pytest.raises(SessionFormatError, match=f"^{path}: corrupt gzip data"):
                load_session(path, format=given)  # type: ignore[arg-type]
        row = scan_session_file(path)
        assert "corrupt gzip data" in row["error"], (path.name, row)


def test_a_damaged_archive_is_one_error_row_of_the_folder_commands(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    good = {fmt: _gzip(folder / f"{fmt}-good.jsonl.gz", _plain_bytes(fmt)) for fmt in PLAIN}
    bad = [p for fmt in PLAIN for p in _damaged(folder, fmt)]

    code, out, err = _run(["ls", str(folder), "--format", "json"], capsys)
    rows = {r["path"]: r for r in json.loads(out)}
    assert code == 0 and len(rows) == len(good) + len(bad)
    for fmt, path in good.items():
        assert rows[str(path)]["error"] is None and rows[str(path)]["source_format"] == fmt
    for path in bad:
        assert "corrupt gzip data" in rows[str(path)]["error"], rows[str(path)]

    code, out, err = _run(["import", str(folder), "-o", str(tmp_path / "out"), "--table", "json"], capsys)
    rows = {r["source"]: r for r in json.loads(out)}
    assert code == 0 and len(rows) == len(good) + len(bad)
    for path in bad:
        assert rows[str(path)]["error"].startswith(f"{path}: corrupt gzip data"), rows[str(path)]
    assert {Path(r["output"]).name for r in rows.values() if r["output"]} == {"claude-code-good.jsonl",
                                                                              "codex-good.jsonl"}
    assert f"wrote 2 of {len(rows)} files" in err

    study = ["study", str(folder), "-o", str(tmp_path / "study"), "--window", "3000", "--reserve", "500",
             "--keep", "500", "--token-source", "calibrated", "--workers", "1", "-q"]
    code, out, err = _run(study, capsys)
    for path in bad:
        assert f"{path}: corrupt gzip data" in err, err
    assert code == 0, err
    studied = pd.read_csv(tmp_path / "study" / "sweep.csv")["session"]
    assert set(studied) == {str(path) for path in good.values()}  # each readable session, whatever its agent


def test_a_gzipd_pi_session_is_listed_as_its_plain_copy(tmp_path: Path) -> None:
    data = _plain_bytes("pi")
    (tmp_path / "a.jsonl").write_bytes(data)
    _gzip(tmp_path / "b.jsonl.gz", data)
    df = discover_sessions(tmp_path).set_index("path")
    plain, packed = df.loc[str(tmp_path / "a.jsonl")], df.loc[str(tmp_path / "b.jsonl.gz")]
    assert pd.isna(packed["error"]) and packed["source_format"] == "pi"
    for column in ("session_id", "entry_count", "message_count", "first_user_message", "started", "modified"):
        assert packed[column] == plain[column], column
