"""Shared test fixtures: where the bundled samples and the real Pi sessions live, the sessions tests
replay (the samples ``auth`` and ``ventas``, the real ``before_compaction`` and ``large_session``), a
local OpenAI-compatible server (``server``), an empty local-model folder (``model_dir``) and
``close_figures``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.real_data import SHARED_DIR, real_pi_dir

pytest_plugins = ["tests.oracle.plugin"]

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = REPO_ROOT / "datasets" / "sessions"
# The large real corpus lives outside the repository, in SHARED_DIR (../shared, or $PIMEM_SHARED_DIR;
# /nonexistent hides it); the real Pi sessions fall back to the bundled ones (tests/support/real_data.py).
REAL_DIR = real_pi_dir()
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
    return REAL_DIR


@pytest.fixture(scope="session")
def real_v3_paths(real_dir: Path) -> list[Path]:
    return [real_dir / n for n in REAL_V3]


@pytest.fixture(scope="session")
def real_v1_paths(real_dir: Path) -> list[Path]:
    paths = [real_dir / n for n in REAL_V1]
    if not all(p.exists() for p in paths):
        pytest.skip("the v1 originals of the real Pi sessions are not bundled (../shared/datasets/pi-mono)")
    return paths


@pytest.fixture(scope="module")
def auth(samples_dir: Path) -> Any:
    """The bundled ``auth-login-bug`` session, loaded once per test module (tests must not change it)."""
    from pimem.sessions.load import load_session

    return load_session(samples_dir / "auth-login-bug.jsonl")


@pytest.fixture(scope="module")
def ventas(samples_dir: Path) -> Any:
    """The bundled ``ventas-pipeline-refactor`` session, loaded once per test module (tests must not change it)."""
    from pimem.core.session_manager import load_session

    return load_session(samples_dir / "ventas-pipeline-refactor.jsonl")


@pytest.fixture(scope="module")
def before_compaction(real_v3_paths: list[Path]) -> Any:
    """The real ``before-compaction.jsonl`` (two recorded compactions), loaded once per test module."""
    from pimem.core.session_manager import load_session

    return load_session(real_v3_paths[0])


@pytest.fixture(scope="module")
def large_session(real_v3_paths: list[Path]) -> Any:
    """The real ``large-session.jsonl`` (no recorded compaction), loaded once per test module."""
    from pimem.core.session_manager import load_session

    return load_session(real_v3_paths[1])


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder as the local model's home (``PIMEM_MODEL_DIR``)."""
    monkeypatch.setenv("PIMEM_MODEL_DIR", str(tmp_path / "model"))
    (tmp_path / "model").mkdir()
    return tmp_path / "model"


@pytest.fixture
def close_figures() -> Iterator[None]:
    """Closes every matplotlib figure the test left open (``pytest.mark.usefixtures("close_figures")``)."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def server() -> Iterator[Any]:
    """A fresh fake OpenAI-compatible server on 127.0.0.1 (:mod:`tests.support.fake_openai_server`)."""
    from tests.support.fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as s:
        yield s
