"""Generated folders of special files: nothing hangs, nothing crashes, nothing is silently lost.

Each example builds a sessions folder mixing real session files with what turns up on real disks:
FIFOs named ``*.jsonl`` (a blocking open would hang), endless files without a newline (``/dev/zero``
-like: reading a line would grow without bound), unreadable files and folders, folders named
``*.jsonl``, symlink loops (between files and of a folder onto itself) and broken links. Discovery,
corpus loading and a sweep over the folder must finish, keep every good session, and account for
every bad entry: an error row naming it, or a ``SkippedFileWarning`` naming it.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pimem.base import files as pimem_io
from pimem.cli.main import _session_paths
from pimem.sessions.load import load_session
from pimem.sessions.discover import discover_sessions, load_sessions
from pimem.errors import SessionFormatError, SkippedFileWarning
from pimem.experiments.sweep import sweep
from tests.support.special_files import make_fifo, release_fifo, unreadable  # noqa: F401 - unreadable is a fixture

pytestmark = pytest.mark.fuzz

SESSION = (
    '{"type":"session","version":3,"id":"s-%(n)d","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}\n'
    '{"type":"message","id":"a%(n)d","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
    '"message":{"role":"user","content":"hello %(n)d","timestamp":1735689601000}}\n'
)
KINDS = ["session", "fifo", "endless", "unreadable_file", "unreadable_dir", "dir_named_jsonl", "file_loop",
         "dir_loop", "broken_link"]
LIMIT = 64 * 1024  # the line bound during these tests: an endless file is 1 GiB of NUL bytes


def _build(root: Path, plan: list[tuple[str, int]], deny) -> tuple[set[str], set[str], list[Path]]:
    """Create the entries of ``plan``; returns (good session paths, bad paths that must be named, fifos)."""
    good: set[str] = set()
    bad: set[str] = set()
    fifos: list[Path] = []
    for n, (kind, depth) in enumerate(plan):
        folder = root.joinpath(*[f"d{n}-{i}" for i in range(depth)])
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"e{n}.jsonl"
        if kind == "session":
            path.write_text(SESSION % {"n": n})
            good.add(str(path))
        elif kind == "fifo" and hasattr(os, "mkfifo"):
            fifos.append(make_fifo(path))
            bad.add(str(path))
        elif kind == "endless":
            with open(path, "wb") as f:
                f.truncate(1 << 30)  # sparse: no disk used
            bad.add(str(path))
        elif kind == "unreadable_file":
            path.write_text(SESSION % {"n": n})
            deny(path)
            bad.add(str(path))
        elif kind == "unreadable_dir":
            hidden = folder / f"private{n}"
            hidden.mkdir()
            (hidden / "inside.jsonl").write_text(SESSION % {"n": n})
            deny(hidden)
            bad.add(str(hidden))
        elif kind == "dir_named_jsonl":
            path.mkdir()
            (path / "inside.jsonl").write_text(SESSION % {"n": n})
            good.add(str(path / "inside.jsonl"))
        elif kind == "file_loop":
            other = folder / f"e{n}-other.jsonl"
            os.symlink(other, path)
            os.symlink(path, other)
            bad.update({str(path), str(other)})
        elif kind == "dir_loop":
            os.symlink(folder, folder / f"loop{n}")  # walked once, never forever
        elif kind == "broken_link":
            os.symlink(folder / "nowhere.jsonl", path)
            bad.add(str(path))
    return good, bad, fifos


def _named(path: str, messages: list[str]) -> bool:
    return any(path in m for m in messages)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(min_value=0, max_value=2)), min_size=1,
                     max_size=6))
def test_special_files_never_hang_crash_or_vanish(tmp_path_factory, monkeypatch, unreadable, plan) -> None:
    monkeypatch.setattr(pimem_io, "MAX_LINE_BYTES", LIMIT)
    root = tmp_path_factory.mktemp("special")
    good, bad, fifos = _build(root, plan, unreadable)
    try:
        # discovery: every good session listed without error; every bad entry an error row or a warning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = discover_sessions(root, workers=1)
        warned = [str(w.message) for w in caught if issubclass(w.category, SkippedFileWarning)]
        rows = {p: (None if pd.isna(e) else e) for p, e in zip(df["path"], df["error"])}
        assert {p for p, e in rows.items() if e is None} == good  # listed, without error: sessions
        for p in bad:
            assert isinstance(rows.get(p), str) or _named(p, warned), p

        # corpus loading: the good sessions load; bad files are errors naming them, or warned about
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            corpus = load_sessions(root, progress=False, workers=1)
        warned = [str(w.message) for w in caught if issubclass(w.category, SkippedFileWarning)]
        assert {s.path for s in corpus} == good
        failed = set(corpus.errors["path"])
        for p in bad:
            assert p in failed or _named(p, warned), p

        # a sweep over the folder (the CLI's expansion): runs for every good session, the rest warned
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            paths = _session_paths([str(root)]) if good or failed else []
            result = sweep(paths, {"reserve_tokens": [1000], "keep_recent_tokens": [500]}, workers=1,
                           progress=False) if paths else None
        if result is not None:
            ran = set(result.loc[result["error"].isna(), "session"]) if "error" in result else set()
            assert ran == good
            errored = set(result.loc[result["error"].notna(), "session"]) if "error" in result else set()
            warned = [str(w.message) for w in caught if issubclass(w.category, SkippedFileWarning)]
            for p in bad:
                assert p in errored or _named(p, warned) or p not in {str(x) for x in paths}, p
    finally:
        for fifo in fifos:
            release_fifo(fifo)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["fifo", "endless", "folder", "file_loop", "device"]),
       prefix=st.binary(max_size=200))
def test_one_special_file_is_a_clear_error(tmp_path_factory, monkeypatch, kind, prefix) -> None:
    monkeypatch.setattr(pimem_io, "MAX_LINE_BYTES", LIMIT)
    folder = tmp_path_factory.mktemp("one")
    path = folder / "x.jsonl"
    fifo = None
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            return
        fifo = make_fifo(path)
    elif kind == "endless":  # a few bytes of anything, then a line that never ends
        with open(path, "wb") as f:
            f.write(prefix.replace(b"\n", b" ") + b"\n" if b"\n" in prefix else b"")
            f.truncate(1 << 30)
    elif kind == "folder":
        path.mkdir()
    elif kind == "file_loop":
        os.symlink(path, path)
    elif kind == "device":
        if not os.path.exists("/dev/zero"):
            return
        path = Path("/dev/zero")
    try:
        with pytest.raises((SessionFormatError, OSError)) as info:
            load_session(path)
        assert str(path) in str(info.value) or getattr(info.value, "filename", None) == str(path)
    finally:
        if fifo is not None:
            release_fifo(fifo)
