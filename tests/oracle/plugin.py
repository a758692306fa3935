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


# Counts of compared cases, reported at the end of the run.
COUNTS: Counter[str] = Counter()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if COUNTS:
        parts = ", ".join(f"{v} {k}" for k, v in sorted(COUNTS.items()))
        terminalreporter.write_line(f"differential comparisons with Pi 0.87.1: {parts}")
