"""The paraphrase-tolerant matcher: free-text facts in other words, names by the exact rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimem.drift.labels import label_fact, matcher_accuracy
from pimem.drift.paraphrase import rule_matcher
from pimem.drift.paraphrase import normalized_matcher, normalized_present
from tests.conftest import REAL_DIR

LABELS = Path(__file__).resolve().parents[2] / "datasets" / "labels" / "before-compaction.facts.jsonl"


def _fact(kind, text):
    return label_fact({"kind": kind, "text": text, "source_entry_id": None})


def test_free_text_in_other_words_is_present_with_the_same_polarity():
    summary = "## Decisions\n- Added a new directory for the helpers\n- Tests: end-to-end only, no unit tests"
    fact = _fact("decision", "Create a folder for the helper functions")
    assert rule_matcher(fact, summary) == "absent"
    assert normalized_matcher(fact, summary) == "present"
    assert normalized_present("no unit tests at all", summary)
    assert not normalized_present("write unit tests", summary)  # the summary negates them
    assert normalized_matcher(_fact("decision", "Deploy the service to Kubernetes"), summary) == "absent"


def test_names_keep_the_exact_rules():
    summary = "- run modes are separate now"
    assert normalized_matcher(_fact("identifier", "run"), summary) == "absent"
    assert normalized_matcher(_fact("path", "src/modes/run.ts"), summary) == "absent"


def test_accuracy_on_the_labelled_facts():
    if not REAL_DIR.exists():
        pytest.skip("real Pi sessions not available (../shared/datasets/pi-mono)")
    table = matcher_accuracy(LABELS, REAL_DIR / "before-compaction.jsonl",
                             {"rules": "rules", "normalized": normalized_matcher}).set_index(["matcher", "facts"])
    rules, norm = table.loc[("rules", "free text")], table.loc[("normalized", "free text")]
    assert norm["recall"] > rules["recall"] + 0.1 and norm["precision"] >= rules["precision"] - 0.02
    assert table.loc[("normalized", "all"), "n"] == table.loc[("rules", "all"), "n"] == 232
