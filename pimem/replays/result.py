"""What a replay produced (:class:`ReplayResult`) and the columns of its tables.

The event table has one row per check and per compaction (:data:`EVENTS`), the call table
one row per replayed assistant call (:data:`CALLS`); ``docs/replay.md`` says what each check
reads. The tables are made from the replay's rows when first read (a sweep never makes them).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar, cast, overload

import numpy as np
import pandas as pd

from pimem.base.tables import Column, Table, as_flag, is_missing, number_array
from pimem.base.types import AgentMessage, Message
from pimem.core.compaction.compaction import estimate_tokens
from pimem.core.messages import convert_to_llm
from pimem.core.incremental.paths import build_session_projection
from pimem.errors import ConfigurationError, UnknownColumnError
from pimem.replays.calibration import Calibration
from pimem.replays.tokens import get_token_source
from pimem.replays.orphans import ORPHANS, orphan_rate, orphan_rows
from pimem.sessions.compactions import CompactionSpan, compaction_spans

__all__ = ["ReplayResult", "ReplaySummary", "EVENTS", "CALLS", "SUMMARY", "EVENT_COLUMNS", "CALL_COLUMNS", "EventRow",
           "CallRow", "Rows"]

CALLS = Table("calls", [
    Column("step", description="the recorded entry's position on the replayed path"),
    Column("entry_id", description="the recorded assistant entry"),
    Column("context_tokens", description="the request's size by the token source (NaN when unknown)"),
    Column("recorded_tokens", description="the request's size the provider recorded (input + cache read + cache write)"),
    Column("prefix_tokens", description="the part of the request that repeats the previous request's prefix (a "
           "prompt cache can read it; 0 for a refused request and for the first)"),
    Column("output_tokens", description="the recorded response's output tokens"),
    Column("timestamp", description="the recorded message's time, epoch milliseconds"),
    Column("refused", description="the provider would refuse the request as larger than the window"),
], "One row per replayed assistant call. Values are as the replay wrote them (dtypes as pandas infers them).")

EVENTS = Table("events", [
    Column("step", description="the recorded entry's position on the replayed path"),
    Column("entry_id", description="the recorded entry at that step"),
    Column("leaf_id", description="the replayed session's leaf when the row was written"),
    Column("kind", description="``check``, ``compaction``, ``compact_failed``, ``compact_skipped``, ``turn_failed`` "
           "or ``context_edit``"),
    Column("check", description="where Pi checks: ``next_turn``, ``agent_end``, ``before_prompt``, ``before_call``, "
           "``turn`` (context edits) or ``recorded`` (a recorded compaction regenerated)"),
    Column("reason", description="``threshold``, ``overflow``, ``manual`` or ``strategy``"),
    Column("context_tokens", description="the context the check read, by the token source (on a compaction "
           "row: that of the check that fired it)"),
    Column("threshold", description="context window − reserve tokens"),
    Column("context_window", description="the model's context window"),
    Column("should_compact", description="the strategy's decision at the check"),
    Column("fired", description="a compaction (or edit) ran and was written"),
    Column("will_retry", description="Pi retries the refused request after this compaction"),
    Column("note", description="why a check or compaction went as it did (``failed``, ``nothing to compact``, …)"),
    Column("compaction_id", description="the compaction entry written"),
    Column("first_kept_entry_id", description="the compaction's first kept entry"),
    Column("messages_summarized", description="messages the preparation summarized"),
    Column("turn_prefix_messages", description="messages of a split turn's prefix"),
    Column("split_turn", description="the cut split a turn"),
    Column("tokens_before", description="Pi's ``tokensBefore`` (see ``docs/replay.md``)"),
    Column("tokens_after", description="Pi's estimate of the projected context after the compaction or edit"),
    Column("summary_tokens", description="the summary's chars/4"),
    Column("request_tokens", description="tokens the summary requests sent"),
    Column("response_tokens", description="tokens the summary requests received"),
    Column("summary_calls", description="summary requests made"),
    Column("latency_s", description="seconds the compaction took"),
    Column("error", description="why a compaction or turn failed"),
    Column("from_hook", description="a hook supplied the compaction"),
    Column("recorded_first_kept_entry_id", description="the recorded compaction's ``firstKeptEntryId`` "
           "(``triggers=\"recorded\"``)"),
    Column("recorded_tokens_before", description="the recorded compaction's ``tokensBefore``"),
    Column("context_edits", description="context edits the strategy wrote"),
], "One row per check, compaction, failure and context edit of a replay. Values are as the replay wrote them "
   "(dtypes as pandas infers them).")

CALL_COLUMNS = CALLS.names
EVENT_COLUMNS = EVENTS.names


_ABSENT: Any = object()  # what a row's column holds when the row does not hold the column
_INT64 = 1 << 63


class _Column:
    """One column of :class:`Rows`, packed: a tag byte per row (0: the row does not hold the column, 1: its
    value is in ``other``, by row) and the values as the column's kind holds them: ``"int"`` and ``"float"``
    in an ``array`` (8 bytes a row, tag 2), ``"object"`` in a list (tag 2), ``"code"`` in the tag alone (3 and
    on: the column's first 253 distinct values, each held once). A value its kind does not hold goes to
    ``other``: every value reads back as it was given, of its own type."""

    __slots__ = ("kind", "tags", "data", "filler", "other", "values", "codes")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.tags = bytearray()
        self.data: Any = {"int": array("q"), "float": array("d"), "object": [], "code": None}[kind]
        self.filler: Any = {"int": 0, "float": 0.0}.get(kind)  # the data of a row whose value is elsewhere
        self.other: dict[int, Any] = {}
        self.values: list[Any] = []  # "code": the value of tag 3 + i
        self.codes: dict[Any, int] = {}

    def push(self, value: Any) -> None:
        """A new last row holding ``value`` (:data:`_ABSENT`: a row without the column)."""
        data = self.data
        if value is _ABSENT:
            self.tags.append(0)
            if data is not None:
                data.append(self.filler)
            return
        kind = self.kind
        if kind == "code":
            tag = self._code(value)
            if tag == 1:
                self.other[len(self.tags)] = value
            self.tags.append(tag)
        elif kind == "object" or self._packs(value):
            data.append(value)
            self.tags.append(2)
        else:
            self.other[len(self.tags)] = value
            data.append(self.filler)
            self.tags.append(1)

    def set(self, row: int, value: Any) -> None:
        """Set ``row``'s value."""
        if self.tags[row] == 1:
            del self.other[row]
        kind = self.kind
        if kind == "code":
            tag = self._code(value)
        elif kind == "object" or self._packs(value):
            self.data[row] = value
            tag = 2
        else:
            tag = 1
        if tag == 1:
            self.other[row] = value
        self.tags[row] = tag

    def _packs(self, value: Any) -> bool:
        """Whether the array of an ``"int"`` or ``"float"`` column holds ``value`` as it is."""
        if self.kind == "float":
            return value.__class__ is float
        return value.__class__ is int and -_INT64 <= value < _INT64

    def _code(self, value: Any) -> int:
        """The tag of ``value`` in a ``"code"`` column (1: the column holds 253 others, or it has no hash)."""
        cls = value.__class__
        # a string stands for itself; any other value is told apart by its type (True is not 1) and a float
        # by its bits (-0.0 is not 0.0, NaN is NaN)
        key = value if cls is str else (cls, value.hex()) if cls is float else (cls, value)
        try:
            tag = self.codes.get(key)
        except TypeError:
            return 1
        if tag is None:
            if len(self.values) >= 253:
                return 1
            tag = self.codes[key] = 3 + len(self.values)
            self.values.append(value)
        return tag

    def get(self, row: int) -> Any:
        """``row``'s value, or :data:`_ABSENT`."""
        tag = self.tags[row]
        if tag > 2:
            return self.values[tag - 3]
        if tag == 2:
            return self.data[row]
        return self.other[row] if tag else _ABSENT

    def as_list(self) -> list[Any]:
        """Every row's value (None where the row does not hold the column)."""
        tags = self.tags
        if self.kind == "code":
            by_tag = [None, None, None] + self.values
            out = [by_tag[t] for t in tags]
        else:
            out = self.data.tolist() if self.kind != "object" else list(self.data)
            if tags.count(2) != len(tags):
                for row, tag in enumerate(tags):
                    if tag == 0:
                        out[row] = None
        for row, value in self.other.items():
            out[row] = value
        return out


class _Row(Mapping[str, Any]):
    """One row of a replay's table (a view of :class:`Rows`): a mapping of the columns the row holds (a column
    it does not hold reads as missing), whose values can be set."""

    __slots__ = ("_rows", "_row")
    _names: tuple[str, ...] = ()  # the table's columns, in order
    _packed: dict[str, str] = {}  # the columns held packed (by kind, see _Column); the others by row, where set

    def __init__(self, rows: Rows[Any], row: int) -> None:
        self._rows, self._row = rows, row

    def __getitem__(self, key: str) -> Any:
        value = self._rows.value(self._row, key)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._rows.value(self._row, key)
        return default if value is _ABSENT else value

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._names:
            raise KeyError(f"{type(self).__name__} has no column {key!r}")
        self._rows.set(self._row, key, value)

    def __iter__(self) -> Iterator[str]:
        rows, row = self._rows, self._row
        return (name for name in self._names if rows.value(row, name) is not _ABSENT)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


_R = TypeVar("_R", bound=_Row)


class Rows(Sequence[_R]):
    """The rows of a replay's table, held by column (:class:`_Column`): a replay writes about one event row
    per recorded entry, and a check row takes about 45 bytes here (a slotted object with its own step and
    token count took 200). Reading gives a row view (:class:`EventRow`, :class:`CallRow`).

    Args:
        row_type: :class:`EventRow` or :class:`CallRow`.
    """

    def __init__(self, row_type: type[_R]) -> None:
        self.row_type = row_type
        self._names = frozenset(row_type._names)
        self._columns = {name: _Column(kind) for name, kind in row_type._packed.items()}
        self._packed_names = frozenset(self._columns)
        self._more: dict[int, dict[str, Any]] = {}  # row → its values of the other columns
        self._count = 0

    def append(self, values: Mapping[str, Any]) -> _R:
        """Add a row holding ``values`` (a column not among them is missing); its view."""
        row, columns = self._count, self._columns
        if not values.keys() <= self._packed_names:
            unknown = values.keys() - self._names
            if unknown:
                raise self._unknown(sorted(unknown, key=str)[0])
            self._more[row] = {k: v for k, v in values.items() if k not in columns}
        for name, column in columns.items():
            column.push(values.get(name, _ABSENT))
        self._count = row + 1
        return self.row_type(self, row)

    def value(self, row: int, key: str) -> Any:
        """``row``'s value of column ``key``, or :data:`_ABSENT`."""
        column = self._columns.get(key)
        if column is not None:
            return column.get(row)
        more = self._more.get(row)
        return _ABSENT if more is None else more.get(key, _ABSENT)

    def set(self, row: int, key: str, value: Any) -> None:
        """Set ``row``'s value of column ``key``."""
        column = self._columns.get(key)
        if column is not None:
            column.set(row, value)
        elif key in self._names:
            self._more.setdefault(row, {})[key] = value
        else:
            raise self._unknown(key)

    def _unknown(self, key: Any) -> UnknownColumnError:
        return UnknownColumnError(f"{self.row_type.__name__} has no column {key!r} (its columns: "
                                  f"{', '.join(self.row_type._names)})")

    def column(self, key: str) -> list[Any]:
        """Every row's value of column ``key`` (None where the row does not hold it)."""
        column = self._columns.get(key)
        if column is not None:
            return column.as_list()
        out: list[Any] = [None] * self._count
        for row, more in self._more.items():
            out[row] = more.get(key)
        return out

    def where(self, key: str, value: Any) -> list[_R]:
        """The rows whose ``key`` is ``value`` (by the column's codes where it has them: no list of every row)."""
        column, row_type = self._columns.get(key), self.row_type
        if column is not None and column.kind == "code" and not column.other:
            tags = {3 + i for i, held in enumerate(column.values) if held == value}
            if None == value:  # noqa: E711 (as a row without the column reads)
                tags.add(0)
            return [row_type(self, row) for row, tag in enumerate(column.tags) if tag in tags]
        return [row_type(self, row) for row, held in enumerate(self.column(key)) if held == value]

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> _R: ...
    @overload
    def __getitem__(self, index: slice) -> list[_R]: ...
    def __getitem__(self, index: int | slice) -> _R | list[_R]:
        if isinstance(index, slice):
            return [self.row_type(self, row) for row in range(self._count)[index]]
        row = range(self._count)[index]  # negative from the end; IndexError past it
        return self.row_type(self, row)

    def __iter__(self) -> Iterator[_R]:
        row_type = self.row_type
        return (row_type(self, row) for row in range(self._count))

    def __repr__(self) -> str:
        return f"Rows({self.row_type.__name__}, {self._count} rows)"


class EventRow(_Row):
    """A row of the events table (:data:`EVENTS`): the columns of a check packed, the others by row."""

    __slots__ = ()
    _names = tuple(EVENT_COLUMNS)
    _packed = {"step": "int", "entry_id": "object", "leaf_id": "object", "kind": "code", "check": "code",
               "reason": "code", "context_tokens": "float", "threshold": "code", "context_window": "code",
               "should_compact": "code", "fired": "code", "will_retry": "code", "note": "code"}


class CallRow(_Row):
    """A row of the calls table (:data:`CALLS`)."""

    __slots__ = ()
    _names = tuple(CALL_COLUMNS)
    _packed = {"step": "int", "entry_id": "object", "context_tokens": "float", "recorded_tokens": "int",
               "prefix_tokens": "float", "output_tokens": "int", "timestamp": "int", "refused": "code"}


_CALIBRATED = " (a calibrated token source only)"

SUMMARY = Table("summary", [
    Column("entries", description="recorded entries replayed"),
    Column("assistant_calls", description="replayed assistant calls"),
    Column("checks", description="compaction checks"),
    Column("compactions", description="compactions written"),
    Column("context_edits", description="context edits the strategy wrote"),
    Column("threshold_compactions", description="compactions at the threshold"),
    Column("overflow_compactions", description="compactions after an overflow"),
    Column("manual_compactions", description="compactions at recorded points (``triggers=\"recorded\"``)"),
    Column("failed_compactions", description="compactions that failed"),
    Column("cancelled_compactions", description="compactions cancelled or aborted"),
    Column("refused_requests", description="requests the provider would refuse as larger than the window"),
    Column("failed_turns", description="turns whose request did not fit even after Pi's overflow compaction: the "
           "run ends there"),
    Column("left_out_entries", description="recorded entries left out after a failed turn"),
    Column("written_entries", description="entries the replay wrote itself (compactions, refusals, edits)"),
    Column("failure_reasons", description="why compactions and turns failed, each reason once with its count"),
    Column("split_turns", description="compactions that split a turn"),
    Column("summary_calls", description="summary requests"),
    Column("summarization_request_tokens", description="tokens the summary requests sent"),
    Column("summarization_response_tokens", description="tokens the summary requests received"),
    Column("summary_tokens", description="chars/4 of the summaries written"),
    Column("peak_context_tokens", description="the largest request the provider would answer"),
    Column("mean_context_tokens", description="the mean answered request"),
    Column("total_context_tokens_sent", description="the sum of the answered requests"),
    Column("tokens_resent_per_call", description="total_context_tokens_sent ÷ answered calls"),
    Column("final_context_tokens", description="Pi's usage-free estimate of the final projected context"),
    Column("context_window", description="the model's context window replayed with"),
    Column("calibration_slope", description="provider tokens per estimated token"),
    Column("calibration_overhead", description="the calibration's fixed tokens per request" + _CALIBRATED),
    Column("calibration_floor_ratio", description="the calibration's floor" + _CALIBRATED),
    Column("calibration_points", description="recorded calls fitted" + _CALIBRATED),
    Column("calibration_r2", description="the fit's R²" + _CALIBRATED),
    Column("calibration_median_relative_error", description="the fit's median relative error" + _CALIBRATED),
    Column("calibration_warning", description="why the fit is poor, if it is" + _CALIBRATED),
    Column("floored_calls", description="calls whose simulated tokens the calibration's floor raised"),
    Column("references_checked", description="later uses of summarized facts checked (:mod:`pimem.replays.orphans`)"),
    Column("orphans", description="those the replayed context did not hold"),
    Column("orphan_reference_rate", description="orphans ÷ references_checked"),
    Column("token_source", description="how request tokens were counted"),
    Column("triggers", description="what made the replay compact"),
    Column("strategy", description="the compaction strategy's spec"),
    Column("warnings", description="what the replay warned about"),
], "What :meth:`ReplayResult.summary` returns, one value each (a sweep row carries them).")


class _ReplayFigures(TypedDict):
    """The keys of every :class:`ReplaySummary`."""

    entries: int
    assistant_calls: int
    checks: int
    compactions: int
    context_edits: int
    threshold_compactions: int
    overflow_compactions: int
    manual_compactions: int
    failed_compactions: int
    cancelled_compactions: int
    refused_requests: int
    failed_turns: int
    left_out_entries: int
    written_entries: int
    failure_reasons: str | None
    split_turns: int
    summary_calls: int
    summarization_request_tokens: float
    summarization_response_tokens: float
    summary_tokens: float
    peak_context_tokens: float
    mean_context_tokens: float
    total_context_tokens_sent: float
    tokens_resent_per_call: float
    final_context_tokens: float
    context_window: int
    calibration_slope: float
    floored_calls: int
    references_checked: int
    orphans: int
    orphan_reference_rate: float
    token_source: str
    triggers: str
    strategy: str
    warnings: str | None


class ReplaySummary(_ReplayFigures, total=False):
    """What :meth:`ReplayResult.summary` returns (a sweep's row holds the same keys); the fit's
    ``calibration_*`` keys below only for a calibrated token source."""

    calibration_overhead: float
    calibration_floor_ratio: float
    calibration_points: int
    calibration_r2: float
    calibration_median_relative_error: float
    calibration_warning: str | None


class _Table:
    """A table of a :class:`ReplayResult` made from the replay's rows when first read (a sweep reads
    only the summary, which counts from the rows); a table given or set is kept as it is."""

    def __init__(self, rows: str, table: Table) -> None:
        self.rows, self.table = rows, table

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = f"_{name}_table"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the field's default: made from the rows
        table = obj.__dict__.get(self.key)
        if table is None:  # made by columns: a column a row does not hold is None there (a replay's rows hold
            rows = getattr(obj, self.rows) or []  # only the columns they set)
            if isinstance(rows, Rows):
                table = self.table.frame({name: rows.column(name) for name in self.table.names})
            else:
                table = self.table.frame({name: [row.get(name) for row in rows] for name in self.table.names})
            obj.__dict__[self.key] = table
        return table

    def __set__(self, obj: Any, value: Any) -> None:
        if value is None:
            obj.__dict__.pop(self.key, None)
        else:
            obj.__dict__[self.key] = value

    def rows_of(self, obj: Any) -> Sequence[Mapping[str, Any]]:
        """The table's rows: the replay's own while the table is not made yet or still has as many."""
        rows = getattr(obj, self.rows)
        table = obj.__dict__.get(self.key)
        if rows is not None and (table is None or len(rows) == len(table)):
            return rows
        return self.__get__(obj).to_dict("records")


@dataclass
class ReplayResult:
    """What a replay produced: the new session, one event row per check and per compaction.

    Args:
        session: the replayed session (a :class:`~pimem.Session`).
        compactions: the compaction entries the replay wrote, in order.
        settings: the :class:`~pimem.CompactionSettings` replayed under.
        token_source: how request tokens were counted (``"calibrated"``, ``"estimate"``, …).
        triggers: what made the replay compact (``"threshold"``, ``"recorded"`` or ``"none"``).
        context_window: the model's context window replayed with.
        events: one row per check, compaction, failure and context edit (:data:`EVENTS`;
            default: made from ``_event_rows`` when first read).
        calls: one row per replayed assistant call (:data:`CALLS`; default: from ``_call_rows``).
        calibration_slope: the calibration's provider tokens per estimated token.
        calibration: the token calibration fitted on the recording.
        floored_calls: the calls whose simulated tokens the calibration's floor raised.
        left_out_ids: the ids of recorded entries left out after a failed turn ended its run.
        written_entries: entries the replay wrote itself, by kind (``compaction``, ``refusal``, ``context_edit``).
        warnings: what the replay warned about.
        strategy: the compaction strategy's spec (``"pi-0.87.1"`` by default).
        context_edit_ids: the ids of the context edits the strategy wrote.
    """

    session: Any
    compactions: list[dict]
    settings: Any
    token_source: str
    triggers: str
    context_window: int
    events: pd.DataFrame = _Table("_event_rows", EVENTS)
    calls: pd.DataFrame = _Table("_call_rows", CALLS)
    calibration_slope: float = 1.0
    calibration: Calibration = field(repr=False, default_factory=Calibration)
    floored_calls: int = 0
    left_out_ids: list[str] = field(repr=False, default_factory=list)
    written_entries: dict[str, int] = field(repr=False, default_factory=dict)
    warnings: list[str] = field(repr=False, default_factory=list)
    strategy: str = "pi-0.87.1"
    context_edit_ids: list[str] = field(repr=False, default_factory=list)
    _leaf_at: list[Any] = field(repr=False, default_factory=list)
    _orphans: Any = field(repr=False, default=None)
    _orphan_rows: list[dict] | None = field(repr=False, default=None)
    _spans: Any = field(repr=False, default=None)
    _event_rows: Sequence[Mapping[str, Any]] | None = field(repr=False, default=None)  # the tables' rows, as the
    _call_rows: Sequence[Mapping[str, Any]] | None = field(repr=False, default=None)  # replay made them (Rows)

    def compaction_spans(self) -> list[CompactionSpan]:
        """The replayed session's compactions with the spans they summarized
        (:func:`pimem.sessions.compactions.compaction_spans`; computed once, shared by the measures)."""
        if self._spans is None:
            self._spans = compaction_spans(self.session)
        return list(self._spans)

    def orphan_references(self) -> pd.DataFrame:
        """Per replayed compaction, the recorded agent's later uses of summarized facts that the
        replayed context did not hold (:func:`pimem.replays.orphans.orphan_references`; computed once)."""
        if self._orphans is None:
            self._orphans = ORPHANS.frame(self._orphan_rows_once())
        return self._orphans

    def _orphan_rows_once(self) -> list[dict]:
        if self._orphan_rows is None:
            self._orphan_rows = orphan_rows(self, spans=self.compaction_spans())
        return self._orphan_rows

    def table_rows(self, name: str) -> Sequence[Mapping[str, Any]]:
        """The rows of the ``"events"`` or ``"calls"`` table as mappings, without making the table
        (the replay's own rows while the table was not edited: read them, do not change them)."""
        if name not in _TABLES:
            raise ConfigurationError(f"a replay's tables are {sorted(_TABLES)}, not {name!r}")
        return _TABLES[name].rows_of(self)

    def summary(self) -> ReplaySummary:
        """Counts, summarization tokens, peak and mean context, tokens re-sent per call, the
        calibration and its warnings, and the orphan-reference rate (the replay is open-loop:
        see :mod:`pimem.replays.orphans`).

        Requests larger than the window are refused by the provider (``refused_requests``); a
        turn whose request still did not fit after Pi's overflow compaction failed
        (``failed_turns``; ``failure_reasons`` says why, with the reasons of failed compactions); its
        run ends there, so the rest of the recorded run is left out (``left_out_entries``).
        Context sizes (peak, mean, total) are over the calls the provider would have answered.
        """
        ev = _TABLES["events"].rows_of(self)
        comp, failed, turns_failed, checks = (_where(ev, "kind", kind) for kind in (
            "compaction", "compact_failed", "turn_failed", "check"))
        calls = _TABLES["calls"].rows_of(self)
        orphans = self._orphan_rows_once()
        ctx = number_array(tokens for tokens, refused in zip(_column(calls, "context_tokens"), _column(calls, "refused"))
                           if not as_flag(refused))
        answered = int((~np.isnan(ctx)).sum())  # a column's max, mean and sum skip what is missing
        sent = float(np.nansum(ctx)) if answered else 0.0
        reasons = [r.get("reason") for r in comp]
        return cast(ReplaySummary, {
            "entries": len(self._leaf_at),
            "assistant_calls": len(calls),
            "checks": len(checks),
            "compactions": len(comp),
            "context_edits": int(_total(ev, "context_edits")),
            "threshold_compactions": reasons.count("threshold"),
            "overflow_compactions": reasons.count("overflow"),
            "manual_compactions": reasons.count("manual"),
            "failed_compactions": sum(r.get("note") == "failed" for r in failed),
            "cancelled_compactions": sum(r.get("note") in ("cancelled", "aborted") for r in failed),
            "refused_requests": sum(r.get("check") == "before_call" for r in checks),
            "failed_turns": len(turns_failed),
            "left_out_entries": len(self.left_out_ids),
            "written_entries": sum(self.written_entries.values()),
            "failure_reasons": _reasons(failed, turns_failed),
            "split_turns": sum(as_flag(r.get("split_turn")) for r in comp),
            "summary_calls": int(_total(ev, "summary_calls")),
            "summarization_request_tokens": _total(ev, "request_tokens"),
            "summarization_response_tokens": _total(ev, "response_tokens"),
            "summary_tokens": _total(comp, "summary_tokens"),
            "peak_context_tokens": float(np.nanmax(ctx)) if answered else 0.0,
            "mean_context_tokens": sent / answered if answered else 0.0,
            "total_context_tokens_sent": sent,
            "tokens_resent_per_call": sent / answered if answered else 0.0,
            "final_context_tokens": float(self.final_context_tokens()),
            "context_window": self.context_window,
            "calibration_slope": self.calibration_slope,
            **({k: v for k, v in self.calibration.as_dict().items() if k != "calibration_slope"}
               if get_token_source(self.token_source).calibrated else {}),
            "floored_calls": self.floored_calls,
            "references_checked": sum(r["references"] for r in orphans),
            "orphans": sum(r["orphans"] for r in orphans),
            "orphan_reference_rate": orphan_rate(orphans),
            "token_source": self.token_source,
            "triggers": self.triggers,
            "strategy": self.strategy,
            "warnings": "; ".join(self.warnings) or None,
        })

    def accepted_calls(self) -> pd.DataFrame:
        """The calls the provider would have answered (a refused request whose turn failed is left out)."""
        if "refused" not in self.calls.columns:
            return self.calls
        return self.calls[~self.calls["refused"].fillna(False).astype(bool)]

    def final_context_tokens(self) -> int:
        """Pi's usage-free estimate of the replayed session's final projected context."""
        msgs = build_session_projection(self.session).messages
        return sum(estimate_tokens(m) for m in msgs)

    def context_at(self, step: int, *, llm: bool = True) -> list[Message] | list[AgentMessage]:
        """The projected messages at ``step`` (after recorded entry ``step`` was replayed).

        ``llm=True`` gives what the model is sent (``convert_to_llm``); else the agent messages.
        """
        if not self._leaf_at:
            return []
        leaf = self._leaf_at[step]
        if leaf is None:
            return []
        messages = build_session_projection(self.session, leaf).messages
        return convert_to_llm(messages) if llm else cast("list[AgentMessage]", messages)

    def write(self, path: str | Path) -> Path:
        """Write the replayed session (JSONL) atomically; returns the path."""
        self.session.write(path)
        return Path(path)


_TABLES: dict[str, _Table] = {name: ReplayResult.__dict__[name] for name in ("events", "calls")}


def _column(rows: Sequence[Mapping[str, Any]], key: str) -> Sequence[Any]:
    """Every row's value of ``key`` (None where a row does not hold it)."""
    return rows.column(key) if isinstance(rows, Rows) else [r.get(key) for r in rows]


def _where(rows: Sequence[Mapping[str, Any]], key: str, value: Any) -> list[Mapping[str, Any]]:
    """The rows whose ``key`` is ``value``."""
    if isinstance(rows, Rows):
        return rows.where(key, value)
    return [r for r in rows if r.get(key) == value]


def _total(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    """:func:`~pimem.base.tables.column_total` of the rows, by column."""
    return float(np.nansum(number_array(_column(rows, key)))) if rows else 0.0


def _reasons(failed: list[Mapping[str, Any]], turns_failed: list[Mapping[str, Any]]) -> str | None:
    """Why compactions and turns failed, each reason once with its count (None: nothing failed)."""
    reasons: dict[str, int] = {}
    for text in [r["error"] for r in failed if not is_missing(r.get("error"))] + [
            f"turn failed: {r['note']}" for r in turns_failed if not is_missing(r.get("note"))]:
        reasons[str(text)] = reasons.get(str(text), 0) + 1
    if not reasons:
        return None
    return "; ".join(f"{n} × {text}" if n > 1 else text for text, n in reasons.items())
