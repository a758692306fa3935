"""The sample sessions bundled with pimem (made by ``datasets/generate.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pimem.sessions.session import load_session

if TYPE_CHECKING:
    from pimem.sessions.session import Session


def sample_dir() -> Path:
    """The folder holding the bundled sample sessions (``datasets/sessions`` of the source tree)."""
    candidates = [
        Path(__file__).resolve().parents[2] / "datasets" / "sessions",
        Path(__file__).resolve().parents[1] / "data" / "sessions",
    ]
    for c in candidates:
        if c.is_dir() and any(c.glob("*.jsonl")):
            return c
    raise FileNotFoundError(
        "bundled sample sessions not found (looked in: " + ", ".join(str(c) for c in candidates) + "); "
        "regenerate them with `python datasets/generate.py`"
    )


def sample_session_paths() -> list[Path]:
    """Paths of the bundled sample sessions, sorted by name."""
    return sorted(sample_dir().glob("*.jsonl"))


def load_samples() -> dict[str, "Session"]:
    """Every bundled sample, loaded, keyed by file stem."""
    return {p.stem: load_session(p) for p in sample_session_paths()}
