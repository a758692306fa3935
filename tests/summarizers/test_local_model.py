"""Integration: the real local model (``pimem model``) answers a real summary request through the openai client.

Skips unless ``pimem model install`` has run (weights and server package in the cache); with
``PIMEM_REQUIRE_LOCAL_MODEL=1`` (CI) a missing install fails instead. Starts the server unless one runs,
sends the smallest history request of the committed real-model dataset, and checks the answer against
the recording: same prompt tokens (tokenizer and chat template), a finished summary, the same answer
when asked again (temperature 0, no prompt cache), and drift measures on the recorded compaction's span.
The recording was made on this server build (see the manifest); the text is not compared with the
recorded one, since llama.cpp picks its CPU kernels by the machine's instruction set and another CPU
rounds differently.
"""

from __future__ import annotations

import os
import warnings

import pytest

from pimem.summarizers import local_server as localmodel
from pimem.experiments import model_summaries
from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.session_manager import load_session
from pimem.drift.measures import summary_measures
from pimem.drift.records import compaction_records
from pimem.sessions.samples import sample_dir

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

FILE = "ventas-pipeline-refactor.w3000-r512-k800.jsonl"  # the smallest requests


def _installed() -> bool:
    s = localmodel.status()
    return bool(s["weights_present"] and s["server_installed"])


@pytest.fixture(scope="module")
def server():
    if not _installed():
        if os.environ.get("PIMEM_REQUIRE_LOCAL_MODEL"):
            pytest.fail("PIMEM_REQUIRE_LOCAL_MODEL is set but the local model is not installed (pimem model install)")
        pytest.skip("local model not installed (pimem model install)")
    localmodel.verify()
    state = localmodel.running_server()
    started = state is None
    if started:
        state = localmodel.start()
    yield state
    if started:
        localmodel.stop()


def _recorded_requests(file: str) -> list[tuple[SummaryRequest, dict, SummaryResponse | None]]:
    """(request, manifest row, recorded answer) of every request of a recorded replay."""
    entry = next(r for r in model_summaries.load_manifest()["replays"] if r["file"] == file)
    recorded = model_summaries.recorded_summarizer(file)
    rows = iter(entry["requests"])
    out: list[tuple[SummaryRequest, dict, SummaryResponse | None]] = []

    class Capture:
        model = "recorded"

        def complete(self, request: SummaryRequest) -> SummaryResponse:
            row = next(rows)
            if row["stop_reason"] != "stop":
                out.append((request, row, None))
                return SummaryResponse(text="", stop_reason=row["stop_reason"], error_message=row["error"])
            response = recorded.complete(request)
            out.append((request, row, response))
            return response

    s = entry["settings"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        replay(sample_dir() / f"{entry['sample']}.jsonl",
               CompactionSettings(reserve_tokens=s["reserve_tokens"], keep_recent_tokens=s["keep_recent_tokens"]),
               context_window=s["context_window"], summarizer=Capture(), token_source=s["token_source"], seed=0)
    return out


def test_real_summary_through_the_openai_client_matches_the_recording(server):
    from pimem.summarizers.local import LocalModelSummarizer

    requests = [(q, row, answer) for q, row, answer in _recorded_requests(FILE) if q.kind == "history" and answer]
    request, row, answer = min(requests, key=lambda t: t[1]["prompt_chars"])
    summarizer = LocalModelSummarizer(server["base_url"])
    assert summarizer.parameters() == model_summaries.load_manifest()["provenance"]["parameters"]
    response = summarizer.complete(request)

    assert response.extra["model"] == localmodel.MODEL_ALIAS
    assert response.usage["input"] + response.usage["cacheRead"] == row["prompt_tokens"]  # tokenizer, template
    assert 0 < response.usage["output"] <= row["max_tokens_sent"]
    # temperature 0 and every request computed from an empty context: asked again, the same answer
    again = summarizer.complete(request)
    assert again.text == response.text and again.usage["output"] == response.usage["output"]
    if response.extra["finish_reason"] == "length":
        # the greedy answer of this build ran into the cap: a failed summary, as Pi reads one
        assert response.stop_reason == "length" and response.usage["output"] == row["max_tokens_sent"]
        assert "token cap" in (response.error_message or "")
        pytest.skip("the model's answer to the smallest recorded request ran into its token cap")
    assert response.stop_reason == "stop", response.error_message

    # the drift measures of the live answer, on the recorded compaction's span
    session = load_session(model_summaries.dataset_dir() / FILE)
    record = next(r for r in compaction_records(session) if r.entry.get("id") == answer.extra["recorded_entry_id"])
    live = summary_measures(record, response.text)
    recorded = summary_measures(record, answer.text)
    assert live["written_tokens"] > 0 and live["n_needed"] == recorded["n_needed"]
    assert 0 <= live["fact_recall"] <= 1  # the span has facts to find (NaN would fail)
    if recorded["n_needed"]:  # this short sample's first compaction may need nothing later
        assert 0 <= live["needed_recall_all"] <= 1
    assert live["conformance"] > 0  # the model writes Pi's template headings


def test_a_prompt_beyond_the_context_fails_with_a_clear_error(server):
    from pimem.summarizers.local import LocalModelSummarizer

    summarizer = LocalModelSummarizer(server["base_url"])
    words = " ".join(f"w{i}" for i in range(server["n_ctx"] + 10))  # at least one token per word
    response = summarizer.complete(SummaryRequest("history", "Summarize.", words, 16))
    assert response.stop_reason == "error"
    assert "does not fit the local model's context" in response.error_message
