"""Where the data bundled with pimem lives: ``datasets/<name>`` of a source checkout, or
``pimem/data/<name>`` of an installed wheel (the build copies ``datasets/sessions``, ``datasets/real``,
``datasets/model-summaries``, ``datasets/labels`` and ``notebooks`` there; see ``setup.py``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED", "bundled_dir", "bundled_candidates"]

#: The folders of ``datasets/`` that wheels and sdists carry as package data.
BUNDLED = ("sessions", "real", "model-summaries", "labels", "notebooks")

_PACKAGE = Path(__file__).resolve().parents[1]  # .../pimem


def _source(name: str) -> Path:
    """Where ``name`` lives in a source checkout (the notebooks at the top, the rest in ``datasets/``)."""
    return _PACKAGE.parent / name if name == "notebooks" else _PACKAGE.parent / "datasets" / name


def bundled_candidates(name: str) -> list[Path]:
    """The places looked in for ``name``, in order: the package's ``data/`` (an installed wheel), then the
    source checkout (the folder beside ``pimem/``, which in site-packages may be another package's)."""
    return [_PACKAGE / "data" / name, _source(name)]


def bundled_dir(name: str, pattern: str = "*") -> Path:
    """The first folder of :func:`bundled_candidates` holding a file matching ``pattern``.

    Raises :class:`FileNotFoundError` naming every place looked in.
    """
    if name not in BUNDLED:
        raise ValueError(f"{name!r} is not bundled with pimem (bundled: {', '.join(BUNDLED)})")
    candidates = bundled_candidates(name)
    for c in candidates:
        if c.is_dir() and any(c.glob(pattern)):
            return c
    raise FileNotFoundError(f"pimem's bundled {name} not found (looked in: "
                            + ", ".join(str(c) for c in candidates) + ")")
