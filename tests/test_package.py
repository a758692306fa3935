"""The package's public surface: every exported name resolves, functions are not hidden by modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pimem


def test_every_export_resolves() -> None:
    missing = [name for name in pimem.__all__ if getattr(pimem, name, None) is None]
    assert missing == []


def test_functions_named_like_their_modules_stay_functions() -> None:
    importlib.import_module("pimem.replay")
    importlib.import_module("pimem.sweep")
    assert callable(pimem.replay) and pimem.replay.__name__ == "replay"
    assert callable(pimem.sweep) and pimem.sweep.__name__ == "sweep"


def test_prompt_notice_ships_with_the_package() -> None:
    from importlib.resources import files

    notice = files("pimem.prompts").joinpath("NOTICE").read_text(encoding="utf-8")
    assert "Mario Zechner" in notice and "MIT" in notice


def test_import_does_not_need_network_or_heavy_work() -> None:
    code = "import pimem, sys; print('openai' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
