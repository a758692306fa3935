"""Shared test fixtures: where the bundled samples and the real Pi sessions live, the sample session most
tests replay (``auth``) and a local OpenAI-compatible server (``server``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest_plugins = ["tests.oracle.plugin"]

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = REPO_ROOT / "datasets" / "sessions"
# The real sessions live outside the repository, beside it in ../shared when present.
SHARED_DIR = Path(os.environ.get("PIMEM_SHARED_DIR", REPO_ROOT.parent / "shared"))
REAL_DIR = SHARED_DIR / "datasets" / "pi-mono"
REAL_V3 = ["before-compaction.jsonl", "large-session.jsonl"]
REAL_V1 = ["before-compaction.v1.jsonl", "large-session.v1.jsonl"]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    if not any(SAMPLES_DIR.glob("*.jsonl")):
        pytest.skip("no bundled sample sessions yet")
    return SAMPLES_DIR


@pytest.fixture(scope="session")
def sample_paths(samples_dir: Path) -> list[Path]:
    return sorted(samples_dir.glob("*.jsonl"))


@pytest.fixture(scope="session")
def real_dir() -> Path:
    if not REAL_DIR.is_dir():
        pytest.skip("real Pi sessions not available (../shared/datasets/pi-mono)")
    return REAL_DIR


@pytest.fixture(scope="session")
def real_v3_paths(real_dir: Path) -> list[Path]:
    return [real_dir / n for n in REAL_V3]


@pytest.fixture(scope="session")
def real_v1_paths(real_dir: Path) -> list[Path]:
    return [real_dir / n for n in REAL_V1]


@pytest.fixture(scope="module")
def auth(samples_dir: Path) -> Any:
    """The bundled ``auth-login-bug`` session, loaded once per test module (tests must not change it)."""
    from pimem.sessions.load import load_session

    return load_session(samples_dir / "auth-login-bug.jsonl")


@pytest.fixture
def server() -> Iterator[Any]:
    """A fresh fake OpenAI-compatible server on 127.0.0.1 (:mod:`tests.support.fake_openai_server`)."""
    from tests.support.fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as s:
        yield s
