"""The automatic matcher against hand-labelled facts: a small fixture with known answers, the committed set
on the real session, and an entailment matcher through a chat model over real HTTP."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pimem.drift import EntailmentMatcher, NotAChatModelError, load_labels, matcher_check
from pimem.drift.labels import ENTAILMENT_SYSTEM, LabelFormatError, precision_recall
from pimem.summarizers.extractive import ExtractiveSummarizer
from tests.support.drift_chain import build_needed_chain
from tests.support.fake_openai_server import Reply, openai_summarizer

LABELS = Path(__file__).resolve().parents[2] / "datasets" / "labels" / "before-compaction.facts.jsonl"


def _row(i, cid, kind, text, label, *, origin="reader", value=None, used=True):
    return {"id": f"t-{i:03d}", "session": "chain", "compaction_id": cid, "compaction_index": 1, "kind": kind,
            "text": text, "source_entry_id": "e0000000", "source_quote": text, "origin": origin,
            "extractor_value": value, "label": label, "evidence": "", "important": True, "used_later": used,
            "used_later_entry_id": None, "notes": ""}


@pytest.fixture
def fixture(tmp_path):
    chain, ids = build_needed_chain()
    cid = ids["c1"]
    rows = [
        _row(1, cid, "identifier", "compute_total", "present", origin="extractor", value="compute_total"),
        _row(2, cid, "path", "src/billing/tax.py", "present", origin="extractor", value="src/billing/tax.py"),
        _row(3, cid, "identifier", "helperNumber7", "absent", origin="extractor", value="helperNumber7", used=False),
        _row(4, cid, "constraint", "I only want integration tests for billing, no unit tests.", "present"),
        _row(5, cid, "constraint", "Unit tests for every billing function", "contradicted", used=False),
        _row(6, cid, "progress", "Wrote src/billing/tax.py with a TaxTable class", "present"),
        _row(7, cid, "decision", "Cache the tax rates in Redis", "absent", used=False),
    ]
    path = tmp_path / "chain.facts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return chain, path


def test_rules_against_a_fixture_with_known_answers(fixture) -> None:
    chain, path = fixture
    check = matcher_check(path, chain.entries)
    facts = check.facts.set_index("id")
    assert list(facts["predicted"]) == ["present", "present", "absent", "present", "absent", "present", "absent"]
    # "Unit tests for every billing function" shares words with the summary line, with the other polarity
    assert facts.loc["t-005", "predicted"] == "absent" and facts.loc["t-005", "label"] == "contradicted"
    table = check.table().set_index("kind")
    assert table.loc["all", "precision"] == 1.0 and table.loc["all", "recall"] == 1.0
    assert table.loc["all", "tp"] == 4 and table.loc["all", "tn"] == 3
    used = check.used_later_table().set_index("kind")
    assert used.loc["identifier", "recall"] == 1.0 and used.loc["identifier", "precision"] == 1.0


def test_bad_label_files_name_file_and_line(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(_row(1, "c", "path", "a.py", "present")) + "\n"
    for body, message in (
        (good + "{not json\n", "bad.jsonl:2: not JSON"),
        (good + json.dumps({**json.loads(good), "id": "t-9", "label": "maybe"}) + "\n", "bad.jsonl:2: label 'maybe'"),
        (good + good, "bad.jsonl:2: duplicate id"),
        (json.dumps({"id": "x"}) + "\n", "bad.jsonl:1: missing field"),
        ("\n", "no labelled facts"),
    ):
        bad.write_text(body)
        with pytest.raises(LabelFormatError, match=message):
            load_labels(bad)


def test_labels_for_another_session_are_refused(fixture, tmp_path) -> None:
    chain, _ = fixture
    path = tmp_path / "other.facts.jsonl"
    path.write_text(json.dumps(_row(1, "0badc0de", "path", "a.py", "present")) + "\n")
    with pytest.raises(LabelFormatError, match="'0badc0de'.*not on the session's active path"):
        matcher_check(path, chain.entries)


def test_precision_recall_edge_cases() -> None:
    assert math.isnan(precision_recall([False, False], [False, False])["precision"])
    assert math.isnan(precision_recall([False], [True])["recall"])
    assert precision_recall([True, False], [True, True])["precision"] == 0.5


def entailment_responder(body: dict) -> str:
    system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
    assert system == ENTAILMENT_SYSTEM
    summary = prompt.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0].lower()
    fact = prompt.split("\">\n", 1)[1].split("\n</fact>", 1)[0].lower()
    if "unit tests for every" in fact:
        return "CONTRADICTED"
    words = [w for w in fact.replace(".", " ").replace(",", " ").split() if len(w) > 4]
    return "PRESENT" if words and sum(w in summary for w in words) / len(words) >= 0.5 else "ABSENT"


def test_entailment_matcher_over_http(fixture, server) -> None:
    chain, path = fixture
    server.responder = entailment_responder
    model = openai_summarizer(server, "judge")
    check = matcher_check(path, chain.entries, EntailmentMatcher(model))
    assert server.hits == 7
    facts = check.facts.set_index("id")
    assert facts.loc["t-005", "predicted"] == "contradicted" and facts.loc["t-005", "agree"]
    assert check.errors.empty
    server.script(*[Reply(content="maybe?")] * 7)
    broken = matcher_check(path, chain.entries, EntailmentMatcher(model), used_later=False)
    assert len(broken.errors) == 7 and broken.facts["predicted"].isna().all()
    assert broken.table()["n"].iloc[-1] == 0  # no verdicts, nothing scored
    with pytest.raises(NotAChatModelError):
        EntailmentMatcher(ExtractiveSummarizer())


def test_committed_labelled_set(real_v3_paths) -> None:
    labels = load_labels(LABELS)
    assert len(labels) >= 150
    assert set(labels["label"]) <= {"present", "absent", "contradicted"}
    assert labels["compaction_index"].nunique() == 2
    check = matcher_check(labels, real_v3_paths[0])
    table = check.table().set_index("kind")
    assert table.loc["all", "n"] == len(labels)
    # the matcher, tuned with this set in view, is precise; paraphrase is where it misses
    assert table.loc["all", "precision"] >= 0.9
    assert 0.6 <= table.loc["all", "recall"] < 0.9
    by_origin = check.table(by="origin").set_index("origin")
    assert by_origin.loc["reader", "recall"] < by_origin.loc["extractor", "recall"]
    used = check.used_later_table().set_index("kind")
    assert used.loc["all", "precision"] >= 0.8
