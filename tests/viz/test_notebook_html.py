"""``pimem notebooks --html``: a page draws each widget's view from the state its kernel left, and loads
nothing from the network."""

from __future__ import annotations

import asyncio
import re

import nbformat
import pytest

from pimem.viz.notebooks import WIDGET_STATE, WIDGET_VIEW, notebook_html, static_widget_views

_NAMESPACE = re.compile(r"http://www\.w3\.org/[\w/.]*")  # XML namespaces name, they fetch nothing


def _reaches_out(page: str) -> list[str]:
    return re.findall(r".{0,60}https?:.{0,60}", _NAMESPACE.sub("", page))


def _model(name: str, **state) -> dict:
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
            "state": state}


def _notebook_with_a_widget() -> nbformat.NotebookNode:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    models = {
        "box": _model("VBoxModel", children=["IPY_MODEL_pick", "IPY_MODEL_flag", "IPY_MODEL_note", "IPY_MODEL_out",
                                             "IPY_MODEL_gone"]),
        "pick": _model("DropdownModel", description="leaf", _options_labels=["first <a>", "second"], index=1),
        "flag": _model("CheckboxModel", description="show all", value=True),
        "note": _model("HTMLModel", value="<table><tr><td>tokens 1,234</td></tr></table>"),
        "out": _model("OutputModel", outputs=[{"output_type": "display_data", "metadata": {},
                                               "data": {"image/png": png, "text/plain": "<Figure>"}}]),
    }
    cell = nbformat.v4.new_code_cell("explorer", execution_count=1, outputs=[
        nbformat.v4.new_output("display_data", data={
            "text/plain": "VBox(...)", WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": "box"}}),
        nbformat.v4.new_output("stream", name="stdout", text="after\n")])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A widget\n\n$x^2$"), cell])
    nb.metadata["widgets"] = {WIDGET_STATE: {"version_major": 2, "version_minor": 0, "state": models}}
    return nb


def test_a_widget_view_is_drawn_from_its_saved_state() -> None:
    nb = _notebook_with_a_widget()
    static = static_widget_views(nb)
    assert "widgets" in nb.metadata and "widgets" not in static.metadata  # the original is left as it is
    outputs = static.cells[1].outputs
    kinds = [next(iter(o.get("data", {"stream": 0}))) if o.output_type != "stream" else "stream" for o in outputs]
    assert kinds == ["text/html", "text/html", "text/html", "image/png", "text/html", "stream"]
    assert "<b>leaf</b>: <code>second</code>" in outputs[0].data["text/html"]
    assert "<b>show all</b>: <code>True</code>" in outputs[1].data["text/html"]
    assert "tokens 1,234" in outputs[2].data["text/html"]
    assert "state was not saved" in outputs[4].data["text/html"]
    page = notebook_html(nb)
    assert WIDGET_VIEW not in page and "data:image/png;base64," in page and "tokens 1,234" in page
    assert "first &lt;a&gt;" not in page and "second" in page
    assert _reaches_out(page) == []


@pytest.mark.notebook
def test_the_widget_notebook_exported_keeps_its_explorer_and_reaches_out_nowhere(tmp_path) -> None:
    """Notebook 05 run in a real kernel: its SessionExplorer's dropdown, checkbox and token table are on the
    page, as the kernel left them; no script, style sheet or font comes from the network."""
    from tests.support.notebooks import NOTEBOOK_DIR, run_notebook

    nb, exc = asyncio.run(run_notebook(NOTEBOOK_DIR / "05-branches.ipynb", tmp_path))
    assert exc is None, exc
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    dropdowns = [m["state"] for m in state.values() if m["model_name"] == "DropdownModel"]
    assert dropdowns, "the explorer left no widget state"
    page = notebook_html(nb)
    shown = dropdowns[0]["_options_labels"][dropdowns[0]["index"]]
    assert f"<b>leaf</b>: <code>{shown}</code>" in page
    assert "show entries not in context" in page
    assert WIDGET_VIEW not in page and "require.min.js" not in page and "mathjax" not in page.lower()
    assert _reaches_out(page) == []
