"""The HTML templates of ``pimem/viz/templates`` (Jinja2, autoescaping on): the drift report, the
study's index page and the widgets' tables. Every value is escaped by the template engine; only
what is marked safe (a section already rendered) passes through as markup."""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pimem.base.tables import format_number

if TYPE_CHECKING:
    import jinja2

__all__ = ["render", "format_cell"]


def format_cell(value: Any) -> str:
    """A cell as text: numbers formatted (:func:`pimem.base.tables.format_number`), blanks for None,
    lists joined, missing values as –."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(format_cell(v) for v in value)
    try:
        import pandas as pd

        if pd.isna(value):
            return "–"
    except (TypeError, ValueError):
        pass
    return format_number(value)


def _quote_path(relative_path: str) -> str:
    """A relative file path for an ``href``/``src``: URL-quoted (``#``, ``?``, ``%``, spaces); the
    template escapes the result."""
    from urllib.parse import quote

    return quote(relative_path)


@lru_cache(maxsize=1)
def _environment() -> "jinja2.Environment":
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("pimem.viz", "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, finalize=lambda v: "" if v is None else v)
    env.filters.update(fmt=format_cell, count=lambda v: f"{int(v):,}", quote_path=_quote_path,
                       base64=lambda png: base64.b64encode(png).decode("ascii"))
    return env


def render(template: str, **context: Any) -> str:
    """``template`` (a file of ``pimem/viz/templates``) rendered with ``context``."""
    return _environment().get_template(template).render(**context)
