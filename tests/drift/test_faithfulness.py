"""Faithfulness: claims of a summary against what its summarizer was given, and the headline score."""

from __future__ import annotations

import math

import pytest

from pimem.drift.faithfulness import (check_claims, faithfulness_measures, given_source, later_source,
                                      summary_claims)
from pimem.drift.records import CompactionRecord
from tests.conftest import REAL_DIR


def _msg(role, text):
    if role == "assistant":
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if role == "tool":
        return {"role": "toolResult", "toolName": "bash", "content": [{"type": "text", "text": text}], "isError": False}
    return {"role": "user", "content": text}


def record(span, later=(), previous=None):
    span = [(f"s{i}", _msg(r, t)) for i, (r, t) in enumerate(span)]
    later = [(f"l{i}", _msg(r, t)) for i, (r, t) in enumerate(later)]
    return CompactionRecord(0, {"type": "compaction", "summary": ""}, span, [], later, previous, [], [], 0)


SPAN = [
    ("user", "Please move the tax code into src/billing/tax.py and keep the old module for reference."),
    ("assistant", "I'll use a TaxTable class instead of a dict. Created src/billing/tax.py with class TaxTable."),
    ("tool", "42 src/billing/tax.py"),
    ("assistant", "The tests pass: 12 passed in 0.8s. Version bumped to 1.4.2."),
]


def verdicts(summary, rec):
    return {v.claim.text: v for v in check_claims(summary_claims(summary), given_source(rec), later=later_source(rec))}


def test_claims_are_lines_without_headings_placeholders_or_lead_ins():
    claims = summary_claims("## Goal\nMove the tax code\n\n## Blocked\n- (none)\n\n**New files:**\n- `src/billing/tax.py`\n"
                            "| file | lines |\n|---|---|\n| tax.py | 42 |\n<modified-files>\nsrc/x.py\n</modified-files>")
    texts = [c.text for c in claims]
    assert texts == ["Move the tax code", "`src/billing/tax.py`", "tax.py ; 42"]
    assert claims[1].context == "New files:" and claims[1].paths == ("src/billing/tax.py",)
    assert claims[2].context == "file ; lines" and claims[2].values == ("42",)


def test_supported_invented_later_and_contradicted_claims():
    rec = record(SPAN, later=[("assistant", "Next I added the VAT rates to src/billing/vat.py.")])
    v = verdicts("## Done\n- Created `src/billing/tax.py` with class `TaxTable` (42 lines)\n"
                 "- Added the VAT rates to `src/billing/vat.py`\n"
                 "- Deployed the billing service to Kubernetes with `helm upgrade`\n"
                 "- Version bumped to 1.5.2\n", rec)
    assert v["Created `src/billing/tax.py` with class `TaxTable` (42 lines)"].verdict == "supported"
    assert v["Added the VAT rates to `src/billing/vat.py`"].verdict == "later"
    assert v["Deployed the billing service to Kubernetes with `helm upgrade`"].verdict == "invented"
    changed = v["Version bumped to 1.5.2"]
    assert changed.verdict == "contradicted" and changed.contradiction.kind == "version"


def test_the_previous_summary_counts_as_given():
    rec = record(SPAN, previous="## Key Decisions\n- Rates are stored in cents, never floats")
    assert verdicts("- Rates are stored in cents, never floats", rec)[
        "Rates are stored in cents, never floats"].verdict == "supported"
    assert verdicts("- Rates are stored in cents, never floats", record(SPAN))[
        "Rates are stored in cents, never floats"].verdict != "supported"


def test_bare_names_are_faithful_but_not_informative():
    claims = summary_claims("## Critical Context\n- `src/billing/tax.py`\n- `TaxTable`\n\n**Files written:**\n- `src/billing/tax.py`")
    assert [c.informative for c in claims] == [False, False, True]


def test_measures_without_needed_facts_and_without_claims():
    rec = record(SPAN)
    row = faithfulness_measures(rec, "## Goal\n(none)\n\n## Done\n- (none)", needed=[])
    assert row["n_claims"] == 0 and math.isnan(row["faithfulness"]) and math.isnan(row["score"])
    row = faithfulness_measures(rec, "- Created `src/billing/tax.py` with class `TaxTable`\n- Migrated to Rust", needed=[])
    # a claim that names nothing the span could hold is unverifiable: neutral, neither false nor true
    assert row["n_claims"] == 1 and row["faithfulness"] == 1.0 and row["claims_unverifiable"] == 1
    row = faithfulness_measures(rec, "- Created `src/billing/tax.py` with class `TaxTable`\n"
                                     "- Migrated `src/billing/tax.rs` to Rust", needed=[])
    # a name the span never holds is an invented specific
    assert row["n_claims"] == 2 and row["faithfulness"] == 0.5 and row["claims_invented"] == 1


@pytest.fixture(scope="module")
def pi():
    if not REAL_DIR.exists():
        pytest.skip("real Pi sessions not available (../shared/datasets/pi-mono)")
    from pimem.drift.metaeval import pi_records

    return pi_records(REAL_DIR)


def test_real_summaries_are_faithful_and_foreign_ones_are_not(pi):
    from pimem.drift.needed import needed_later_facts

    own, foreign = [], []
    records = [r for recs in pi.values() for r in recs]
    for i, rec in enumerate(records):
        needed = needed_later_facts(rec)
        own.append(faithfulness_measures(rec, rec.summary, needed=needed))
        other = records[(i + 2) % len(records)]  # a summary of another span (of another session for most)
        foreign.append(faithfulness_measures(rec, other.summary, needed=needed))
    assert all(r["faithfulness"] >= 0.9 for r in own)
    assert sum(r["faithfulness"] for r in foreign) / len(foreign) < 0.75
    assert all(f["claims_invented"] + f["claims_from_later"] + f["claims_contradicted"] >
               o["claims_invented"] + o["claims_from_later"] + o["claims_contradicted"] for o, f in zip(own, foreign))
    scored = [(o, f) for o, f in zip(own, foreign) if not math.isnan(o["score"])]
    assert len(scored) == 3  # three of the five have a later trajectory to be needed in
    assert all(f["score"] < o["score"] and f["score"] < 0.1 for o, f in scored)


HALLUCINATED = """## Goal
Port the payment gateway to Rust and deploy it on Kubernetes.

## Progress
### Done
- [x] Wrote `services/payments/src/main.rs` with an Axum router
- [x] Migrated the Postgres schema with `sqlx migrate run`

## Key Decisions
- Use gRPC instead of REST between the gateway and the ledger
"""


def test_a_hallucinated_summary_scores_zero(pi):
    from pimem.drift.needed import needed_later_facts

    for rec in [r for recs in pi.values() for r in recs]:
        row = faithfulness_measures(rec, HALLUCINATED, needed=needed_later_facts(rec))
        # the path and the command are invented (or contradicted) specifics; the goal and the gRPC line name
        # nothing the rules can look for: unverifiable, they weigh nothing either way
        assert row["faithfulness"] == 0.0 and row["claims_invented"] + row["claims_contradicted"] == 2
        assert row["claims_unverifiable"] == 2
        assert math.isnan(row["score"]) or row["score"] == 0.0


def test_code_spans_are_matched_as_written():
    # bold and underscore markers go outside code spans only: the dunder path stays itself and is supported
    rec = record([("assistant", "Edited pimem/__init__.py to export load_session.")])
    claim = summary_claims("- Edited `pimem/__init__.py` to export load_session")[0]
    assert claim.paths == ("pimem/__init__.py",)
    assert verdicts("- Edited `pimem/__init__.py` to export load_session", rec)[claim.text].verdict == "supported"
    # a quoted value keeps its words and its number, and a quote found as written supports the claim
    quoted = summary_claims('- Every upload answered `"status": 500`')[0]
    assert quoted.quotes == ('"status": 500',) and "status" in quoted.words and quoted.values == ("500",)
    rec = record([("tool", 'POST /upload -> {"status": 500, "error": "disk full"}')])
    assert verdicts('- Every upload answered `"status": 500`', rec)[quoted.text].verdict == "supported"
    wrong = verdicts('- Every upload answered `"status": 200`', rec)['Every upload answered `"status": 200`']
    assert wrong.verdict in ("invented", "contradicted") and "200" in wrong.missing


def test_ids_counts_and_labelled_numbers_are_names():
    rec = record([("tool", "[main 22c57db7] Fix login\n 3 files changed"),
                  ("assistant", "Found 5 review comments. You picked option 2.")])
    v = verdicts("- Committed as `22c57db7`\n- Committed as `7f3e90bc`\n- 5 review comments\n- 4 review comments\n"
                 "- The user chose option 2\n- The user chose option 3", rec)
    assert [v[k].verdict == "supported" for k in v] == [True, False, True, False, True, False]
    assert v["Committed as `7f3e90bc`"].missing == ["id:7f3e90bc"]


def test_filler_is_neutral_and_a_step_is_not_a_statement():
    rec = record(SPAN)
    base = "## Done\n- Created `src/billing/tax.py` with class `TaxTable`\n- Migrated `src/billing/x.rs` to Rust"
    filler = base + "\n\nOverall the work went well and it is worth carrying on in the same careful way."
    a, b = faithfulness_measures(rec, base, needed=[]), faithfulness_measures(rec, filler, needed=[])
    assert a["faithfulness"] == b["faithfulness"] == 0.5 and b["claims_unverifiable"] == 1
    # a next step names what is to be done, not what the span shows: unverifiable, not invented
    v = verdicts("## Next Steps\n1. Write `tests/test_tax_rates.py` for the VAT table", rec)
    assert v["Write `tests/test_tax_rates.py` for the VAT table"].verdict == "unverifiable"


def test_a_renamed_heading_moves_nothing():
    from pimem.drift.needed import NeededFact
    from pimem.text.facts import Fact

    rec = record([("tool", "Error: cannot find module 'left-pad'")])
    error = Fact("error", "error: cannot find module 'left-pad'", None, 0, 0, "toolResult", "tool_result",
                 "Error: cannot find module 'left-pad'")
    needed = [NeededFact(error, "error", 2.0, "l0", "recurred")]
    one = "4. Errors and fixes:\n   - cannot find module 'left-pad': installed it"
    two = one.replace("4. Errors and fixes:", "4. What went wrong:")
    a, b = faithfulness_measures(rec, one, needed=needed), faithfulness_measures(rec, two, needed=needed)
    assert a["score"] == b["score"] and a["recall_faithful"] == b["recall_faithful"]
    assert summary_claims(one)[0].section == "Errors and fixes" and summary_claims(one)[0].context == ""


def test_terse_lines_tie_names_to_words_across_messages():
    rec = record([("assistant", "Added `ShadowBranchHashLength` to checkpoint/temporary.go."),
                  ("tool", "temporary.go: ShadowBranchNameForCommit uses ShadowBranchHashLength now"),
                  ("assistant", "getShadowBranchNameForCommit in manual_commit_session.go calls it too.")])
    text = ("`ShadowBranchHashLength` in checkpoint/temporary.go, used by `ShadowBranchNameForCommit()` and "
            "`getShadowBranchNameForCommit()` (manual_commit_session.go)")
    claim = summary_claims("- " + text)[0]
    assert claim.informative  # names a word relates, though its own words are stop words
    assert verdicts("- " + text, rec)[text].verdict == "supported"
    assert not summary_claims("- `ShadowBranchHashLength`, `getShadowBranchNameForCommit`")[0].informative


def _claim_responder(body):
    from pimem.drift.faithfulness import CLAIM_JUDGE_SYSTEM

    system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
    assert system == CLAIM_JUDGE_SYSTEM and "<excerpts>" in prompt
    claim = prompt.split("<claim", 1)[1].split(">\n", 1)[1].split("\n</claim>", 1)[0]
    if "Kubernetes" in claim:
        return "UNVERIFIABLE"
    if "1.5.2" in claim or "tests fail" in claim:
        return "CONTRADICTED"
    return "SUPPORTED"


def test_a_chat_model_can_judge_the_claims_cached_and_compared_with_the_rules():
    from pimem.drift.chat import JudgeError, NotAChatModelError
    from pimem.drift.faithfulness import ClaimJudge, judge_agreement
    from pimem.summarizers.extractive import ExtractiveSummarizer
    from tests.support.fake_openai_server import FakeOpenAIServer, Reply, openai_summarizer

    rec = record(SPAN)
    summary = ("## Done\n- Created `src/billing/tax.py` with class `TaxTable`\n- Version bumped to 1.5.2\n"
               "- Deployed the billing service to Kubernetes\n- The tests fail on CI")
    with FakeOpenAIServer() as server:
        server.responder = _claim_responder
        judge = ClaimJudge(openai_summarizer(server, "judge"))
        row = faithfulness_measures(rec, summary, needed=[], judge=judge)
        assert server.hits == 4  # one request per claim
        assert row["claims_supported"] == 1 and row["contradicted_judge"] == 2 and row["claims_unverifiable"] == 1
        assert row["faithfulness"] == 1 / 3
        faithfulness_measures(rec, summary, needed=[], judge=judge)
        assert server.hits == 4  # answers are kept: the same claims on the same excerpts cost nothing
        table, kappa = judge_agreement(rec, summary, judge)
        assert list(table["rules"]) == ["supported", "contradicted", "unsupported", "unsupported"]
        assert list(table["judge"]) == ["supported", "contradicted", "unsupported", "contradicted"]
        assert table["agree"].sum() == 3 and 0 < kappa < 1
        server.script(Reply(content="probably fine"))
        with pytest.raises(JudgeError):
            ClaimJudge(openai_summarizer(server, "judge"))(summary_claims("- The build is green")[0], given_source(rec))
    with pytest.raises(NotAChatModelError):
        ClaimJudge(ExtractiveSummarizer())


def _compacted_lines(first_parent, span=True):
    from tests.support.tiny import tiny_session_lines

    lines = tiny_session_lines(8)
    summary = ("## Goal\nwork on the parser\n\n## Done\n- Deployed the parser to production with "
               "`helm upgrade parser`\n- work on the parser step 2\n")
    if not span:  # the file starts at the compaction: its span is before the file
        compaction = {"type": "compaction", "id": "c0001", "parentId": first_parent, "timestamp": lines[1]["timestamp"],
                      "summary": summary, "firstKeptEntryId": lines[1]["id"], "tokensBefore": 4000}
        lines[1]["parentId"] = "c0001"
        return [lines[0], compaction, *lines[1:]]
    lines[1]["parentId"] = first_parent
    cut = lines[10]  # the compaction follows the fifth assistant reply and keeps from the sixth prompt
    compaction = {"type": "compaction", "id": "c0001", "parentId": cut["id"], "timestamp": cut["timestamp"],
                  "summary": summary, "firstKeptEntryId": lines[11]["id"], "tokensBefore": 4000}
    lines[11]["parentId"] = "c0001"
    return lines[:11] + [compaction] + lines[11:]


@pytest.mark.parametrize("first_parent, span", [(None, True), ("before-the-file", True), ("before-the-file", False)])
def test_a_span_before_the_file_is_said_and_one_wholly_before_it_is_unscorable(tmp_path, first_parent, span):
    import json
    import warnings

    from pimem import load_session
    from pimem.drift import drift_report

    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _compacted_lines(first_parent, span)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = drift_report(load_session(path))
    row = report.iloc[0]
    notes = [n for n in report.attrs["notes"] if "before the file" in n or "not in the file" in n]
    if first_parent is None:  # the whole span is in the file: the invented deployment is judged as such
        assert 0 < row["faithfulness"] < 1 and not notes
    elif span:  # part of the span is before the file: the numbers stand, as lower bounds, and the note says so
        assert 0 < row["faithfulness"] < 1 and len(notes) == 1 and "lower bounds" in notes[0]
        assert "first entry's parent is not in the file" in notes[0]
    else:  # none of it is in the file: nothing can be checked, so nothing is scored
        assert math.isnan(row["faithfulness"]) and math.isnan(row["score"]) and math.isnan(row["recall_faithful"])
        assert len(notes) == 1 and "left out" in notes[0]
