"""A widget notebook in a real JupyterLab: a ``jupyter lab`` server on 127.0.0.1 with a token, opened in
Chromium; the notebook runs in a real kernel, its ``SessionExplorer`` appears, and choosing another leaf
in the dropdown or ticking the checkbox changes what the explorer shows. The browser asks nothing of any
host but the server."""

from __future__ import annotations

import json
import re
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import nbformat
import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the browser fixture skips (or fails in CI) with the reason
    PlaywrightTimeout = TimeoutError  # type: ignore[misc,assignment]

from tests.support.notebooks import KERNEL_NAME, kernel_dir, kernel_env

pytestmark = pytest.mark.slow  # minutes: left out of scripts/test --fast

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "datasets" / "sessions" / "ventas-pipeline-refactor.jsonl"  # three leaves, a branch summary
RUN_TRIES = 5
RUN_WAIT_MS = 60_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_it_listens(port: int, proc: subprocess.Popen, seen: list[str], tries: int = 600) -> None:
    """The server logs its address a moment before it accepts connections: try, a bounded number of times."""
    for _ in range(tries):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    pytest.fail(f"jupyter lab does not accept connections on port {port}:\n" + "".join(seen[-40:]))


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on 127.0.0.1 serving a folder with ``explorer.ipynb``: (base URL, token)."""
    pytest.importorskip("jupyterlab")
    root = tmp_path / "work"
    root.mkdir()
    code = ("import pimem\nfrom pimem.viz.widgets import SessionExplorer\n"
            f"explorer = SessionExplorer(pimem.load_session({str(SESSION)!r}))\nexplorer")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "pimem test kernel", "language": "python"}
    nbformat.write(nb, str(root / "explorer.ipynb"))
    # start the notebook's own kernel without asking, and ask nothing about news
    settings = tmp_path / "settings" / "@jupyterlab"
    for plugin, value in (("notebook-extension/tracker", {"autoStartDefaultKernel": True}),
                          ("apputils-extension/notification", {"fetchNews": "false"})):
        (settings / plugin).parent.mkdir(parents=True, exist_ok=True)
        (settings / f"{plugin}.jupyterlab-settings").write_text(json.dumps(value))
    env = kernel_env(tmp_path)
    kernels = kernel_dir(tmp_path)  # .../kernels: JUPYTER_PATH entries hold a kernels/ folder
    env.update(JUPYTER_PATH=str(kernels.parent), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"))
    token, port = secrets.token_hex(16), _free_port()
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.extension_manager=readonly"] + (["--allow-root"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the server says where it listens once it does
            seen.append(line)
            if f"127.0.0.1:{port}/lab" in line:
                break
        else:
            pytest.fail("jupyter lab ended before it served:\n" + "".join(seen[-40:]))
        # keep reading what it logs, or a full pipe would stop the server
        threading.Thread(target=lambda: seen.extend(proc.stderr or ()), daemon=True).start()
        _wait_until_it_listens(port, proc, seen)
        yield f"http://127.0.0.1:{port}", token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_explorer_widget_runs_and_answers_in_jupyterlab(lab: tuple[str, str], new_page, tmp_path) -> None:
    base, token = lab
    shot = tmp_path / "jupyterlab.png"
    page, log = new_page(1400, 1000)
    page.goto(f"{base}/lab/tree/explorer.ipynb?token={token}")
    cell = page.locator(".jp-Notebook .jp-Cell").first
    cell.wait_for()
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()  # its kernel is up
    select = page.locator(".jp-OutputArea .widget-dropdown select")
    accept = page.locator(".jp-Dialog .jp-mod-accept")  # "Select Kernel", should JupyterLab still ask
    # a run asked for while the page is still connecting to its kernel can be dropped: ask again, a few times
    for _ in range(RUN_TRIES):
        if accept.is_visible():
            accept.click()
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")  # run the cell, stay on it
        try:
            select.wait_for(timeout=RUN_WAIT_MS)
            break
        except PlaywrightTimeout:
            continue
    else:
        page.screenshot(path=str(shot))
        raise AssertionError(f"no widget after {RUN_TRIES} runs; the page as it was: {shot}")
    html = page.locator(".jp-OutputArea .jp-OutputArea-output").first  # the explorer: breakdown and table
    before = html.inner_text()
    options = select.locator("option").all_inner_texts()
    assert len(options) >= 3 and "path entries" in before and "context messages" in before, (options, before[:300])

    other = next(o for o in options[1:] if re.search(r"\bleaf\W+[0-9a-f]{8}\b", o))
    select.select_option(label=other)
    page.wait_for_function("([el, old]) => el.innerText !== old", arg=[html.element_handle(), before])
    after_leaf = html.inner_text()
    leaf_id = re.search(r"[0-9a-f]{8}", other).group(0)
    assert after_leaf != before and leaf_id in after_leaf, (other, after_leaf[:300])  # it shows the leaf chosen

    page.locator(".jp-OutputArea .widget-checkbox input[type=checkbox]").check()
    page.wait_for_function("([el, old]) => el.innerText !== old", arg=[html.element_handle(), after_leaf])
    assert html.inner_text() != after_leaf

    host = urlsplit(base).netloc
    outside = [u for u in log.requests if urlsplit(u).scheme in ("http", "https", "ws", "wss")
               and urlsplit(u).netloc != host]
    assert outside == [], outside
    assert not [e for e in log.errors if "page error" in e], log.errors
