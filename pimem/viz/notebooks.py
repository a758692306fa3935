"""The research notebooks bundled with pimem: copied out to open in JupyterLab, or executed and
rendered as HTML pages that read without a kernel (``pimem notebooks``).

A page loads nothing from the network: nbconvert's lab page without require.js, MathJax, Mermaid or
the widget manager from a CDN (``templates/notebook-offline.html.j2``). A widget's view is drawn from
the widget state the kernel left (stored by the execution): what its ``Output`` widgets showed, its
``HTML`` and ``Label`` widgets' content, and each control's description and value, as they were when
the notebook had run.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

from pimem.base.bundled import bundled_dir
from pimem.base.files import atomic_write_text

__all__ = ["notebook_dir", "notebook_paths", "copy_notebooks", "execute_notebook", "notebook_html",
           "static_widget_views", "render_notebooks"]


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
                                     store_widget_state=True,
                                     resources={"metadata": {"path": str(cwd or Path(path).parent)}})
    client.execute()
    return nb


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_TEMPLATES = Path(__file__).resolve().parent / "templates"
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_STYLE = re.compile(r"(<style[^>]*>)(.*?)(</style>)", re.S | re.I)
_MAX_DEPTH = 50  # widgets nest deeper than this only by a cycle


def _html_output(text: str) -> dict[str, Any]:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": text}}


def _control_text(name: str, state: dict[str, Any]) -> str | None:
    """A control's description and value as one line, or None for a widget that shows no value."""
    if "value" not in state and "index" not in state:
        return None
    value = state.get("value")
    labels = state.get("_options_labels")
    index = state.get("index")
    if labels is not None and isinstance(index, int) and 0 <= index < len(labels):
        value = labels[index]
    elif labels is not None and isinstance(index, (list, tuple)):
        value = ", ".join(str(labels[i]) for i in index if isinstance(i, int) and 0 <= i < len(labels))
    description = str(state.get("description") or name.removesuffix("Model"))
    return (f'<div class="pimem-widget-control"><b>{html.escape(description)}</b>: '
            f"<code>{html.escape(str(value))}</code></div>")


def _static_outputs(model_id: str, models: dict[str, Any], depth: int = 0) -> list[dict[str, Any]]:
    """The outputs that draw widget ``model_id`` as it was, from the saved widget state."""
    model = models.get(model_id)
    if model is None or depth > _MAX_DEPTH:
        return [_html_output('<div class="pimem-widget-control"><i>(a widget whose state was not saved)</i></div>')]
    name, state = str(model.get("model_name", "")), model.get("state") or {}
    if name == "OutputModel":
        return list(state.get("outputs") or [])
    if name in ("HTMLModel", "HTMLMathModel"):
        return [_html_output(str(state.get("value") or ""))]
    if name == "LabelModel":
        return [_html_output(f"<div>{html.escape(str(state.get('value') or ''))}</div>")]
    children = state.get("children")
    if isinstance(children, list):
        return [o for c in children if isinstance(c, str)
                for o in _static_outputs(c.removeprefix("IPY_MODEL_"), models, depth + 1)]
    text = _control_text(name, state)
    return [_html_output(text)] if text else []


def static_widget_views(nb: Any) -> Any:
    """A copy of ``nb`` whose widget views are drawn statically from its saved widget state (see the
    module docs), without the state itself; ``nb`` is left as it is."""
    import copy

    import nbformat

    out = copy.deepcopy(nb)
    models = ((out.metadata.get("widgets") or {}).get(WIDGET_STATE) or {}).get("state") or {}
    for cell in out.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for o in cell.outputs:
            view = (o.get("data") or {}).get(WIDGET_VIEW)
            if view is None:
                outputs.append(o)
                continue
            outputs += [nbformat.from_dict(x) for x in _static_outputs(str(view.get("model_id")), models)]
        cell.outputs = outputs
    out.metadata.pop("widgets", None)
    return out


def notebook_html(nb: Any) -> str:
    """An executed notebook as one standalone HTML page via nbconvert: figures embedded, widget views drawn
    statically (:func:`static_widget_views`), nothing loaded from the network."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", extra_template_paths=[str(_TEMPLATES)],
                            template_file="notebook-offline.html.j2")
    body, _ = exporter.from_notebook_node(static_widget_views(nb))
    # the theme's comments name web pages; nothing on the page should look like it reaches out
    return _STYLE.sub(lambda m: m.group(1) + _CSS_COMMENT.sub("", m.group(2)) + m.group(3), body)


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
