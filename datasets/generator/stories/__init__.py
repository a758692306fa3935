"""The four sample stories, one module each; ``STORIES`` lists their ``record`` functions in output order."""

from __future__ import annotations

from typing import Callable

from ..harness import Recorder
from . import auth_login_bug, gpxkit_antimeridian, logslice_since_flag, ventas_pipeline_refactor

STORIES: list[Callable[[int], Recorder]] = [
    auth_login_bug.record,
    ventas_pipeline_refactor.record,
    logslice_since_flag.record,
    gpxkit_antimeridian.record,
]
