"""pimem's sample-session generator: a harness that records scripted sessions as Pi would write them,
and the four stories written against it.

    harness/   Recorder, tool calls, the in-memory project, the summarizer, the model table
    stories/   one module per sample session (``record(seed) -> Recorder``)
    fixtures/  each story's starting project, one file per project file (``.txt`` appended)

``generate(out_dir, seed)`` writes every sample; ``datasets/generate.py`` is the command line.
"""

from __future__ import annotations

from pathlib import Path

from .stories import STORIES

DEFAULT_SEED = 20260302


def generate(out_dir: Path, seed: int = DEFAULT_SEED) -> list[Path]:
    """Write every sample session into ``out_dir``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [story(seed).save(out_dir) for story in STORIES]
