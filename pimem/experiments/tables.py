"""Every table pimem returns, by name, with its columns: ``pimem.columns("events")``.

Each table's columns are declared once where the table is made (a
:class:`~pimem.base.tables.Table` of :class:`~pimem.base.tables.Column`), and that declaration
builds the DataFrame and writes the ``Columns:`` list of the function's docstring; this module
only gathers them.
"""

from __future__ import annotations

from typing import Any

from pimem.base.tables import Table
from pimem.drift import labels, measures, metaeval, metrics, probes, resume_probe, rework
from pimem.errors import ConfigurationError
from pimem.experiments import run_measures, sweep
from pimem.replays import cost, orphans, result
from pimem.sessions import discover, frames

__all__ = ["TABLES", "columns"]

TABLES: dict[str, Table] = {t.name: t for t in (
    *frames.TABLES.values(), discover.DISCOVER,
    result.EVENTS, result.CALLS, result.SUMMARY, orphans.ORPHANS, cost.COST, cost.RECORDED_COST,
    metrics.DRIFT_REPORT, metrics.FACTS, metrics.PRESENCE, metrics.SECTIONS, metrics.LOST_FACTS,
    metrics.RETENTION, metrics.SURVIVAL, measures.MEASURE_DOCS, measures.NEEDED_FACTS, measures.RECALL_CURVE,
    probes.PROBES, probes.PROBE_REPORT, resume_probe.RESUME_PROBE, metaeval.META_PAIRS,
    labels.MATCHER_ACCURACY, labels.CONTRADICTION_FIGURES,
    run_measures.RUN_MEASURES, run_measures.MASKED_NEEDED, sweep.SWEEP,
    rework.POINTS, rework.EVENTS, rework.REWORK_TABLE, rework.CORRELATIONS, rework.FACTS, rework.REACQUISITION,
    rework.SIGNAL_DOCS, rework.VS_ORPHANS, rework.EXAMPLES,
)}


def columns(table: str | None = None) -> Any:
    """The columns of a table pimem returns: ``column``, ``dtype`` (None: as pandas infers it from
    the values), ``description`` and ``source`` (where the value is read); without a name, the
    tables: ``table``, ``description``, ``columns``.

    Args:
        table: the table's name (``"entries"``, ``"events"``, ``"drift_report"``, …).
    """
    import pandas as pd

    if table is None:
        return pd.DataFrame({"table": list(TABLES), "description": [t.description for t in TABLES.values()],
                             "columns": [len(t.columns) for t in TABLES.values()]})
    found = TABLES.get(table)
    if found is None:
        raise ConfigurationError(f"no table named {table!r}; the tables: {', '.join(TABLES)}")
    return found.describe()
