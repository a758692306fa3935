"""Pytest plugin: the session-scoped ``oracle`` fixture (Pi 0.87.1 run in Node).

Without Node or the pinned release the fixture skips, unless ``PIMEM_REQUIRE_ORACLE=1``
(as in CI), where a missing oracle fails with a clear message.
"""

from __future__ import annotations

import os

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
