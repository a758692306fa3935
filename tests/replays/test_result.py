"""A replay's summary has exactly the keys its TypedDict (``ReplaySummary``) declares, of the declared kinds."""

from __future__ import annotations

import random
import typing
import warnings

import pandas as pd
import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.replays.engine import replay
from pimem.replays.recording import calibrate_recording
from pimem.replays.result import CALL_COLUMNS, EVENT_COLUMNS, SUMMARY, CallRow, EventRow, ReplaySummary, Rows
from pimem.sessions.load import load_session
from pimem.sessions.samples import sample_session_paths

KINDS = {int: (int,), float: (int, float), str: (str,)}


def _kinds_of(hint: object) -> tuple[type, ...]:
    args = typing.get_args(hint) or (hint,)
    return tuple(kind for arg in args for kind in (KINDS.get(arg, (arg,)) if isinstance(arg, type) else ()))


@pytest.mark.parametrize("token_source", ["calibrated", "estimate"])
def test_the_summary_is_described_by_its_typeddict(token_source: str) -> None:
    path = next(p for p in sample_session_paths() if p.name == "gpxkit-antimeridian.jsonl")
    result = replay(path, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), context_window=8000,
                    token_source=token_source)
    summary = result.summary()
    keys = set(summary)
    assert ReplaySummary.__required_keys__ <= keys <= ReplaySummary.__required_keys__ | ReplaySummary.__optional_keys__
    assert (keys >= ReplaySummary.__optional_keys__) == (token_source == "calibrated")
    hints = typing.get_type_hints(ReplaySummary)
    wrong = {k: v for k, v in summary.items() if not isinstance(v, _kinds_of(hints[k]))}
    assert wrong == {}
    assert summary["compactions"] > 0  # the replay compacted: the figures are not all defaults
    assert set(SUMMARY.names) == set(hints)  # the declared columns are the TypedDict's keys
    assert list(summary) == [c for c in SUMMARY.names if c in summary]  # in the declared order


def _table_figures(result) -> dict:
    """The summary's table figures as column operations on ``result.events``, ``result.calls`` and the
    orphan table."""
    ev, calls, orphans = result.events, result.calls, result.orphan_references()
    comp, failed = ev[ev["kind"] == "compaction"], ev[ev["kind"] == "compact_failed"]
    turns_failed = ev[ev["kind"] == "turn_failed"]
    ctx = calls[~calls["refused"].fillna(False).astype(bool)]["context_tokens"] if len(calls) else pd.Series(
        dtype=float)
    reasons = comp["reason"].value_counts().to_dict()
    errors = list(failed["error"].dropna()) + [f"turn failed: {n}" for n in turns_failed["note"].dropna()]
    return {
        "assistant_calls": len(calls),
        "checks": int((ev["kind"] == "check").sum()),
        "compactions": len(comp),
        "context_edits": int(ev["context_edits"].fillna(0).sum()),
        "threshold_compactions": int(reasons.get("threshold", 0)),
        "overflow_compactions": int(reasons.get("overflow", 0)),
        "failed_compactions": int((failed["note"] == "failed").sum()),
        "cancelled_compactions": int(failed["note"].isin(["cancelled", "aborted"]).sum()),
        "refused_requests": int(((ev["kind"] == "check") & (ev["check"] == "before_call")).sum()),
        "failed_turns": len(turns_failed),
        "reasons": sorted(set(map(str, errors))),
        "split_turns": int(comp["split_turn"].fillna(False).astype(bool).sum()),
        "summary_calls": int(ev["summary_calls"].fillna(0).sum()),
        "summarization_request_tokens": float(ev["request_tokens"].fillna(0).sum()),
        "summarization_response_tokens": float(ev["response_tokens"].fillna(0).sum()),
        "summary_tokens": float(comp["summary_tokens"].fillna(0).sum()),
        "peak_context_tokens": float(ctx.max()) if len(ctx) else 0.0,
        "mean_context_tokens": float(ctx.mean()) if len(ctx) else 0.0,
        "total_context_tokens_sent": float(ctx.sum()) if len(ctx) else 0.0,
        "references_checked": int(orphans["references"].sum()),
        "orphans": int(orphans["orphans"].sum()),
        "orphan_reference_rate": float(orphans["orphans"].sum() / orphans["references"].sum())
        if orphans["references"].sum() else "nan",
    }


def _summary_figures(summary) -> dict:
    reasons = summary["failure_reasons"]
    parts = [] if reasons is None else [p.split(" × ", 1)[-1] for p in reasons.split("; ")]
    figures = {k: summary[k] for k in (
        "assistant_calls", "checks", "compactions", "context_edits", "threshold_compactions", "overflow_compactions",
        "failed_compactions", "cancelled_compactions", "refused_requests", "failed_turns", "split_turns",
        "summary_calls", "summarization_request_tokens", "summarization_response_tokens", "summary_tokens",
        "peak_context_tokens", "mean_context_tokens", "total_context_tokens_sent", "references_checked", "orphans",
        "orphan_reference_rate")}
    figures["reasons"] = sorted(set(parts))
    if figures["orphan_reference_rate"] != figures["orphan_reference_rate"]:
        figures["orphan_reference_rate"] = "nan"
    return figures


@pytest.mark.parametrize("case", ["compacting", "refused", "disabled", "failed-retry", "masking"])
def test_the_summary_reads_the_tables_as_their_columns_say(case: str) -> None:
    """The summary counts from the rows the replay made; the same figures as column operations on the
    tables, on replays that compact, refuse requests, fail turns and mask tool output, and again
    after the table was edited (then the table is read)."""
    settings = {"compacting": dict(reserve_tokens=2000, keep_recent_tokens=2000),
                "refused": dict(reserve_tokens=500, keep_recent_tokens=800),
                "disabled": dict(reserve_tokens=500, keep_recent_tokens=800, enabled=False),
                "failed-retry": dict(reserve_tokens=1500, keep_recent_tokens=3900),
                "masking": dict(reserve_tokens=2000, keep_recent_tokens=2000)}[case]
    window = {"compacting": 8000, "refused": 4000, "disabled": 3000, "failed-retry": 4000, "masking": 8000}[case]
    seen = []
    for path in sample_session_paths():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # the window counts from what every request carries (chars adds the calibration's overhead)
            overhead = int(calibrate_recording(load_session(path).get_branch()).overhead)
            result = replay(path, CompactionSettings(**settings), context_window=window + overhead, token_source="chars",
                            strategy="masking:keep_turns=2" if case == "masking" else None)
        assert _summary_figures(result.summary()) == _table_figures(result)
        seen.append(_table_figures(result))
        if len(result.events) > 1:  # an edited table is what the summary reads
            result.events = result.events.iloc[1:].reset_index(drop=True)
            assert _summary_figures(result.summary()) == _table_figures(result)
    key = {"compacting": "compactions", "refused": "refused_requests", "disabled": "failed_turns",
           "failed-retry": "failed_compactions", "masking": "context_edits"}[case]
    assert any(f[key] for f in seen)  # the case did happen


def test_the_tables_are_made_from_the_replays_rows_when_first_read() -> None:
    path = next(p for p in sample_session_paths() if p.name == "gpxkit-antimeridian.jsonl")
    result = replay(path, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), context_window=8000)
    before = result.summary()  # counted from the rows, no table made
    assert "_events_table" not in result.__dict__ and "_calls_table" not in result.__dict__
    events, calls = result.events, result.calls
    assert list(events.columns) == EVENT_COLUMNS and list(calls.columns) == CALL_COLUMNS
    assert events.equals(pd.DataFrame({c: [r.get(c) for r in result._event_rows] for c in EVENT_COLUMNS}))
    assert all(r.keys() <= set(EVENT_COLUMNS) for r in result._event_rows)
    assert calls.equals(pd.DataFrame(result._call_rows, columns=CALL_COLUMNS))
    assert result.events is events  # made once
    assert (events["kind"] == "compaction").sum() == before["compactions"] > 0
    assert str(result.summary()) == str(before)
    result.calls = calls.iloc[:0]  # a table set is the one read
    assert result.calls.empty and result.summary()["assistant_calls"] == 0


# Values a replay's row can hold, each of its own type: the packed columns must give every one back as it was.
_ODD_VALUES = [0, -1, 1 << 62, -(1 << 63), 1 << 63, 10**30, True, False, None, 0.0, -0.0, float("nan"), float("inf"),
               2.5, "check", "", "\ud800", [1, 2], {"a": 1}, (1,)]


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return type(a) is type(b) and (a == b and str(a) == str(b) or a != a and b != b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("row_type", [EventRow, CallRow])
def test_rows_give_back_every_value_as_it_was_set(row_type: type) -> None:
    rng = random.Random(7)
    names = list(row_type._names)
    rows, expected = Rows(row_type), []
    for i in range(600):  # past the 253 distinct values a code column holds in its tags
        values = {name: rng.choice(_ODD_VALUES + [i, i + 0.5, f"id-{i}"]) for name in names if rng.random() < 0.7}
        rows.append(values)
        expected.append(values)
    for _ in range(400):  # values set later, over packed, coded and other values alike
        i, name = rng.randrange(len(expected)), rng.choice(names)
        value = rng.choice(_ODD_VALUES + [i, -i - 0.25, f"late-{i}"])
        rows[i][name] = value
        expected[i][name] = value
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert list(row) == [name for name in names if name in want]  # the columns it holds, in order
        assert all(_same(row[name], value) for name, value in want.items())
        assert all(row.get(name, "absent") == "absent" for name in names if name not in want)
    for name in names:
        assert all(_same(got, want.get(name)) for got, want in zip(rows.column(name), expected))
    for value in ("check", None, 0, 2.5):
        for name in names:
            found = [row._row for row in rows.where(name, value)]
            assert found == [i for i, want in enumerate(expected) if want.get(name) == value]
    with pytest.raises(KeyError):
        rows.append({"no such column": 1})
    with pytest.raises(KeyError):
        rows[0]["no such column"] = 1
    assert len(rows) == len(expected) and rows[-1]._row == len(expected) - 1
