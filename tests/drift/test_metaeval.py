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
    # negations: the contradiction rules catch some (see the held-out set); the old headline only those that
    # turn round a needed constraint's polarity
    assert table.loc["score", "real > negated"] >= 0.6
    assert table.loc["score", "real > negated"] > table.loc["needed_recall", "real > negated"]
    scores = evaluation.scores
    for rewrite in ("empty_template", "files_only"):
        assert (scores.loc[scores["rewrite"] == rewrite, "score"].fillna(0) == 0).all()


def _write(tmp_path, rows):
    import json

    path = tmp_path / "rewrites.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _hand_row(**fields):
    import hashlib

    row = {"id": "h-x-0-overclaim", "split": "heldout", "session": "s", "compaction": 0,
           "summary_sha256": hashlib.sha256(SUMMARY.encode()).hexdigest()[:16], "class": "overclaim",
           "expected": [["real", ">", "rewrite"]],
           "edits": [{"find": "1. Run `pytest tests/billing` (12 tests)", "replace": "1. Nothing left: all 12 tests pass"}],
           "text": None, "rationale": "the tests never ran"}
    row.update(fields)
    return row


def test_hand_rewrites_load_and_apply(tmp_path):
    from pimem.drift.metaeval import load_hand_rewrites

    (rw,) = load_hand_rewrites(_write(tmp_path, [_hand_row()]))
    text = rw.apply(SUMMARY)
    assert "Nothing left: all 12 tests pass" in text and "Run `pytest" not in text
    assert rw.expected == (("real", ">", "rewrite", None),)
    (written,) = load_hand_rewrites(_write(tmp_path, [_hand_row(edits=None, text="## Goal\nshort")]))
    assert written.apply("anything") == "## Goal\nshort"


@pytest.mark.parametrize("change, message", [
    ({"class": "bogus"}, "class 'bogus'"),
    ({"expected": [["real", "<", "rewrite"]]}, "expected pairs"),
    ({"text": "both"}, "either edits or text"),
    ({"split": "train"}, "split must be"),
])
def test_a_malformed_rewrite_names_file_and_line(tmp_path, change, message):
    from pimem.drift.metaeval import load_hand_rewrites
    from pimem.errors import LabelFormatError

    path = _write(tmp_path, [_hand_row(id="ok"), _hand_row(**change)])
    with pytest.raises(LabelFormatError, match=rf"rewrites.jsonl:2: .*{re.escape(message)}"):
        load_hand_rewrites(path)


def test_a_rewrite_for_another_summary_or_a_missing_text_is_refused(tmp_path):
    from pimem.drift.metaeval import load_hand_rewrites
    from pimem.errors import LabelFormatError

    (rw,) = load_hand_rewrites(_write(tmp_path, [_hand_row()]))
    with pytest.raises(LabelFormatError, match="written for another summary"):
        rw.apply(SUMMARY + "\n")
    (gone,) = load_hand_rewrites(_write(tmp_path, [_hand_row(edits=[{"find": "not there", "replace": ""}])]))
    with pytest.raises(LabelFormatError, match="occurs 0 times"):
        gone.apply(SUMMARY)


def test_hand_evaluation_orders_pairs_per_class(tmp_path):
    from pimem.drift.metaeval import hand_evaluate, load_hand_rewrites, ordered

    rows = [_hand_row(),
            _hand_row(id="h-x-0-filler", **{"class": "filler"}, expected=[["rewrite", "~", "real"]],
                      edits=[{"append": "All in all, the work is going well."}]),
            _hand_row(id="h-x-0-terse", **{"class": "terse"}, edits=None,
                      expected=[["rewrite", ">", "extracted"], ["rewrite", ">~", "real", "per_fact"]],
                      text="## Done\n- Created `src/billing/tax.py` with a `TaxTable` class")]
    rewrites = load_hand_rewrites(_write(tmp_path, rows))
    rec = _record()
    seen = []

    def score(record, text, **_):
        seen.append(text)
        return {"score": 0.5 if "Nothing left" in text else 0.8, "needed_recall": 0.1}

    he = hand_evaluate({"s": [rec]}, rewrites, measures=("score",), score=score)
    assert set(he.scores["item"]) == {"real", "h-x-0-overclaim", "h-x-0-filler", "h-x-0-terse",
                                      "extracted:h-x-0-terse"}
    pairs = he.pairs
    assert list(pairs["pair"]) == ["real > rewrite", "rewrite ~ real", "rewrite > extracted", "rewrite >~ real per fact"]
    table = he.table("score")
    assert list(table["class"]) == ["overclaim", "filler", "terse", "pooled"]
    assert table.set_index("class").loc["overclaim", "in_order"] == 1.0
    assert table.set_index("class").loc["pooled", "n_pairs"] == 4
    assert ordered(0.9, ">~", 1.0) and not ordered(0.89, ">~", 1.0)
    with pytest.raises(Exception, match="no compaction 0 of session 's'"):
        hand_evaluate({"s": []}, rewrites, score=score)


def test_the_committed_rewrites_apply_to_the_real_summaries():
    from pathlib import Path

    from pimem.drift.metaeval import HAND_CLASSES, claude_code_records, load_hand_rewrites, pi_records
    from tests.conftest import SHARED_DIR

    data = Path(__file__).resolve().parents[2] / "datasets" / "metaeval"
    splits = {name: load_hand_rewrites(data / f"rewrites-{name}.jsonl") for name in ("heldout", "tune", "fresh", "fresh2")}
    assert sorted(p.name for p in data.glob("rewrites-*.jsonl")) == [f"rewrites-{n}.jsonl" for n in sorted(splits)]
    assert all({r.split for r in part} == {name} for name, part in splits.items())
    assert {name: len(part) for name, part in splits.items()} == {"heldout": 77, "tune": 49, "fresh": 70, "fresh2": 70}
    # the splits share no session, and every compaction has one rewrite of each class
    sessions = [{r.session for r in part} for part in splits.values()]
    assert sum(map(len, sessions)) == len(set().union(*sessions))
    heldout, tune, fresh, fresh2 = splits.values()
    for part in splits.values():
        per = {}
        for r in part:
            per.setdefault((r.session, r.compaction), []).append(r.cls)
        assert all(sorted(v) == sorted(HAND_CLASSES) for v in per.values())
    if not (SHARED_DIR / "datasets" / "claude-code").exists():
        pytest.skip("real Claude Code transcripts not available (../shared/datasets/claude-code)")
    records = {**pi_records(SHARED_DIR / "datasets" / "pi-mono"), **claude_code_records(SHARED_DIR)}
    for r in heldout + tune + fresh + fresh2:
        real = records[r.session][r.compaction].summary
        text = r.apply(real)  # raises when the summary is not the one the rewrite was written for
        assert (text != real) and (r.text is not None or len(text) > 0.5 * len(real)), r.id
