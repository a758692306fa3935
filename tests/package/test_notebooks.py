"""Execute every notebook top to bottom in a real Jupyter kernel of this interpreter, and check that
the outputs committed with it are the ones it produces.

A kernel spec pointing at ``sys.executable`` is written to a temporary folder, so the tests work in a
fresh clone without installing a kernel (:mod:`tests.support.notebooks`). Each notebook runs when a
test first asks for it (``-k 03-replay`` runs one), with no model key in the kernel's environment (the
notebooks must run offline). Each must finish without an error output, show at least one figure, and
give the outputs it is committed with (text normalised, figures counted); ``scripts/notebook-outputs``
writes them.
"""

from __future__ import annotations

import asyncio
import html

import nbformat
import pytest

nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from tests.support.notebooks import NOTEBOOK_DIR, REPO, WIDGET_VIEW, comparable, run_notebook  # noqa: E402

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = ["01-loading", "02-how-pi-builds-context", "03-replay-sweep", "04-summary-drift", "05-branches",
            "06-strategies", "07-real-compactions", "08-rework", "09-replay-truth"]
MAX_BYTES = 400_000  # one notebook with its outputs (figures at 80 dpi)


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory):
    """name → (executed notebook, error or None), each notebook run once, when first asked for."""
    tmp = tmp_path_factory.mktemp("jupyter")
    done: dict[str, tuple[nbformat.NotebookNode, BaseException | None]] = {}

    def get(name: str) -> tuple[nbformat.NotebookNode, BaseException | None]:
        if name not in done:
            done[name] = asyncio.run(run_notebook(NOTEBOOK_DIR / f"{name}.ipynb", tmp))
        return done[name]

    return get


def _reads_shared_data(nb: nbformat.NotebookNode) -> bool:
    return any("shared/datasets" in c.source or 'Path("../shared")' in c.source
               for c in nb.cells if c.cell_type == "code")


def test_the_notebooks_are_there_with_their_outputs_in_committed_form() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.nbformat == 4
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, path.name
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), f"{path.name}: not run in order"
        assert "widgets" not in nb.metadata, path.name  # widget state: random ids, nothing to show
        outputs = [o for c in code for o in c.outputs]
        assert not [o for o in outputs if o.output_type == "error" or WIDGET_VIEW in o.get("data", {})], path.name
        assert not [c for c in nb.cells if "execution" in c.metadata], f"{path.name} keeps timings"
        assert str(REPO) not in path.read_text(encoding="utf-8"), f"{path.name} holds this checkout's path"
        assert sum(c["figures"] for c in comparable(nb)) >= 1, f"{path.name}: no figure committed"
        first = nb.cells[0]
        assert first.cell_type == "markdown" and "**Question:**" in first.source, path.name
        assert any(("SESSION =" in c.source or "SESSIONS =" in c.source) for c in code), path.name
        assert path.stat().st_size < MAX_BYTES, path.name


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
    nb, exc = executed(name)
    if exc is not None:
        detail = f"{getattr(exc, 'ename', type(exc).__name__)}: {getattr(exc, 'evalue', str(exc)[-1500:])}"
        pytest.fail(f"{name} failed: {detail}")
    assert _errors(nb) == []
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{name}: not every cell ran"
    assert _figures(nb) >= 1, f"{name} produced no figure"


@pytest.mark.notebook
@pytest.mark.parametrize("name", EXPECTED)
def test_committed_outputs_are_current(executed, name: str) -> None:
    """What a reader sees without a kernel is what the notebook gives today: every cell's text outputs
    (timings, addresses, temporary paths and progress bars normalised) and its number of figures."""
    committed = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    if _reads_shared_data(committed) and not (REPO.parent / "shared" / "datasets").is_dir():
        pytest.skip("the committed outputs were made with the real sessions of ../shared, absent here")
    nb, exc = executed(name)
    if exc is not None:
        pytest.fail(f"{name} did not run: {exc}")
    fresh, stored = comparable(nb), comparable(committed)
    assert len(fresh) == len(stored), f"{name}: cells added or removed; run scripts/notebook-outputs {name}"
    for now, then in zip(fresh, stored):
        assert now == then, f"{name}, cell {now['cell']}: outputs changed; run scripts/notebook-outputs {name}"


@pytest.mark.notebook
@pytest.mark.parametrize("name", EXPECTED)
def test_executed_notebooks_render_as_pages_readable_without_a_kernel(executed, name: str, tmp_path) -> None:
    """What ``pimem notebooks --html`` writes: each executed notebook as one HTML page with its figures."""
    from pimem.viz.notebooks import notebook_html

    nb, exc = executed(name)
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


@pytest.mark.notebook
def test_the_notebooks_command_renders_a_notebook_as_a_page(tmp_path, capsys) -> None:
    """``pimem notebooks --html NAME``: the notebook run in a real kernel, written as one HTML page."""
    from pimem.cli.main import main

    assert main(["notebooks", "--html", "-q", "05-branches", "-o", str(tmp_path / "pages")]) == 0
    assert [p.name for p in (tmp_path / "pages").glob("*.html")] == ["05-branches.html"]
    page = (tmp_path / "pages" / "05-branches.html").read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html>") and "data:image/png;base64," in page
    assert "Traceback (most recent call last)" not in page
    assert f"wrote {tmp_path / 'pages' / '05-branches.html'}" in capsys.readouterr().out
    assert main(["notebooks", "--html", "no-such-notebook", "-o", str(tmp_path / "x")]) != 0
    assert "no notebook named no-such-notebook" in capsys.readouterr().err


def test_the_comparison_ignores_timings_and_addresses_but_not_results_or_figures() -> None:
    """The currency check itself: volatile parts normalised away, a changed number or a lost figure caught."""
    import copy

    nb = nbformat.read(NOTEBOOK_DIR / "03-replay-sweep.ipynb", as_version=4)
    base = comparable(nb)
    index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                 and any(o.output_type == "stream" and o.name == "stdout" and any(ch.isdigit() for ch in o.text)
                         for o in c.outputs))

    def with_stdout(edit) -> list:
        copied = copy.deepcopy(nb)
        out = next(o for o in copied.cells[index].outputs if o.output_type == "stream" and o.name == "stdout")
        out.text = edit(out.text)
        return comparable(copied)

    one = with_stdout(lambda t: t + "done in 12.5 s at 0x7f3a2b4c5d60, wrote /tmp/tmpab12cd/x.html\n")
    other = with_stdout(lambda t: t + "done in 3.1 s at 0x55d0c0ffee00, wrote /tmp/tmpzz99/x.html\n")
    assert one == other != base

    def bump_first_digit(text: str) -> str:
        i = next(i for i, ch in enumerate(text) if ch.isdigit())
        return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1:]

    assert with_stdout(bump_first_digit) != base

    fewer = copy.deepcopy(nb)
    cell = next(c for c in fewer.cells if any("image/png" in o.get("data", {}) for o in c.get("outputs", [])))
    cell.outputs = [o for o in cell.outputs if "image/png" not in o.get("data", {})]
    assert comparable(fewer) != base


def test_the_comparison_joins_a_stdout_text_a_kernel_sent_in_pieces() -> None:
    """Where the kernel splits a printed line depends on timing: two chunks read as the one text they make."""
    import copy

    nb = nbformat.read(NOTEBOOK_DIR / "05-branches.ipynb", as_version=4)
    base = comparable(nb)
    index, at = next((i, k) for i, c in enumerate(nb.cells) if c.cell_type == "code"
                     for k, o in enumerate(c.outputs)
                     if o.output_type == "stream" and o.name == "stdout" and len(o.text) > 20)
    split = copy.deepcopy(nb)
    out = split.cells[index].outputs[at]
    first, second = copy.deepcopy(out), copy.deepcopy(out)
    first.text, second.text = out.text[:7], out.text[7:]
    noise = nbformat.v4.new_output("stream", name="stderr", text="a warning\n")
    split.cells[index].outputs[at:at + 1] = [first, noise, second]
    assert comparable(split) == base
    second.text = second.text.replace(second.text[0], "#", 1)
    assert comparable(split) != base
