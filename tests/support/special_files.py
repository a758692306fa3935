"""Special files for tests: FIFOs that can never hang a test, and files or folders that cannot be read.

``make_fifo`` starts a guard that opens the FIFO's writing end and closes it at once: code that
(wrongly) opens the FIFO with a blocking open is released and reads an empty file, so a
regression fails its assertions instead of hanging the suite. ``unreadable`` (a fixture) takes
read permission away; when the tests run as root, who reads everything, the same
``PermissionError`` is raised by ``os.open`` / ``os.scandir`` for those paths instead.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest


def _release_writer(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY)  # blocks until some reader opens the FIFO
    except OSError:
        return
    os.close(fd)


def make_fifo(path: Path) -> Path:
    """Create a FIFO at ``path`` with its guard (see the module docstring)."""
    os.mkfifo(path)
    threading.Thread(target=_release_writer, args=(str(path),), daemon=True).start()
    return path


def release_fifo(path: Path) -> None:
    """End the guard of a FIFO no code opened (a walk that only looked at it)."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.fixture
def unreadable(monkeypatch) -> Iterator[Callable[[Path], None]]:
    """``unreadable(path)``: reading ``path`` (a file, or a folder's listing) fails with EACCES."""
    denied: list[Path] = []
    real_open, real_scandir = os.open, os.scandir

    def is_denied(target) -> bool:
        try:
            real = os.path.realpath(os.fsdecode(target))
        except TypeError:  # a file descriptor
            return False
        return any(real == str(d) for d in denied)

    def guarded_open(target, flags, *args, **kwargs):
        if is_denied(target):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(target))
        return real_open(target, flags, *args, **kwargs)

    def guarded_scandir(target="."):
        if is_denied(target):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(target))
        return real_scandir(target)

    modes: dict[Path, int] = {}

    def deny(path: Path) -> None:
        modes[path] = stat.S_IMODE(path.stat().st_mode)
        path.chmod(0)
        denied.append(Path(os.path.realpath(path)))
        if os.geteuid() == 0 and len(denied) == 1:  # root reads everything: refuse it here
            monkeypatch.setattr(os, "open", guarded_open)
            monkeypatch.setattr(os, "scandir", guarded_scandir)

    yield deny
    for path, mode in modes.items():
        path.chmod(mode)
