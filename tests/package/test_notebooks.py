"""Execute every notebook top to bottom in a real Jupyter kernel of this interpreter.

A kernel spec pointing at ``sys.executable`` is written to a temporary folder, so the tests
work in a fresh clone without installing a kernel. The notebooks run concurrently (one kernel
each, one event loop), with ``MPLBACKEND=Agg`` and no model key in the kernel's environment
(the notebooks must run offline). Each must finish without an error output and show at least
one figure.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = ["01-loading", "02-how-pi-builds-context", "03-replay-sweep", "04-summary-drift", "05-branches",
            "06-strategies", "07-real-compactions"]
KERNEL_NAME = "pimem-test-python"
TIMEOUT_S = 300


def _kernel_dir(tmp: Path) -> Path:
    spec_dir = tmp / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "pimem test kernel", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return tmp / "kernels"


def _kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    for key in ("OPENAI_API_KEY", "PIMEM_BASE_URL", "PIMEM_API_KEY"):
        env.pop(key, None)
    repo = str(NOTEBOOK_DIR.parent)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


async def _run_one(path: Path, kernels: Path) -> tuple[nbformat.NotebookNode, BaseException | None]:
    nb = nbformat.read(path, as_version=4)
    km = AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    client = nbclient.NotebookClient(nb, km=km, timeout=TIMEOUT_S, allow_errors=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        await client.async_execute(env=_kernel_env())
        return nb, None
    except Exception as exc:  # noqa: BLE001 - reported per notebook by the tests below
        return nb, exc


async def _run_all(kernels: Path) -> dict[str, tuple[nbformat.NotebookNode, BaseException | None]]:
    results = await asyncio.gather(*(_run_one(p, kernels) for p in NOTEBOOKS))
    return {p.stem: r for p, r in zip(NOTEBOOKS, results)}


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[nbformat.NotebookNode, BaseException | None]]:
    kernels = _kernel_dir(tmp_path_factory.mktemp("jupyter"))
    return asyncio.run(_run_all(kernels))


def test_the_five_notebooks_are_there_and_stored_without_outputs() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.nbformat == 4
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, path.name
        assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name} has outputs"
        first = nb.cells[0]
        assert first.cell_type == "markdown" and "**Question:**" in first.source, path.name
        assert any(("SESSION =" in c.source or "SESSIONS =" in c.source) for c in code), path.name
        assert path.stat().st_size < 40_000, path.name


def test_notebook_two_answers_the_five_questions() -> None:
    nb = nbformat.read(NOTEBOOK_DIR / "02-how-pi-builds-context.ipynb", as_version=4)
    headings = [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines()
                if line.startswith("## ")]
    for question in ("Why does Pi separate full session storage from model-context construction?",
                     "How do JSONL and id/parentId support branches?",
                     "How are tool calls and tool results stored, and how do they take part in summaries?",
                     "Why is firstKeptEntryId the key to compaction?",
                     "How do structured summaries keep task state across repeated compactions?"):
        assert f"## {question}" in headings


def _errors(nb: nbformat.NotebookNode) -> list[str]:
    out = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
            elif o.get("output_type") == "stream" and o.get("name") == "stderr" and "Traceback" in o.get("text", ""):
                out.append(f"cell {i}: traceback on stderr: {o['text'][:500]}")
    return out


def _figures(nb: nbformat.NotebookNode) -> int:
    return sum(1 for c in nb.cells for o in c.get("outputs", [])
               if o.get("output_type") in ("display_data", "execute_result") and "image/png" in o.get("data", {}))


@pytest.mark.notebook
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_clean_and_draws(executed, name: str) -> None:
    nb, exc = executed[name]
    if exc is not None:
        detail = f"{getattr(exc, 'ename', type(exc).__name__)}: {getattr(exc, 'evalue', str(exc)[-1500:])}"
        pytest.fail(f"{name} failed: {detail}")
    assert _errors(nb) == []
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{name}: not every cell ran"
    assert _figures(nb) >= 1, f"{name} produced no figure"


@pytest.mark.notebook
def test_executed_notebooks_render_as_pages_readable_without_a_kernel(executed, tmp_path) -> None:
    """What ``pimem notebooks --html`` writes: each executed notebook as one HTML page with its figures."""
    from pimem.viz.notebooks import notebook_html

    for name in EXPECTED:
        nb, exc = executed[name]
        if exc is not None:
            pytest.fail(f"{name} did not run: {exc}")
        page = notebook_html(nb)
        (tmp_path / f"{name}.html").write_text(page, encoding="utf-8")
        assert page.lstrip().lower().startswith("<!doctype html>"), name
        assert page.count("data:image/png;base64,") >= _figures(nb) >= 1, name
        title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
        assert html.escape(title, quote=False) in page or title in page, name
        assert "Traceback (most recent call last)" not in page, name


def test_the_notebooks_command_copies_them_out_and_keeps_what_is_there(tmp_path, capsys) -> None:
    from pimem.cli.main import main

    assert main(["notebooks", "-o", str(tmp_path / "nb")]) == 0
    copied = sorted(p.name for p in (tmp_path / "nb").glob("*.ipynb"))
    assert copied == [p.name for p in NOTEBOOKS]
    (tmp_path / "nb" / NOTEBOOKS[0].name).write_text("mine")
    assert main(["notebooks", "-o", str(tmp_path / "nb")]) == 0
    assert (tmp_path / "nb" / NOTEBOOKS[0].name).read_text() == "mine"
    out = capsys.readouterr().out
    assert "kept" in out and "jupyter lab" in out
