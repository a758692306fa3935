"""Reading session files safely and writing outputs atomically.

Reading: :func:`open_regular` opens a file without ever blocking and refuses what is not a
regular file (a FIFO would block forever, ``/dev/zero`` never ends, a folder cannot be read);
:func:`open_session_bytes` reads a gzip'd file as its plain content (a damaged archive is a
:class:`SessionFormatError` naming it); :func:`read_lines` streams the lines of either in blocks,
:data:`MAX_LINE_BYTES` bounding one line, so no file (a gzip bomb neither) is ever held whole.
Writing: a temporary file in the target folder
(``.<name>.<random>.tmp``), then one rename; temporary files left by a killed writer are
removed by the next successful write to the same target.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
import tempfile
import time
import warnings
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar, cast

from pimem.base.tables import escape_lone_surrogates
from pimem.errors import ConfigurationError, LabelFormatError, PimemWarning, SessionFormatError

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


GZIP_MAGIC = b"\x1f\x8b"
_READ_CHUNK = 1 << 18  # 256 KiB: small against any file, large against a line
_ASCII_BLANKS = b" \t\n\r\x0b\x0c"  # all of them whitespace to JavaScript's trim() too
_NON_EMPTY_LINE = re.compile(rb"[^\n]+")
_T = TypeVar("_T")


class _SessionGzip(gzip.GzipFile):
    """A gzip'd file read as its content: a damaged or cut-short archive raises
    :class:`SessionFormatError` naming the file (not ``EOFError`` or ``zlib.error``)."""

    def __init__(self, raw: IO[bytes], file: str) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw, self._file = raw, file

    def _checked(self, read: Callable[..., _T], *args: Any) -> _T:
        try:
            return read(*args)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise SessionFormatError(f"{self._file}: corrupt gzip data: {exc}") from exc

    def read(self, size: int | None = -1) -> bytes:
        return self._checked(super().read, size)

    def read1(self, size: int = -1) -> bytes:
        return self._checked(super().read1, size)

    def readinto(self, b: Any) -> int:
        return self._checked(super().readinto, b)

    def readline(self, size: int | None = -1) -> bytes:
        return self._checked(super().readline, size)

    def peek(self, n: int = 0) -> bytes:
        return self._checked(super().peek, n)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_session_bytes(path: str | os.PathLike, buffering: int = -1) -> IO[bytes]:
    """:func:`open_regular`, decompressed when the file is gzip'd (by its content, not its name).

    Reading a damaged or cut-short archive raises :class:`SessionFormatError` naming the file.
    """
    f = open_regular(path, buffering=buffering)
    try:
        if f.read(2) != GZIP_MAGIC:
            f.seek(0)
            return f
        f.seek(0)
        return cast(IO[bytes], _SessionGzip(f, os.fspath(path)))
    except BaseException:
        f.close()
        raise


def read_lines(f: IO[bytes], file: str) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, ended by a newline) of every line of ``f`` that
    holds more than ASCII whitespace (the other lines are blank to every reader, JavaScript's
    ``trim()`` included: they are only counted).

    Reads blocks of 256 KiB, so the content is never in memory whole and a run of blank lines
    (a gzip bomb of newlines) passes at the speed of a byte scan; a line longer than a block is
    joined once. A line past :data:`MAX_LINE_BYTES` is a :class:`SessionFormatError` naming
    ``file`` and the line (no JavaScript string holds it: Pi cannot read it either).

    Args:
        f: a binary stream (:func:`open_session_bytes`).
        file: its name, for errors.
    """
    lineno = 0
    pending: list[bytes] = []  # the line under way, read in earlier blocks
    pending_bytes = 0
    while block := f.read(_READ_CHUNK):
        newlines = block.count(b"\n")
        if not newlines:
            pending.append(block)
            pending_bytes += len(block)
            if pending_bytes > MAX_LINE_BYTES:
                raise _too_long(file, lineno + 1)
            continue
        first = block.index(b"\n")
        if pending:
            pending.append(block[:first])
            raw = b"".join(pending)
            pending, pending_bytes = [], 0
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise _too_long(file, lineno)
            if raw.strip():
                yield lineno, raw, True
        else:
            lineno += 1
            raw = block[:first]
            if raw.strip():
                yield lineno, raw, True
        last = block.rindex(b"\n")
        if last + 1 < len(block):
            pending.append(block[last + 1:])
            pending_bytes = len(block) - last - 1
        if newlines == 1:
            continue
        if newlines * 16 <= len(block):
            for raw in block.split(b"\n")[1:-1]:
                lineno += 1
                if raw.strip():  # (the line itself when it has no blanks around it: no copy)
                    yield lineno, raw, True
            continue
        # short lines (a flood of blank ones?): only the non-empty ones are looked at
        start = lineno
        lineno = start + newlines - 1
        inner = block[first + 1:last]
        if not inner.translate(None, _ASCII_BLANKS):  # blank lines only: counted, none read
            continue
        before = 0  # newlines of ``inner`` before the match
        pos = 0
        count = inner.count
        for match in _NON_EMPTY_LINE.finditer(inner):
            before += count(b"\n", pos, match.start())
            pos = match.end()
            raw = match.group()
            if raw.strip():
                yield start + 1 + before, raw, True
    if pending:
        raw = b"".join(pending)
        if len(raw) > MAX_LINE_BYTES:
            raise _too_long(file, lineno + 1)
        if raw.strip():
            yield lineno + 1, raw, False


def _too_long(file: str, lineno: int) -> SessionFormatError:
    return SessionFormatError(f"{file}:{lineno}: line longer than {MAX_LINE_BYTES} bytes (no JavaScript string "
                              "can hold it: Pi cannot load this file either)")


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


def labelled_rows(path: str | os.PathLike[str], fields: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file:line, object)`` of each line of a hand-labelled JSONL file (blank lines skipped): each an object
    holding ``fields``, its ``id`` unique in the file; any other line raises
    :class:`~pimem.errors.LabelFormatError` naming file and line.

    Args:
        path: the file.
        fields: the fields every object must hold (``id`` among them).
    """
    file = os.fspath(path)
    seen: set[Any] = set()
    with open(file, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{file}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LabelFormatError(f"{where}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise LabelFormatError(f"{where}: expected an object, got {type(row).__name__}")
            missing = [f for f in fields if f not in row]
            if missing:
                raise LabelFormatError(f"{where}: missing field(s) {missing}")
            if row["id"] in seen:
                raise LabelFormatError(f"{where}: duplicate id {row['id']!r}")
            seen.add(row["id"])
            yield where, row
