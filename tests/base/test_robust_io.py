"""Real-world files and folders: nothing hangs, crashes or is lost.

FIFOs and devices are refused without blocking, endless lines are bounded, an unreadable file or
folder is a warning naming it while the rest goes on, a locked cache is not a corrupt cache,
killed writes leave no temporary files behind, and outputs are never read back as sessions.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from pimem.base import files as pimem_io
from pimem.cli.main import _session_paths, main
from pimem.core.session_manager import load_session
from pimem.sessions.discover import discover_sessions, load_sessions, scan_session_file
from pimem.errors import (
    CacheCorruptError,
    CacheUnavailableError,
    SessionFormatError,
    SkippedFileWarning,
    SourceOverwriteError,
)
from pimem.summarizers.cached import CachedSummarizer
from pimem.experiments.sweep import sweep
from tests.support.special_files import make_fifo, unreadable  # noqa: F401 - unreadable is a fixture
from tests.support.summarizers import EchoSummarizer

GRID = {"reserve_tokens": [4096], "keep_recent_tokens": [4000], "context_window": [32000]}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------------------------- FIFOs


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "pipe.jsonl")
    with pytest.raises(SessionFormatError, match=r"pipe\.jsonl: a FIFO"):
        load_session(fifo)
    row = scan_session_file(fifo)
    assert row["error"] and "FIFO" in row["error"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_show_of_a_fifo_exits_2(tmp_path: Path, capsys) -> None:
    fifo = make_fifo(tmp_path / "pipe.jsonl")
    code, _, err = run(["show", str(fifo)], capsys)
    assert code == 2 and "FIFO" in err and "pipe.jsonl" in err
    code, out, err = run(["ls", str(fifo), "--format", "csv"], capsys)
    assert code == 0 and "a FIFO, not a regular session file" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_fifo_in_a_folder_is_left_out_with_a_warning(tmp_path: Path, sample_paths: list[Path]) -> None:
    shutil.copy(sample_paths[0], tmp_path / "a.jsonl")
    make_fifo(tmp_path / "pipe.jsonl")
    with pytest.warns(SkippedFileWarning, match=r"pipe\.jsonl: a FIFO"):
        corpus = load_sessions(tmp_path, progress=False)
    assert len(corpus) == 1
    with pytest.warns(SkippedFileWarning, match="FIFO"):
        assert list(discover_sessions(tmp_path)["path"]) == [str(tmp_path / "a.jsonl")]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_sweep_leaves_out_a_fifo(tmp_path: Path, sample_paths: list[Path]) -> None:
    fifo = make_fifo(tmp_path / "pipe.jsonl")
    with pytest.warns(SkippedFileWarning, match="pipe.jsonl"):
        df = sweep([fifo, sample_paths[0]], GRID, workers=1, progress=False)
    assert list(df["session"]) == [str(sample_paths[0])] and df["error"].isna().all()


# ------------------------------------------------------------------------------- endless input


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused() -> None:
    with pytest.raises(SessionFormatError, match="character device"):
        load_session("/dev/zero")
    assert "character device" in scan_session_file("/dev/zero")["error"]


def test_endless_line_is_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(pimem_io, "MAX_LINE_BYTES", 1 << 20)
    path = tmp_path / "zeros.jsonl"
    with open(path, "wb") as f:  # a sparse 1 GiB file of NUL bytes: one line that never ends
        f.truncate(1 << 30)
    with pytest.raises(SessionFormatError, match=r"zeros\.jsonl:1: line longer than 1048576 bytes"):
        load_session(path)
    assert "longer than 1048576 bytes" in scan_session_file(path)["error"]


def test_folder_named_jsonl(tmp_path: Path, sample_paths: list[Path]) -> None:
    folder = tmp_path / "odd.jsonl"
    folder.mkdir()
    shutil.copy(sample_paths[0], folder / "inside.jsonl")
    with pytest.raises(SessionFormatError, match="a folder"):
        load_session(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # walked as a folder: nothing to warn about
        assert list(discover_sessions(tmp_path)["path"]) == [str(folder / "inside.jsonl")]


# ------------------------------------------------------------------------------- permissions


def test_unreadable_file_deep_in_a_folder_is_a_warning(tmp_path: Path, sample_paths: list[Path], unreadable,
                                                       capsys) -> None:
    root = tmp_path / "sessions"
    (root / "x" / "y").mkdir(parents=True)
    shutil.copy(sample_paths[0], root / "a.jsonl")
    locked = root / "x" / "y" / "locked.jsonl"
    shutil.copy(sample_paths[1], locked)
    unreadable(locked)
    out = tmp_path / "r.csv"
    code, text, err = run(["sweep", str(root), *sum(([f"--{k}", str(v[0])] for k, v in
                                                   (("reserve", GRID["reserve_tokens"]), ("keep", GRID["keep_recent_tokens"]),
                                                    ("window", GRID["context_window"]))), []),
                           "--workers", "1", "-q", "-o", str(out)], capsys)
    assert code == 0, err
    assert "pimem: warning:" in err and "locked.jsonl" in err and "ermission denied" in err
    assert list(pd.read_csv(out)["session"]) == [str(root / "a.jsonl")]


def test_unreadable_folder_is_a_warning(tmp_path: Path, sample_paths: list[Path], unreadable) -> None:
    shutil.copy(sample_paths[0], tmp_path / "a.jsonl")
    (tmp_path / "private").mkdir()
    shutil.copy(sample_paths[1], tmp_path / "private" / "b.jsonl")
    unreadable(tmp_path / "private")
    with pytest.warns(SkippedFileWarning, match="private: cannot read folder"):
        corpus = load_sessions(tmp_path, progress=False)
    assert [Path(s.path).name for s in corpus] == ["a.jsonl"]


def test_symlink_loop_is_left_out(tmp_path: Path, sample_paths: list[Path]) -> None:
    shutil.copy(sample_paths[0], tmp_path / "a.jsonl")
    os.symlink(tmp_path / "loop2.jsonl", tmp_path / "loop1.jsonl")
    os.symlink(tmp_path / "loop1.jsonl", tmp_path / "loop2.jsonl")
    os.symlink(tmp_path, tmp_path / "self")  # a folder loop is walked once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = discover_sessions(tmp_path)
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, SkippedFileWarning))
    assert [m.split(": ")[0] for m in messages] == [str(tmp_path / "loop1.jsonl"), str(tmp_path / "loop2.jsonl")]
    assert all("cannot read file" in m for m in messages)
    assert list(df["path"]) == [str(tmp_path / "a.jsonl")]
    with pytest.raises(OSError):
        load_session(tmp_path / "loop1.jsonl")


# ------------------------------------------------------------------------------------ the cache


def _request(prompt: str):
    from pimem.core.llm import SummaryRequest

    return SummaryRequest(kind="history", system_prompt="s", prompt=prompt, max_tokens=100, reasoning=None,
                          session_id="r", model="m")


def test_locked_cache_is_unavailable_not_corrupt_and_never_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedSummarizer(EchoSummarizer(), path).complete(_request("kept"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process in the middle of a long write
    try:
        for rebuild in (False, True):
            with pytest.raises(CacheUnavailableError, match="locked") as info:
                CachedSummarizer(EchoSummarizer(), path, busy_timeout_s=0.05, rebuild=rebuild).connect()
            assert not isinstance(info.value, CacheCorruptError)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert sorted(p.name for p in tmp_path.iterdir() if "corrupt" in p.name) == []
    again = CachedSummarizer(EchoSummarizer(), path)
    assert again.lookup(_request("kept")).text == "summary of kept"


def test_garbage_is_still_corrupt_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheCorruptError, match="not a readable pimem cache"):
        CachedSummarizer(EchoSummarizer(), path).connect()
    CachedSummarizer(EchoSummarizer(), path, rebuild=True).connect()
    assert any("corrupt" in p.name for p in tmp_path.iterdir())


def _open_at_once(path: str, barrier, queue) -> None:
    barrier.wait()
    try:
        cache = CachedSummarizer(EchoSummarizer(), path)
        cache.complete(_request(f"p{os.getpid() % 3}"))
        queue.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(exc).__name__}: {exc}")


def test_fresh_cache_opened_by_many_processes_at_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    results = []
    for trial in range(3):
        path = str(tmp_path / f"c{trial}.sqlite")
        barrier, queue = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(path, barrier, queue)) for _ in range(8)]
        for p in procs:
            p.start()
        results += [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(120)
    assert results == ["ok"] * len(results)


# -------------------------------------------------------------------------- temporary files


_KILLED_WRITE = """
import os, sys
from pimem.base.files import atomic_open
with atomic_open(sys.argv[1]) as f:
    f.write("half a table")
    f.flush()
    os._exit(9)  # killed in the middle of the write
"""
_GOOD_WRITE = "import sys, pandas as pd; from pimem.base.files import write_table; write_table(pd.DataFrame({'a': [1]}), sys.argv[1])"


def test_killed_write_leaves_a_temp_file_the_next_write_removes(tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", _KILLED_WRITE, str(target)], env=env)
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".t.csv.") and left[0].endswith(".tmp")
    other = tmp_path / ".other.csv.abcd1234.tmp"  # another target's temp file: not ours to remove
    other.write_text("x")
    subprocess.run([sys.executable, "-c", _GOOD_WRITE, str(target)], env=env, check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.csv.abcd1234.tmp", "t.csv"]


def test_temp_files_newer_than_the_process_are_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    busy = tmp_path / ".t.txt.zzzz9999.tmp"  # a write going on in another process right now
    busy.write_text("in progress")
    pimem_io.atomic_write_text(target, "done")
    assert busy.exists() and target.read_text() == "done"


# ------------------------------------------------------------------------- outputs and sources


def test_cli_sweep_keeps_a_resume_log(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    out = tmp_path / "r.csv"
    argv = ["sweep", *map(str, sample_paths[:2]), "--reserve", "4096,8192", "--keep", "4000", "--window", "32000",
            "--workers", "1", "-q", "-o", str(out)]
    code, text, err = run(argv, capsys)
    assert code == 0, err
    log = tmp_path / "r.csv.jsonl"
    lines = log.read_bytes().splitlines()
    assert len(lines) == 4
    log.write_bytes(b"\n".join(lines[:3]) + b"\n")  # the sweep was killed before its last run ended
    code, text, err = run(argv, capsys)
    assert code == 0, err
    assert "3 resumed" in text
    df = pd.read_csv(out)
    assert len(df) == 4 and df["error"].isna().all()
    assert len(log.read_bytes().splitlines()) == 4


def test_study_output_inside_the_sessions_folder_is_not_read_as_sessions(tmp_path: Path,
                                                                          sample_paths: list[Path]) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    for p in sample_paths[:2]:
        shutil.copy(p, root / p.name)
    out = root / "study"
    (out / "replays").mkdir(parents=True)  # what a first run leaves there
    shutil.copy(sample_paths[0], out / "replays" / sample_paths[0].name)
    (out / "sweep-runs.jsonl").write_text("{}\n")
    found = _session_paths([str(root)], exclude=[out])
    assert sorted(p.name for p in found) == sorted(p.name for p in sample_paths[:2])
    # relative spellings of the same folder are recognised too
    assert _session_paths([str(root)], exclude=[os.path.relpath(out)]) == found


def test_write_after_chdir_never_overwrites_a_relative_source(tmp_path: Path, sample_paths: list[Path],
                                                              monkeypatch) -> None:
    (tmp_path / "sub").mkdir()
    shutil.copy(sample_paths[0], tmp_path / "a.jsonl")
    monkeypatch.chdir(tmp_path)
    s = load_session("a.jsonl")
    before = (tmp_path / "a.jsonl").read_bytes()
    monkeypatch.chdir(tmp_path / "sub")
    with pytest.raises(SourceOverwriteError):
        s.write("../a.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == before
    s.write("a.jsonl")  # a new file in the new folder is fine
    assert (tmp_path / "sub" / "a.jsonl").exists()



@pytest.mark.slow
def test_study_rerun_inside_the_sessions_folder_sees_the_same_sessions(tmp_path: Path, sample_paths: list[Path],
                                                                        capsys) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    shutil.copy(sample_paths[0], root / sample_paths[0].name)
    if hasattr(os, "mkfifo"):
        make_fifo(root / "pipe.jsonl")
    argv = ["study", str(root), "-o", str(root / "study"), "--reserve", "2000", "--keep", "1000",
            "--window", "24000", "--token-source", "calibrated", "--workers", "1", "-q"]
    runs = []
    for _ in range(2):
        code, text, err = run(argv, capsys)
        assert code == 0, err
        runs.append(pd.read_csv(root / "study" / "sweep.csv"))
    assert list(runs[1]["session"]) == list(runs[0]["session"]) == [str(root / sample_paths[0].name)]
    assert (root / "study" / "replays").is_dir()  # what the second run would have read as sessions
