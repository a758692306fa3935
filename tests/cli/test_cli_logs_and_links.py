"""Logs and caches against what may be planted at their names: a symbolic link is never followed
(nothing is written outside the output), and a run log line whose fields are not a run's row is
never taken as that run (it is run again, with a warning naming the line)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from pimem.cli.main import main
from pimem.errors import CacheUnavailableError, ConfigurationError
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer
from tests.support.tiny import write_tiny_session

FAST_SWEEP = ["--reserve", "500", "--keep", "500", "--window", "3000", "--workers", "1", "-q"]
FAST_STUDY = ["--reserve", "500", "--keep", "500", "--window", "3000", "--token-source", "calibrated",
              "--workers", "1", "-q"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _planted(link: Path, elsewhere: Path) -> bytes:
    """A symbolic link at ``link`` to a file outside the output; its bytes as they were."""
    elsewhere.write_bytes(b"someone else's file\n")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, link)
    return elsewhere.read_bytes()


# --------------------------------------------------------------------------- links at a log's name


def test_a_link_at_the_sweep_log_is_never_written_through(tmp_path: Path, capsys) -> None:
    session = write_tiny_session(tmp_path / "a.jsonl")
    out = tmp_path / "out" / "r.csv"
    before = _planted(tmp_path / "out" / "r.csv.jsonl", tmp_path / "victim.txt")
    code, _, err = run(["sweep", str(session), "-o", str(out), *FAST_SWEEP], capsys)
    assert code == 2 and f"{out}.jsonl: the sweep log is a symbolic link" in err
    assert (tmp_path / "victim.txt").read_bytes() == before  # before: 2.1 KB of JSON lines appended to it
    assert not out.exists()  # refused before any run


def test_a_link_at_the_study_run_log_is_never_written_through(tmp_path: Path, capsys) -> None:
    session = write_tiny_session(tmp_path / "a.jsonl")
    before = _planted(tmp_path / "st" / "sweep-runs.jsonl", tmp_path / "victim.txt")
    code, _, err = run(["study", str(session), "-o", str(tmp_path / "st"), *FAST_STUDY], capsys)
    assert code == 2 and "sweep-runs.jsonl: the sweep log is a symbolic link" in err
    assert (tmp_path / "victim.txt").read_bytes() == before


def test_the_sweep_log_is_opened_without_following_a_link(tmp_path: Path) -> None:
    """Also when the link appears after the check (the open itself refuses it)."""
    from pimem.experiments.sweep import _append_result, _read_results

    link = tmp_path / "log.jsonl"
    before = _planted(link, tmp_path / "victim.txt")
    with pytest.raises(ConfigurationError, match="the sweep log is a symbolic link"):
        _append_result(link, {"run_hash": "x"})
    with pytest.raises(ConfigurationError, match="the sweep log is a symbolic link"):
        _read_results(link)
    assert (tmp_path / "victim.txt").read_bytes() == before


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_a_link_at_the_summary_cache_is_never_followed(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / "cache.sqlite"
    victim = tmp_path / "victim.txt"
    before = _planted(Path(f"{path}{suffix}"), victim)
    cache = CachedSummarizer(ExtractiveSummarizer(), path)
    with pytest.raises(CacheUnavailableError, match=f"{path}{suffix}: a symbolic link at the summary cache's name"):
        cache.connect()
    assert victim.read_bytes() == before
    assert not path.exists() or suffix == ""  # no database was made beside the link either


def test_a_link_at_the_study_cache_fails_the_runs_and_writes_nothing_through_it(tmp_path: Path, capsys) -> None:
    session = write_tiny_session(tmp_path / "a.jsonl")
    before = _planted(tmp_path / "st" / "cache.sqlite", tmp_path / "victim.txt")
    code, out, err = run(["study", str(session), "-o", str(tmp_path / "st"), *FAST_STUDY], capsys)
    assert "Traceback" not in err and "(1 with errors)" in out
    logged = [json.loads(line) for line in (tmp_path / "st" / "sweep-runs.jsonl").read_text().splitlines()]
    assert logged and all("a symbolic link at the summary cache's name" in (r["error"] or "") for r in logged)
    assert (tmp_path / "victim.txt").read_bytes() == before


# --------------------------------------------------------------------------- tampered resume lines


@pytest.mark.parametrize("field, value", [
    ("reserve_tokens", {"x": 1}),   # the case: a setting that is an object
    ("reserve_tokens", 999),        # another setting than the run's
    ("compactions", "many"),        # a count that is text
    ("peak_context_tokens", True),  # a number that is a boolean
    ("cost_model", 5),              # a text that is a number
    ("needed_recall", [0.5]),       # a list anywhere
    ("session_hash", "0" * 64),     # another session
])
def test_a_tampered_resume_line_is_run_again_with_a_warning(tmp_path: Path, capsys, field, value) -> None:
    session = write_tiny_session(tmp_path / "a.jsonl")
    out = tmp_path / "r.csv"
    code, _, err = run(["sweep", str(session), "-o", str(out), *FAST_SWEEP], capsys)
    assert code == 0, err
    first = pd.read_csv(out)
    log = Path(f"{out}.jsonl")
    row = json.loads(log.read_text())
    logged = row[field]
    row[field] = value
    log.write_text(json.dumps(row) + "\n")
    code, _, err = run(["sweep", str(session), "-o", str(out), *FAST_SWEEP], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert f"{log}:1: the logged run {row['run_hash']} does not have the row's types ({field} is" in err
    again = pd.read_csv(out)
    assert not again["resumed"].any()  # run again, not taken from the line
    pd.testing.assert_series_equal(again[field], first[field])
    assert again["reserve_tokens"].tolist() == [500]
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])[field] == logged


def test_an_untouched_resume_line_is_taken_back(tmp_path: Path, capsys) -> None:
    session = write_tiny_session(tmp_path / "a.jsonl")
    out = tmp_path / "r.csv"
    assert run(["sweep", str(session), "-o", str(out), *FAST_SWEEP], capsys)[0] == 0
    code, _, err = run(["sweep", str(session), "-o", str(out), *FAST_SWEEP], capsys)
    assert code == 0 and "does not have the row's types" not in err and pd.read_csv(out)["resumed"].all()
