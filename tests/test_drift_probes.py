"""Probe evaluation with deterministic judges that read only the summary."""

from __future__ import annotations

import math
import re

import pytest

from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.drift import PROBE_SYSTEM_PROMPT, generate_probes, probe_eval, probe_report
from pimem.drift.facts import content_words
from tests.test_drift import build_chain


def _summary_of(request: SummaryRequest) -> str:
    m = re.search(r"<summary>\n(.*)\n</summary>", request.prompt, re.S)
    assert m, "probe prompt must carry the summary in <summary> tags"
    return m.group(1)


class LookupJudge:
    """Answers with the summary lines that share a content word with the question."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        if "<answer>" in request.prompt:  # rubric: 2 when the answer quotes something, else 0
            answer = request.prompt.split("<answer>\n", 1)[1]
            return SummaryResponse(text="0" if "NOT IN SUMMARY" in answer else "2")
        question = request.prompt.rsplit("Question:", 1)[1]
        words = content_words(question) | {"file", "path", "error", "decision"}
        lines = [ln for ln in _summary_of(request).split("\n") if content_words(ln) & words]
        return SummaryResponse(text="\n".join(lines) or "NOT IN SUMMARY")


class EchoJudge:
    """A perfect reader: answers with the whole summary."""

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse(text=_summary_of(request))


class SilentJudge:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse(text="NOT IN SUMMARY")


class BrokenJudge:
    def complete(self, request: SummaryRequest) -> SummaryResponse:
        raise ConnectionError("no route")


def test_probes_cover_every_compaction_and_type() -> None:
    chain, _ = build_chain()
    probes = generate_probes(chain.entries)
    assert [(p.compaction, p.probe_type) for p in probes][:4] == [
        (0, "recall"), (0, "artifact"), (0, "continuation"), (0, "decision")]
    assert len(probes) == 12
    artifact = next(p for p in probes if p.compaction == 1 and p.probe_type == "artifact")
    assert {f.value for f in artifact.expected} == {"src/billing/core.py", "tests/test_billing.py"}
    cont = next(p for p in probes if p.compaction == 0 and p.probe_type == "continuation")
    assert "tests/test_billing.py" in {f.value for f in cont.expected}  # what really came next


def test_echo_judge_reaches_the_ceiling_and_silence_scores_zero() -> None:
    chain, _ = build_chain()
    echo = probe_eval(chain.entries, EchoJudge())
    scored = echo.dropna(subset=["ceiling"])
    assert len(scored) > 0 and (scored["score"] == scored["ceiling"]).all()
    silent = probe_eval(chain.entries, SilentJudge())
    assert (silent.dropna(subset=["ceiling"])["score"] == 0).all() and silent["not_in_summary"].all()
    art = echo[(echo["probe_type"] == "artifact") & (echo["compaction"] == 1)]
    assert art["score"].iloc[0] == 1.0  # both files are in summary 2's blocks


def test_lookup_judge_with_rubric_and_request_shape() -> None:
    chain, _ = build_chain()
    judge = LookupJudge()
    res = probe_eval(chain.entries, judge, rubric=True)
    first = judge.requests[0]
    assert first.kind == "history" and first.system_prompt == PROBE_SYSTEM_PROMPT
    assert first.prompt.rstrip().endswith("Question: " + res["question"].iloc[0])
    scored = res.dropna(subset=["score", "ceiling"])
    assert (scored["score"] <= scored["ceiling"] + 1e-12).all()
    graded = res[res["probe_type"].isin(["continuation", "decision"]) & (res["n_expected"] > 0)]
    assert graded["rubric"].notna().all() and set(graded["rubric"]) <= {0.0, 0.5, 1.0}
    assert res[res["probe_type"] == "artifact"]["rubric"].isna().all()  # judged deterministically only
    rep = probe_report(res)
    assert list(rep["probe_type"]) == ["recall", "artifact", "continuation", "decision"]
    assert (rep["n"] == 3).all() and (rep["errors"] == 0).all()


def test_failing_judge_is_recorded_not_raised() -> None:
    chain, _ = build_chain()
    res = probe_eval(chain.entries, BrokenJudge())
    assert res["error"].str.contains("ConnectionError").all() and res["score"].isna().all()
    with pytest.raises(TypeError, match="complete"):
        probe_eval(chain.entries, object())


def test_probes_on_real_session(real_v3_paths) -> None:
    from tests.test_drift import _real_entries

    res = probe_eval(_real_entries(real_v3_paths[0]), EchoJudge())
    assert len(res) == 8
    art = res[res["probe_type"] == "artifact"]
    assert ((art["score"] > 0.5) & (art["score"] < 1)).all()  # most, not all, files survive
    assert not math.isnan(res[res["probe_type"] == "recall"]["score"].iloc[0])
