"""The model client's defaults and their environment variables (``PIMEM_TIMEOUT``, ``PIMEM_RETRIES``,
``PIMEM_DEADLINE``), parsed without importing the client."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pimem.errors import ConfigurationError

__all__ = ["DEFAULT_MODEL", "DEFAULT_TIMEOUT", "DEFAULT_RETRIES", "DEFAULT_DEADLINE", "DEFAULT_MAX_RESPONSE_BYTES",
           "ENV_TIMEOUT", "ENV_RETRIES", "ENV_DEADLINE", "client_options_from_env", "parse_seconds",
           "parse_deadline", "parse_retries"]

DEFAULT_MODEL = "gpt-4.1-mini"

# Limits of the OpenAI-compatible client (see pimem.summarizers.openai_compat).
DEFAULT_TIMEOUT = 120.0
DEFAULT_RETRIES = 4
DEFAULT_DEADLINE = 600.0
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
ENV_TIMEOUT, ENV_RETRIES, ENV_DEADLINE = "PIMEM_TIMEOUT", "PIMEM_RETRIES", "PIMEM_DEADLINE"


def client_options_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``timeout``, ``max_retries`` and ``deadline`` from ``PIMEM_TIMEOUT``, ``PIMEM_RETRIES`` and
    ``PIMEM_DEADLINE`` (only those set); :class:`ConfigurationError` naming a variable that is not a number."""
    env = os.environ if env is None else env
    options: dict[str, Any] = {}
    for name, key, parse in ((ENV_TIMEOUT, "timeout", parse_seconds), (ENV_RETRIES, "max_retries", parse_retries),
                             (ENV_DEADLINE, "deadline", parse_deadline)):
        value = env.get(name)
        if value:
            try:
                options[key] = parse(value)
            except ValueError as exc:
                raise ConfigurationError(f"{name}={value!r}: {exc}") from None
    return options


def parse_seconds(text: str) -> float:
    """A positive number of seconds (else a :class:`~pimem.errors.ConfigurationError`, a ``ValueError``)."""
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(f"expected a positive number of seconds, got {text!r}")
    return value


def parse_deadline(text: str) -> float | None:
    """A positive number of seconds, or ``none``/``off`` for no deadline."""
    return None if text.strip().lower() in ("none", "off") else parse_seconds(text)


def parse_retries(text: str) -> int:
    """A non-negative whole number of retries."""
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"expected a whole number of retries, got {text!r}") from None
    if value < 0:
        raise ConfigurationError(f"expected a non-negative number of retries, got {text!r}")
    return value
