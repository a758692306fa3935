"""Reading session files safely and writing outputs atomically.

Reading: :func:`open_regular` opens a file without ever blocking and refuses what is not a
regular file (a FIFO would block forever, ``/dev/zero`` never ends, a folder cannot be read);
:data:`MAX_LINE_BYTES` bounds one line. Writing: a temporary file in the target folder
(``.<name>.<random>.tmp``), then one rename; temporary files left by a killed writer are
removed by the next successful write to the same target.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator

from pimem.base.tables import escape_lone_surrogates
from pimem.errors import ConfigurationError, PimemWarning, SessionFormatError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


# The longest string V8 can build (2**29 - 24 UTF-16 units): Pi cannot read a longer line, and
# pimem stops there instead of growing one line without bound (an endless file with no newline).
MAX_LINE_BYTES = (1 << 29) - 24

_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, in words ("a FIFO", "a folder", ...)."""
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, buffering: int = -1) -> IO[bytes]:
    """Open ``path`` for binary reading; :class:`SessionFormatError` if it is not a regular file.

    The file is opened non-blocking first, so a FIFO (which would block until a writer comes)
    or a device (``/dev/zero`` never ends) is refused at once instead of hanging.
    OS errors (missing, permission, symlink loop) propagate as ``OSError``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SessionFormatError(f"{os.fspath(path)}: {file_kind(mode)}, not a regular session file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


_TMP_SUFFIX = ".tmp"
_STARTED = time.time()


_NAME_MAX = 255  # bytes in one file name on common file systems


def _temp_prefix(target: Path) -> str:
    """``.<target name>.``, the name shortened (keeping a digest of it) when the temporary name
    (prefix + 8 random characters + ``.tmp``) would pass the file-name length limit."""
    prefix = f".{target.name}."
    room = _NAME_MAX - 8 - len(_TMP_SUFFIX)
    if len(os.fsencode(prefix)) <= room:
        return prefix
    import hashlib

    digest = hashlib.sha256(os.fsencode(target.name)).hexdigest()[:12]
    head = os.fsencode(target.name)[: room - len(digest) - 3].decode("utf-8", "ignore")
    return f".{head}~{digest}."


def _remove_stale_temps(target: Path, keep: str) -> None:
    """Remove temporary files of earlier writes to ``target`` that never finished.

    Only names this module makes (``.<target name>.<8 random chars>.tmp``) and only files last
    modified before this process started: a write still running in another process is left alone.
    """
    prefix = _temp_prefix(target)
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(_TMP_SUFFIX)) or name == keep:
            continue
        middle = name[len(prefix) : -len(_TMP_SUFFIX)]
        if len(middle) != 8 or not middle.replace("_", "").isalnum():
            continue
        full = target.parent / name
        try:
            st = full.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_mtime < _STARTED:
                full.unlink()
        except OSError:
            pass


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename.

    If the block raises, the temporary file is removed and ``path`` is left as it was. After a
    successful write, temporary files that killed writes to ``path`` left behind are removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=_TMP_SUFFIX, dir=target.parent)
    except OSError as exc:
        raise _naming(exc, target) from None
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not exc.filename:  # a full disk names no file: say which
            raise _naming(exc, target) from exc
        raise
    _remove_stale_temps(target, os.path.basename(tmp))


def _naming(exc: OSError, target: Path) -> OSError:
    """``exc`` with the file it is about (``ENOSPC`` and others carry no name)."""
    return type(exc)(exc.errno, f"cannot write {target}: {exc.strerror or exc}", str(target))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a DataFrame as CSV or Parquet (by suffix), atomically."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ConfigurationError(f"unsupported table format {suffix!r} for {target} (use .csv or .parquet)")
    try:
        _write_table(df, target, suffix)
    except UnicodeEncodeError:  # lone UTF-16 surrogates from Pi's text: neither format holds them
        _write_table(_escape_surrogates(df, target), target, suffix)


def _write_table(df: pd.DataFrame, target: Path, suffix: str) -> None:
    if suffix == ".csv":
        with atomic_open(target, "w") as f:
            df.to_csv(f, index=False)
    else:
        with atomic_open(target, "wb") as f:
            _for_parquet(df).to_parquet(f, index=False)


def _escape_surrogates(df: pd.DataFrame, target: Path) -> pd.DataFrame:
    """``df`` with lone surrogates written as ``\\udXXX`` (as JSON.stringify escapes them), and a
    warning naming the columns: CSV and Parquet hold UTF-8 text only."""
    out = df.copy()
    changed = []
    for i in range(out.shape[1]):
        values = out.iloc[:, i].tolist()
        escaped = [escape_lone_surrogates(v) if isinstance(v, str) else v for v in values]
        if any(a is not b for a, b in zip(escaped, values)):
            changed.append(str(out.columns[i]))
            out.isetitem(i, escaped)
    warnings.warn(f"{target}: lone UTF-16 surrogates in column(s) {', '.join(changed)} written as \\uXXXX "
                  f"escapes ({target.suffix[1:]} holds UTF-8 text only)", PimemWarning, stacklevel=3)
    return out


def _for_parquet(df: pd.DataFrame) -> pd.DataFrame:
    """Parquet needs one type per column: turn mixed object columns into strings."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            kinds = {type(v) for v in out[col].dropna()}
            if len(kinds) > 1 or kinds & {dict, list, tuple}:
                out[col] = out[col].map(lambda v: None if v is None else str(v))
    return out


# --------------------------------------------------------------------------- outputs are never inputs

#: The file pimem leaves in every folder it writes outputs into. Its first line says what it is;
#: each further line is the name of a file pimem wrote there, or ``*`` when the whole folder is
#: pimem's (a study). Session discovery leaves those out, so outputs are never read as sessions.
OUTPUT_MARKER = ".pimem-output"
_MARKER_HEADER = "pimem output folder: the files named below (* = every file) were written by pimem\n"


def read_output_marker(folder: str | os.PathLike) -> set[str] | None:
    """The names the marker of ``folder`` lists (``{"*"}`` for a whole folder), None without a marker."""
    try:
        text = (Path(folder) / OUTPUT_MARKER).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return {line for line in text.splitlines()[1:] if line}


def mark_output(folder: str | os.PathLike, *names: str) -> None:
    """Record in ``folder``'s marker that pimem wrote ``names`` there (none: the whole folder)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    listed = read_output_marker(target) or set()
    wanted = set(names) if names else {"*"}
    if wanted <= listed:
        return
    atomic_write_text(target / OUTPUT_MARKER, _MARKER_HEADER + "".join(f"{n}\n" for n in sorted(listed | wanted)))


def mark_output_file(path: str | os.PathLike) -> None:
    """Record that pimem wrote the file ``path`` (in its folder's marker)."""
    p = Path(path)
    mark_output(p.parent, p.name)
