"""The committed real-model summaries (datasets/model-summaries): they load, carry their provenance, and
replaying each sample with them reproduces the recorded requests, cut points and files byte for byte — so a
change in the pipeline that alters what is sent to the model, or where it cuts, fails here."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from pimem.summarizers import local_server as localmodel
from pimem.experiments import model_summaries
from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.session_manager import load_session
from pimem.sessions.samples import sample_dir
from pimem.summarizers import ExtractiveSummarizer

DATASET = model_summaries.dataset_dir()
MANIFEST = model_summaries.load_manifest()
REPLAYS = [r["file"] for r in MANIFEST["replays"]]


class _Reproducer:
    """Answers like the recording did, checking every request against the manifest's digest."""

    def __init__(self, entry: dict) -> None:
        self.rows = list(entry["requests"])
        self.recorded = model_summaries.recorded_summarizer(entry["file"])
        self.model = "recorded"
        self.seen: list[str] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        digest = model_summaries.request_digest(request)
        self.seen.append(digest)
        i = len(self.seen) - 1
        assert i < len(self.rows), f"request {i + 1} was not in the recording"
        row = self.rows[i]
        assert digest == row["request_sha256"], f"request {i + 1} ({request.kind}) differs from the recorded one"
        if row["stop_reason"] != "stop":
            return SummaryResponse(text="", stop_reason=row["stop_reason"], error_message=row["error"] or "failed")
        return self.recorded.complete(request)


def test_manifest_provenance_names_the_model_and_its_weights():
    p = MANIFEST["provenance"]
    assert p["model"] == localmodel.MODEL_ALIAS
    assert p["weights"]["sha256"] == localmodel.MODEL_SHA256 and p["weights"]["bytes"] == localmodel.MODEL_SIZE
    assert p["parameters"]["temperature"] == 0 and p["parameters"]["max_tokens_cap"] > 0
    assert p["server"]["n_ctx"] and p["server"]["package"]  # the server the recording was made with
    assert len(REPLAYS) >= 2 and all((DATASET / f).is_file() for f in REPLAYS)


@pytest.mark.parametrize("file", REPLAYS)
def test_recorded_summarizer_reads_each_replay_with_provenance(file):
    rec = model_summaries.recorded_summarizer(file)
    entry = next(r for r in MANIFEST["replays"] if r["file"] == file)
    assert len(rec.records) == len(entry["compactions"]) > 0
    assert rec.identity()["provenance"]["weights"]["sha256"] == localmodel.MODEL_SHA256
    assert rec.provenance["settings"] == entry["settings"]
    # real model text, not the extractive summarizer's
    assert all(r.history.strip() for r in rec.records)


@pytest.mark.parametrize("file", REPLAYS)
def test_replaying_with_the_recording_reproduces_requests_cut_points_and_file(file, tmp_path):
    entry = next(r for r in MANIFEST["replays"] if r["file"] == file)
    s = entry["settings"]
    answer = _Reproducer(entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(sample_dir() / f"{entry['sample']}.jsonl",
                        CompactionSettings(reserve_tokens=s["reserve_tokens"], keep_recent_tokens=s["keep_recent_tokens"]),
                        context_window=s["context_window"], summarizer=answer, token_source=s["token_source"], seed=0)
    assert answer.seen == [r["request_sha256"] for r in entry["requests"]]
    cuts = [{"id": c["id"], "firstKeptEntryId": c["firstKeptEntryId"], "tokensBefore": c["tokensBefore"]}
            for c in result.compactions]
    assert cuts == entry["compactions"]
    out = result.write(tmp_path / file)
    # byte for byte, but for the compactions' usage: a recording answers both halves of a split turn with
    # the entry's summed usage
    assert _without_usage(Path(out)) == _without_usage(DATASET / file)


def _without_usage(path: Path) -> list[str]:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith('{"type":"compaction"'):
            line = re.sub(r',"usage":\{(?:[^{}]|\{[^{}]*\})*\}', "", line)
            assert '"usage"' not in line
        lines.append(line)
    return lines


def test_extractive_summaries_would_not_reproduce_the_recording(tmp_path):
    """The reproduction check can fail: other summaries give another file (and other later requests
    wherever a request carries the previous summary)."""
    entry = max(MANIFEST["replays"], key=lambda r: len(r["requests"]))
    s = entry["settings"]
    seen: list[str] = []

    class Logging(ExtractiveSummarizer):
        def complete(self, request):  # type: ignore[override]
            seen.append(model_summaries.request_digest(request))
            return super().complete(request)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(sample_dir() / f"{entry['sample']}.jsonl",
                        CompactionSettings(reserve_tokens=s["reserve_tokens"], keep_recent_tokens=s["keep_recent_tokens"]),
                        context_window=s["context_window"], summarizer=Logging(), token_source=s["token_source"],
                        seed=0)
    recorded = [r["request_sha256"] for r in entry["requests"]]
    assert seen[0] == recorded[0]  # the first request has no previous summary: the same
    out = result.write(tmp_path / entry["file"])
    assert _without_usage(Path(out)) != _without_usage(DATASET / entry["file"])
    assert [c["summary"] for c in result.compactions] != [
        r["summary"] for r in map(json.loads, (DATASET / entry["file"]).read_text(encoding="utf-8").splitlines())
        if r.get("type") == "compaction"]


def test_replays_and_requests_frames():
    replays = model_summaries.replays_frame()
    requests = model_summaries.requests_frame()
    assert list(replays["file"]) == REPLAYS
    assert replays["requests"].sum() == len(requests)
    assert (requests["prompt_tokens"] > 0).all() and (requests["latency_s"] > 0).all()
    assert set(requests["kind"]) <= {"history", "turn_prefix", "branch"}
    load_session(DATASET / REPLAYS[0])  # a Pi session file


def test_only_the_appended_file_blocks_are_stripped():
    """A model that copies its previous summary quotes file blocks; those stay, the appended ones go."""
    from pimem.summarizers.recorded import strip_file_blocks

    quoted = "S\n\n<read-files>\na.ts\n</read-files>\n\n## Next Steps\n1. go"
    appended = "\n\n<read-files>\nb.ts\nc.ts\n</read-files>\n\n<modified-files>\nd.ts\n</modified-files>"
    assert strip_file_blocks(quoted + appended) == quoted
    assert strip_file_blocks("x\n\n<modified-files>\nd.ts\n</modified-files>") == "x"
    assert strip_file_blocks(quoted) == quoted
