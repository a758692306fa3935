"""The notebooks' committed outputs: run a notebook in a real kernel, put the result in the form it is
committed in, and compare the outputs of two runs with their volatile parts normalised.

``python -m tests.support.notebooks [NAME ...]`` (what ``scripts/notebook-outputs`` runs) executes the
notebooks (default: all) and writes them back with their outputs, so that a reader on a code host sees
the tables and figures; ``tests/package/test_notebooks.py`` runs them again and checks that what is
committed is still what they produce.

The committed form is deterministic: no widget outputs or widget state (a progress bar or a slider
cannot be shown without a kernel, and their model ids are random), no execution timings, the checkout's
own path written as a relative one and a cell's temporary file as its line, figures at
:data:`FIGURE_DPI` as 256-colour PNGs. Compared, text outputs are
normalised further (timings, memory addresses, temporary folders, progress bars); figures are compared
by count.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
KERNEL_NAME = "pimem-test-python"
TIMEOUT_S = 300
FIGURE_DPI = 80  # figures in the committed notebooks: readable, and about half the bytes of 100 dpi
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def kernel_dir(tmp: Path) -> Path:
    """A kernel spec pointing at this interpreter (a fresh clone needs no installed kernel)."""
    spec_dir = tmp / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "pimem test kernel", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return tmp / "kernels"


def kernel_env(tmp: Path) -> dict[str, str]:
    """The kernel's environment: offline (no model key), this checkout's pimem, figures at FIGURE_DPI."""
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    for key in ("OPENAI_API_KEY", "PIMEM_BASE_URL", "PIMEM_API_KEY"):
        env.pop(key, None)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    rc = tmp / "matplotlibrc"
    rc.mkdir(parents=True, exist_ok=True)
    (rc / "matplotlibrc").write_text(f"figure.dpi: {FIGURE_DPI}\n")
    env["MATPLOTLIBRC"] = str(rc)
    return env


async def run_notebook(path: Path, tmp: Path) -> tuple[nbformat.NotebookNode, BaseException | None]:
    """Execute ``path`` top to bottom in a real kernel (working folder: its own); the error, if any, is returned."""
    import nbclient
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    km = AsyncKernelManager(kernel_name=KERNEL_NAME,
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir(tmp))]))
    client = nbclient.NotebookClient(nb, km=km, timeout=TIMEOUT_S, allow_errors=False, record_timing=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        await client.async_execute(env=kernel_env(tmp))
        return nb, None
    except Exception as exc:  # noqa: BLE001 - reported by the caller
        return nb, exc


def _relative_paths(text: str) -> str:
    """The checkout's absolute path as seen from the notebooks' folder (``..``)."""
    return text.replace(str(REPO), "..")


_KERNEL_CELL = re.compile(r"(?:/private)?/[^\s:'\"]*ipykernel_\d+/\d+\.py:(\d+)")


_SOURCE_LINE = re.compile(r"(\.\./pimem/[\w/]+\.py):\d+:")


def _stable_text(text: str) -> str:
    """Text as committed: the checkout's path relative, a cell's temporary file name as its line, no line
    numbers of pimem's own files in warnings (they move with every edit)."""
    return _SOURCE_LINE.sub(r"\1:", _KERNEL_CELL.sub(r"<cell line \1>", _relative_paths(text)))


def small_png(png_base64: str) -> str:
    """A figure as a 256-colour PNG (about a quarter of the bytes; deterministic for the same figure)."""
    import base64
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(png_base64))).convert("RGBA")
    palette = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    palette.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii") + "\n"


def committed_form(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` as it is committed: widget outputs and state, timings and the checkout's path left out,
    figures as 256-colour PNGs."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.outputs:
            if WIDGET_VIEW in out.get("data", {}):
                continue  # a progress bar or a widget: nothing to show without a kernel
            if "text" in out:
                out["text"] = _stable_text(out["text"])
            for kind, value in out.get("data", {}).items():
                if kind.startswith("text/") and isinstance(value, str):
                    out["data"][kind] = _stable_text(value)
                elif kind == "image/png":
                    out["data"][kind] = small_png(value)
            kept.append(out)
        cell.outputs = kept
    return nb


_VOLATILE = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x…"),  # memory addresses
    (re.compile(r"(/private)?/(tmp|var/folders)/[^\s'\"<>)]*"), "<tmp>"),  # temporary folders and files
    (re.compile(re.escape(tempfile.gettempdir()) + r"[^\s'\"<>)]*"), "<tmp>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(s|ms|seconds)\b"), "<time>"),  # timings
    (re.compile(r"\d+(\.\d+)?\s?(it|file|run|session)s?/s"), "<rate>"),  # progress rates
    (re.compile(r"\[\d\d:\d\d(<[\d:?]+)?"), "[<elapsed>"),
]


def _normalised(text: str) -> str:
    text = _stable_text(text)
    lines = []
    for line in text.replace("\r", "\n").splitlines():
        if re.search(r"\d+%\|.*\|", line):
            continue  # a text progress bar (tqdm on stderr)
        for pattern, replacement in _VOLATILE:
            line = pattern.sub(replacement, line)
        lines.append(line.rstrip())
    return "\n".join(line for line in lines if line)


def comparable(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    """Per code cell: its text outputs normalised (stdout and results; stderr left out) and its figure count.

    Consecutive stdout chunks count as one text: where a kernel splits a printed line is timing, not output.
    """
    cells = []
    for i, cell in enumerate(committed_form(nb).cells):
        if cell.cell_type != "code":
            continue
        texts: list[tuple[str, str]] = []
        figures = 0
        stdout: list[str] = []

        def flush() -> None:
            if stdout:
                texts.append(("stdout", _normalised("".join(stdout))))
                stdout.clear()

        for out in cell.outputs:
            if out.output_type == "stream":
                if out.name == "stdout":
                    stdout.append(out.text)
                continue
            flush()
            if out.output_type in ("display_data", "execute_result"):
                data = out.get("data", {})
                if "image/png" in data or "image/svg+xml" in data:
                    figures += 1
                elif "text/plain" in data:
                    texts.append(("result", _normalised(data["text/plain"])))
            elif out.output_type == "error":
                texts.append(("error", f"{out.ename}: {out.evalue}"))
        flush()
        cells.append({"cell": i, "texts": texts, "figures": figures})
    return cells


def write_outputs(names: list[str] | None = None) -> list[tuple[Path, int]]:
    """Execute the notebooks (default: all) and write each back in its committed form; returns (path, bytes)."""
    paths = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    if names:
        paths = [p for p in paths if p.stem in names or p.name in names]
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            print(f"running {path.name}", file=sys.stderr, flush=True)
            nb, exc = asyncio.run(run_notebook(path, Path(tmp)))
            if exc is not None:
                raise SystemExit(f"{path.name} failed: {exc}")
            nbformat.write(committed_form(nb), path)
            written.append((path, path.stat().st_size))
    return written


if __name__ == "__main__":
    for p, size in write_outputs(sys.argv[1:]):
        print(f"{p.relative_to(REPO)}: {size:,} bytes")
