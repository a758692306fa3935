"""The research notebooks bundled with pimem: copied out to open in JupyterLab, or executed and
rendered as HTML pages that read without a kernel (``pimem notebooks``)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

from pimem.base.bundled import bundled_dir
from pimem.base.files import atomic_write_text

__all__ = ["notebook_dir", "notebook_paths", "copy_notebooks", "execute_notebook", "notebook_html",
           "render_notebooks"]


def notebook_dir() -> Path:
    """``notebooks/`` of a source checkout, or ``pimem/data/notebooks`` of an installed wheel."""
    return bundled_dir("notebooks", "*.ipynb")


def notebook_paths() -> list[Path]:
    """The bundled notebooks, in order."""
    return sorted(notebook_dir().glob("*.ipynb"))


def copy_notebooks(dest: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """Copy the notebooks into ``dest`` (created); a file already there is kept. Returns (copied, kept)."""
    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for p in notebook_paths():
        out = target / p.name
        if out.exists():
            kept.append(out)
        else:
            shutil.copyfile(p, out)
            copied.append(out)
    return copied, kept


def execute_notebook(path: str | os.PathLike[str], *, timeout: int = 900, cwd: str | os.PathLike[str] | None = None,
                     kernel_name: str = "python3") -> Any:
    """Run a notebook top to bottom in a real kernel; returns the executed ``nbformat`` notebook."""
    import nbclient
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, allow_errors=False,
                                     resources={"metadata": {"path": str(cwd or Path(path).parent)}})
    client.execute()
    return nb


def notebook_html(nb: Any) -> str:
    """An executed notebook as one standalone HTML page (figures embedded), via nbconvert."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return body


def render_notebooks(out: str | os.PathLike[str], paths: Sequence[str | os.PathLike[str]] | None = None, *,
                     timeout: int = 900, progress: bool = True) -> list[Path]:
    """Execute each notebook (default: the bundled ones) and write ``out/<name>.html``; returns the pages."""
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    pages = []
    for p in [Path(x) for x in (paths or notebook_paths())]:
        if progress:
            print(f"pimem notebooks: running {p.name}", file=sys.stderr, flush=True)
        nb = execute_notebook(p, timeout=timeout, cwd=target)
        page = target / f"{p.stem}.html"
        atomic_write_text(page, notebook_html(nb))
        pages.append(page)
    return pages
