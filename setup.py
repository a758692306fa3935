"""Build step: wheels carry the bundled data (``datasets/sessions``, ``datasets/model-summaries``,
``datasets/labels``) and the notebooks as package data under ``pimem/data/``. pimem is pure Python (the
wheel is ``py3-none-any``); everything else is in ``pyproject.toml``."""

from pathlib import Path
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = ("sessions", "real", "model-summaries", "labels", "notebooks")  # pimem.base.bundled.BUNDLED


class build_py_with_data(build_py):
    """``build_py`` that also copies the bundled ``datasets/`` folders into ``pimem/data/``."""

    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for name in BUNDLED:
            source = root / name if name == "notebooks" else root / "datasets" / name
            if not source.is_dir():
                raise SystemExit(f"setup.py: {source} is missing; the wheel must carry it")
            target = Path(self.build_lib) / "pimem" / "data" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))


setup(cmdclass={"build_py": build_py_with_data})
