"""``pimem.columns``: every table pimem returns is declared once, and the declaration is what it returns."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import pimem
from pimem.core.compaction.compaction import CompactionSettings
from pimem.drift import metrics
from pimem.errors import ConfigurationError
from pimem.experiments.tables import TABLES
from pimem.replays.result import EVENT_COLUMNS
from pimem.sessions.samples import sample_session_paths


def test_columns_lists_the_tables_and_each_tables_columns() -> None:
    listed = pimem.columns()
    assert listed["table"].tolist() == list(TABLES) and len(listed) >= 30
    assert (listed["columns"] > 0).all() and listed["description"].str.len().gt(0).all()
    events = pimem.columns("events")
    assert events["column"].tolist() == EVENT_COLUMNS
    assert list(events.columns) == ["column", "dtype", "description", "source"]
    entries = pimem.columns("entries").set_index("column")
    assert entries.loc["est_tokens", "dtype"] == "Int64" and "estimate_tokens" in entries.loc["est_tokens", "description"]
    with pytest.raises(ConfigurationError, match="no table named 'event'.*events"):
        pimem.columns("event")


def test_every_column_says_what_it_holds() -> None:
    empty = {t.name: [c.name for c in t.columns if not c.description] for t in TABLES.values()}
    assert {k: v for k, v in empty.items() if v} == {}


def test_the_replay_and_drift_tables_are_their_declarations() -> None:
    path = next(p for p in sample_session_paths() if p.name == "gpxkit-antimeridian.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pimem.replay(path, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), context_window=8000)
    assert list(result.events.columns) == TABLES["events"].names
    assert list(result.calls.columns) == TABLES["calls"].names
    assert list(result.orphan_references().columns) == TABLES["orphans"].names
    report = metrics.drift_report(result)
    assert len(report) > 0 and list(report.columns) == TABLES["drift_report"].names
    for name in ("facts", "presence", "sections"):
        assert list(report.attrs[name].columns) == TABLES[name].names
    assert list(metrics.compaction_metrics("## Goal\nx", [])) == [c.name for c in metrics.METRIC_COLUMNS]
    assert list(metrics.lost_facts(report).columns) == TABLES["lost_facts"].names
    assert list(metrics.survival_curves(report).columns) == TABLES["survival"].names
    assert list(metrics.retention_by_age(report, by_kind=True).columns) == ["age", "kind", "n", "n_present",
                                                                            "retention"]
    cost = pimem.replay_cost(result, prices={"free": pimem.PRICES["free"]}, model="free")
    assert list(cost) == TABLES["cost"].names
    measures = pimem.run_measures(result, cost=False)
    assert list(measures) == TABLES["run_measures"].names
    empty = metrics.drift_report(pimem.load_session(path), leaf_id=pimem.load_session(path).entries[0]["id"])
    assert len(empty) == 0 and list(empty.columns) == TABLES["drift_report"].names
    assert isinstance(empty, pd.DataFrame)
