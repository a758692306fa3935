"""Triggers checked on real sessions: does a replay at the recorded settings compact where the recording did?

Run: ``.venv/bin/python benchmarks/replay_triggers.py``

Pi: each real Pi session with recorded compactions is replayed (calibrated, Pi 0.87.1's checks, the
default settings, the window of the recorded model). Up to the first recorded compaction the replay
sends exactly what the recording sent, so its first compaction should be at the same entry with the
same count, if the recording's Pi used the same rule and settings (the files were written by older Pi
releases, and a compaction may have been asked for by hand; Pi's entries do not say which).

Claude Code: its rule is stated from public material and the transcripts' own ``compactMetadata``:
automatic compaction when the context (the last request's input, cache reads and writes, plus its
output) passes the window (200k) less a buffer of 45k tokens (Claude Code up to 2.1.2x) or 33k (from
2.1.25; the 78 automatic compactions in the corpus have ``preTokens`` from 155,031 and from 167,038
respectively). For every automatic compaction the check finds the first request after the previous
compaction whose context passes that threshold and compares it with the request right before the
compaction (same entry) and its context with ``preTokens``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd

from pimem.core.compaction.compaction import CompactionSettings, get_assistant_usage
from pimem.core.incremental.caches import TokenCache
from pimem.replays.engine import replay
from pimem.replays.recording import input_tokens, output_tokens, recorded_release
from pimem.replays.validation import corpus_files
from pimem.sessions.load import load_session

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared"))
WINDOW = 200_000


def pi_triggers() -> pd.DataFrame:
    rows = []
    for item in corpus_files(SHARED):
        if item.agent != "pi":
            continue
        session = load_session(item.path)
        path = session.get_branch()
        recorded = [(i, e) for i, e in enumerate(path) if e.get("type") == "compaction"]
        if not recorded:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = replay(session, CompactionSettings())
        events = result.events
        fired = events[events["kind"] == "compaction"]
        first = fired.iloc[0] if len(fired) else None
        check = None
        if first is not None:
            before = events.loc[:first.name]
            check = before[before["kind"] == "check"].iloc[-1]
        step, entry = recorded[0]
        rows.append({"file": item.path.name, "release": recorded_release(path) or "older (v1 file)",
                     "window": result.context_window, "recorded_step": step,
                     "recorded_tokens": entry.get("tokensBefore"),
                     "replayed_step": None if first is None else int(first["step"]),
                     "replayed_check": None if first is None else first["check"],
                     "replayed_tokens": None if check is None else float(check["context_tokens"]),
                     "threshold": result.context_window - CompactionSettings().reserve_tokens})
    frame = pd.DataFrame(rows)
    frame["token_difference"] = frame["replayed_tokens"] / frame["recorded_tokens"] - 1
    return frame


def claude_code_triggers() -> pd.DataFrame:
    """One row per automatic compaction (copies once): the context Claude Code counts before each
    request (the last request's input, cache and output, plus chars/4 of what came after it), where it
    first passes the threshold, and that count at the compaction against ``preTokens``."""
    rows = []
    seen: set[str] = set()
    cache = TokenCache()
    for item in corpus_files(SHARED):
        if item.agent != "claude-code":
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            session = load_session(item.path)
        threshold = WINDOW - (33_000 if _late(session) else 45_000)
        counts: list[tuple[int, float]] = []  # (position, count before a request there)
        usage = None
        trailing = 0.0
        for i, entry in enumerate(session.get_branch()):
            message = entry.get("message") if entry.get("type") == "message" else None
            if entry.get("type") == "compaction":
                key = str(entry.get("summary"))[:300]
                if (entry.get("details") or {}).get("trigger") == "auto" and key not in seen and usage is not None:
                    seen.add(key)
                    at_compaction = usage + trailing
                    crossed = [j for j, c in counts if c > threshold]
                    pre = entry.get("tokensBefore")
                    rows.append({"file": item.path.name, "threshold": threshold, "pre_tokens": pre,
                                 "count": at_compaction, "same_entry": not crossed and at_compaction > threshold,
                                 "crossed_before": bool(crossed), "token_difference": at_compaction / pre - 1})
                counts, usage, trailing = [], None, 0.0
                continue
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant" and get_assistant_usage(message):
                if usage is not None:
                    counts.append((i, usage + trailing))
                usage, trailing = input_tokens(message) + output_tokens(message), 0.0
            elif usage is not None:
                trailing += cache.estimate(message)
    return pd.DataFrame(rows)


def _late(session) -> bool:
    """Whether the transcript was written by Claude Code 2.1.25 or later (its 33k buffer)."""
    version = ((session.header or {}).get("source") or {}).get("version")
    try:
        parts = [int(p) for p in str(version).split(".")[:3]]
    except ValueError:
        return False
    return parts >= [2, 1, 25]


def main() -> None:
    pd.set_option("display.width", 200)
    pi = pi_triggers()
    print("Pi: first recorded compaction against the first replayed one (calibrated, defaults)")
    print(pi.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    cc = claude_code_triggers()
    print(f"\nClaude Code: {len(cc)} automatic compactions with a request before them, under the buffer rule")
    print(f"same entry: {cc['same_entry'].sum()} ({cc['same_entry'].mean():.1%}); passed the threshold earlier: "
          f"{cc['crossed_before'].sum()}; |count / preTokens - 1| median {cc['token_difference'].abs().median():.2%}, "
          f"p90 {cc['token_difference'].abs().quantile(0.9):.2%}, bias {cc['token_difference'].median():+.2%}")


if __name__ == "__main__":
    main()
