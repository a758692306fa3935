"""The built package installs like one: sdist → wheel, installed into a fresh virtual environment,
runs ``pimem study``, ``python -m pimem`` and a notebook on the data it carries.

Offline and cheap: the sources are copied to a temporary folder and built there without build
isolation (``python -m build --no-isolation``: the sdist first, then the wheel from the unpacked
sdist, so a file the sdist forgets is missing from the wheel too). The fresh environment gets the
wheel with ``pip install --no-index --no-deps``; its third-party dependencies are this
interpreter's (one ``.pth`` line, no download), and ``pip check`` confirms the wheel's declared
requirements are met by them. Nothing runs from the source tree: no ``PYTHONPATH``, a working
folder outside the repository, and every path checked to lie inside the fresh environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BUNDLED = ("sessions", "real", "model-summaries", "labels", "notebooks")


def _source(name: str) -> Path:
    return REPO / name if name == "notebooks" else REPO / "datasets" / name
NOTEBOOK = "05-branches.ipynb"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "OPENAI_API_KEY",
                                                            "PIMEM_BASE_URL", "PIMEM_API_KEY")}
    env.update(MPLBACKEND="Agg", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def _run(cmd: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "pimem", src / "pimem", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "data"))
    for name in BUNDLED:
        shutil.copytree(_source(name), src / _source(name).relative_to(REPO),
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    dist = tmp / "dist"
    proc = _run([sys.executable, "-m", "build", "--no-isolation", "-o", str(dist), str(src)], cwd=tmp)
    assert "SetuptoolsDeprecationWarning" not in proc.stdout + proc.stderr  # a clean build says nothing to fix
    wheel = next(dist.glob("pimem-*.whl"))
    sdist = next(dist.glob("pimem-*.tar.gz"))
    return {"tmp": tmp, "wheel": wheel, "sdist": sdist}


@pytest.fixture(scope="module")
def venv(built: dict[str, Path]) -> Path:
    root = built["tmp"] / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)], cwd=built["tmp"])
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=_env()).stdout.strip()
    # the dependencies: this interpreter's site-packages, after the fresh environment's own (a plain path
    # line: the .pth files there, such as an editable install of pimem, are not processed)
    Path(purelib, "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps", "--quiet",
          str(built["wheel"])], cwd=built["tmp"])
    return root


def test_the_wheel_carries_the_samples_the_model_summaries_and_the_labels(built) -> None:
    with zipfile.ZipFile(built["wheel"]) as z:
        names = z.namelist()
    for folder in BUNDLED:
        prefix = f"pimem/data/{folder}/"
        files = sorted(n.removeprefix(prefix) for n in names if n.startswith(prefix))
        assert files == sorted(str(f.relative_to(_source(folder))) for f in _source(folder).rglob("*")
                               if f.is_file() and ".ipynb_checkpoints" not in f.parts), folder
    assert "pimem/data/model-summaries/manifest.json" in names and "pimem/data/real/NOTICE" in names
    assert "pimem/core/prompts/NOTICE" in names and "pimem/py.typed" in names and "pimem/__main__.py" in names
    templates = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("pimem/viz/templates/"))
    assert templates == sorted(p.name for p in (REPO / "pimem" / "viz" / "templates").glob("*.j2")) and templates
    assert not [n for n in names if n.startswith(("tests/", "datasets/", "notebooks/")) or "generator" in n]
    assert all(n.endswith(".ipynb") for n in names if n.startswith("pimem/data/notebooks/"))
    with tarfile.open(built["sdist"]) as t:
        members = t.getnames()
    top = members[0].split("/")[0]
    for folder in BUNDLED:
        where = folder if folder == "notebooks" else f"datasets/{folder}"
        assert any(m.startswith(f"{top}/{where}/") for m in members), folder
    assert f"{top}/setup.py" in members and f"{top}/MANIFEST.in" in members


def test_the_wheel_is_pure_python_for_every_platform(built) -> None:
    assert built["wheel"].name.endswith("-py3-none-any.whl"), built["wheel"].name
    with zipfile.ZipFile(built["wheel"]) as z:
        names = z.namelist()
        wheel_meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: true" in wheel_meta and "Tag: py3-none-any" in wheel_meta
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c", ".dylib"))]


def test_installed_pimem_finds_its_data_inside_the_environment(venv, tmp_path) -> None:
    code = ("import json, pimem; from pimem.experiments import model_summaries; "
            "print(json.dumps({'pimem': pimem.__file__, 'samples': str(pimem.sample_dir()), "
            "'n': len(pimem.sample_session_paths()), 'summaries': str(model_summaries.dataset_dir()), "
            "'replays': len(model_summaries.replays_frame()), 'labels': str(pimem.labels_dir())}))")
    out = json.loads(_run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path).stdout)
    for key in ("pimem", "samples", "summaries", "labels"):
        assert Path(out[key]).resolve().is_relative_to(venv.resolve()), (key, out[key])
    assert Path(out["samples"]).parts[-2:] == ("data", "sessions")
    assert out["n"] == len(list(_source("sessions").glob("*.jsonl"))) and out["replays"] == len(
        json.loads((_source("model-summaries") / "manifest.json").read_text())["replays"]) >= 2
    # the declared requirements are met (pip check reads the wheel's metadata)
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "check"], cwd=tmp_path)


def test_python_dash_m_pimem_and_the_study_run_from_the_wheel(venv, tmp_path) -> None:
    version = _run([str(venv / "bin" / "python"), "-m", "pimem", "--version"], cwd=tmp_path).stdout
    assert version.startswith("pimem ")
    out = tmp_path / "study"
    proc = _run([str(venv / "bin" / "pimem"), "study", "-o", str(out), "-q", "--token-source", "calibrated"],
                cwd=tmp_path)
    assert (out / "index.html").stat().st_size > 0 and (out / "sweep.csv").stat().st_size > 0
    assert "Traceback" not in proc.stderr and "SetuptoolsDeprecationWarning" not in proc.stderr
    index = (out / "index.html").read_text(encoding="utf-8")
    for sample in ("auth-login-bug", "gpxkit-antimeridian", "logslice-since-flag", "ventas-pipeline-refactor"):
        assert sample in index


def test_a_notebook_runs_in_a_kernel_of_the_fresh_environment(venv, tmp_path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = tmp_path / "kernels" / "pimem-wheel"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "pimem wheel", "language": "python"}))
    work = tmp_path / "notebooks"
    work.mkdir()
    nb = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import pimem; print(pimem.__file__, pimem.sample_dir())"))
    km = KernelManager(kernel_name="pimem-wheel", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]))
    client = nbclient.NotebookClient(nb, km=km, timeout=300, allow_errors=False,
                                     resources={"metadata": {"path": str(work)}})
    client.execute(env=_env())
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    figures = sum(1 for c in nb.cells for o in c.get("outputs", [])
                  if o.get("output_type") in ("display_data", "execute_result") and "image/png" in o.get("data", {}))
    assert figures >= 1
    where = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert str(venv.resolve()) in where and "data/sessions" in where
