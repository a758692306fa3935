"""The sessions bundled with pimem: the generated samples (made by ``datasets/generate.py``) and the real
recorded sessions (``datasets/real``: the Pi author's own Pi sessions and Claude Code transcripts with
repeated compactions, gzip'd, with their provenance and licences in ``README.md`` and ``NOTICE`` there)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pimem.base.bundled import bundled_dir
from pimem.sessions.load import load_session
from pimem.errors import ConfigurationError

if TYPE_CHECKING:
    from pimem.sessions.session import Session

#: The kinds of real session bundled, each a subfolder of :func:`real_dir`.
REAL_KINDS = ("pi", "claude-code")

_REAL_SUFFIX = ".jsonl.gz"


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


def real_dir() -> Path:
    """The folder holding the bundled real sessions (``datasets/real`` of a source checkout, or
    ``pimem/data/real`` of an installed wheel), with ``pi/`` and ``claude-code/`` in it."""
    return bundled_dir("real", f"*/*{_REAL_SUFFIX}")


def real_session_paths(kind: str | None = None) -> list[Path]:
    """Paths of the bundled real sessions (``.jsonl.gz``), Pi's first, sorted by name within a kind.

    Args:
        kind: keep one kind: ``"pi"`` (the Pi author's Pi sessions) or ``"claude-code"`` (Claude Code
            transcripts that compacted two or three times); None keeps both.
    """
    if kind is not None and kind not in REAL_KINDS:
        raise ConfigurationError(f"kind must be one of {', '.join(REAL_KINDS)} or None, not {kind!r}")
    root = real_dir()
    return [p for k in REAL_KINDS if kind in (None, k) for p in sorted((root / k).glob(f"*{_REAL_SUFFIX}"))]


def real_session_name(path: str | Path) -> str:
    """The name a bundled real session goes by: its kind and file name without ``.jsonl.gz``
    (``"pi/before-compaction"``, ``"claude-code/cd_95adddad32_0_full"``)."""
    p = Path(path)
    name = p.name[:-len(_REAL_SUFFIX)] if p.name.endswith(_REAL_SUFFIX) else p.stem
    return f"{p.parent.name}/{name}"


def load_real_sessions(kind: str | None = None) -> dict[str, "Session"]:
    """Every bundled real session, loaded, keyed by :func:`real_session_name`.

    Args:
        kind: ``"pi"``, ``"claude-code"`` or None for both (see :func:`real_session_paths`).
    """
    return {real_session_name(p): load_session(p) for p in real_session_paths(kind)}
