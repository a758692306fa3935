"""The ``pimem`` command (:mod:`~pimem.cli.main`)."""

from pimem.cli.main import main

__all__ = ["main"]
