"""An on-disk cache in front of any summarizer: re-runs are free, killed sweeps resume.

Store: one SQLite file in WAL mode. Why SQLite/WAL: a single file that many processes can read while
one writes (WAL readers never block the writer and vice versa); every insert is an ACID transaction,
so a process killed mid-write leaves either the whole answer or nothing (the WAL is replayed or
discarded on the next open); ``busy_timeout`` plus ``BEGIN IMMEDIATE`` serialize concurrent writers
without "database is locked" errors; and it ships with Python. (A directory of JSON files would need
its own atomic-rename and index logic; a key-value server would add a daemon.)

Key: sha256 of the canonical JSON (sorted keys, no spaces) of ``request.cache_key_fields()`` — kind,
system prompt, prompt, max tokens, reasoning, cache retention, model, and the draw index ``sample``
when it is not 0; never the routing id — together with the inner summarizer's identity
(``inner.identity()`` when it has one, else class + ``model`` + ``base_url``; never the API key).

Repeated draws: a model at temperature > 0 answers the same request differently each time, and a
cache that kept one answer per request would make every draw the same. ``request.sample`` numbers
the draws (``replay(..., sample=k)``, or a ``"sample"`` axis in a sweep grid: ``range(n)`` gives
``n`` draws per request), and each index has its own cached answer. Draw 0 has no ``sample`` field
in its key, so caches written before draws were numbered keep answering as draw 0.

Row: the response text (a BLOB of its ``surrogatepass`` UTF-8 bytes when it holds lone UTF-16
surrogates, which SQLite's UTF-8 text cannot; every text column alike), Pi usage (JSON), stop reason, error message, whether a tool was called,
latency, creation time and extra data, plus a sha256 digest of all of them. A row whose digest does
not match, or a file SQLite reports damaged (or not a database), raises :class:`CacheCorruptError`
(or, with ``rebuild=True``, the bad file is moved aside as ``*.corrupt-<time>`` / the bad row dropped
and the request asked again) — never a silent wrong answer. Contention is not corruption: a cache
locked by other processes is waited for (``busy_timeout_s``, retried with backoff), and one that
stays locked, or cannot be written (disk full, permissions), raises :class:`CacheUnavailableError`
and is never moved aside, whatever ``rebuild`` says.

Only successful responses (``stop_reason == "stop"``, no tool call, no error) are cached by default:
errors, length stops and tool calls are not, so a resumed sweep retries them. ``cache_failures=True``
caches everything.

The object is picklable: the connection is opened lazily per process (by pid), so a cache made in
the parent works in worker processes (fork, spawn or Dask).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pimem.base.tables import frame
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.errors import CacheCorruptError, CacheUnavailableError

__all__ = ["CachedSummarizer", "CacheCorruptError", "CacheUnavailableError", "default_cache_path", "summarizer_identity", "request_key"]

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS summaries (
    key TEXT PRIMARY KEY,
    summarizer TEXT NOT NULL,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    usage TEXT,
    stop_reason TEXT NOT NULL,
    error TEXT,
    called_tool INTEGER NOT NULL,
    latency_s REAL,
    created_at REAL NOT NULL,
    extra TEXT NOT NULL,
    digest TEXT NOT NULL
);
"""


def default_cache_path() -> Path:
    """``<user cache dir>/pimem/summaries.sqlite`` (``PIMEM_CACHE_DIR`` overrides the folder)."""
    folder = os.environ.get("PIMEM_CACHE_DIR")
    if not folder:
        import platformdirs

        folder = platformdirs.user_cache_dir("pimem")
    return Path(folder) / "summaries.sqlite"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def summarizer_identity(inner: Any) -> dict[str, Any]:
    """What identifies a summarizer's answers: ``inner.identity()`` or class + model + base_url."""
    ident = getattr(inner, "identity", None)
    if callable(ident):
        return dict(ident())
    return {
        "class": f"{type(inner).__module__}.{type(inner).__qualname__}",
        "model": getattr(inner, "model", None),
        "base_url": getattr(inner, "base_url", None),
    }


def request_key(request: SummaryRequest, identity: dict[str, Any]) -> str:
    """The cache key: sha256 of canonical JSON of the request's answer-determining fields + identity."""
    payload = _canonical({"request": request.cache_key_fields(), "summarizer": identity})
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def _to_db(text: str | None) -> str | bytes | None:
    """A string as SQLite can store it: as is, or (holding lone UTF-16 surrogates, which no UTF-8
    text can carry) as a BLOB of its ``surrogatepass`` bytes, read back exactly by :func:`_from_db`."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _from_db(value: Any) -> Any:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


class _NotWal(Exception):
    """The journal mode could not be switched yet (another connection holds the file): tried again."""


# the files SQLite keeps at the cache's name: the database, its journal, write-ahead log and shared memory
_SQLITE_FILES = ("", "-journal", "-wal", "-shm")

# SQLite's primary result codes (the low byte of extended codes)
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_CORRUPT, _SQLITE_NOTADB = 5, 6, 11, 26


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the file: wait and try again."""
    code = _code(exc)
    if code is not None:
        return code in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """SQLite says the file is damaged or not a database at all."""
    code = _code(exc)
    if code is not None:
        return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _digest(key: str, text: str, usage: str | None, stop_reason: str, error: str | None, called_tool: int,
            extra: str) -> str:
    h = hashlib.sha256()
    for part in (key, text, usage or "", stop_reason, error or "", str(called_tool), extra):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


class CachedSummarizer:
    """Answers from the on-disk cache when it can, from ``inner`` otherwise (see module docstring).

    Args:
        inner: the summarizer asked on a miss (its identity is part of every key).
        path: the SQLite file (default: :func:`default_cache_path`).
        cache_failures: cache every answer, not only successful ones.
        rebuild: move a corrupt file aside (or drop a corrupt row) and ask again, instead of raising
            :class:`CacheCorruptError`.
        busy_timeout_s: seconds to wait while other processes hold the file locked.
    """

    def __init__(self, inner: Any, path: str | os.PathLike[str] | None = None, *, cache_failures: bool = False,
                 rebuild: bool = False, busy_timeout_s: float = 60.0) -> None:
        self.inner = inner
        self.path = Path(path) if path is not None else default_cache_path()
        self.cache_failures = cache_failures
        self.rebuild = rebuild
        self.busy_timeout_s = busy_timeout_s
        self.identity = summarizer_identity(inner)
        self._identity_json = _canonical(self.identity)
        self.hits = 0
        self.misses = 0
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"CachedSummarizer({self.inner!r}, path={str(self.path)!r})"

    @property
    def model(self) -> str | None:
        return getattr(self.inner, "model", None)

    # -- pickling: connections never travel --------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        state["_pid"] = None
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # -- connection -------------------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """The open connection of this process (opened, checked and created on first use).

        Waits up to ``busy_timeout_s`` while other processes hold the file locked (a fresh cache
        opened by many workers at once), then raises :class:`CacheUnavailableError`.
        """
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                return self._conn
            # A connection inherited through fork must not be used (or closed) in the child.
            self._conn = None
            try:
                conn = self._retrying(self._open, "open the cache")
            except CacheCorruptError:
                if not self.rebuild:
                    raise
                self._move_aside()
                conn = self._retrying(self._open, "open the cache")
            self._conn, self._pid = conn, os.getpid()
            return conn

    def _retrying(self, action: Any, what: str) -> Any:
        """``action()``, tried again with backoff while the file is busy, for ``busy_timeout_s``."""
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                return action()
            except _NotWal as exc:
                if time.monotonic() >= deadline:
                    raise CacheUnavailableError(str(exc)) from None
            except sqlite3.Error as exc:
                error = self._classify(exc, what)
                if not (isinstance(error, CacheUnavailableError) and _is_busy(exc)) or time.monotonic() >= deadline:
                    raise error from exc
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.25)

    def _classify(self, exc: sqlite3.Error, what: str) -> CacheCorruptError | CacheUnavailableError:
        """Damage (corrupt file, not a database) or a cache that cannot be used now (busy, full, ...)."""
        if _is_corrupt(exc):
            return CacheCorruptError(
                f"{self.path}: not a readable pimem cache ({exc}); delete it or open it with rebuild=True")
        if _is_busy(exc):
            return CacheUnavailableError(
                f"{self.path}: could not {what}: still locked by another process after {self.busy_timeout_s:g} s "
                f"({exc}); the cache is not damaged")
        return CacheUnavailableError(f"{self.path}: could not {what} ({exc}); the cache is not damaged")

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._refuse_links()
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise _NotWal(f"{self.path}: could not switch the cache to WAL mode (got {mode}: still locked by "
                              "another process, or a file system without shared memory)")
            conn.execute("PRAGMA synchronous = NORMAL")
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise CacheCorruptError(f"{self.path}: SQLite integrity check failed: {check}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.strip().split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta(name, value) VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            version = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if version is None or version[0] != str(SCHEMA_VERSION):
                raise CacheCorruptError(f"{self.path}: unknown cache schema version {version and version[0]!r}")
            return conn
        except BaseException:
            conn.close()
            raise

    def _refuse_links(self) -> None:
        """A symbolic link at the cache's name, or at the name of its journal, write-ahead log or
        shared memory (SQLite would open, write or create the file it points to, elsewhere) is a
        :class:`CacheUnavailableError`, never followed."""
        for suffix in _SQLITE_FILES:
            name = self.path.with_name(self.path.name + suffix)
            if os.path.islink(name):
                raise CacheUnavailableError(
                    f"{name}: a symbolic link at the summary cache's name; the cache is never opened through one "
                    "(remove it, or give the cache another path); the cache is not damaged")

    def _move_aside(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.exists():
                src.replace(Path(f"{self.path}.corrupt-{stamp}-{os.getpid()}{suffix}"))

    def close(self) -> None:
        """Close this process's connection (it reopens on the next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
            self._pid = None

    # -- lookup and store ---------------------------------------------------------------------------

    def key(self, request: SummaryRequest) -> str:
        """The cache key of ``request`` for this summarizer."""
        return request_key(request, self.identity)

    def lookup(self, request: SummaryRequest) -> SummaryResponse | None:
        """The cached response for ``request``, or None (does not count a hit or miss)."""
        key = self.key(request)
        conn = self.connect()

        def read() -> Any:
            with self._lock:  # one connection per process, shared by threads
                return conn.execute(
                    "SELECT text, usage, stop_reason, error, called_tool, latency_s, created_at, extra, digest "
                    "FROM summaries WHERE key = ?",
                    (key,),
                ).fetchone()

        row = self._retrying(read, f"read cached answer {key[:12]}")
        if row is None:
            return None
        text, usage, stop_reason, error, called_tool, latency, created, extra, digest = map(_from_db, row)
        if not isinstance(text, str) or _digest(key, text, usage, stop_reason, error, called_tool, extra) != digest:
            if self.rebuild:
                with self._lock:
                    conn.execute("DELETE FROM summaries WHERE key = ?", (key,))
                return None
            raise CacheCorruptError(
                f"{self.path}: cached answer {key[:12]} does not match its checksum; "
                "delete the cache or open it with rebuild=True"
            )
        extra_d = json.loads(extra)
        extra_d.update({"cached": True, "cache_key": key, "cached_at": created})
        return SummaryResponse(text=text, usage=json.loads(usage) if usage else None, stop_reason=stop_reason,
                               error_message=error, called_tool=bool(called_tool), latency_s=latency, extra=extra_d)

    def store(self, request: SummaryRequest, response: SummaryResponse) -> bool:
        """Insert ``response`` for ``request`` atomically; False when an answer was already there."""
        key = self.key(request)
        usage = _canonical(response.usage) if response.usage is not None else None
        extra = _canonical({k: v for k, v in response.extra.items() if k not in ("cached", "cache_key", "cached_at")})
        called = int(bool(response.called_tool))
        digest = _digest(key, response.text, usage, response.stop_reason, response.error_message, called, extra)
        conn = self.connect()

        def write() -> Any:
            with self._lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO summaries(key, summarizer, kind, model, request, text, usage,"
                        " stop_reason, error, called_tool, latency_s, created_at, extra, digest)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (key, _to_db(self._identity_json), request.kind,
                         _to_db(str(self.identity.get("model") or request.model or "")),
                         _to_db(_canonical(request.cache_key_fields())), _to_db(response.text), _to_db(usage),
                         _to_db(response.stop_reason), _to_db(response.error_message), called, response.latency_s,
                         time.time(), _to_db(extra), digest),
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                return cur

        return self._retrying(write, f"store answer {key[:12]}").rowcount == 1

    @staticmethod
    def _succeeded(response: SummaryResponse) -> bool:
        return response.stop_reason == "stop" and not response.called_tool and not response.error_message

    def complete(self, request: SummaryRequest, inner: Any = None) -> SummaryResponse:
        """A cached answer, or the inner summarizer's (cached when it succeeded).

        ``inner``: answer a miss with this summarizer instead of ``self.inner`` (it must have
        the same identity); lets concurrent users share one cache object.
        """
        cached = self.lookup(request)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        response = (self.inner if inner is None else inner).complete(request)
        if self.cache_failures or self._succeeded(response):
            self.store(request, response)
        response.extra = {**response.extra, "cached": False, "cache_key": self.key(request)}
        return response

    # -- inspection -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.connect().execute("SELECT COUNT(*) FROM summaries").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        """Hit/miss counters of this object and what the file holds."""
        conn = self.connect()
        by_reason = dict(conn.execute("SELECT stop_reason, COUNT(*) FROM summaries GROUP BY stop_reason").fetchall())
        mine = conn.execute("SELECT COUNT(*) FROM summaries WHERE summarizer = ?",
                            (_to_db(self._identity_json),)).fetchone()[0]
        lookups = self.hits + self.misses
        size = sum(Path(f"{self.path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{self.path}{s}").exists())
        return {
            "path": str(self.path),
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": self.hits / lookups if lookups else None,
            "entries": sum(by_reason.values()),
            "entries_for_summarizer": mine,
            "by_stop_reason": by_reason,
            "size_bytes": size,
        }

    def export(self, *, all_summarizers: bool = False):  # -> pandas.DataFrame
        """All cached answers of this summarizer (or of every summarizer) as a DataFrame."""
        import pandas as pd


        conn = self.connect()
        sql = ("SELECT key, summarizer, kind, model, request, text, usage, stop_reason, error, called_tool, "
               "latency_s, created_at, extra FROM summaries")
        params: tuple[Any, ...] = ()
        if not all_summarizers:
            sql += " WHERE summarizer = ?"
            params = (_to_db(self._identity_json),)
        rows = [tuple(map(_from_db, r)) for r in conn.execute(sql + " ORDER BY created_at, key", params).fetchall()]
        columns = ["key", "summarizer", "kind", "model", "request", "text", "usage", "stop_reason", "error",
                   "called_tool", "latency_s", "created_at", "extra"]
        df = frame(rows, columns=columns)
        df["usage"] = [json.loads(u) if u else None for u in df["usage"]]
        df["request"] = [json.loads(r) for r in df["request"]]
        df["extra"] = [json.loads(e) for e in df["extra"]]
        df["summarizer"] = [json.loads(s) for s in df["summarizer"]]
        df["called_tool"] = df["called_tool"].astype(bool)
        df["input_tokens"] = [u.get("input") if u else None for u in df["usage"]]
        df["output_tokens"] = [u.get("output") if u else None for u in df["usage"]]
        df["max_tokens"] = [r.get("max_tokens") for r in df["request"]]
        df["reasoning"] = [r.get("reasoning") for r in df["request"]]
        df["sample"] = [r.get("sample", 0) for r in df["request"]]
        df["created"] = pd.to_datetime(df["created_at"], unit="s", utc=True)
        return df


def response_as_dict(response: SummaryResponse) -> dict[str, Any]:
    """A plain dict of a response (for logs and frames)."""
    return asdict(response)
