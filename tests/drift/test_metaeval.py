"""The meta-evaluation: rewrites of real summaries with the order a careful reader expects, and how often
each measure agrees."""

from __future__ import annotations

import math
import re

import pytest

from pimem.drift.metaeval import (EXPECTED, PERTURBATIONS, _tokens, meta_evaluate, ordered_as_expected, perturbations)
from pimem.drift.records import CompactionRecord
from tests.conftest import REAL_DIR

SUMMARY = """## Goal
Move the tax code into `src/billing/tax.py`.

## Key Decisions
- Use a `TaxTable` class instead of a dict
- Keep the old module for reference

## Progress
### Done
- [x] Created `src/billing/tax.py` (42 lines), version 1.4.2

## Next Steps
1. Run `pytest tests/billing` (12 tests)
"""


def _record():
    span = [("a", {"role": "user", "content": "Move the tax code into src/billing/tax.py"}),
            ("b", {"role": "assistant", "content": [{"type": "toolCall", "id": "t", "name": "bash",
                                                        "arguments": {"command": "pytest tests/billing"}}]})]
    return CompactionRecord(0, {"type": "compaction", "summary": SUMMARY}, span, [], [], None, [],
                            ["src/billing/tax.py"], 0)


def test_rewrites_change_what_they_say_they_change():
    v = perturbations(_record(), SUMMARY, wrong_span="## Goal\nsomething else", other_session=None)
    assert set(v) == set(PERTURBATIONS) and v["other_session"] is None and v["previous_summary"] is None
    real = v["real"]
    assert _tokens(v["truncated_quarter"]) < _tokens(v["truncated_half"]) < _tokens(real)
    assert sorted(filter(None, real.split("\n"))) == sorted(filter(None, v["shuffled"].split("\n")))
    assert v["shuffled"] != real
    assert "`TaxTable` instead of a dict" not in v["negated"] and "a dict instead of" in v["negated"]
    assert "Do not keep" in v["negated"] or "not keep" in v["negated"].lower()
    assert "42 lines" not in v["changed_values"] and "1.4.2" not in v["changed_values"]
    assert "src/billing/tax.py" in v["paraphrase"] and "Created" not in v["paraphrase"]
    assert "src/billing/tax.py" in v["files_only"] and "(none)" in v["empty_template"]
    assert _tokens(v["name_dump"]) <= _tokens(real) + 40  # the dump fills the real summary's length
    assert re.search(r"^- `", v["name_dump"], re.M)


def test_order_relations():
    assert ordered_as_expected(0.5, ">", 0.4) and not ordered_as_expected(0.4, ">", 0.4)
    assert ordered_as_expected(0.5, "=", 0.5) and not ordered_as_expected(0.5, "=", 0.51)
    assert ordered_as_expected(0.5, "~", 0.46) and not ordered_as_expected(0.5, "~", 0.44)
    assert not ordered_as_expected(math.nan, ">", 0.0) and not ordered_as_expected(0.3, ">", math.nan)
    assert all(rel in (">", "=", "~") for _, rel, _ in EXPECTED)


@pytest.fixture(scope="module")
def evaluation():
    if not REAL_DIR.exists():
        pytest.skip("real Pi sessions not available (../shared/datasets/pi-mono)")
    from pimem.drift.metaeval import pi_records

    return meta_evaluate(pi_records(REAL_DIR))


def test_every_real_pi_compaction_is_rewritten_and_scored(evaluation):
    scores = evaluation.scores
    assert scores.groupby(["session", "compaction"]).ngroups == 5
    assert set(scores["rewrite"]) == set(PERTURBATIONS)
    table = evaluation.table().set_index("measure")
    assert table.loc["score", "n_compactions"] == 3  # the other two have no later trajectory
    assert table.loc["score", "n_unscorable"] > 0 and table.loc["faithfulness", "n_compactions"] == 5
    assert math.isnan(table.loc["score", "ci_low"]) and "no 95% interval" in table.loc["score", "interval"]


def test_the_headline_orders_rewrites_better_than_the_old_one(evaluation):
    table = evaluation.table().set_index("measure")
    assert table.loc["score", "in_order"] > table.loc["needed_recall", "in_order"] + 0.1
    for pair in ("real > name_dump", "real > other_session", "real > empty_template", "real > files_only",
                 "real > changed_values", "real = shuffled"):
        assert table.loc["score", pair] == 1.0, pair
    # negations: the contradiction rules catch some (see the held-out set); the old headline none
    assert table.loc["score", "real > negated"] >= 0.6 and table.loc["needed_recall", "real > negated"] == 0.0
    scores = evaluation.scores
    for rewrite in ("empty_template", "files_only"):
        assert (scores.loc[scores["rewrite"] == rewrite, "score"].fillna(0) == 0).all()
