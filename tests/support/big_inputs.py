"""Very large inputs for the figure checks, built directly as data (no long replays).

* :func:`big_session` — a session of 100,000 entries with branches, labels and compactions.
* :func:`big_replay` — a ReplayResult of 50,000 calls and 500 compactions, with its
  compaction effects table.
* :func:`big_report` — a drift report of 500 compactions with its fact, presence and section
  frames, shaped as :func:`pimem.drift.drift_report` makes them.
* :func:`big_sweep` — sweep results over a 14 × 14 grid of settings.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd

from pimem.replays.engine import EVENT_COLUMNS, ReplayResult
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.session_manager import Session
from pimem.drift.metrics import drift_report
from pimem.text.sections import COMPACTION_SECTIONS

TS = "2026-01-01T00:00:00.000Z"
USAGE = {"input": 0, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 10,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def big_session(n: int = 100_000, compaction_every: int = 10_000, seed: int = 3) -> Session:
    """``n`` entries: user / assistant turns (with usage), a label every 97 entries, a
    compaction every ``compaction_every`` entries, and short side branches (about 0.2%)."""
    rng = random.Random(seed)
    header = {"type": "session", "version": 3, "id": "big", "timestamp": TS, "cwd": "/project"}
    entries: list[dict] = []
    ids: list[str] = []
    parent = None
    for i in range(n):
        eid = f"{i:08x}"
        if i % compaction_every == compaction_every - 1:
            entry = {"type": "compaction", "id": eid, "parentId": parent, "timestamp": TS,
                     "summary": f"## Goal\nstep {i}", "firstKeptEntryId": ids[-40], "tokensBefore": 9000}
        elif i % 97 == 50:
            entry = {"type": "label", "id": eid, "parentId": parent, "timestamp": TS, "targetId": ids[-3],
                     "label": f"mark-{i}"}
        elif i % 2 == 0:
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": TS,
                     "message": {"role": "user", "content": f"question {i} " + "x" * (i % 400), "timestamp": i}}
        else:
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": TS,
                     "message": {"role": "assistant", "content": [{"type": "text", "text": f"answer {i} " + "y" * 300}],
                                 "api": "x", "provider": "p", "model": "m", "stopReason": "stop",
                                 "usage": dict(USAGE, input=1000 + i % 5000), "timestamp": i}}
        entries.append(entry)
        ids.append(eid)
        parent = ids[-rng.randint(2, 8)] if rng.random() < 0.002 and len(ids) > 10 else eid
    return Session(header, entries)


def big_replay(calls: int = 50_000, compactions: int = 500, window: int = 16_000, reserve: int = 4_000,
               seed: int = 5) -> tuple[ReplayResult, pd.DataFrame]:
    """A replay of ``calls`` assistant calls (one every second step) whose context saws between
    about 3k tokens and the threshold, compacting ``compactions`` times; and its effects table."""
    rng = np.random.default_rng(seed)
    steps = np.arange(calls) * 2 + 1
    per = calls // compactions
    phase = np.arange(calls) % per
    base = 3_000 + rng.integers(0, 1500, compactions).repeat(per)[:calls]
    context = (base + phase * (window - reserve - 3_000) / per + rng.normal(0, 150, calls)).clip(500)
    session = Session({"type": "session", "version": 3, "id": "big-replay", "timestamp": TS, "cwd": "/p"}, [])
    fired_at = np.nonzero(phase == per - 1)[0]
    checks = pd.DataFrame({"step": steps, "kind": "check", "check": "agent_end", "reason": "threshold",
                           "context_tokens": context, "threshold": window - reserve, "context_window": window,
                           "should_compact": False, "fired": False})
    checks.loc[fired_at, ["should_compact", "fired"]] = True
    comp = pd.DataFrame({"step": steps[fired_at], "kind": "compaction", "reason": "threshold",
                         "compaction_id": [f"c{i:06d}" for i in range(len(fired_at))],
                         "summary_tokens": rng.integers(300, 3000, len(fired_at))})
    events = pd.concat([checks, comp], ignore_index=True).sort_values(["step", "kind"], kind="stable")
    events = events.reindex(columns=EVENT_COLUMNS).reset_index(drop=True)
    calls_df = pd.DataFrame({"step": steps, "entry_id": [f"{s:08x}" for s in steps], "context_tokens": context,
                             "recorded_tokens": context})
    result = ReplayResult(session=session, events=events, compactions=[], settings=CompactionSettings(
        reserve_tokens=reserve, keep_recent_tokens=4_000), token_source="estimate", triggers="threshold",
        context_window=window, calls=calls_df)
    trigger = context[fired_at]
    after = base[np.minimum(fired_at + 1, calls - 1)].astype(float)
    effects = pd.DataFrame({"step": steps[fired_at], "compaction_id": comp["compaction_id"], "reason": "threshold",
                            "est_before": trigger.round(), "est_after": after, "freed": (trigger - after).round(),
                            "trigger_tokens": trigger, "summary_tokens": comp["summary_tokens"]})
    return result, effects


def big_report(compactions: int = 500, facts_per_compaction: int = 3, seed: int = 11) -> pd.DataFrame:
    """A drift report of ``compactions`` rows with the columns and ``attrs`` frames of
    :func:`pimem.drift.drift_report` (columns from an empty report, so the schema follows it)."""
    rng = np.random.default_rng(seed)
    columns = list(drift_report(Session({"type": "session", "version": 3, "id": "e", "timestamp": TS,
                                         "cwd": "/"}, [])).columns)
    idx = np.arange(compactions)
    report = pd.DataFrame(index=idx, columns=columns)
    report["compaction"] = idx
    report["entry_id"] = [f"e{i:07d}" for i in idx]
    report["first_kept_entry_id"] = [f"k{i:07d}" for i in idx]
    report["span_tokens"] = rng.integers(200, 20_000, compactions)
    report["summary_tokens"] = rng.integers(300, 4_000, compactions)
    report["compression_ratio_with_prev"] = (report["span_tokens"] / report["summary_tokens"]).astype(float)
    for col in ("fact_recall", "prev_retention", "cumulative_loss", "conformance", "sim_prev_cosine",
                "goal_sim_request_cosine", "compression_ratio"):
        if col in report.columns:
            report[col] = rng.random(compactions)
    kinds = np.array(["path", "identifier", "error", "command", "number", "constraint", "decision"])
    n_facts = compactions * facts_per_compaction
    introduced = np.repeat(idx, facts_per_compaction)
    fact_kind = kinds[rng.integers(0, len(kinds), n_facts)]
    values = [f"src/Module{i}/Handler.ts" if k == "path" else f"CamelCaseName{i}" for i, k in enumerate(fact_kind)]
    keys = [f"{k}:{v.lower() if k != 'path' else v}" for k, v in zip(fact_kind, values)]
    report.attrs["facts"] = pd.DataFrame({"key": keys, "kind": fact_kind, "value": values, "surface": values,
                                          "entry_id": [f"m{i:07d}" for i in range(n_facts)], "role": "assistant",
                                          "source": "text", "introduced_at": introduced})
    rows_fact = np.concatenate([np.full(compactions - c, f) for f, c in enumerate(introduced)])
    rows_comp = np.concatenate([np.arange(c, compactions) for c in introduced])
    ages = rows_comp - introduced[rows_fact]
    present = rng.random(len(rows_fact)) < 0.9 * np.exp(-ages / 120)
    report.attrs["presence"] = pd.DataFrame({"key": np.array(keys)[rows_fact], "kind": fact_kind[rows_fact],
                                             "compaction": rows_comp, "introduced_at": introduced[rows_fact],
                                             "age": ages, "present": present, "in_span": ages == 0})
    sections = list(COMPACTION_SECTIONS)
    sec = pd.DataFrame({"compaction": np.repeat(idx, len(sections)), "section": np.tile(sections, compactions)})
    sec["present"] = True
    sec["present_prev"] = sec["compaction"] > 0
    sec["tokens"] = rng.integers(0, 400, len(sec))
    sim = rng.random(len(sec))
    sec["jaccard_prev"] = np.where(sec["present_prev"], sim * 0.8, np.nan)
    sec["cosine_prev"] = np.where(sec["present_prev"], sim, np.nan)
    report.attrs["sections"] = sec
    report.attrs["notes"] = []
    return report


def big_sweep(n: int = 14, sessions: int = 3, seed: int = 2) -> pd.DataFrame:
    """Sweep results over ``n`` reserve × ``n`` keep values for a few sessions."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(sessions):
        for r in np.linspace(1_000, 60_000, n).astype(int):
            for k in np.linspace(2_000, 120_000, n).astype(int):
                rows.append({"session": f"s{s}", "reserve_tokens": int(r), "keep_recent_tokens": int(k),
                             "context_window": 200_000, "error": None,
                             "compactions": float(rng.integers(0, 600)),
                             "summarization_request_tokens": float(rng.integers(10_000, 90_000_000)),
                             "peak_context_tokens": float(rng.integers(100_000, 220_000)),
                             "mean_context_tokens": float(rng.random() * 150_000)})
    return pd.DataFrame(rows)
