"""The sample sessions bundled with pimem (made by ``datasets/generate.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pimem.base.bundled import bundled_dir
from pimem.sessions.load import load_session

if TYPE_CHECKING:
    from pimem.sessions.session import Session


def sample_dir() -> Path:
    """The folder holding the bundled sample sessions (``datasets/sessions`` of a source checkout, or
    ``pimem/data/sessions`` of an installed wheel)."""
    try:
        return bundled_dir("sessions", "*.jsonl")
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{exc}; in a source checkout, regenerate them with "
                                "`python datasets/generate.py`") from None


def sample_session_paths() -> list[Path]:
    """Paths of the bundled sample sessions, sorted by name."""
    return sorted(sample_dir().glob("*.jsonl"))


def load_samples() -> dict[str, "Session"]:
    """Every bundled sample, loaded, keyed by file stem."""
    return {p.stem: load_session(p) for p in sample_session_paths()}
