"""The real sessions bundled with pimem (``datasets/real``): the files are the ones their provenance table
names, they load as Pi loads them (gzip'd or not), and the API finds them."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

import pimem
from pimem.errors import SessionFormatError
from pimem.sessions.samples import REAL_KINDS, real_session_name

REAL = Path(__file__).resolve().parents[2] / "datasets" / "real"


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _provenance() -> dict[str, tuple[str, int]]:
    """file -> (blob here, bytes) from the README's provenance table."""
    rows = {}
    for line in (REAL / "README.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[0].endswith(".jsonl.gz"):
            rows[cells[0]] = (cells[5], int(cells[6].replace(",", "")))
    return rows


def test_every_bundled_file_is_the_one_its_provenance_row_names() -> None:
    rows = _provenance()
    files = sorted(str(p.relative_to(REAL)) for p in REAL.glob("*/*") if p.is_file())
    assert files == sorted(rows) and len(files) == 9
    for name, (blob, size) in rows.items():
        data = gzip.decompress((REAL / name).read_bytes())
        assert len(data) == size, name
        assert _git_blob(data).startswith(blob) and len(blob) == 12, name


def test_the_notice_carries_both_licences() -> None:
    notice = (REAL / "NOTICE").read_text()
    assert notice.count("Permission is hereby granted, free of charge") == 2
    assert "Copyright (c) 2025 Mario Zechner" in notice and "Copyright (c) 2026 Entire Inc." in notice


def test_the_api_finds_them_pi_sessions_first() -> None:
    paths = pimem.real_session_paths()
    assert pimem.real_dir() == REAL and [p.parent.name for p in paths] == ["pi"] * 4 + ["claude-code"] * 5
    assert pimem.real_session_paths("pi") == paths[:4] and pimem.real_session_paths("claude-code") == paths[4:]
    assert real_session_name(paths[0]) == "pi/before-compaction"
    with pytest.raises(ValueError, match="kind must be one of pi, claude-code"):
        pimem.real_session_paths("codex")
    assert REAL_KINDS == ("pi", "claude-code")


def test_each_loads_with_its_recorded_compactions() -> None:
    sessions = pimem.load_real_sessions()
    pi = {name: len(s.compactions_df()) for name, s in sessions.items() if name.startswith("pi/")}
    # history-compact wrote two, the second on a line shared with another object: Pi skips that line
    assert pi == {"pi/before-compaction": 2, "pi/large-session": 0, "pi/history-compact": 1,
                  "pi/history-session": 1}
    for name, s in sessions.items():
        if not name.startswith("claude-code/"):
            continue
        boundaries = gzip.decompress((REAL / f"{name}.jsonl.gz").read_bytes()).count(b'"compact_boundary"')
        compactions = [e for e in s.entries if e["type"] == "compaction"]
        assert s.source_format == "claude-code" and len(compactions) == boundaries >= 2, name
        assert all(e["summary"].startswith("This session is being continued") for e in compactions), name


@pytest.mark.parametrize("name", ["before-compaction", "history-session"])
def test_a_gzipd_pi_session_loads_as_its_plain_copy(tmp_path: Path, name: str) -> None:
    plain = tmp_path / f"{name}.jsonl"
    plain.write_bytes(gzip.decompress((REAL / "pi" / f"{name}.jsonl.gz").read_bytes()))
    a, b = pimem.load_session(plain), pimem.load_session(REAL / "pi" / f"{name}.jsonl.gz")
    assert a.header == b.header and a.entries == b.entries  # v1 ids too: drawn from the content
    assert [w.line for w in a.warnings] == [w.line for w in b.warnings]


def test_a_corrupt_gzip_file_names_the_file(tmp_path: Path) -> None:
    data = (REAL / "pi" / "history-session.jsonl.gz").read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionFormatError, match=re.escape(str(cut)) + ": corrupt gzip data"):
        pimem.load_session(cut)
