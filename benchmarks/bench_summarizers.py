"""Summarizer speed: extractive requests per second on real sessions, and the cache's cost per hit.

Requests are built from the real Pi sessions (``../shared/datasets/pi-mono/*.jsonl``; the bundled
samples when absent) through the pipeline: at every user message of the path that gives a
preparation, the history request (and the turn-prefix request of a split turn) ``compact()`` would
send. Figures are ratios against baselines run side by side:

* extractive: requests/second, and its time per request against serializing the same span
  (``serialize_conversation``, the work every summarizer's input costs anyway);
* cache: a hit in ``CachedSummarizer`` (SQLite lookup + checksum) against a direct call to a trivial
  summarizer, and a miss (call + atomic insert) against the same.

Run: ``.venv/bin/python -m benchmarks.bench_summarizers [--limit N]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pimem.core.compaction.compaction import (
    CompactionSettings,
    build_history_prompt,
    build_turn_prefix_prompt,
    prepare_compaction,
)
from pimem.core.compaction.utils import serialize_conversation
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.messages import convert_to_llm
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.core.session_manager import load_session
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer

REPO = Path(__file__).resolve().parent.parent
REAL = REPO.parent / "shared" / "datasets" / "pi-mono"


class TrivialSummarizer:
    model = "trivial"

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        return SummaryResponse(text="## Goal\n- x", usage=None)


def session_paths() -> list[Path]:
    real = [REAL / "before-compaction.jsonl", REAL / "large-session.jsonl"]
    if all(p.exists() for p in real):
        return real
    return sorted((REPO / "datasets" / "sessions").glob("*.jsonl"))


def build_requests(limit: int) -> list[tuple[SummaryRequest, list]]:
    """(request, the messages it serializes) at each user message of each session's path."""
    out: list[tuple[SummaryRequest, list]] = []
    settings = CompactionSettings()
    for path in session_paths():
        branch = load_session(path).get_branch()
        ends = [i + 1 for i, e in enumerate(branch) if e.get("type") == "message" and e["message"]["role"] == "user"]
        for end in ends:
            prep = prepare_compaction(branch[:end], settings)
            if prep is None:
                continue
            if prep.messages_to_summarize:
                prompt = build_history_prompt(prep.messages_to_summarize, None, prep.previous_summary)
                out.append((SummaryRequest("history", SUMMARIZATION_SYSTEM_PROMPT, prompt, 13107),
                            prep.messages_to_summarize))
            if prep.is_split_turn and prep.turn_prefix_messages:
                prompt = build_turn_prefix_prompt(prep.turn_prefix_messages)
                out.append((SummaryRequest("turn_prefix", SUMMARIZATION_SYSTEM_PROMPT, prompt, 8192),
                            prep.turn_prefix_messages))
            if len(out) >= limit:
                return out
    return out


def timed(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--cache-requests", type=int, default=2000)
    args = parser.parse_args()

    pairs = build_requests(args.limit)
    requests = [r for r, _ in pairs]
    chars = sum(len(r.prompt) for r in requests)
    print(f"sessions: {', '.join(p.name for p in session_paths())}")
    print(f"requests: {len(requests)} ({chars / 1e6:.1f} M prompt characters, "
          f"median {statistics.median(len(r.prompt) for r in requests) / 1000:.0f} k)")

    ex = ExtractiveSummarizer()
    t_ex = timed(lambda: [ex.complete(r) for r in requests])
    t_ser = timed(lambda: [serialize_conversation(convert_to_llm(m)) for _, m in pairs])
    print("\nextractive summarizer")
    print(f"  requests/second          {len(requests) / t_ex:10.1f}")
    print(f"  ms per request           {1000 * t_ex / len(requests):10.2f}")
    print(f"  MB of prompt per second  {chars / t_ex / 1e6:10.1f}")
    print(f"  baseline: serializing the same spans {1000 * t_ser / len(requests):.2f} ms/request; "
          f"extractive / serialize = {t_ex / t_ser:.2f}x")

    n = args.cache_requests
    small = [SummaryRequest("history", "sys", f"prompt {i} " + "x" * 2000, 1000) for i in range(n)]
    trivial = TrivialSummarizer()
    with tempfile.TemporaryDirectory() as tmp:
        cache = CachedSummarizer(trivial, Path(tmp) / "bench.sqlite")
        t_miss = timed(lambda: [cache.complete(r) for r in small], repeats=1)  # first pass: misses + inserts
        t_hit = timed(lambda: [cache.complete(r) for r in small])
        t_direct = timed(lambda: [trivial.complete(r) for r in small])
        t_key = timed(lambda: [cache.key(r) for r in small])
        print("\ncache (SQLite WAL) over a trivial summarizer")
        print(f"  direct call              {1e6 * t_direct / n:10.2f} µs")
        print(f"  cache key (sha256)       {1e6 * t_key / n:10.2f} µs")
        print(f"  hit                      {1e6 * t_hit / n:10.2f} µs   overhead per hit "
              f"{1e6 * (t_hit - t_direct) / n:.1f} µs ({t_hit / t_direct:.0f}x a trivial call)")
        print(f"  miss (call + insert)     {1e6 * t_miss / n:10.2f} µs")
        real_hits = [cache.complete(r) for r in requests[:50]]  # real-size prompts: miss then hit
        t_real_hit = timed(lambda: [cache.complete(r) for r in requests[:50]])
        t_real_ex = timed(lambda: [ex.complete(r) for r in requests[:50]])
        print(f"  hit on real requests     {1e6 * t_real_hit / len(real_hits):10.2f} µs "
              f"vs extractive {1e6 * t_real_ex / len(real_hits):.0f} µs: a hit is "
              f"{t_real_ex / t_real_hit:.1f}x faster than recomputing")


if __name__ == "__main__":
    main()
