"""Pytest plugin: the session-scoped oracle fixtures (Pi 0.87.1, its agent loop, and other releases run in Node).

Without Node or the pinned release the fixture skips, unless ``PIMEM_REQUIRE_ORACLE=1``
(as in CI), where a missing oracle fails with a clear message.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from tests.oracle.client import Oracle, OracleUnavailable
from tests.oracle.install import PI_VERSION


def oracle_required() -> bool:
    return os.environ.get("PIMEM_REQUIRE_ORACLE", "") not in ("", "0", "false", "no")


def _oracle_or_skip(missing: str, **options: str) -> Oracle:
    """``Oracle(**options)``; without it the test skips, or fails naming what is ``missing`` when required."""
    try:
        return Oracle(**options)
    except OracleUnavailable as exc:
        if oracle_required():
            pytest.fail(f"PIMEM_REQUIRE_ORACLE=1 but {missing} is missing: {exc}", pytrace=False)
        pytest.skip(str(exc))


def release_oracle(release: str) -> Oracle:
    """The oracle of Pi ``release`` (0.87.1, 1.6.0 or 0.13.2, with its own driver), skipping or failing as
    the fixtures do."""
    if release == PI_VERSION:
        return _oracle_or_skip("the oracle")
    if release == "0.13.2":
        return _oracle_or_skip("Pi 0.13.2", release="0.13.2", driver="driver_0_13_2.mjs")
    return _oracle_or_skip(f"Pi {release}", release=release)


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    """Pi's own functions, run in Node over batches of requests."""
    return release_oracle(PI_VERSION)


@pytest.fixture(scope="session")
def agent_oracle() -> Oracle:
    """Pi's own agent loop (``AgentSession.prompt``) with a canned model (``agent_loop.mjs``), run in Node."""
    return _oracle_or_skip("the oracle", driver="agent_loop.mjs")


@pytest.fixture(scope="session")
def oracle_1_6_0() -> Oracle:
    """Pi 1.6.0's own functions (same driver as 0.87.1), run in Node."""
    return release_oracle("1.6.0")


@pytest.fixture(scope="session")
def oracle_0_13_2() -> Oracle:
    """Pi 0.13.2's own functions (its own driver: the old single-file layout), run in Node."""
    return release_oracle("0.13.2")


# Counts of compared cases, reported at the end of the run.
COUNTS: Counter[str] = Counter()
# The same per other Pi release.
RELEASE_COUNTS: dict[str, Counter[str]] = {"1.6.0": Counter(), "0.13.2": Counter()}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if COUNTS:
        parts = ", ".join(f"{v} {k}" for k, v in sorted(COUNTS.items()))
        terminalreporter.write_line(f"differential comparisons with Pi 0.87.1: {parts}")
    for release, counts in sorted(RELEASE_COUNTS.items()):
        if not counts:
            continue
        parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        terminalreporter.write_line(f"differential comparisons with Pi {release}: {parts}")
