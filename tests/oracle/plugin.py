"""Pytest plugin: the session-scoped ``oracle`` fixture (Pi 0.87.1 run in Node).

Without Node or the pinned release the fixture skips, unless ``PIMEM_REQUIRE_ORACLE=1``
(as in CI), where a missing oracle fails with a clear message.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from tests.oracle.client import Oracle, OracleUnavailable


def oracle_required() -> bool:
    return os.environ.get("PIMEM_REQUIRE_ORACLE", "") not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    """Pi's own functions, run in Node over batches of requests."""
    try:
        return Oracle()
    except OracleUnavailable as exc:
        if oracle_required():
            pytest.fail(f"PIMEM_REQUIRE_ORACLE=1 but the oracle is missing: {exc}", pytrace=False)
        pytest.skip(str(exc))


def _release_oracle(release: str, driver: str | None = None) -> Oracle:
    try:
        return Oracle(release=release, **({"driver": driver} if driver else {}))
    except OracleUnavailable as exc:
        if oracle_required():
            pytest.fail(f"PIMEM_REQUIRE_ORACLE=1 but Pi {release} is missing: {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def oracle_1_6_0() -> Oracle:
    """Pi 1.6.0's own functions (same driver as 0.87.1), run in Node."""
    return _release_oracle("1.6.0")


@pytest.fixture(scope="session")
def oracle_0_13_2() -> Oracle:
    """Pi 0.13.2's own functions (its own driver: the old single-file layout), run in Node."""
    return _release_oracle("0.13.2", "driver_0_13_2.mjs")


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
