"""``pimem model stop`` signals only the server it started; ``start`` fails when its port is taken.

The state file (``server.json``) is data anyone can edit: a pid of -1, 0 or 1, this process, a
process of the same name serving another port or other weights, or a pid reused by a later
process must never receive a signal.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from pimem.cli.main import main
from pimem.summarizers import local_server as localmodel

SLEEPER = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(1)"


@pytest.fixture
def signals(monkeypatch):
    """Every os.kill call, none delivered (as if the target did not exist)."""
    sent: list[tuple[int, int]] = []

    def kill(pid: int, sig: int) -> None:
        sent.append((pid, sig))
        if sig == 0:
            return  # "alive"
        raise ProcessLookupError

    monkeypatch.setattr(os, "kill", kill)
    return sent


def _fake_server(port: int, weights: str) -> subprocess.Popen:
    """A process whose command line reads like ``python -m pimem.summarizers.llama_server --port P --model W``."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, "-m", localmodel.SERVER_MODULE, "--model", weights,
                             "--port", str(port)], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"  # started: its command line is in /proc
    return proc


def _state(model_dir, **state) -> None:
    (model_dir / "server.json").write_text(json.dumps(state))


@pytest.mark.parametrize("pid", [-1, 0, 1, "self", "group"])
def test_stop_never_signals_pid_le_1_or_itself(model_dir, signals, pid):
    pid = {"self": os.getpid(), "group": os.getpgrp()}.get(pid, pid)
    _state(model_dir, pid=pid, port=8080, base_url="http://127.0.0.1:8080/v1", weights="w")
    assert localmodel.running_server() is None
    assert localmodel.stop() is False
    assert [s for s in signals if s[1] != 0] == []
    assert not (model_dir / "server.json").exists()  # the bad state is removed
    with pytest.raises(localmodel.ModelError, match="refusing"):
        localmodel._terminate(0)


def test_stop_leaves_another_server_of_the_same_name_alone(model_dir, tmp_path):
    weights = str(localmodel.weights_path())
    other = _fake_server(9, weights)  # another model server, on another port
    try:
        start = localmodel._proc_start_time(other.pid)
        base = dict(pid=other.pid, pid_start_time=start, base_url="http://127.0.0.1:8080/v1", weights=weights)
        for state in (dict(base, port=8080), dict(base, port=9, weights=str(tmp_path / "other.gguf")),
                      dict(base, port=9, pid_start_time=(start or 0) + 1), dict(base, port=9, pid_start_time=None)):
            _state(model_dir, **state)
            assert localmodel.running_server() is None
            assert localmodel.stop() is False
            assert other.poll() is None  # still running
        _state(model_dir, **dict(base, port=9))  # exactly what start() records: this one is ours
        assert localmodel.running_server()["pid"] == other.pid
        assert localmodel.stop() is True
        other.wait(timeout=20)  # ended (stop() reaped it: it is this test's child)
        assert localmodel._cmdline(other.pid) is None
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_start_on_a_taken_port_fails_clearly(model_dir, monkeypatch, capsys):
    monkeypatch.setattr(localmodel, "_server_importable", lambda: True)
    monkeypatch.setattr(localmodel, "MODEL_SIZE", 1)
    localmodel.weights_path().write_bytes(b"x")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(localmodel.ModelError, match=f"port {port} .* already in use"):
            localmodel.start(port=port)
        assert main(["model", "start", "--port", str(port)]) == 2
    assert "already in use" in capsys.readouterr().err
    assert not (model_dir / "server.json").exists()


def test_an_answer_from_another_process_is_not_a_start(model_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        died = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
        died.wait()
        with pytest.raises(localmodel.ModelError, match="exited with code 1"):
            localmodel._check_serving(died, port)
        alive = subprocess.Popen([sys.executable, "-c", SLEEPER])
        try:
            with pytest.raises(localmodel.ModelError, match="does not hold the port"):
                localmodel._check_serving(alive, port)
        finally:
            alive.kill()
            alive.wait()
    assert localmodel._pid_listens_on(os.getpid(), port) is False


def test_a_descriptor_closed_while_listed_does_not_hide_the_answer(monkeypatch):
    """A starting process opens and closes files while its descriptors are read: one that vanished
    between the listing and its link is skipped, not taken for "cannot tell"."""
    readlink = os.readlink
    vanished: list[str] = []

    def flaky(path: str) -> str:
        link = readlink(path)
        if not vanished and not link.startswith("socket:"):
            vanished.append(path)
            raise FileNotFoundError(path)
        return link

    monkeypatch.setattr(os, "readlink", flaky)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert localmodel._pid_listens_on(os.getpid(), port) is True
        vanished.clear()
        alive = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE)
        try:
            assert alive.stdout.readline() == b"ready\n"
            assert localmodel._pid_listens_on(alive.pid, port) is False
        finally:
            alive.kill()
            alive.wait()
    assert vanished  # the vanished descriptor was met
