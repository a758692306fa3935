"""Measures that degenerate summaries cannot fool: each test fails if a measure can be gamed the way
an empty template, a fact dump or a truncation games the old ones."""

from __future__ import annotations

import math

import pytest

import pimem
from pimem.errors import ConfigurationError, SummarizationError
from pimem.drift import (
    MEASURES,
    compaction_records,
    compare_sources,
    drift_report,
    fact_present,
    needed_later_facts,
    summary_measures,
)
from pimem.drift.measures import measure_docs
from pimem.summarizers.baselines import (
    EMPTY_HISTORY,
    EmptyTemplateSummarizer,
    FactDumpSummarizer,
    HeadTruncationSummarizer,
    TailTruncationSummarizer,
    baseline_summarizers,
)
from pimem.summarizers.extractive import ExtractiveSummarizer
from tests.support.drift_chain import GOOD_SUMMARY, TRIVIA, WRONG_POLARITY, build_needed_chain


@pytest.fixture(scope="module")
def chain():
    c, ids = build_needed_chain()
    return c, ids, compaction_records(c.entries)[0]


def _needed_values(record):
    return {(n.cls, n.fact.value) for n in needed_later_facts(record)}


def test_needed_later_facts_come_from_the_trajectory_not_the_kept_tail(chain) -> None:
    _, ids, record = chain
    needed = needed_later_facts(record)
    classes = {n.cls for n in needed}
    assert classes == {"constraint", "decision", "error", "artifact", "reference"}
    values = {n.fact.value for n in needed}
    assert "compute_total" in values and "src/billing/tax.py" in values
    # forty names the session never used again are not needed
    assert not any(v.startswith("helperNumber") for v in values)
    # the kept tail shows tests/test_integration.py: the agent has it without a summary
    assert "tests/test_integration.py" not in values
    # first uses point after the compaction entry
    later_ids = {eid for eid, _ in record.later}
    assert all(n.used_at in later_ids for n in needed)
    integration = next(n for n in needed if n.cls == "constraint" and "integration" in n.fact.value)
    assert integration.used_at == ids["later"]
    # "Never change the semantics of compute_total()" is acted on later (a message holds half its words)
    assert any(n.cls == "constraint" and "semantics" in n.fact.value for n in needed)


def test_the_good_summary_holds_what_was_needed(chain) -> None:
    _, _, record = chain
    m = summary_measures(record)
    assert m["needed_recall"] == 1.0 and m["n_needed"] == 8
    assert m["written_tokens"] < m["stored_tokens"]  # the stored text carries Pi's file blocks


def test_file_blocks_never_count_as_content(chain) -> None:
    _, _, record = chain
    blocks = "\n\n<read-files>\nsrc/billing/core.py\n</read-files>\n\n<modified-files>\nsrc/billing/tax.py\n</modified-files>"
    empty = summary_measures(record, EMPTY_HISTORY + blocks)
    assert empty["needed_recall"] == 0.0 and empty["needed_recall_artifact"] == 0.0
    assert empty["fact_recall"] == 0.0
    # the empty template is perfectly conformant and fills no section: format is not content
    assert empty["conformance"] == 1.0 and empty["content_sections"] == 0.0
    # the blocks are still checked, apart, as Pi's pipeline: they score the same whoever summarized
    good = summary_measures(record, GOOD_SUMMARY + blocks)
    assert empty["pipeline_modified_recall"] == good["pipeline_modified_recall"] == 1.0
    assert empty["pipeline_read_recall"] == good["pipeline_read_recall"] == 1.0
    assert not fact_present(("path", "src/billing/tax.py"), pimem.drift.summarizer_text(EMPTY_HISTORY + blocks))


def test_opposite_polarity_does_not_count(chain) -> None:
    _, _, record = chain
    assert summary_measures(record, GOOD_SUMMARY)["needed_recall_constraint"] == 1.0
    # of the two needed constraints, the one stated the other way round is not held
    assert summary_measures(record, WRONG_POLARITY)["needed_recall_constraint"] == 0.5


def test_copying_the_kept_tail_earns_nothing(chain) -> None:
    _, _, record = chain
    copied = "## Critical Context\n- Next, the new file tests/test_integration.py please\n- Writing them."
    m = summary_measures(record, copied)
    assert m["needed_recall"] == 0.0


def test_trivia_and_length_do_not_buy_needed_recall(chain) -> None:
    c, _, record = chain
    trivia = "## Critical Context\n- " + TRIVIA
    m = summary_measures(record, trivia)
    assert m["needed_recall"] == 0.0 and m["fact_recall"] > summary_measures(record, GOOD_SUMMARY)["fact_recall"]
    # at the good summary's length, every baseline holds less of what was needed
    comparison = compare_sources(c.entries, {"recorded": "recorded", **baseline_summarizers(budget=None)})
    table = comparison.table
    recorded = table.loc["needed_recall", "recorded"]
    for name in ("empty template", "fact dump", "head truncation", "tail truncation"):
        assert table.loc["needed_recall", name] < recorded, name
        assert table.loc["written_tokens", name] <= table.loc["written_tokens", "recorded"], name
    # without a length limit the dump holds every fact: fact recall is gameable, and says so
    unlimited = compare_sources(c.entries, {"fact dump": FactDumpSummarizer(budget=None)}, max_tokens=None)
    assert unlimited.table.loc["fact_recall", "fact dump"] == 1.0
    assert "fact dump" in MEASURES["fact_recall"][3]


def test_comparison_shape_and_curve(chain) -> None:
    c, _, record = chain
    comparison = compare_sources(c.entries, {"recorded": "recorded", "extractive": ExtractiveSummarizer(),
                                             "tail": TailTruncationSummarizer(budget=None)})
    assert comparison.sources == ["recorded", "extractive", "tail"]
    per = comparison.per_compaction
    assert list(per["source"]) == ["recorded", "extractive", "tail"] and per["error"].isna().all()
    budget = summary_measures(record)["written_tokens"]
    assert list(per["max_tokens"].iloc[1:]) == [budget, budget]  # matched to the recorded length
    assert set(measure_docs()["measure"]) >= set(comparison.table.index)
    curve = comparison.curve([1, 10, 50, 1000])
    rec = curve[curve["source"] == "recorded"].set_index("budget")["needed_recall"]
    assert rec.loc[1] == 0.0 and rec.loc[1000] == 1.0  # the whole summary at a budget beyond its length
    assert (curve["tokens"] <= curve["budget"]).all()
    facts = comparison.facts()
    assert set(facts["source"]) == {"recorded", "extractive", "tail"}
    assert facts[facts["source"] == "recorded"]["present"].all()


def test_a_failing_summarizer_is_a_row_with_an_error_not_a_score(chain) -> None:
    c, _, _ = chain

    class Broken:
        model = "broken"

        def complete(self, request):
            raise ConnectionError("no route")

    comparison = compare_sources(c.entries, {"broken": Broken()})
    row = comparison.per_compaction.iloc[0]
    assert "ConnectionError" in row["error"] and ("needed_recall" not in row or math.isnan(row["needed_recall"]))
    with pytest.raises(ConfigurationError, match="summarizer"):
        compare_sources(c.entries, {"nonsense": 42})


def test_baselines_fit_their_budget_and_replay_like_any_summarizer(sample_paths) -> None:
    from pimem.core.compaction.compaction import build_history_prompt
    from pimem.core.llm import SummaryRequest
    from pimem.summarizers.extractive import estimate_text_tokens
    from tests.drift.test_drift import _assistant, _user

    msgs = [_user("please fix src/a.py " * 40), _assistant("I'll use `fix_it()` instead of patching. " * 30)]
    request = SummaryRequest("history", "sys", build_history_prompt(msgs), max_tokens=120)
    for summarizer in baseline_summarizers().values():
        response = summarizer.complete(request)
        assert response.stop_reason == "stop" and estimate_text_tokens(response.text) <= 120, summarizer
    assert EmptyTemplateSummarizer().complete(request).text == EMPTY_HISTORY
    head = HeadTruncationSummarizer().complete(request).text
    tail = TailTruncationSummarizer().complete(request).text
    assert head.startswith("[User]: please fix") and tail.endswith("patching. ")
    dump = FactDumpSummarizer().complete(request).text
    assert "- path: src/a.py" in dump and "- identifier: fix_it" in dump
    result = pimem.replay(sample_paths[0], pimem.CompactionSettings(reserve_tokens=4096, keep_recent_tokens=4000),
                          context_window=16000, summarizer=FactDumpSummarizer())
    assert len(result.compactions) > 0
    with pytest.raises(ConfigurationError):
        HeadTruncationSummarizer(budget=0)


def test_drift_report_reads_only_what_the_summarizer_wrote() -> None:
    c, _ = build_needed_chain(EMPTY_HISTORY)
    report = drift_report(c.entries)
    assert report.loc[0, "needed_recall"] == 0.0 and report.loc[0, "fact_recall"] == 0.0
    assert report.loc[0, "file_mention_recall"] == 0.0
    assert report.loc[0, "pipeline_modified_recall"] == 1.0  # the blocks name both files: Pi's doing
    good, _ = build_needed_chain()
    assert drift_report(good.entries).loc[0, "needed_recall"] == 1.0


def test_real_session_recorded_summaries_beat_every_baseline_at_matched_length(real_v3_paths) -> None:
    session = pimem.load_session(real_v3_paths[0])
    comparison = compare_sources(session, {"recorded": "recorded", "extractive": ExtractiveSummarizer(),
                                           **baseline_summarizers(budget=None)})
    table = comparison.table
    assert table.loc["conformance", "empty template"] == 1.0 and table.loc["needed_recall", "empty template"] == 0.0
    for name in ("extractive", "empty template", "fact dump", "head truncation", "tail truncation"):
        assert table.loc["score", name] < table.loc["score", "recorded"], name
    # the former headline, which counts a fact held anywhere, still ranks the degenerate baselines below; the
    # extractive summarizer, which quotes the user's asks as written, holds more of them than the paraphrasing
    # recorded summaries (its claims are faithful, but it says little else: the score ranks it second)
    for name in ("empty template", "fact dump", "head truncation", "tail truncation"):
        assert table.loc["needed_recall", name] < table.loc["needed_recall", "recorded"], name
    # the recorded summaries carry no file blocks; every replayed source gets the same ones from Pi
    pipeline = table.loc["pipeline_modified_recall"].drop("recorded")
    assert pipeline.nunique() == 1
    assert (comparison.per_compaction["n_needed"] > 10).all()


def test_another_models_summaries_written_as_a_recording_are_one_more_column(chain, tmp_path) -> None:
    from pimem.drift import resummarized_session

    c, ids, _ = chain
    written = resummarized_session(c.entries, ExtractiveSummarizer(), max_tokens=200).write(tmp_path / "other.jsonl")
    reloaded = pimem.load_session(written)
    compaction = next(e for e in reloaded.entries if e["type"] == "compaction")
    assert compaction["id"] == ids["c1"] and compaction["firstKeptEntryId"] == ids["keep"]
    assert compaction["summary"] != next(e for e in c.entries if e["type"] == "compaction")["summary"]
    comparison = compare_sources(c.entries, {"live": ExtractiveSummarizer(), "from file": written}, max_tokens=200)
    table = comparison.table
    assert table.loc["needed_recall", "live"] == table.loc["needed_recall", "from file"]
    assert comparison.notes == []  # same cut points: same spans

    class Broken:
        def complete(self, request):
            raise ConnectionError("down")

    with pytest.raises(SummarizationError, match="compaction 0"):
        resummarized_session(c.entries, Broken())


def test_an_update_that_forgets_the_older_spans_loses_carried_recall() -> None:
    from tests.support.drift_chain import SECOND_FORGETTING, build_two_compaction_chain

    carrying, _ = build_two_compaction_chain()
    forgetting, _ = build_two_compaction_chain(SECOND_FORGETTING)
    good = compare_sources(carrying.entries, {"recorded": "recorded"}).per_compaction.set_index("compaction")
    bad = compare_sources(forgetting.entries, {"recorded": "recorded"}).per_compaction.set_index("compaction")
    assert math.isnan(good.loc[0, "needed_recall_carried"]) or good.loc[0, "n_carried"] == 0
    assert good.loc[1, "n_carried"] >= 2
    assert good.loc[1, "needed_recall_carried"] == 1.0 and bad.loc[1, "needed_recall_carried"] == 0.0
    # the tail of the transcript alone carries nothing of the earlier spans either
    tail = compare_sources(carrying.entries, {"tail": TailTruncationSummarizer(budget=None)}, max_tokens=60)
    assert tail.per_compaction.set_index("compaction").loc[1, "needed_recall_carried"] < 1.0


def test_matched_length_is_shown_and_matched_is_accepted_or_refused(chain) -> None:
    c, _, record = chain
    matched = compare_sources(c.entries, {"recorded": "recorded", "fact dump": FactDumpSummarizer(budget=None)},
                              matched=True)
    table = matched.table
    written = table.loc["written_tokens", "recorded"]
    assert table.loc["budget_tokens", "fact dump"] == written  # the length that was matched, beside the scores
    assert math.isnan(table.loc["budget_tokens", "recorded"])  # a stored summary had no budget
    own = compare_sources(c.entries, {"fact dump": FactDumpSummarizer(budget=None)}, matched=False)
    assert own.table.loc["budget_tokens", "fact dump"] == math.floor(0.8 * 16384)  # Pi's own budget
    with pytest.raises(ConfigurationError, match=r"matched=True contradicts max_tokens=500"):
        compare_sources(c.entries, {"recorded": "recorded"}, matched=True, max_tokens=500)
    with pytest.raises(ConfigurationError, match="matched must be True or False"):
        compare_sources(c.entries, {"recorded": "recorded"}, matched="yes")  # type: ignore[arg-type]


def test_the_headline_sees_through_names_and_inventions(chain) -> None:
    c, _, record = chain
    good = summary_measures(record, GOOD_SUMMARY)
    names = summary_measures(record, "## Critical Context\n- `src/billing/tax.py`\n- `TaxTable`\n- `compute_total`")
    invented = summary_measures(record, GOOD_SUMMARY + "\n- Deployed billing to Kubernetes with `helm upgrade billing`")
    assert good["score"] > 0 and names["score"] == 0.0 and names["faithfulness"] == 1.0
    assert names["claims_bare"] == 3 and names["needed_recall"] > 0  # the old headline paid the names
    assert invented["claims_invented"] == good["claims_invented"] + 1 and invented["score"] < good["score"]
    assert set(MEASURES) >= {"score", "recall_faithful", "faithfulness", "claims_contradicted", "few_needed"}


def test_a_trajectory_is_shared_by_text_or_by_message_object_inside_shared_recordings() -> None:
    import copy

    from pimem.drift.needed import shared_trajectory
    from pimem.replays.recording import shared_recordings

    messages = [(f"e{i}", {"role": "user", "content": f"edit src/m{i}.py please"}) for i in range(5)]
    first = shared_trajectory(messages)
    assert shared_trajectory(list(messages)) is first  # the same ids and texts
    copied = [(eid, copy.deepcopy(m)) for eid, m in messages]
    assert shared_trajectory(copied) is first  # other objects, the same texts
    messages[2][1]["content"] = "now edit src/other.py"  # edited in place: read again outside the block
    edited = shared_trajectory(messages)
    assert edited is not first and "other" in edited.postings
    with shared_recordings():  # messages do not change here: the same objects are enough
        assert shared_trajectory(messages) is edited
        again = shared_trajectory(copied)  # other objects: not taken for the same
        assert again is not edited and "other" not in again.postings


def test_a_comparison_per_compaction_beside_the_mean(chain) -> None:
    c, _, _ = chain
    comparison = compare_sources(c.entries, {"recorded": "recorded", "tail": TailTruncationSummarizer(budget=None)})
    per = comparison.compaction_table
    assert list(per.columns) == [(0, "recorded"), (0, "tail")] and list(per.columns.names) == ["compaction", "source"]
    assert per.loc["score", (0, "recorded")] == comparison.table.loc["score", "recorded"]  # one compaction: its mean
    assert per.loc["n_needed", (0, "tail")] == 8


def test_the_drift_reports_headline_is_the_score(chain) -> None:
    from pimem.drift import headline

    c, _, record = chain
    report = drift_report(c.entries)
    assert report.loc[0, "score"] == summary_measures(record)["score"] > 0
    assert report.loc[0, "n_needed_constraint"] == 2 and report.loc[0, "n_needed"] == 8
    head = headline(report)
    assert list(head)[:3] == ["compactions", "score", "mean_score"] and head["mean_score"] == report.loc[0, "score"]
