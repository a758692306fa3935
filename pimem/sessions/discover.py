"""Finding session files on disk and loading many of them at once.

Pi's own sessions, and the transcripts of Claude Code (``~/.claude/projects/<project>/<id>.jsonl``)
and Codex (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``), which load as Pi sessions through
:mod:`pimem.sessions.importers` (plain or ``.jsonl.gz``).

``discover_sessions`` lists session files cheaply (one pass of ``orjson`` over each file, no
``Session`` objects), computing what Pi's session picker shows (``buildSessionInfo`` in
``core/session-manager.js``). ``load_sessions`` loads a whole corpus in parallel and collects
per-file errors instead of stopping; the resulting ``Corpus`` offers the DataFrame views of
``pimem.sessions.frames`` over all its sessions at once.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import orjson
import pandas as pd

from pimem.base import files
from pimem.base.collector import collector_paused
from pimem.base.files import file_kind, open_regular, read_output_marker
from pimem.base.js import loads_line, parse_iso_ms
from pimem.core.pi_ai import content_text
from pimem.core.session_manager import not_a_header
from pimem.base.tables import DATETIME, Column, Table, category_array, frame, str_array
from pimem.errors import SessionFormatError, SkippedFileWarning
from pimem.sessions import frames
from pimem.sessions.session import Session
from pimem.sessions.load import load_session, sniff_format

__all__ = [
    "Corpus",
    "claude_projects_dir",
    "codex_sessions_dir",
    "dedupe_session_paths",
    "default_session_files",
    "default_sessions_dir",
    "discover_sessions",
    "load_sessions",
    "scan_session_file",
]

ENV_AGENT_DIR = "PI_CODING_AGENT_DIR"
ENV_SESSION_DIR = "PI_CODING_AGENT_SESSION_DIR"
CONFIG_DIR_NAME = ".pi"
ENV_CLAUDE_CONFIG_DIR = "CLAUDE_CONFIG_DIR"
ENV_CODEX_HOME = "CODEX_HOME"
SESSION_SUFFIXES = (".jsonl", ".jsonl.gz")

# Below this many bytes in total, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
PARALLEL_MIN_FILES = 8
# Loading in worker processes only pays with spare cores: the parent still has to unpickle
# every session, which costs about half of parsing it. On 2 cores serial loading wins.
PARALLEL_LOAD_MIN_CPUS = 4

def _source_format(row: dict[str, Any]) -> Any:
    """A session's format; a Pi session's row has none ("pi"), a file that is no session NA."""
    if "source_format" in row:
        return row["source_format"]
    return "pi" if row.get("error") is None else None


DISCOVER = Table("discover", [
    Column("path", "string", "the file"),
    Column("session_id", "string", "the header's ``id``"),
    Column("cwd", "string", "the header's ``cwd`` (\"\" when absent, as Pi)"),
    Column("started", DATETIME, "the header's ``timestamp``; NaT if invalid", path="started_ms"),
    Column("modified", DATETIME, "Pi's ``buildSessionInfo`` rule: the latest user or assistant activity "
           "(``message.timestamp`` in ms, else the entry's ``timestamp``), else the header timestamp, else the "
           "file's mtime", path="modified_ms"),
    Column("name", "string", "the latest ``session_info`` name, trimmed; an empty name clears it"),
    Column("entry_count", "Int64", "entries as ``load_session`` keeps them: JSON-object lines after the header, "
           "blank, malformed and non-object lines and extra headers skipped"),
    Column("message_count", "Int64", "``message`` entries"),
    Column("size_bytes", "Int64", "file size"),
    Column("version", "Int64", "header ``version`` (1 when absent, as Pi assumes)"),
    Column("first_user_message", "string", "the first user message with text, its text parts joined with \" \" "
           "(Pi's ``firstMessage``; Pi shows \"(no messages)\" where this is NA)"),
    Column("parent_session", "string", "the header's ``parentSession``"),
    Column("error", "string", "why the file is not a session (empty, unreadable, first entry not a session "
           "header); NA for sessions. Such rows have the other columns NA"),
    Column("source_format", "category", "``\"pi\"``, ``\"claude-code\"`` or ``\"codex\"`` (NA for files that are "
           "no session)", path=_source_format),
], "One row per session file.", locate=lambda row: f"file {row.get('path')!r}")
DISCOVER_COLUMNS = DISCOVER.names


_BOM = b"\xef\xbb\xbf"


# --------------------------------------------------------------------------- paths


def _expand_pi_path(value: str) -> Path:
    """Expand a path the way Pi's ``normalizePath`` does: ``~``, ``~/…`` and ``file://`` URLs."""
    if value == "~":
        return Path.home()
    if value.startswith("~/"):
        return Path.home() / value[2:]
    if value.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(value).path))
    return Path(value)


def default_sessions_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Pi keeps its sessions.

    As Pi 0.87.1 decides it: ``$PI_CODING_AGENT_SESSION_DIR`` if set (a custom session folder),
    else ``$PI_CODING_AGENT_DIR/sessions``, else ``~/.pi/agent/sessions``. Empty variables count
    as unset; ``~`` and ``file://`` are expanded as Pi does.

    Args:
        env: the environment to read (default: ``os.environ``).
    """
    env_vars: Mapping[str, str] = os.environ if env is None else env
    session_dir = env_vars.get(ENV_SESSION_DIR)
    if session_dir:
        return _expand_pi_path(session_dir)
    agent_dir = env_vars.get(ENV_AGENT_DIR)
    base = _expand_pi_path(agent_dir) if agent_dir else Path.home() / CONFIG_DIR_NAME / "agent"
    return base / "sessions"


def claude_projects_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Claude Code keeps its transcripts: ``$CLAUDE_CONFIG_DIR/projects``, else ``~/.claude/projects``."""
    env_vars: Mapping[str, str] = os.environ if env is None else env
    base = env_vars.get(ENV_CLAUDE_CONFIG_DIR)
    return (_expand_pi_path(base) if base else Path.home() / ".claude") / "projects"


def codex_sessions_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Codex keeps its rollouts: ``$CODEX_HOME/sessions``, else ``~/.codex/sessions``."""
    env_vars: Mapping[str, str] = os.environ if env is None else env
    base = env_vars.get(ENV_CODEX_HOME)
    return (_expand_pi_path(base) if base else Path.home() / ".codex") / "sessions"


def _regular_files(paths: Iterable[Path]) -> list[Path]:
    import stat as stat_mod

    out = []
    for p in paths:
        try:
            if stat_mod.S_ISREG(os.stat(p).st_mode):
                out.append(p)
        except OSError:
            pass
    return out


def default_session_files(env: Mapping[str, str] | None = None) -> list[Path]:
    """Every session file where the agents keep them: Pi's sessions folder (walked), Claude Code's
    ``projects/*/*.jsonl`` (a project's ``<id>/subagents/`` transcripts are left out: load them
    one by one) and Codex's ``sessions/**/rollout-*.jsonl``. Missing folders give nothing."""
    found: list[Path] = []
    pi = default_sessions_dir(env)
    if pi.is_dir():
        found += walk_jsonl(pi)
    claude = claude_projects_dir(env)
    if claude.is_dir():
        found += sorted(_regular_files(claude.glob("*/*.jsonl")))
    codex = codex_sessions_dir(env)
    if codex.is_dir():
        found += sorted(_regular_files([*codex.glob("**/rollout-*.jsonl"), *codex.glob("**/rollout-*.jsonl.gz")]))
    return found


def _skip(path: str, why: str) -> None:
    import warnings


    warnings.warn(f"{path}: {why}; left out", SkippedFileWarning, stacklevel=3)


def _walk_error(exc: OSError) -> None:
    _skip(exc.filename or "?", f"cannot read folder: {exc.strerror or exc}")


def walk_jsonl(root: Path) -> list[Path]:
    """Every ``*.jsonl`` and ``*.jsonl.gz`` file under ``root`` (any depth, symlinked folders
    followed once), sorted.

    What cannot be used is left out with a :class:`~pimem.errors.SkippedFileWarning` naming it:
    unreadable folders, and ``*.jsonl`` names that are not regular files (FIFOs, devices,
    sockets, broken links, symlink loops). A folder named ``*.jsonl`` is walked like any folder.
    pimem's own outputs are left out silently: folders below ``root`` that pimem wrote (a study)
    and files it lists as written in a folder (a sweep's table and log, a replay), both recognised
    by the marker file :data:`pimem.base.files.OUTPUT_MARKER`. The walk is iterative, so any depth
    of nesting works.
    """
    import stat as stat_mod


    found: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()  # (device, inode): a folder reached twice (symlinks) is walked once
    stack = [os.fspath(root)]
    while stack:
        dirpath = stack.pop()
        try:
            st = os.stat(dirpath)
            with os.scandir(dirpath) as it:
                children = list(it)
        except OSError as exc:
            _walk_error(exc)
            continue
        if (st.st_dev, st.st_ino) in seen_dirs:
            continue
        seen_dirs.add((st.st_dev, st.st_ino))
        written = read_output_marker(dirpath)
        if written is not None and "*" in written and dirpath != os.fspath(root):
            continue  # a folder pimem wrote (a study): never its input
        subdirs = []
        for child in children:
            try:
                is_dir = child.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                subdirs.append(child.path)
            elif child.name.endswith(SESSION_SUFFIXES):
                if written is not None and child.name in written:
                    continue  # a file pimem wrote here (a replay, a sweep log)
                try:
                    mode = os.stat(child.path).st_mode
                except OSError as exc:
                    _skip(child.path, f"cannot read file: {exc.strerror or exc}")
                    continue
                if stat_mod.S_ISREG(mode):
                    found.append(Path(child.path))
                else:
                    _skip(child.path, f"{file_kind(mode)}, not a session file")
        stack.extend(sorted(subdirs, reverse=True))
    found.sort()
    return found


def dedupe_session_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """``paths`` with each session file once: the same file given again (the same path, another
    path to it, a symlink) or a copy with identical bytes is left out with a
    :class:`~pimem.errors.SkippedFileWarning` saying which file it repeats."""
    import hashlib
    import warnings


    kept: list[Path] = []
    by_real: dict[str, Path] = {}
    by_size: dict[int, list[Path]] = {}
    digests: dict[Path, str] = {}

    def digest(path: Path) -> str | None:
        if path not in digests:
            h = hashlib.sha256()
            try:
                with open(path, "rb") as f:
                    while block := f.read(1 << 20):
                        h.update(block)
            except OSError:
                return None
            digests[path] = h.hexdigest()
        return digests[path]

    for item in paths:
        path = Path(item)
        real = os.path.realpath(path)
        first = by_real.get(real)
        if first is not None:
            warnings.warn(f"{path}: the same file as {first}; counted once", SkippedFileWarning, stacklevel=2)
            continue
        try:
            st = os.stat(path)
        except OSError:
            by_real[real] = path
            kept.append(path)  # what cannot be read is reported by whoever reads it
            continue
        twin = None
        if _is_regular(st.st_mode):
            for other in by_size.get(st.st_size, []):
                if digest(other) is not None and digest(other) == digest(path):
                    twin = other
                    break
        if twin is not None:
            warnings.warn(f"{path}: the same content as {twin} (a copy); counted once", SkippedFileWarning,
                          stacklevel=2)
            continue
        by_real[real] = path
        by_size.setdefault(st.st_size, []).append(path)
        kept.append(path)
    return kept


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _resolve_paths(paths_or_root: str | os.PathLike | Iterable[str | os.PathLike] | None) -> list[Path]:
    """A folder (walked for ``*.jsonl``), one file, or an iterable of files/folders."""
    if paths_or_root is None:
        return default_session_files()
    if isinstance(paths_or_root, (str, os.PathLike)):
        items: list[str | os.PathLike] = [paths_or_root]
    else:
        items = list(paths_or_root)
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out.extend(walk_jsonl(p))
        else:
            out.append(p)
    return out


# --------------------------------------------------------------------------- scanning


def _parse_line(line: bytes) -> Any:
    """Parse one line as Pi does (``JSON.parse``); ``None`` for blank or malformed lines.

    What ``orjson`` refuses goes through ``pimem.base.js.loads_line`` (invalid UTF-8 replaced
    with U+FFFD as Node's decoder does, lone surrogate escapes, huge numbers).
    """
    if not line.strip():
        return None
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass

    try:
        return loads_line(line)
    except ValueError:
        return None


def _iso_ms(value: Any) -> float | None:
    """``new Date(value).getTime()`` for the ISO strings Pi writes; ``None`` when invalid."""
    if not isinstance(value, str):
        return None

    ms = parse_iso_ms(value)
    return None if ms is None else float(ms)


def _error_row(path: Path, size: int | None, error: str) -> dict[str, Any]:
    return {"path": str(path), "size_bytes": size, "error": error}


_READ_BUFFER = 1024 * 1024


class _LineTooLong(Exception):
    pass


def _bounded_lines(f: Any) -> Iterator[bytes]:
    """The lines of ``f`` (with their newline); :class:`_LineTooLong` past ``MAX_LINE_BYTES``."""
    readline = f.readline
    while True:
        line = readline(files.MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > files.MAX_LINE_BYTES:
            raise _LineTooLong
        yield line


def _scan_lines(f: Any) -> tuple[dict[str, Any], int, int, str | None, str, float | None] | str:
    """One pass over a session file's lines, read in buffered blocks (never the whole file).

    Returns (header, entry count, message count, name, first user message, last activity ms),
    or the error text for a file that is not a session.
    """
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    header: dict[str, Any] | None = None
    entry_count = 0
    message_count = 0
    name: str | None = None
    first_message = ""
    last_activity: float | None = None
    seen_content = False  # a non-whitespace byte: not an "empty file"

    for line_no, line in enumerate(_bounded_lines(f), start=1):
        if line_no == 1 and line.startswith(_BOM):
            seen_content = True
            line = line[len(_BOM):]
        try:
            entry = loads(line)
        except decode_error:
            entry = _parse_line(line[:-1] if line.endswith(b"\n") else line)
        if header is None:
            if not seen_content and line.strip():
                seen_content = True
            if not entry:  # blank, malformed, or a falsy JSON value (Pi's ``if (entry)``)
                continue
            problem = not_a_header(entry)
            if problem is not None:
                return f"line {line_no}: {problem}"
            header = entry
            continue
        if not entry or not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "session":  # a second header: Pi's loader skips it
            continue
        entry_count += 1
        if kind == "session_info":
            # Pi: ``entry.name?.trim() || undefined`` — the latest wins, an empty name clears it.
            raw = entry.get("name")
            name = raw.strip() or None if isinstance(raw, str) else None
            continue
        if kind != "message":
            continue
        message_count += 1
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or "content" not in message:
            continue
        role = message["role"]
        if role != "user" and role != "assistant":
            continue
        stamp = message.get("timestamp")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            activity: float | None = float(stamp)
        else:
            activity = _iso_ms(entry.get("timestamp"))
        if activity is not None and not math.isnan(activity):
            last_activity = max(last_activity or 0.0, activity)
        if not first_message and role == "user":
            # Pi's extractTextContent: contentText joined with spaces (blocks that are not objects skipped)
            content = message.get("content")
            if isinstance(content, list):
                content = [block for block in content if isinstance(block, dict)]
            first_message = content_text(content, " ") if isinstance(content, (str, list)) else ""

    if header is None:
        return "not a Pi session: no parseable JSON line" if seen_content else "empty file"
    return header, entry_count, message_count, name, first_message, last_activity


def scan_session_file(path: str | os.PathLike) -> dict[str, Any]:
    """One discovery row for one file (see ``discover_sessions`` for the columns).

    Files that are not sessions (empty, unreadable, first entry not a header) give a row
    with only ``path``, ``size_bytes`` and ``error`` set. Never raises for bad content.
    """
    p = Path(path)
    try:
        with open_regular(p, buffering=_READ_BUFFER) as f:
            stat = os.fstat(f.fileno())
            scanned = _scan_lines(f)
    except OSError as exc:
        return _error_row(p, None, f"cannot read file: {exc.strerror or exc}")
    except SessionFormatError as exc:  # a FIFO, a device, a folder
        return _error_row(p, None, str(exc).removeprefix(f"{p}: "))
    except _LineTooLong:
        return _error_row(p, None, f"not a Pi session: a line longer than {files.MAX_LINE_BYTES} bytes")
    size = stat.st_size
    if isinstance(scanned, str):
        return _imported_row(p, size) or _error_row(p, size, scanned)
    header, entry_count, message_count, name, first_message, last_activity = scanned

    header_ms = _iso_ms(header.get("timestamp"))
    if last_activity is not None and last_activity > 0:
        modified_ms = last_activity
    elif header_ms is not None:
        modified_ms = header_ms
    else:
        modified_ms = stat.st_mtime * 1000.0
    version = header.get("version", 1)
    parent = header.get("parentSession")
    return {
        "path": str(p),
        "session_id": header["id"],
        "cwd": header["cwd"] if isinstance(header.get("cwd"), str) else "",
        "started_ms": header_ms,
        "modified_ms": modified_ms,
        "name": name,
        "entry_count": entry_count,
        "message_count": message_count,
        "size_bytes": size,
        "version": version if isinstance(version, int) and not isinstance(version, bool) else None,
        "first_user_message": first_message or None,
        "parent_session": parent if isinstance(parent, str) else None,
        "error": None,
    }


def _imported_row(p: Path, size: int) -> dict[str, Any] | None:
    """The discovery row of a Claude Code or Codex transcript (imported in full), else None."""
    try:
        fmt = sniff_format(p)
    except (SessionFormatError, OSError):
        return None
    if fmt not in ("claude-code", "codex"):
        return None
    try:
        session = load_session(p, format=fmt)  # type: ignore[arg-type]
    except (SessionFormatError, OSError) as exc:
        row = _error_row(p, size, f"{fmt} transcript that cannot be imported: {exc}")
        row["source_format"] = fmt
        return row
    messages = [e["message"] for e in session.entries if e.get("type") == "message"]
    activity = [m.get("timestamp") for m in messages if m.get("role") in ("user", "assistant")]
    stamps = [float(t) for t in activity if isinstance(t, (int, float)) and not isinstance(t, bool)]
    first = next((m for m in messages if m.get("role") == "user"), None)
    first_text = content_text(first.get("content"), " ") if first is not None else ""
    header = session.header
    return {
        "path": str(p),
        "session_id": session.id,
        "cwd": header.get("cwd") if isinstance(header.get("cwd"), str) else "",
        "started_ms": _iso_ms(header.get("timestamp")),
        "modified_ms": max(stamps) if stamps else _iso_ms(header.get("timestamp")),
        "name": session.name,
        "entry_count": len(session.entries),
        "message_count": len(messages),
        "size_bytes": size,
        "version": header.get("version"),
        "first_user_message": first_text or None,
        "parent_session": None,
        "error": None,
        "source_format": fmt,
    }


def _scan_many(paths: Sequence[Path]) -> list[dict[str, Any]]:
    return [scan_session_file(p) for p in paths]


def _rows_to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return DISCOVER.frame(rows)


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _worth_parallel(paths: Sequence[Path]) -> bool:
    """Enough files and bytes for worker processes to pay for their start-up."""
    if len(paths) < PARALLEL_MIN_FILES:
        return False
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total >= PARALLEL_MIN_BYTES


def _chunks(items: Sequence[Path], n: int) -> list[list[Path]]:
    size = max(1, math.ceil(len(items) / n))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def discover_sessions(
    root: str | os.PathLike | None = None,
    *,
    workers: int | None = None,
) -> pd.DataFrame:
    """List the session files under ``root`` (default: :func:`default_session_files`: Pi's,
    Claude Code's and Codex's folders).

    ``root`` is walked recursively for ``*.jsonl`` and ``*.jsonl.gz`` files. A Claude Code
    transcript or Codex rollout is imported (``pimem.sessions.importers``) to fill its row. Each file is read once and its lines
    parsed with ``orjson`` (no ``Session`` objects are built). With ``workers`` > 1, or by default
    when the files total more than ``PARALLEL_MIN_BYTES``, files are scanned in worker processes.
    A missing root gives an empty frame. One row per file, sorted by path.

    Pi's own list leaves out a few files that are listed here: a file starting with a UTF-8
    byte-order mark (Pi's ``JSON.parse`` rejects the header line; ``load_session`` strips the
    mark), and files where ``buildSessionInfo`` throws on a broken entry (a ``message`` entry
    without a message object, a non-string ``session_info`` name, non-list content); here
    such entries are skipped for the columns they would feed.

    Args:
        root: the folder to walk (default: the agents' own folders).
        workers: worker processes (default: by the files' total size).
    """
    if root is None:
        paths = default_session_files()
    else:
        base = Path(root)
        paths = walk_jsonl(base) if base.is_dir() else ([base] if os.path.lexists(base) else [])
    if workers is None:
        use_workers = _default_workers() if _worth_parallel(paths) else 1
    else:
        use_workers = max(1, workers)
    if use_workers > 1 and len(paths) > 1:
        chunks = _chunks(paths, use_workers * 4)
        with ProcessPoolExecutor(max_workers=use_workers) as pool:
            rows = [row for part in pool.map(_scan_many, chunks) for row in part]
    else:
        rows = _scan_many(paths)
    return _rows_to_frame(rows)


DISCOVER.document(discover_sessions)


# --------------------------------------------------------------------------- corpus loading


def _load_one(path: Path, seed: int | str | None = None) -> tuple[str, "Session | None", tuple[str, str] | None]:
    """Load one file; never raises: returns (path, session, None) or (path, None, (type, message))."""
    try:
        file_seed = None if seed is None else f"{seed}:{os.fspath(path)}"
        return str(path), load_session(path, seed=file_seed), None
    except Exception as exc:  # collected per file, never stops a corpus load
        return str(path), None, (type(exc).__name__, str(exc))


def _load_chunk(
    paths: Sequence[Path], seed: int | str | None = None
) -> list[tuple[str, "Session | None", tuple[str, str] | None]]:
    with collector_paused():
        return [_load_one(p, seed) for p in paths]


_FRAME_NAMES = ("entries_df", "messages_df", "tool_calls_df", "usage_df", "compactions_df")


class Corpus:
    """Many loaded sessions plus the files that failed to load.

    ``sessions`` is in path order; ``errors`` has one row per failed file (columns ``path``,
    ``error_type``, ``message``). Iterating yields the sessions. The ``*_df`` methods concatenate
    the per-session frames of ``pimem.sessions.frames`` and add ``session_id``, ``path`` and
    ``source_format`` (categoricals) as the first three columns.

    Args:
        sessions: the loaded sessions, in path order.
        errors: one row per file that failed to load (``path``, ``error_type``, ``message``);
            default: none.
    """

    def __init__(self, sessions: Sequence["Session"], errors: pd.DataFrame | None = None) -> None:
        self.sessions: list[Session] = list(sessions)
        if errors is None:
            errors = frame({"path": pd.Series(dtype="string"), "error_type": pd.Series(dtype="string"), "message": pd.Series(dtype="string")})
        self.errors: pd.DataFrame = errors

    def __len__(self) -> int:
        return len(self.sessions)

    def __iter__(self) -> Iterator["Session"]:
        return iter(self.sessions)

    def __getitem__(self, index: int) -> "Session":
        return self.sessions[index]

    def __repr__(self) -> str:
        return f"Corpus({len(self.sessions)} sessions, {len(self.errors)} errors)"

    def _concat(self, frame: Callable[..., pd.DataFrame], columns: Iterable[str] | None) -> pd.DataFrame:
        parts = []
        ids: list[str] = []
        paths: list[str] = []
        formats: list[str] = []
        for session in self.sessions:
            df = frame(session, columns)
            parts.append(df)
            sid = str(session.header.get("id", ""))
            ids.extend([sid] * len(df))
            paths.extend([str(session.path) if session.path is not None else ""] * len(df))
            fmt = getattr(session, "source_format", None)
            formats.extend([fmt if isinstance(fmt, str) else "pi"] * len(df))
        if not parts:
            empty = frame_template(frame, columns)
            empty.insert(0, "source_format", pd.Categorical([]))
            empty.insert(0, "path", pd.Categorical([]))
            empty.insert(0, "session_id", pd.Categorical([]))
            return empty
        out = pd.concat(parts, ignore_index=True)
        # Categoricals with differing categories fall back to object in concat: restore them.
        for col in parts[0].columns:
            if isinstance(parts[0][col].dtype, pd.CategoricalDtype) and not isinstance(out[col].dtype, pd.CategoricalDtype):
                out[col] = out[col].astype("category")
        out.insert(0, "source_format", category_array(formats))
        out.insert(0, "path", category_array(paths))
        out.insert(0, "session_id", category_array(ids))
        return out

    def entries_df(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """``pimem.sessions.frames.entries_df`` of every session, with ``session_id`` and ``path``.

        Args:
            columns: the columns to build (default: all).
        """
        return self._concat(frames.entries_df, columns)

    def messages_df(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """``pimem.sessions.frames.messages_df`` of every session, with ``session_id`` and ``path``.

        Args:
            columns: the columns to build (default: all).
        """
        return self._concat(frames.messages_df, columns)

    def tool_calls_df(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """``pimem.sessions.frames.tool_calls_df`` of every session, with ``session_id`` and ``path``.

        Args:
            columns: the columns to build (default: all).
        """
        return self._concat(frames.tool_calls_df, columns)

    def usage_df(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """``pimem.sessions.frames.usage_df`` of every session, with ``session_id`` and ``path``.

        Args:
            columns: the columns to build (default: all).
        """
        return self._concat(frames.usage_df, columns)

    def compactions_df(self, columns: Iterable[str] | None = None, *, dedupe: bool = True) -> pd.DataFrame:
        """``pimem.sessions.frames.compactions_df`` of every session, with ``session_id`` and ``path``.

        A corpus may hold several copies of one session (checkpoint files that each hold the
        transcript up to then): with ``dedupe`` each compaction — one session id and entry id; for a
        Claude Code import the entry id is the boundary's uuid, tied one to one to its summary's —
        is kept once, from the copy with the most entries (rows stay in corpus order).

        Args:
            columns: the columns to build (default: all; ``dedupe`` reads ``id`` as well).
            dedupe: keep each compaction once.
        """
        chosen = None if columns is None else list(columns)
        wanted = chosen if chosen is None or not dedupe or "id" in chosen else [*chosen, "id"]
        df = self._concat(frames.compactions_df, wanted)
        if dedupe and not df.empty:
            size = {str(s.path) if s.path is not None else "": len(s.entries) for s in self.sessions}
            entries = df["path"].astype(str).map(size).fillna(0)
            ranked = df.assign(_entries=-entries).sort_values("_entries", kind="stable")
            keep = ranked.drop_duplicates(subset=["session_id", "id"]).index
            df = df.loc[sorted(keep)].reset_index(drop=True)
        if wanted is not chosen:
            df = df.drop(columns="id")
        return df


def frame_template(frame: Callable[..., pd.DataFrame], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """The empty frame (right columns and dtypes) a frame function gives for an empty session."""
    return frame(Session({"type": "session", "version": 3, "id": "", "timestamp": "", "cwd": ""}, []), columns)


def load_sessions(
    paths_or_root: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    progress: bool = True,
    workers: int | None = None,
    *,
    seed: int | str | None = None,
) -> Corpus:
    """Load many sessions, in parallel when it pays, with a progress bar.

    Args:
        paths_or_root: a folder (walked recursively for ``*.jsonl``), one file, or an iterable of files
            and folders; ``None`` means ``default_sessions_dir()``.
        progress: show a progress bar.
        workers: ``None`` picks serial loading for small corpora (under ``PARALLEL_MIN_BYTES`` or
            ``PARALLEL_MIN_FILES`` files) and on machines with fewer than ``PARALLEL_LOAD_MIN_CPUS``
            cores, a process pool of up to ``os.cpu_count()`` (at most 8) workers otherwise; ``1``
            forces serial loading.
        seed: makes the ids given to v1 entries reproducible (each file gets its own seed derived from
            ``seed`` and its path), whatever the number of workers.

    The cyclic garbage collector is paused while loading (it would otherwise double the time). A file
    that fails (``SessionFormatError``, unreadable, …) is recorded in ``Corpus.errors`` and loading goes
    on. Files that load with warnings are kept (see ``Session.warnings``). Unreadable folders and
    ``*.jsonl`` entries that are not regular files (FIFOs, devices, broken links, symlink loops) are
    left out with a ``SkippedFileWarning``.
    """
    from functools import partial

    from tqdm.auto import tqdm

    paths = _resolve_paths(paths_or_root)
    if workers is None:
        spare_cores = (os.cpu_count() or 1) >= PARALLEL_LOAD_MIN_CPUS
        use_workers = _default_workers() if spare_cores and _worth_parallel(paths) else 1
    else:
        use_workers = max(1, workers)

    results: list[tuple[str, Any, tuple[str, str] | None]] = []
    bar = tqdm(total=len(paths), desc="loading sessions", unit="file", disable=not progress)
    try:
        with collector_paused():
            if use_workers > 1 and len(paths) > 1:
                # Small chunks keep the bar moving and balance uneven file sizes.
                chunks = _chunks(paths, max(use_workers * 8, 1))
                with ProcessPoolExecutor(max_workers=use_workers) as pool:
                    for part in pool.map(partial(_load_chunk, seed=seed), chunks):
                        results.extend(part)
                        bar.update(len(part))
            else:
                for p in paths:
                    results.append(_load_one(p, seed))
                    bar.update(1)
    finally:
        bar.close()

    sessions = [s for _, s, err in results if err is None]
    failed = [(path, err[0], err[1]) for path, _, err in results if err is not None]
    errors = frame(
        {
            "path": pd.Series(str_array([f[0] for f in failed])),
            "error_type": pd.Series(str_array([f[1] for f in failed])),
            "message": pd.Series(str_array([f[2] for f in failed])),
        }
    )
    return Corpus(sessions, errors)
