"""Probes: session-specific questions, answered from summary + kept context and graded by a chat model
over real HTTP (a local OpenAI-compatible server on 127.0.0.1, the real ``openai`` client)."""

from __future__ import annotations

import json
import math

import pytest

from pimem.drift import NotAChatModelError, compaction_records, generate_probes, probe_eval, probe_report
from pimem.drift.chat import is_chat_model
from pimem.errors import ConfigurationError
from pimem.drift.measures import compare_sources
from pimem.drift.probes import ANSWER_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT, PROBE_DIMENSIONS, QUESTION_SYSTEM_PROMPT, parse_grades
from pimem.summarizers import CachedSummarizer, OpenAISummarizer
from pimem.summarizers.baselines import EmptyTemplateSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer
from tests.support.fake_openai_server import Reply, openai_summarizer
from tests.support.drift_chain import build_needed_chain
from tests.drift.test_drift import build_chain


def _messages(body: dict) -> tuple[str, str]:
    msgs = body.get("messages", [])
    return msgs[0]["content"], msgs[1]["content"]


def grader(body: dict) -> str:
    """Answers probes by quoting the context; grades 5 when the answer holds a reference line, else 1."""
    system, prompt = _messages(body)
    if system == ANSWER_SYSTEM_PROMPT:
        summary = prompt.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0]
        return "From the summary: " + summary.replace("\n", " ")[:2000]
    if system == JUDGE_SYSTEM_PROMPT:
        reference = prompt.split("<reference>\n", 1)[1].split("\n</reference>", 1)[0]
        answer = prompt.split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]
        first = reference.split("\n")[0].split(": ", 1)[-1].strip("`")
        score = 5 if first and first in answer else 1
        return json.dumps({d: score for d in PROBE_DIMENSIONS})
    if system.startswith(QUESTION_SYSTEM_PROMPT[:40]):
        return json.dumps([{"type": "decision", "question": "Which function must keep its semantics?",
                            "reference": "compute_total()"}])
    return "unexpected request"


@pytest.fixture
def server(server):
    """The shared fake server, answering as ``grader``."""
    server.responder = grader
    return server


def chat(server, model="judge-model") -> OpenAISummarizer:
    return openai_summarizer(server, model)


def test_offline_probes_are_specific_and_grounded_after_the_compaction() -> None:
    chain, _ = build_needed_chain()
    probes = generate_probes(chain.entries)
    by_type = {t: [p for p in probes if p.probe_type == t] for t in ("recall", "artifact", "decision", "continuation")}
    assert any("compute_total" in p.question for p in by_type["recall"])
    assert any("vat_rate" in p.question for p in by_type["recall"])  # the error came back later
    assert [p.question for p in by_type["artifact"]] == [
        "What was created or changed in `src/billing/tax.py` so far, and what state is it in?"]
    decisions = " ".join(p.question for p in by_type["decision"])
    assert "integration" in decisions and "TaxTable" in decisions
    assert not any("helperNumber" in p.question for p in probes)  # never used again: never asked
    # the continuation reference is what the recording did after the compaction entry, not the kept tail
    (cont,) = by_type["continuation"]
    assert "Remember: integration tests only" in cont.reference and "Next, the new file" not in cont.reference
    # questions come from each span, not one fixed text per compaction
    other = generate_probes(build_chain()[0].entries)
    references = {p.reference for p in other if p.probe_type == "continuation"}
    assert len(references) == 3


def test_probe_eval_asks_from_summary_and_kept_context_and_grades_six_dimensions(server) -> None:
    chain, _ = build_needed_chain()
    res = probe_eval(chain.entries, chat(server))
    assert res["error"].isna().all(), res["error"].tolist()
    assert set(res["source"]) == {"recorded"}
    for dim in PROBE_DIMENSIONS:
        assert res[dim].between(0, 5).all()
    # answers were asked with the summary (no file blocks) and the kept tail, never the later trajectory
    answers = [r.body["messages"][1]["content"] for r in server.requests
               if r.body["messages"][0]["content"] == ANSWER_SYSTEM_PROMPT]
    assert len(answers) == len(res)
    assert all("<recent-messages>" in a and "Next, the new file" in a for a in answers)
    assert not any("<read-files>" in a or "Remember: integration" in a for a in answers)
    recall = res[(res["probe_type"] == "recall") & res["question"].str.contains("compute_total")]
    assert recall["score"].iloc[0] == 5 and recall["summary_coverage"].iloc[0] == 1.0
    rep = probe_report(res)
    assert list(rep["source"]) == ["recorded"] and rep["errors"].iloc[0] == 0 and rep["graded"].iloc[0] == len(res)


def test_a_summary_without_the_facts_scores_lower(server) -> None:
    from pimem.summarizers.baselines import EMPTY_HISTORY

    good = probe_eval(build_needed_chain()[0].entries, chat(server))
    empty = probe_eval(build_needed_chain(EMPTY_HISTORY)[0].entries, chat(server))
    assert empty["summary_coverage"].max() == 0.0
    assert empty["score"].mean() < good["score"].mean()


def test_a_judge_that_is_not_a_chat_model_is_an_error(server) -> None:
    chain, _ = build_chain()
    for judge in (ExtractiveSummarizer(), EmptyTemplateSummarizer(), object()):
        with pytest.raises(NotAChatModelError, match="chat model"):
            probe_eval(chain.entries, judge)
    with pytest.raises(NotAChatModelError):
        probe_eval(chain.entries, chat(server), answerer=ExtractiveSummarizer())
    with pytest.raises(NotAChatModelError):
        generate_probes(chain.entries, questioner=ExtractiveSummarizer())
    assert is_chat_model(CachedSummarizer(chat(server), ":memory:")) and not is_chat_model(ExtractiveSummarizer())
    assert server.hits == 0  # nothing was asked of anyone


def test_the_judge_must_not_be_the_summarizer(server, tmp_path) -> None:
    chain, _ = build_chain()
    writer = chat(server, model="writer")
    comparison = compare_sources(chain.entries, {"writer": writer}, max_tokens=800)
    with pytest.raises(ConfigurationError, match="must not be the summarizer"):
        probe_eval(comparison, chat(server, model="writer"))
    with pytest.raises(ConfigurationError, match="must not be the summarizer"):
        probe_eval(comparison, CachedSummarizer(writer, tmp_path / "c.sqlite"))
    res = probe_eval(comparison, chat(server, model="another-model"))
    assert set(res["source"]) == {"writer"} and res["error"].isna().all()


def test_unreadable_grades_are_errors_not_scores(server) -> None:
    chain, _ = build_needed_chain()
    probes = generate_probes(chain.entries)[:2]
    server.script(Reply(content="an answer"), Reply(content="I'd say about four out of five"),
                  Reply(content="another answer"), Reply(status=400, error_message="bad request"))
    res = probe_eval(chain.entries, chat(server), probes=probes)
    assert res["score"].isna().all() and res["error"].notna().all()
    assert "JudgeError" in res["error"].iloc[0] and "400" in res["error"].iloc[1]
    with pytest.raises(Exception, match="accuracy"):
        parse_grades('{"accuracy": 7, "completeness": 3}')
    assert parse_grades(json.dumps({d: 3 for d in PROBE_DIMENSIONS})) == {d: 3 for d in PROBE_DIMENSIONS}


def test_model_written_questions(server) -> None:
    chain, _ = build_chain()
    probes = generate_probes(chain.entries, questioner=chat(server, model="questioner"))
    assert [p.question for p in probes] == ["Which function must keep its semantics?"] * 3  # one per compaction
    assert {p.generated_by for p in probes} == {"questioner"}
    body = next(r.body for r in server.requests if r.body["messages"][0]["content"].startswith(QUESTION_SYSTEM_PROMPT[:40]))
    assert "<what-happened-next>" in body["messages"][1]["content"]
    server.script(Reply(content="no list here"))
    with pytest.raises(Exception, match="JSON list"):
        generate_probes(chain.entries, questioner=chat(server, model="questioner"))


def test_probes_on_real_session(before_compaction) -> None:
    session = before_compaction
    probes = generate_probes(session)
    assert {p.compaction for p in probes} == {0, 1}
    for index in (0, 1):
        types = [p.probe_type for p in probes if p.compaction == index]
        assert types.count("continuation") == 1 and "recall" in types and "artifact" in types
    questions = [p.question for p in probes if p.probe_type != "continuation"]
    assert len(set(questions)) == len(questions)
    cov = [p for p in probes if p.expected]
    assert cov and not any(math.isnan(len(p.expected)) for p in cov)
