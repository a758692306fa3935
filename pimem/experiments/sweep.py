"""Sweeps: replay every session under every setting of a grid, in parallel, cached and resumable.

One *run* is one session replayed under one setting. Its key (``run_hash``) is a hash of the
session's content, the setting and the summarizer's identity, so a finished run is recognised
wherever the session file lives. With ``results_path`` each finished run is appended to a JSONL
file (one line, flushed and synced) as soon as this process has it: at once in this process, when
its chunk ends in a worker (see below); a sweep that dies is started again with the same
arguments and skips the runs already there. Runs that ended in an error are written too (with
the ``error`` column) and tried again on the next start. A ``results_path`` ending in
``.parquet`` names the final table instead: the resumable log is then the JSONL file beside it
(``<name>.parquet.jsonl``), and the Parquet file is written (atomically) when the sweep ends.
A killed worker process breaks the pool: the sweep raises, and started again it redoes only
the runs missing from the log.

Summaries go through a :class:`~pimem.summarizers.cached.CachedSummarizer` on a shared SQLite
file when ``cache`` is given, so identical requests (same prompt, same settings) are answered
once across runs, processes and restarts. The ``summarizer_calls`` column counts the requests
that reached the underlying summarizer (cache misses); ``summary_calls`` counts all requests.

Repeated draws: a ``"sample"`` axis (``{"sample": range(n)}``) replays each setting ``n`` times
with the summary requests numbered as draws 0…n−1 (``SummaryRequest.sample``), so a model at
temperature > 0 behind the cache gives ``n`` distinct cached answers per request.

Strategies and summarizers are grid axes too: ``{"strategy": ["pi-0.87.1", "masking:keep_turns=5",
"hybrid"], "summarizer": ["extractive", "fact-dump"], ...}`` (names or spec strings of
:func:`pimem.replays.strategies.get_strategy` and :func:`pimem.summarizers.get_summarizer`, or objects).
A ``summarizer`` axis replaces the sweep's ``summarizer`` argument for its runs.

Every run row carries the replay's :meth:`~pimem.replays.engine.ReplayResult.summary`, its drift
measures (needed-later recall of its summaries, what masking removed; see
:mod:`pimem.experiments.run_measures`) and its cache-aware cost (:mod:`pimem.replays.cost`; ``prices`` overrides
the price table, ``cost_model`` the priced model). ``measures="cost"`` leaves the drift measures out,
``measures=False`` both.

Parallelism: ``concurrent.futures.ProcessPoolExecutor`` (``workers`` processes; 1 runs in this
process), or a Dask cluster when ``client`` is a ``dask.distributed.Client``. Runs go out in chunks of
one session's settings (:func:`chunk_runs`): the runs of a session share its loaded entries, its walked
recording and what the measures memoise of its messages, so a chunk builds them once in one process.
A process that moves on to another session's runs forgets what the last one left in the memos
(:func:`pimem.base.memo.forget_memos`): it is rarely met again, and a heap full of it slows every later
run. The cyclic garbage collector is paused while a process runs its chunks
(:func:`pimem.base.collector.collector_paused`): reference counting frees what a run drops, and the
collector would otherwise read every object the memos hold again and again; the cycles a session's
runs leave are collected when the process moves on.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import os
import threading
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence

import orjson
import pandas as pd

from pimem.base.collector import collector_paused
from pimem.base.files import atomic_open, open_regular
from pimem.base.js import js_stringify
from pimem.base.memo import forget_memos
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.llm import Summarizer
from pimem.errors import ConfigurationError, SessionFormatError, SkippedFileWarning
from pimem.base.tables import Column, Table
from pimem.experiments.run_measures import RUN_MEASURES, run_measures
from pimem.replays.cost import COST, Price, as_price
from pimem.replays.engine import replay
from pimem.replays.recording import shared_recordings
from pimem.replays.result import SUMMARY
from pimem.replays.strategies.base import get_strategy
from pimem.sessions.load import SessionLike, as_session, load_session
from pimem.summarizers.registry import SUMMARIZER_NAMES, default_summarizer, get_summarizer
from pimem.summarizers.cached import CachedSummarizer

__all__ = ["sweep", "expand_grid", "run_hash", "log_path_for", "chunk_runs", "SETTING_KEYS", "SWEEP"]

# setting keys understood per run; anything else is an error naming the key
SETTING_KEYS = (
    "reserve_tokens", "keep_recent_tokens", "enabled", "context_window", "token_source", "triggers",
    "seed", "leaf_id", "sample", "strategy", "summarizer",
)
_COMPACTION_KEYS = ("enabled", "reserve_tokens", "keep_recent_tokens")

_SETTING_DOCS = {
    "reserve_tokens": "the setting's ``reserveTokens``", "keep_recent_tokens": "its ``keepRecentTokens``",
    "enabled": "compaction enabled", "context_window": "the context window replayed with",
    "token_source": "how request tokens were counted", "triggers": "what made the replay compact",
    "seed": "the seed of the replayed session's ids", "leaf_id": "the leaf replayed (None: the current one)",
    "sample": "the draw of a ``sample`` axis", "strategy": "the compaction strategy's spec",
    "summarizer": "the summarizer of a ``summarizer`` axis",
}

# A run's row; the DataFrame has a column when some run has it (``calibration_*`` with a calibrated
# token source, the measures and cost with ``measures``, ``traceback`` after an error).
SWEEP = Table("sweep", [
    Column("run_hash", description="the run's key: the session's content, the setting and the summarizer"),
    Column("session", description="the session's label (its path)"),
    Column("session_hash", description="the session's content hash"),
    Column("setting_index", description="the setting's position in the grid"),
    Column("session_index", description="the session's position"),
    *(Column(k, description=_SETTING_DOCS[k]) for k in SETTING_KEYS),
    *(c for c in SUMMARY.columns if c.name not in SETTING_KEYS),  # the summary's value, at the setting's place
    *RUN_MEASURES.columns,
    *COST.columns,
    Column("error", description="why the run failed (None: it did not)"),
    Column("traceback", description="where it failed"),
    Column("summarizer_calls", description="summary requests that reached the summarizer (cache misses)"),
    Column("elapsed_s", description="seconds the run took"),
    Column("worker_pid", description="the process that ran it"),
    Column("resumed", description="the row was read from the results log of an earlier start"),
], "One row per run (a session under a setting), in session then setting order; made as pandas makes it from "
   "the runs' rows, with a column where some run has it.")


def expand_grid(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A dict of lists → its cartesian product (in key order); a list of dicts → itself."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        values = []
        for k in keys:
            v = grid[k]
            values.append(list(v) if isinstance(v, (list, tuple, range)) else [v])
        settings: list[dict[str, Any]] = [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    else:
        settings = [dict(s) for s in grid]
    for s in settings:
        unknown = [k for k in s if k not in SETTING_KEYS]
        if unknown:
            raise ConfigurationError(f"unknown sweep setting {unknown[0]!r}; known: {', '.join(SETTING_KEYS)}")
        if s.get("strategy") is not None:
            get_strategy(s["strategy"])  # an unknown name or parameter fails before any run
        if isinstance(s.get("summarizer"), str):
            if s["summarizer"] not in SUMMARIZER_NAMES:
                raise ConfigurationError(f"unknown summarizer {s['summarizer']!r} in the grid; "
                                         f"known: {', '.join(SUMMARIZER_NAMES)}")
    return settings


def _summarizer_identity(summarizer: Any) -> Any:
    if summarizer is None:
        return {"class": "ExtractiveSummarizer", "default": True}
    ident = getattr(summarizer, "identity", None)
    if callable(ident):
        return ident()
    return {"class": type(summarizer).__name__, "repr": repr(summarizer)}


def _session_text(session: Any) -> bytes:
    return b"\n".join(_entry_bytes(e) for e in [session.header, *session.entries])


def _entry_bytes(entry: Any) -> bytes:
    """An entry's JSON bytes for hashing: orjson, or JSON.stringify where orjson refuses (lone
    surrogates, nesting deeper than 254 levels)."""
    try:
        return orjson.dumps(entry)
    except TypeError:  # orjson.JSONEncodeError

        return js_stringify(entry).encode("utf-8")


def _session_key(ref: Any) -> tuple[str, str, int]:
    """(label, content hash, size in bytes) of a session given as a path or a ``Session``."""
    if isinstance(ref, (str, os.PathLike)):
        digest = hashlib.sha256()
        size = 0
        with open_regular(ref, buffering=0) as f:  # never a FIFO or a device; read in blocks
            while block := f.read(1 << 20):
                digest.update(block)
                size += len(block)
        return str(ref), digest.hexdigest(), size
    data = _session_text(ref)
    label = str(getattr(ref, "path", None) or (ref.header or {}).get("id"))
    return label, hashlib.sha256(data).hexdigest(), len(data)


def _hashable(setting: Mapping[str, Any]) -> dict[str, Any]:
    """The setting with strategy and summarizer objects replaced by their identities."""
    out = dict(setting)
    if "strategy" in out and not isinstance(out["strategy"], str) and out["strategy"] is not None:
        out["strategy"] = get_strategy(out["strategy"]).identity()
    if "summarizer" in out and not isinstance(out["summarizer"], str) and out["summarizer"] is not None:
        out["summarizer"] = _summarizer_identity(out["summarizer"])
    return out


def _label(value: Any) -> Any:
    """A strategy or summarizer axis value as a table cell."""
    if value is None or isinstance(value, str):
        return value
    spec = getattr(value, "spec", None)
    if callable(spec):
        return spec()
    ident = _summarizer_identity(value)
    return ident.get("class") if isinstance(ident, dict) else str(ident)


def run_hash(session_hash: str, setting: Mapping[str, Any], summarizer_identity: Any) -> str:
    """The key of one run: content of the session, the setting, the summarizer."""
    payload = orjson.dumps({"session": session_hash, "setting": _hashable(setting), "summarizer": summarizer_identity},
                           option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.sha256(payload).hexdigest()[:24]


class _CallCounter:
    """Counts the requests that reach the wrapped summarizer."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.model = getattr(inner, "model", "")

    def complete(self, request: Any) -> Any:
        self.calls += 1
        return self.inner.complete(request)

    def identity(self) -> Any:
        return _summarizer_identity(self.inner)

    def __repr__(self) -> str:
        return repr(self.inner)


_LOADED: dict[str, Any] = {}


def _load_ref(ref: Any, key: str) -> Any:
    """Load a session once per process (runs of one session share it)."""
    if not isinstance(ref, (str, os.PathLike)):
        return ref
    hit = _LOADED.get(key)
    if hit is None:
        if len(_LOADED) > 4:
            _LOADED.clear()
        hit = load_session(ref)
        _LOADED[key] = hit
    return hit


# One cache front per (process, cache file, summarizer identity): opening the SQLite file runs
# an integrity check over the whole file, which must not be paid once per run.
_CACHED: dict[tuple[int, str, bytes], tuple[Any, tuple[int, int] | None]] = {}


def _make_summarizer(summarizer: Any, cache: Any) -> tuple[Any, _CallCounter]:
    """The summarizer a run uses (behind the cache when given) and its miss counter (reset)."""
    if summarizer is None:
        summarizer = default_summarizer()
    if cache is None:
        counter = _CallCounter(summarizer)
        return counter, counter

    if isinstance(cache, CachedSummarizer):  # pragma: no cover - a ready cache object is used as is
        return cache, _CallCounter(summarizer)
    counter = _CallCounter(summarizer)
    ident = orjson.dumps(_summarizer_identity(summarizer), option=orjson.OPT_SORT_KEYS, default=str)
    key = (os.getpid(), os.path.abspath(str(cache)), ident)
    hit = _CACHED.get(key)
    if hit is not None and hit[1] == _file_id(cache):
        return _CacheFront(hit[0], counter), counter
    cached = CachedSummarizer(counter, cache)  # the identity is the summarizer's (see _CallCounter)
    cached.connect()  # creates the file, so that its identity can be checked next time
    if len(_CACHED) > 8:
        _CACHED.clear()
    _CACHED[key] = (cached, _file_id(cache))
    return _CacheFront(cached, counter), counter


class _CacheFront:
    """One run's use of a process-wide cache: its misses go to the run's own counter.

    Runs of one process may overlap (threads of a Dask worker), so the shared cache object is
    never re-pointed at a run's summarizer.
    """

    def __init__(self, cached: Any, counter: _CallCounter) -> None:
        self.cached = cached
        self.counter = counter
        self.model = counter.model

    def complete(self, request: Any) -> Any:
        return self.cached.complete(request, self.counter)

    def identity(self) -> Any:
        return self.counter.identity()

    def __repr__(self) -> str:
        return repr(self.cached)


def _file_id(path: Any) -> tuple[int, int] | None:
    """(device, inode) of a file, None when missing: a cache file deleted or replaced is reopened."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_current_session: str | None = None  # the session whose runs this process ran last
_running = 0  # chunks under way in this process
_SESSION_LOCK = threading.Lock()


@contextmanager
def _session_runs(session_hash: str) -> Iterator[None]:
    """Runs of one session in this process, with the cyclic collector paused. Entering another
    session's runs first forgets what the last session's left in the memos (:mod:`pimem.base.memo`)
    and the sessions loaded, and collects the cycles they left, unless runs are under way here
    already (threads of a Dask worker). Pool workers and a sweep in this process keep the collector
    paused between chunks too: that collection is the one that frees cycles."""
    global _current_session, _running
    with _SESSION_LOCK:
        if session_hash != _current_session and not _running:
            forget_memos()
            _LOADED.clear()
            gc.collect()  # cycles the last session's runs left: few objects are alive now
            _current_session = session_hash
        _running += 1
    try:
        with collector_paused():
            yield
    finally:
        with _SESSION_LOCK:
            _running -= 1


def _run_chunk(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replay a chunk of runs of one session (see :func:`_session_runs`); never raises (errors go in
    each run's ``error`` column)."""
    with _session_runs(tasks[0]["session_hash"]):
        return [_run(task) for task in tasks]


def chunk_runs(tasks: Sequence[dict[str, Any]], workers: int) -> list[list[dict[str, Any]]]:
    """The runs in chunks for ``workers`` parallel workers: each chunk holds runs of one session (in
    setting order), at most ``ceil(len(tasks) / (4 * workers))`` of them, so that the workers share
    out three to four chunks each or more; the chunks of the biggest sessions come first, so parallel
    workers do not wait on one long tail."""
    most = max(1, -(-len(tasks) // (4 * max(1, workers))))
    by_session: dict[int, list[dict[str, Any]]] = {}
    for t in tasks:
        by_session.setdefault(t["session_index"], []).append(t)
    chunks: list[list[dict[str, Any]]] = []
    for runs in by_session.values():
        runs.sort(key=lambda t: t["setting_index"])
        n = -(-len(runs) // most)  # chunks of this session, as even as they can be
        size = -(-len(runs) // n)
        chunks.extend(runs[i:i + size] for i in range(0, len(runs), size))
    chunks.sort(key=lambda c: (-c[0]["size"], c[0]["session_index"], c[0]["setting_index"]))
    return chunks


def _run(task: dict[str, Any]) -> dict[str, Any]:
    setting = task["setting"]
    row: dict[str, Any] = {"run_hash": task["run_hash"], "session": task["label"],
                           "session_hash": task["session_hash"], "setting_index": task["setting_index"],
                           "session_index": task["session_index"]}
    row.update({k: setting.get(k) for k in SETTING_KEYS})
    row["strategy"] = _label(setting.get("strategy"))
    row["summarizer"] = _label(setting.get("summarizer"))
    start = time.perf_counter()
    counter = None
    try:
        session = _load_ref(task["ref"], task["session_hash"])
        base = task["summarizer"]
        if setting.get("summarizer") is not None:
            base = setting["summarizer"]
            if isinstance(base, str):
                base = get_summarizer(base, session)
        summarizer, counter = _make_summarizer(base, task["cache"])
        defaults = CompactionSettings()
        settings = CompactionSettings(**{k: setting.get(k, getattr(defaults, k)) for k in _COMPACTION_KEYS})
        with shared_recordings():  # the runs of one session walk its recording once
            result = replay(
                session, settings, summarizer=summarizer, context_window=setting.get("context_window"),
                token_source=setting.get("token_source", "calibrated"),
                triggers=setting.get("triggers", "threshold"),
                seed=setting.get("seed", 0), leaf_id=setting.get("leaf_id"), sample=setting.get("sample") or 0,
                strategy=setting.get("strategy"),
            )
            summary: dict[str, Any] = dict(result.summary())
            summary.pop("token_source", None)
            summary.pop("triggers", None)
            row.update(summary)
            if task.get("measures"):
                row.update(run_measures(result, **task["measures"]))
        row["error"] = None
    except Exception as exc:  # noqa: BLE001 - one failing run must not stop the sweep
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc(limit=8)
    row["summarizer_calls"] = counter.calls if counter is not None else 0
    row["elapsed_s"] = time.perf_counter() - start
    row["worker_pid"] = os.getpid()
    return row


def _read_results(path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line cut short by a crash: that run is redone
            if isinstance(row, dict) and row.get("run_hash") and not row.get("error"):
                done[row["run_hash"]] = row
    return done


def _append_result(path: Path, row: dict[str, Any]) -> None:
    """Append one line, whole or not at all: a write cut short (a full disk) is undone before the
    error (which names the file) is raised, so the log never keeps a torn line."""
    data = orjson.dumps(row, default=str, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise type(exc)(exc.errno, f"cannot append to the sweep log {path}: {exc.strerror or exc}",
                            str(path)) from None
    finally:
        os.close(fd)


def log_path_for(results_path: str | os.PathLike) -> Path:
    """The JSONL log that makes a sweep with this ``results_path`` resumable."""
    path = Path(results_path)
    if path.suffix.lower() == ".parquet":
        return path.with_name(path.name + ".jsonl")
    return path


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write the table atomically (temp file in the same folder, then rename)."""
    table = df.copy()
    for column in table.columns:  # free-form values (lists, dicts) travel as JSON text
        if table[column].dtype == object and table[column].map(lambda v: isinstance(v, (list, dict))).any():
            table[column] = table[column].map(
                lambda v: orjson.dumps(v, default=str).decode() if isinstance(v, (list, dict)) else v)
    with atomic_open(path, "wb") as f:
        table.to_parquet(f, index=False)


def _start_worker(parent: int) -> None:
    """A pool worker's start: the cyclic collector paused for its life (see :func:`_session_runs`) and
    what the worker was started with (modules) left out of its collections, and an end when the
    sweep's process is gone."""
    gc.disable()
    gc.freeze()
    _watch_parent(parent)


def _watch_parent(parent: int, every_s: float = 0.5) -> None:
    """In a pool worker: end this process when the sweep's process is gone (killed with SIGKILL, a
    pool never tells its workers), instead of waiting for work forever."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="pimem-watch-parent", daemon=True).start()


def _is_dask_client(client: Any) -> bool:
    return client is not None and type(client).__module__.startswith("distributed")


def sweep(
    sessions: Iterable[SessionLike],
    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
    *,
    summarizer: Summarizer | str | None = None,
    workers: int | None = None,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    results_path: str | os.PathLike | None = None,
    client: Any = None,
    measures: bool | Literal["cost"] = True,
    prices: Mapping[str, Price | Mapping[str, float]] | None = None,
    cost_model: str | None = None,
    cache_ttl_s: float | None = 300.0,
) -> pd.DataFrame:
    """Replay every session under every setting of ``grid``; one row per run (columns: :data:`SWEEP`,
    ``pimem.columns("sweep")``).

    Args:
        sessions: paths, ``Session`` objects or replay results (their replayed session;
            :func:`pimem.as_session`). A path that cannot be read (permissions, a FIFO, a device) is left
            out with a ``SkippedFileWarning``; a file that reads but does not load gives its runs an
            ``error``.
        grid: a dict of lists (cartesian product) or a list of setting dicts with keys from
            :data:`SETTING_KEYS`.
        summarizer: the summarizer of every run that names none (default the offline one).
        workers: processes to run in (default ``os.cpu_count()``; 1 runs in this process).
        cache: a SQLite file shared by all runs for summaries.
        progress: show a progress bar.
        results_path: a JSONL file that makes the sweep resumable, or a ``.parquet`` file for the final
            table (its log beside it; see module docs).
        client: a ``dask.distributed.Client`` to run on.
        measures: add drift and cost columns (``"cost"``: the cost columns only).
        prices: model prices for the cost columns (as in :func:`pimem.replays.cost.replay_cost`).
        cost_model: the model whose price the cost columns use.
        cache_ttl_s: how long a provider keeps a prompt cache, for the cost columns.
    """
    settings = expand_grid(grid)
    # paths stay paths (each is loaded where its runs go); a session or a result is resolved here
    refs = [ref if isinstance(ref, (str, os.PathLike)) else as_session(ref) for ref in sessions]
    ident = _summarizer_identity(summarizer)
    measure_options: dict[str, Any] | None = None
    if measures:
        measure_options = {"prices": {k: as_price(v) for k, v in (prices or {}).items()} or None,
                           "cost_model": cost_model, "cache_ttl_s": cache_ttl_s, "drift": measures != "cost"}
        if prices or cost_model or cache_ttl_s != 300.0 or measures == "cost":
            ident = {"summarizer": ident, "measures": measure_options}
    cache_path = str(cache) if isinstance(cache, (str, os.PathLike)) else cache
    tasks: list[dict[str, Any]] = []
    for si, ref in enumerate(refs):
        try:
            label, shash, size = _session_key(ref)
        except (OSError, SessionFormatError) as exc:  # unreadable, a FIFO, a device: the rest goes on
            why = str(exc) if isinstance(exc, SessionFormatError) else f"{ref}: cannot read: {exc.strerror or exc}"
            warnings.warn(f"{why}; left out of the sweep", SkippedFileWarning, stacklevel=2)
            continue
        if isinstance(ref, os.PathLike):
            ref = str(ref)
        for ki, setting in enumerate(settings):
            tasks.append({"ref": ref, "label": label, "session_hash": shash, "session_index": si,
                          "setting_index": ki, "setting": setting, "summarizer": summarizer,
                          "cache": cache_path, "run_hash": run_hash(shash, setting, ident), "size": size,
                          "measures": measure_options})
    results_file = log_path_for(results_path) if results_path is not None else None
    done = _read_results(results_file) if results_file is not None else {}
    rows: list[dict[str, Any]] = []
    todo = []
    for t in tasks:
        prev = done.get(t["run_hash"])
        if prev is not None and measures and ("cost_total" not in prev or (
                measures != "cost" and "needed_recall" not in prev)):
            prev = None  # logged without measures: run again to add them
        if prev is not None:
            prev = dict(prev)
            prev.update(session_index=t["session_index"], setting_index=t["setting_index"], resumed=True)
            rows.append(prev)
        else:
            todo.append(t)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tasks), initial=len(rows), desc="sweep")

    def finish(row: dict[str, Any]) -> None:
        row["resumed"] = False
        if results_file is not None:
            _append_result(results_file, row)
        rows.append(row)
        if bar is not None:
            bar.update(1)

    try:
        if _is_dask_client(client):
            from distributed import as_completed as dask_as_completed

            chunks = chunk_runs(todo, max(1, sum(client.nthreads().values())))
            futures = [client.submit(_run_chunk, c, pure=False) for c in chunks]
            for fut in dask_as_completed(futures):
                for row in fut.result():
                    finish(row)
        else:
            n = workers if workers is not None else (os.cpu_count() or 1)
            if n <= 1 or len(todo) <= 1:
                with collector_paused():  # as in a worker; each run is logged as it ends
                    for chunk in chunk_runs(todo, 1):
                        with _session_runs(chunk[0]["session_hash"]):
                            for t in chunk:
                                finish(_run(t))
            else:
                with ProcessPoolExecutor(max_workers=n, initializer=_start_worker, initargs=(os.getpid(),)) as pool:
                    futures = [pool.submit(_run_chunk, c) for c in chunk_runs(todo, n)]
                    for fut in as_completed(futures):
                        for row in fut.result():
                            finish(row)
    finally:
        if bar is not None:
            bar.close()
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values(["session_index", "setting_index"], kind="stable").reset_index(drop=True)
    if results_path is not None and Path(results_path).suffix.lower() == ".parquet":
        _write_parquet(df, Path(results_path))
    return df
