"""The model judge of claims beside the rules: a chosen sample of claims, unreadable answers kept apart."""

from __future__ import annotations

import math

import pytest

from pimem.drift.chat import JudgeError
from pimem.drift.faithfulness import ClaimJudge, given_source, judge_agreement, summary_claims
from tests.drift.test_faithfulness import SPAN, record
from tests.support.fake_openai_server import FakeOpenAIServer, Reply, openai_summarizer

SUMMARY = ("## Done\n- Created `src/billing/tax.py` with class `TaxTable`\n- Version bumped to 1.5.2\n"
           "- Deployed the billing service to Kubernetes\n- The tests fail on CI")


def _responder(body):
    claim = body["messages"][1]["content"].split("<claim", 1)[1].split(">\n", 1)[1].split("\n</claim>", 1)[0]
    if "Kubernetes" in claim:
        return "It might be supported or contradicted."
    if "1.5.2" in claim:
        return "CONTRADICTED"
    return "Supported."


def test_only_the_chosen_claims_are_judged_and_an_unreadable_answer_is_kept_out_of_the_kappa():
    rec = record(SPAN)
    chosen = {"Version bumped to 1.5.2", "Deployed the billing service to Kubernetes", "The tests fail on CI"}
    with FakeOpenAIServer() as server:
        server.responder = _responder
        judge = ClaimJudge(openai_summarizer(server, "judge"))
        table, kappa = judge_agreement(rec, SUMMARY, judge, only=chosen)
        assert server.hits == 3  # the claim not chosen is never asked about
        assert list(table["claim"]) == ["Version bumped to 1.5.2", "Deployed the billing service to Kubernetes",
                                        "The tests fail on CI"]
        assert list(table["rules"]) == ["contradicted", "unsupported", "unsupported"]
        assert list(table["judge"]) == ["contradicted", "no answer", "supported"]
        assert list(table["agree"]) == [True, False, False]
        # kappa over the two answered claims: observed 1/2, chance (1·1 + 0 + 0)/4 = 1/4
        assert kappa == pytest.approx((0.5 - 0.25) / (1 - 0.25))
        claim = next(c for c in summary_claims(SUMMARY) if "Kubernetes" in c.text)
        assert judge.answer(claim, given_source(rec)) is None
        with pytest.raises(JudgeError, match="expected one of SUPPORTED"):
            judge(claim, given_source(rec))
        assert server.hits == 3  # the unreadable answer is kept, not asked again


def test_a_failed_request_is_an_error_not_a_missing_answer():
    rec = record(SPAN)
    with FakeOpenAIServer() as server:
        server.script(*[Reply(status=400, error_message="bad request")] * 4)
        judge = ClaimJudge(openai_summarizer(server, "judge", max_retries=0))
        with pytest.raises(JudgeError):
            judge_agreement(rec, SUMMARY, judge, only={"The tests fail on CI"})


def test_nothing_chosen_gives_an_empty_table_and_no_kappa():
    rec = record(SPAN)
    with FakeOpenAIServer() as server:
        table, kappa = judge_agreement(rec, SUMMARY, ClaimJudge(openai_summarizer(server, "judge")), only=set())
        assert server.hits == 0
    assert table.empty and math.isnan(kappa)
