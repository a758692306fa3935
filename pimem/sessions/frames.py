"""DataFrame views of one session: entries, messages, tool calls, usage, compactions.

Every function takes a :class:`~pimem.core.session_manager.Session` and returns a new DataFrame; nothing
is cached and the session is never changed. Columns are typed: categoricals for small
vocabularies (entry type, role, model, tool name), nullable ``Int64``/``boolean`` where a value
can be missing, ``datetime64[ns, UTC]`` for times (entry ``timestamp`` strings are parsed as
JavaScript's ``new Date(iso)`` does). Character counts are JavaScript string lengths (UTF-16
code units), and token estimates are Pi's ``estimateTokens`` (``pimem.core.compaction.compaction``).

Entries whose content is too broken for Pi's own functions (which would throw) get NA in
the derived columns instead of an exception.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import pandas as pd

from pimem.base.js import parse_iso_ms, utf16_len
from pimem.base.tables import category_array, frame, str_array
from pimem.core.compaction.compaction import (
    calculate_context_tokens,
    estimate_chars,
    estimate_tokens,
    get_assistant_usage,
)
from pimem.core.messages import create_compaction_summary_message
from pimem.core.session_manager import build_context_entries, session_entry_to_context_messages
from pimem.sessions.spans import first_kept_index
from pimem.text.messages import message_preview

if TYPE_CHECKING:  # pragma: no cover
    from pimem.core.session_manager import Session

__all__ = [
    "compactions_df",
    "entries_df",
    "message_chars",
    "messages_df",
    "tool_calls_df",
    "usage_df",
]

PREVIEW_WIDTH = 120


# --------------------------------------------------------------------------- helpers


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _u16(value: Any) -> int:
    """JavaScript ``value.length`` for strings (UTF-16 units) and arrays; TypeError otherwise."""
    if isinstance(value, str):
        return utf16_len(value)
    if isinstance(value, list):
        return len(value)
    raise TypeError("no length")


def message_chars(message: dict[str, Any]) -> int:
    """The characters Pi's ``estimateTokens`` counts for one message (UTF-16 units).

    This is :func:`pimem.core.compaction.compaction.estimate_chars`:
    ``estimate_tokens(message) == ceil(message_chars(message) / 4)``. Raises ``TypeError``
    where Pi's function would throw.
    """
    return estimate_chars(message)


def _chars_and_tokens(messages: Sequence[dict[str, Any]]) -> tuple[int | None, int | None]:
    """(chars, Pi's token estimate) summed over messages; (None, None) if Pi would throw."""
    chars = tokens = 0
    try:
        for m in messages:
            c = estimate_chars(m)
            chars += c
            tokens += -(-c // 4)  # estimate_tokens(m) == ceil(message_chars(m) / 4)
    except (TypeError, AttributeError, KeyError, ValueError):
        return None, None
    return chars, tokens


def _context_messages(entry: dict[str, Any]) -> list[dict[str, Any]] | None:
    try:
        return session_entry_to_context_messages(entry)
    except (TypeError, AttributeError, KeyError, ValueError):
        return None


def _times(values: Iterable[Any]) -> pd.Series:
    """ISO strings → ``datetime64[ns, UTC]`` as ``new Date(iso)`` parses them (NaT if invalid)."""
    ms = [parse_iso_ms(v) for v in values]
    return ms_times(ms)


_NS_RANGE_MS = (2**63 - 1) // 1_000_000  # datetime64[ns] holds about ±292 years around 1970


def ms_times(values: Iterable[Any]) -> pd.Series:
    """Epoch milliseconds (numbers or None) → ``datetime64[ns, UTC]``; NaT outside its range.

    Whole milliseconds and their fraction are converted separately: ``ms * 1e6`` as a double
    is off by up to 128 ns at today's dates (1.7e18 is beyond a double's exact integers).
    """
    arr = np.array([_as_float(v) if _is_num(v) else np.nan for v in values], dtype="float64")
    valid = np.isfinite(arr) & (np.abs(arr) < _NS_RANGE_MS)
    ms = np.where(valid, arr, 0.0)
    whole = np.floor(ms)
    ns = whole.astype(np.int64) * 1_000_000 + np.round((ms - whole) * 1_000_000).astype(np.int64)
    out = pd.Series(pd.arrays.IntegerArray(ns, ~valid))
    return pd.to_datetime(out, unit="ns", utc=True).astype("datetime64[ns, UTC]")


def _as_float(v: Any) -> float:
    """``float(v)``; an integer beyond the double range is infinite (as JavaScript reads it), not an error."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _int_col(values: Sequence[Any]) -> pd.arrays.IntegerArray:
    if all(type(v) is int or v is None for v in values):  # the common case, fast
        try:
            return pd.array(values, dtype="Int64")
        except (OverflowError, TypeError):  # an integer beyond int64: the slow path reads it as unknown
            pass
    # beyond int64 (usage of 1e308 in a damaged file; the loader warns) is unknown, not an OverflowError
    return pd.array([int(v) if _is_num(v) and abs(v) < 2**63 and float(v).is_integer() else None for v in values],
                    dtype="Int64")


def _float_col(values: Sequence[Any]) -> np.ndarray:
    return np.array([_as_float(v) if _is_num(v) else np.nan for v in values], dtype="float64")


def _bool_col(values: Sequence[Any]) -> pd.arrays.BooleanArray:
    return pd.array([v if isinstance(v, bool) else None for v in values], dtype="boolean")


def _str_col(values: Sequence[Any]) -> pd.arrays.StringArray:
    return str_array([v if isinstance(v, str) else None for v in values])


def _cat_col(values: Sequence[Any]) -> pd.Categorical:
    return category_array([v if isinstance(v, str) else None for v in values])


def _plain_bool_col(values: Sequence[Any]) -> np.ndarray:
    return np.array(values, dtype=bool)


# A table's columns, stated once: name, dtype (one of these builders) and what it holds; the
# table's docstring and its DataFrame's dtypes both come from the list.
_BUILDERS: dict[str, Any] = {
    "string": _str_col, "Int64": _int_col, "float": _float_col, "bool": _plain_bool_col, "boolean": _bool_col,
    "category": _cat_col, "datetime64[ns, UTC]": _times, "object": lambda values: pd.Series(values, dtype=object),
}


@dataclass(frozen=True)
class Column:
    """One column of a table: its name, its dtype and a description for the docstring."""

    name: str
    dtype: str
    description: str = ""
    build: Any = None  # the builder when not the dtype's (epoch milliseconds: ``ms_times``)


def _rows(columns: Sequence[Column]) -> dict[str, Any]:
    """An empty list per column, to append a table's rows to."""
    return {c.name: [] for c in columns}


def _table(columns: Sequence[Column], rows: dict[str, Any]) -> pd.DataFrame:
    """The DataFrame of ``rows`` (a list of values per column; an array or Series is taken as it is)."""
    return frame({c.name: rows[c.name] if isinstance(rows[c.name], (np.ndarray, pd.Series))
                  else (c.build or _BUILDERS[c.dtype])(rows[c.name]) for c in columns})


def _columns_doc(columns: Sequence[Column]) -> str:
    """The ``Columns:`` paragraph of a table's docstring."""
    parts = [f"``{c.name}`` ({c.dtype}{': ' + c.description if c.description else ''})" for c in columns]
    return "Columns: " + ", ".join(parts) + "."


def _document(columns: Sequence[Column], function: Any) -> None:
    """Append the column list to ``function``'s docstring (at its indentation)."""
    text = textwrap.fill(_columns_doc(columns), 100, initial_indent="    ", subsequent_indent="    ",
                         break_long_words=False, break_on_hyphens=False)
    function.__doc__ = (function.__doc__ or "").rstrip() + "\n\n" + text + "\n    "


def _entry_lines(session: "Session") -> list[int | None]:
    """File line number (1-based) of each entry, when the session knows it."""
    lines = getattr(session, "_lines", None)  # kept by ``load_session``, None for appended entries
    if lines is None or len(lines) != len(session.entries):
        return [None] * len(session.entries)
    return list(lines)


class _StrKeyed(dict):
    """A dict keyed by entry ids: any other key (a number, an object, null) is simply absent."""

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, key, default) if key.__class__ is str else default

    def __contains__(self, key: object) -> bool:
        return key.__class__ is str and dict.__contains__(self, key)


class _StrSet(frozenset):
    """A set of entry ids: any other value is simply absent."""

    def __contains__(self, key: object) -> bool:
        return key.__class__ is str and frozenset.__contains__(self, key)


class _Tree:
    """Depth, child counts and the active path of a session, computed once per frame call.

    Only string ids are in the tree (as in Pi's index); other ids read as absent.
    """

    def __init__(self, session: "Session") -> None:
        entries = session.entries
        parent: dict[Any, Any] = _StrKeyed()
        for e in entries:
            eid = e.get("id")
            if eid.__class__ is str:
                pid = e.get("parentId")
                parent[eid] = pid if pid.__class__ is str else None
        self.parent = parent
        children: dict[Any, int] = _StrKeyed()
        for e in entries:
            pid = e.get("parentId")
            if pid.__class__ is str:
                children[pid] = children.get(pid, 0) + 1
        self.children = children
        depth: dict[Any, int] = _StrKeyed()
        for e in entries:
            eid = e.get("id")
            if eid.__class__ is not str or eid in depth:
                continue
            chain: list[Any] = []
            seen: set[Any] = set()
            cur = eid
            while cur is not None and cur not in depth and cur in parent and cur not in seen:
                seen.add(cur)
                chain.append(cur)
                cur = parent[cur]
            base = depth[cur] if cur in depth else -1
            for node in reversed(chain):
                base += 1
                depth[node] = base
        self.depth = depth
        self.active: frozenset[Any] = _StrSet(e.get("id") for e in session.get_branch())

    def is_descendant(self, entry_id: Any, ancestor_id: Any, limit: int = 100_000) -> bool:
        cur = entry_id
        seen = 0
        while cur is not None and seen < limit:
            if cur == ancestor_id:
                return True
            cur = self.parent.get(cur)
            seen += 1
        return False


def _usage_numbers(usage: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """(input, output, cacheRead, cacheWrite, totalTokens, cost.total) of a usage dict."""
    if not isinstance(usage, dict):
        return None, None, None, None, None, None
    cost = usage.get("cost")
    cost_total = cost.get("total") if isinstance(cost, dict) else None
    return (
        usage.get("input"),
        usage.get("output"),
        usage.get("cacheRead"),
        usage.get("cacheWrite"),
        usage.get("totalTokens"),
        cost_total,
    )


def _tool_names(message: dict[str, Any]) -> str | None:
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if not isinstance(content, list):
            return None
        names = [
            str(b.get("name"))
            for b in content
            if isinstance(b, dict) and b.get("type") == "toolCall" and b.get("name") is not None
        ]
        return ",".join(names) if names else None
    if role == "toolResult":
        name = message.get("toolName")
        return name if isinstance(name, str) else None
    return None


# --------------------------------------------------------------------------- entries


ENTRY_COLUMNS = [
    Column("line", "Int64", "line in the file, when the session was loaded from one"),
    Column("id", "string", "tree link"),
    Column("parent_id", "string", "tree link"),
    Column("type", "category", "entry type (``message``, ``compaction``, ``label``, …, unknown kept)"),
    Column("timestamp", "datetime64[ns, UTC]", "the entry's ``timestamp``; NaT if invalid"),
    Column("depth", "Int64", "ancestors above the entry (a root is 0; a dangling parent ends the count)"),
    Column("child_count", "Int64", "entries whose ``parentId`` is this id"),
    Column("on_active_path", "bool", "on ``Session.get_branch()`` (root → current leaf)"),
    Column("role", "category", "the message role, for ``message`` entries"),
    Column("message_chars", "Int64", "characters Pi's estimator counts (UTF-16 units) over the context messages "
           "the entry makes (``session_entry_to_context_messages``; 0 for entries outside context, NA where Pi "
           "would throw)"),
    Column("est_tokens", "Int64", "``estimate_tokens`` summed over those messages"),
    Column("tool_names", "string", "an assistant's tool calls, comma-joined; a tool result's tool"),
    Column("is_error", "boolean", "a tool result's ``isError``"),
    Column("stop_reason", "category", "an assistant's ``stopReason``"),
    Column("input", "Int64", "usage of an assistant message or ``usage`` entry, as recorded"),
    Column("output", "Int64", "usage, as recorded"),
    Column("cache_read", "Int64", "usage, as recorded"),
    Column("cache_write", "Int64", "usage, as recorded"),
    Column("total_tokens", "Int64", "usage, as recorded (NA when absent)"),
    Column("cost_total", "float", "``usage.cost.total``"),
    Column("provider", "category", "of an assistant message, ``model_change`` or ``usage``"),
    Column("model", "category", "of an assistant message, ``model_change`` or ``usage``"),
    Column("thinking_level", "category", "of a ``thinking_level_change``"),
    Column("first_kept_entry_id", "string", "of a compaction"),
    Column("tokens_before", "Int64", "of a compaction"),
    Column("from_id", "string", "a branch summary's ``fromId``"),
    Column("from_hook", "boolean", "a compaction's or branch summary's ``fromHook``"),
    Column("summary_chars", "Int64", "UTF-16 length of a compaction's or branch summary's summary"),
    Column("target_id", "string", "a ``label``'s or ``context_edit``'s target"),
    Column("custom_type", "category", "of ``custom`` / ``custom_message`` entries and custom messages"),
    Column("label", "string", "the entry's current label (``Session.get_label``)"),
]


def entries_df(session: "Session") -> pd.DataFrame:
    """One row per entry, in file order (the header is not an entry)."""
    entries = session.entries
    tree = _Tree(session)
    n = len(entries)
    cols: dict[str, list[Any]] = {c.name: [None] * n for c in ENTRY_COLUMNS}
    cols["line"] = _entry_lines(session)
    for i, e in enumerate(entries):
        eid = e.get("id")
        kind = e.get("type")
        cols["id"][i] = eid
        cols["parent_id"][i] = e.get("parentId")
        cols["type"][i] = kind
        cols["timestamp"][i] = e.get("timestamp")
        cols["depth"][i] = tree.depth.get(eid)
        cols["child_count"][i] = tree.children.get(eid, 0)
        cols["on_active_path"][i] = eid in tree.active
        cols["label"][i] = session.get_label(eid) if eid is not None else None
        msgs = _context_messages(e)
        if msgs is not None:
            cols["message_chars"][i], cols["est_tokens"][i] = _chars_and_tokens(msgs)
        if kind == "message":
            m = e.get("message")
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            cols["role"][i] = role
            cols["tool_names"][i] = _tool_names(m)
            if role == "assistant":
                cols["stop_reason"][i] = m.get("stopReason")
                cols["provider"][i] = m.get("provider")
                cols["model"][i] = m.get("model")
                (cols["input"][i], cols["output"][i], cols["cache_read"][i], cols["cache_write"][i],
                 cols["total_tokens"][i], cols["cost_total"][i]) = _usage_numbers(m.get("usage"))  # fmt: skip
            elif role == "toolResult":
                cols["is_error"][i] = m.get("isError")
            elif role == "custom":
                cols["custom_type"][i] = m.get("customType")
        elif kind == "compaction":
            cols["first_kept_entry_id"][i] = e.get("firstKeptEntryId")
            cols["tokens_before"][i] = e.get("tokensBefore")
            cols["from_hook"][i] = e.get("fromHook")
            s = e.get("summary")
            cols["summary_chars"][i] = _u16(s) if isinstance(s, str) else None
        elif kind == "branch_summary":
            cols["from_id"][i] = e.get("fromId")
            cols["from_hook"][i] = e.get("fromHook")
            s = e.get("summary")
            cols["summary_chars"][i] = _u16(s) if isinstance(s, str) else None
        elif kind == "model_change":
            cols["provider"][i] = e.get("provider")
            cols["model"][i] = e.get("modelId")
        elif kind == "thinking_level_change":
            cols["thinking_level"][i] = e.get("thinkingLevel")
        elif kind in ("label", "context_edit"):
            cols["target_id"][i] = e.get("targetId")
        elif kind in ("custom", "custom_message"):
            cols["custom_type"][i] = e.get("customType")
        elif kind == "usage":
            cols["provider"][i] = e.get("provider")
            cols["model"][i] = e.get("model")
            (cols["input"][i], cols["output"][i], cols["cache_read"][i], cols["cache_write"][i],
             cols["total_tokens"][i], cols["cost_total"][i]) = _usage_numbers(e.get("usage"))  # fmt: skip

    return _table(ENTRY_COLUMNS, cols)


_document(ENTRY_COLUMNS, entries_df)


# --------------------------------------------------------------------------- messages


def _block_counts(content: Any) -> tuple[int, int, int, int, int]:
    """(blocks, text, thinking, toolCall, image); a string content is one text block."""
    if isinstance(content, str):
        return 1, 1, 0, 0, 0
    if not isinstance(content, list):
        return 0, 0, 0, 0, 0
    text = thinking = calls = images = 0
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            text += 1
        elif kind == "thinking":
            thinking += 1
        elif kind == "toolCall":
            calls += 1
        elif kind == "image":
            images += 1
    return len(content), text, thinking, calls, images


MESSAGE_COLUMNS = [
    Column("line", "Int64"),
    Column("entry_id", "string"),
    Column("parent_id", "string"),
    Column("timestamp", "datetime64[ns, UTC]", "entry time"),
    Column("message_timestamp", "datetime64[ns, UTC]", "the message's own epoch-ms ``timestamp``; for assistants "
           "this is when the request started", build=ms_times),
    Column("role", "category"),
    Column("depth", "Int64"),
    Column("on_active_path", "bool"),
    Column("preview", "string", f"one line of readable text, at most {PREVIEW_WIDTH} characters"),
    Column("chars", "Int64", "Pi's estimator over the message, NA where Pi would throw"),
    Column("est_tokens", "Int64", "Pi's estimator over the message, NA where Pi would throw"),
    Column("content_blocks", "Int64", "a string content counts as one text block"),
    Column("text_blocks", "Int64"),
    Column("thinking_blocks", "Int64"),
    Column("tool_call_blocks", "Int64"),
    Column("image_blocks", "Int64"),
    Column("tool_name", "category", "of a tool result"),
    Column("tool_call_id", "string", "of a tool result"),
    Column("is_error", "boolean", "of a tool result"),
    Column("stop_reason", "category", "of an assistant"),
    Column("provider", "category", "of an assistant"),
    Column("model", "category", "of an assistant"),
    Column("custom_type", "category", "of a custom message"),
    Column("error_message", "string", "an assistant's ``errorMessage``"),
]


def messages_df(session: "Session") -> pd.DataFrame:
    """One row per ``message`` entry, in file order."""
    tree = _Tree(session)
    lines = _entry_lines(session)
    rows = _rows(MESSAGE_COLUMNS)
    for i, e in enumerate(session.entries):
        if e.get("type") != "message":
            continue
        m = e.get("message")
        if not isinstance(m, dict):
            m = {}
        eid = e.get("id")
        role = m.get("role")
        rows["line"].append(lines[i])
        rows["entry_id"].append(eid)
        rows["parent_id"].append(e.get("parentId"))
        rows["timestamp"].append(e.get("timestamp"))
        rows["message_timestamp"].append(m.get("timestamp"))
        rows["role"].append(role)
        rows["depth"].append(tree.depth.get(eid))
        rows["on_active_path"].append(eid in tree.active)
        try:
            preview = message_preview(m, PREVIEW_WIDTH)
        except (TypeError, AttributeError, ValueError):
            preview = None
        rows["preview"].append(preview)
        try:
            chars, tokens = _chars_and_tokens([m])
        except (TypeError, AttributeError, KeyError, ValueError):
            chars, tokens = None, None
        rows["chars"].append(chars)
        rows["est_tokens"].append(tokens)
        counts = _block_counts(m.get("content"))
        for key, value in zip(("content_blocks", "text_blocks", "thinking_blocks", "tool_call_blocks", "image_blocks"), counts):
            rows[key].append(value)
        is_result = role == "toolResult"
        is_assistant = role == "assistant"
        rows["tool_name"].append(m.get("toolName") if is_result else None)
        rows["tool_call_id"].append(m.get("toolCallId") if is_result else None)
        rows["is_error"].append(m.get("isError") if is_result else None)
        rows["stop_reason"].append(m.get("stopReason") if is_assistant else None)
        rows["provider"].append(m.get("provider") if is_assistant else None)
        rows["model"].append(m.get("model") if is_assistant else None)
        rows["custom_type"].append(m.get("customType") if role == "custom" else None)
        rows["error_message"].append(m.get("errorMessage") if is_assistant else None)
    return _table(MESSAGE_COLUMNS, rows)


_document(MESSAGE_COLUMNS, messages_df)


# --------------------------------------------------------------------------- tool calls


_DESCENDANT_WALK_LIMIT = 100_000  # ``_Tree.is_descendant``'s default limit


class _ResultIndex:
    """Tool results by ``toolCallId``, answering "the first result in file order below an entry".

    ``_Tree.is_descendant`` walks parent ids up from each candidate; with a tool-call id that
    repeats across many branches that is a walk per call and candidate. Here the id tree is
    numbered once in depth-first order (entry ``x`` is below ``a`` when ``a``'s number range holds
    ``x``'s), each id's results are sorted by that number, and a sparse table of their file
    positions gives the earliest one in a range in constant time. Ids in a parent cycle (not
    reached from a root) and trees deeper than the walk limit fall back to the walk.
    """

    def __init__(self, tree: _Tree, results: dict[Any, list[dict[str, Any]]]) -> None:
        self.tree = tree
        self.results = results
        children: dict[Any, list[Any]] = {}
        roots: list[Any] = []
        parent = tree.parent
        for node, pid in parent.items():
            try:
                linked = pid is not None and pid in parent
            except TypeError:  # an unhashable parentId links nowhere
                linked = False
            if linked:
                children.setdefault(pid, []).append(node)
            else:
                roots.append(node)
        enter: dict[Any, int] = {}
        leave: dict[Any, int] = {}
        depth: dict[Any, int] = {}
        deepest = 0
        counter = 0
        for root in roots:
            enter[root] = counter
            depth[root] = 0
            counter += 1
            pending = [(root, iter(children.get(root, ())))]
            while pending:
                node, kids = pending[-1]
                child = next(kids, None)
                if child is None:
                    pending.pop()
                    leave[node] = counter
                    continue
                enter[child] = counter
                depth[child] = len(pending)
                deepest = max(deepest, len(pending))
                counter += 1
                pending.append((child, iter(children.get(child, ()))))
        self.enter, self.leave = enter, leave
        self.usable = deepest < _DESCENDANT_WALK_LIMIT
        # Per tool-call id: candidates (file order) sorted by DFS number, and a sparse table.
        self._sorted: dict[Any, tuple[list[int], list[list[int]]]] = {}

    def _table(self, call_id: Any) -> tuple[list[int], list[list[int]]]:
        table = self._sorted.get(call_id)
        if table is None:
            candidates = self.results[call_id]
            enter = self.enter
            placed = sorted(
                (enter[r.get("id")], i) for i, r in enumerate(candidates) if r.get("id") is not None and r.get("id") in enter
            )
            numbers = [number for number, _ in placed]
            levels = [[i for _, i in placed]]
            width = 1
            while 2 * width <= len(numbers):
                below = levels[-1]
                levels.append([min(below[j], below[j + width]) for j in range(len(below) - width)])
                width *= 2
            table = (numbers, levels)
            self._sorted[call_id] = table
        return table

    def find(self, call_id: Any, call_entry_id: Any) -> dict[str, Any] | None:
        """The first result (file order) for ``call_id`` at or below ``call_entry_id``, else the
        first result for ``call_id`` anywhere, else None."""
        from bisect import bisect_left

        candidates = self.results.get(call_id, []) if call_id is not None else []
        if not candidates:
            return None
        if call_entry_id is None:
            return candidates[0]
        if not self.usable or call_entry_id not in self.enter:
            tree = self.tree
            found = next((r for r in candidates if tree.is_descendant(r.get("id"), call_entry_id)), None)
            return found if found is not None else candidates[0]
        numbers, levels = self._table(call_id)
        lo = bisect_left(numbers, self.enter[call_entry_id])
        hi = bisect_left(numbers, self.leave[call_entry_id])
        if lo >= hi:
            return candidates[0]
        level = (hi - lo).bit_length() - 1
        row = levels[level]
        return candidates[min(row[lo], row[hi - (1 << level)])]


TOOL_CALL_COLUMNS = [
    Column("call_entry_id", "string"),
    Column("call_index", "Int64", "position among the message's tool calls"),
    Column("call_id", "string"),
    Column("name", "category"),
    Column("arguments", "object", "the dict as recorded"),
    Column("file_path", "string", "``arguments.path``, as ``read``/``write``/``edit`` take it; named so that "
           "corpus frames can carry the session's ``path``"),
    Column("command", "string", "``arguments.command`` of ``bash`` calls"),
    Column("call_timestamp", "datetime64[ns, UTC]", "the assistant entry's time, i.e. when the response finished"),
    Column("result_entry_id", "string"),
    Column("result_timestamp", "datetime64[ns, UTC]", "the result entry's time"),
    Column("result_chars", "Int64", "what Pi's estimator counts of the result content, UTF-16 units, images 4800"),
    Column("result_est_tokens", "Int64"),
    Column("is_error", "boolean"),
    Column("latency_s", "float", "result entry time − assistant entry time, the tool's run time"),
    Column("since_request_s", "float", "result message ``timestamp`` − assistant message ``timestamp``, from the "
           "start of the model request to the result"),
    Column("model", "category"),
    Column("on_active_path", "bool", "the calling entry"),
    Column("result_on_active_path", "boolean"),
]


def tool_calls_df(session: "Session") -> pd.DataFrame:
    """One row per ``toolCall`` block of an assistant message, joined with its tool result.

    The result is the ``toolResult`` message with the same ``toolCallId`` that descends from
    the calling entry (the first in file order); failing that, the first with that id anywhere.
    Calls without a result keep NA in the result columns.
    """
    tree = _Tree(session)
    entries = session.entries
    results: dict[Any, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("type") != "message":
            continue
        m = e.get("message")
        if isinstance(m, dict) and m.get("role") == "toolResult":
            results.setdefault(m.get("toolCallId"), []).append(e)
    index_of_results = _ResultIndex(tree, results)

    rows = _rows(TOOL_CALL_COLUMNS)
    rows["call_message_ms"], rows["result_message_ms"] = [], []  # for since_request_s
    for e in entries:
        if e.get("type") != "message":
            continue
        m = e.get("message")
        if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        eid = e.get("id")
        index = 0
        for block in m["content"]:
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            call_id = block.get("id")
            args = block.get("arguments")
            name = block.get("name")
            result = index_of_results.find(call_id, eid)
            rows["call_entry_id"].append(eid)
            rows["call_index"].append(index)
            rows["call_id"].append(call_id)
            rows["name"].append(name)
            rows["arguments"].append(args)
            rows["file_path"].append(args.get("path") if isinstance(args, dict) else None)
            rows["command"].append(args.get("command") if name == "bash" and isinstance(args, dict) else None)
            rows["call_timestamp"].append(e.get("timestamp"))
            rows["call_message_ms"].append(m.get("timestamp"))
            rows["model"].append(m.get("model"))
            rows["on_active_path"].append(eid in tree.active)
            if result is None:
                for k in ("result_entry_id", "result_timestamp", "result_message_ms", "result_chars",
                          "result_est_tokens", "is_error", "result_on_active_path"):  # fmt: skip
                    rows[k].append(None)
            else:
                rm = result["message"]
                rows["result_entry_id"].append(result.get("id"))
                rows["result_timestamp"].append(result.get("timestamp"))
                rows["result_message_ms"].append(rm.get("timestamp"))
                try:
                    chars, tokens = _chars_and_tokens([rm])
                except (TypeError, AttributeError, KeyError, ValueError):
                    chars, tokens = None, None
                rows["result_chars"].append(chars)
                rows["result_est_tokens"].append(tokens)
                rows["is_error"].append(rm.get("isError"))
                rows["result_on_active_path"].append(result.get("id") in tree.active)
            index += 1

    call_ts = rows["call_timestamp"] = _times(rows["call_timestamp"])
    result_ts = rows["result_timestamp"] = _times(rows["result_timestamp"])
    rows["latency_s"] = (result_ts - call_ts).dt.total_seconds().astype("float64")
    rows["since_request_s"] = (_float_col(rows["result_message_ms"]) - _float_col(rows["call_message_ms"])) / 1000.0
    return _table(TOOL_CALL_COLUMNS, rows)


_document(TOOL_CALL_COLUMNS, tool_calls_df)


# --------------------------------------------------------------------------- usage


USAGE_COLUMNS = [
    Column("entry_id", "string"),
    Column("timestamp", "datetime64[ns, UTC]"),
    Column("kind", "category", "``assistant`` or the ``usage`` entry's ``kind``, e.g. ``cache_warm``"),
    Column("provider", "category"),
    Column("model", "category"),
    Column("stop_reason", "category"),
    Column("input", "Int64", "as recorded"),
    Column("output", "Int64", "as recorded"),
    Column("cache_read", "Int64", "as recorded"),
    Column("cache_write", "Int64", "as recorded"),
    Column("total_tokens", "Int64", "as recorded"),
    Column("cost_total", "float"),
    Column("context_tokens", "Int64", "Pi's ``calculateContextTokens`` — ``totalTokens`` or the sum of the four "
           "counts; NA for ``usage`` entries"),
    Column("valid_for_context", "bool", "Pi's ``getAssistantUsage`` accepts it — not aborted, not error, context "
           "tokens > 0"),
    Column("on_active_path", "bool"),
    Column("cumulative_cost", "float", "running sum of ``cost_total`` in file order, missing costs counting 0"),
]


def usage_df(session: "Session") -> pd.DataFrame:
    """Recorded token usage over time: assistant messages with a ``usage``, and ``usage`` entries,
    in file order."""
    tree = _Tree(session)
    rows = _rows(USAGE_COLUMNS)
    row_kind: Any
    for e in session.entries:
        kind = e.get("type")
        if kind == "message":
            m = e.get("message")
            if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("usage"), dict):
                continue
            usage = m["usage"]
            row_kind, provider, model, stop = "assistant", m.get("provider"), m.get("model"), m.get("stopReason")
            try:
                context = calculate_context_tokens(usage)
                valid = get_assistant_usage(m) is not None
            except (TypeError, ValueError):
                context, valid = None, False
        elif kind == "usage":
            usage = e.get("usage")
            row_kind, provider, model, stop = e.get("kind"), e.get("provider"), e.get("model"), None
            context, valid = None, False
        else:
            continue
        numbers = _usage_numbers(usage)
        rows["entry_id"].append(e.get("id"))
        rows["timestamp"].append(e.get("timestamp"))
        rows["kind"].append(row_kind)
        rows["provider"].append(provider)
        rows["model"].append(model)
        rows["stop_reason"].append(stop)
        for key, value in zip(("input", "output", "cache_read", "cache_write", "total_tokens", "cost_total"), numbers):
            rows[key].append(value)
        rows["context_tokens"].append(context)
        rows["valid_for_context"].append(valid)
        rows["on_active_path"].append(e.get("id") in tree.active)
    rows["cost_total"] = _float_col(rows["cost_total"])
    rows["cumulative_cost"] = np.cumsum(np.nan_to_num(rows["cost_total"], nan=0.0))
    return _table(USAGE_COLUMNS, rows)


_document(USAGE_COLUMNS, usage_df)


# --------------------------------------------------------------------------- compactions


def _context_entries(path: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Pi's ``buildContextEntries`` over a path; also returns the latest compaction on it."""
    latest = None
    for entry in path:
        if entry.get("type") == "compaction":
            latest = entry
    return (build_context_entries(path) if path else []), latest


_NO_KEY = object()


def _is_system_message(entry: dict[str, Any]) -> bool:
    """``buildContextEntries``' test for dropping an entry from the kept span (may raise as Pi's)."""
    return entry.get("type") == "message" and entry["message"].get("role") == "system"


class _CompactionSpan:
    """What ``compactions_df`` needs of the context a compaction's parent path gives."""

    __slots__ = ("path_length", "context_length", "previous", "start", "kept_index")

    def __init__(self, path_length: int, context_length: int, previous: Any, start: int, kept_index: int | None) -> None:
        self.path_length = path_length
        self.context_length = context_length
        self.previous = previous
        self.start = start
        self.kept_index = kept_index


def _compaction_span_by_walk(session: "Session", entry: dict[str, Any]) -> _CompactionSpan:
    """The span of one compaction by building its path and context entries (O(path length))."""
    branch = session.get_branch(entry.get("id"))
    path = branch[:-1] if branch and branch[-1] is entry else [x for x in branch if x is not entry]
    context, previous = _context_entries(path)
    start = 1 if previous is not None else 0
    kept_index = first_kept_index(context, start, entry.get("firstKeptEntryId"), entry.get("id"))
    return _CompactionSpan(len(path), len(context), previous, start, kept_index)


def _compaction_spans(session: "Session") -> dict[int, _CompactionSpan]:
    """Spans of all compactions in one depth-first walk of the tree (linear in the entries).

    Keyed by ``id(entry)``. The walk keeps the root path of the current entry as a stack, with
    the positions of its ids, of its compactions and running counts of the entries
    ``buildContextEntries`` keeps, so each compaction's span comes from a few look-ups. Parent
    links are followed as ``Session.get_branch`` does. Compactions it cannot place (an id that
    another entry took over, entries in a parent cycle, a kept span whose entries Pi's function
    would throw on) are left out; the caller walks them one by one.
    """
    by_id: dict[Any, dict[str, Any]] = getattr(session, "_by_id", None) or {}
    children: dict[int, list[dict[str, Any]]] = {}
    roots: list[dict[str, Any]] = []
    for node in by_id.values():
        parent_id = node.get("parentId")
        parent = by_id.get(parent_id) if isinstance(parent_id, str) and parent_id else None
        if parent is None:
            roots.append(node)
        else:
            children.setdefault(id(parent), []).append(node)

    spans: dict[int, _CompactionSpan] = {}
    stack: list[dict[str, Any]] = []
    position: dict[Any, int] = {}  # id -> position on the stack (ids on one root path are distinct)
    compactions: list[int] = []  # positions of compactions on the stack
    kept_before = [0]  # kept_before[k]: entries in stack[:k] that are not system messages
    broken_before = [0]  # broken_before[k]: entries in stack[:k] whose system test throws

    def push(node: dict[str, Any]) -> None:
        depth = len(stack)
        if node.get("type") == "compaction":
            spans_add(node, depth)
            compactions.append(depth)
        stack.append(node)
        node_id = node.get("id")
        try:
            position.setdefault(node_id, depth)
        except TypeError:
            pass
        try:
            system, broken = _is_system_message(node), False
        except (TypeError, AttributeError, KeyError):
            system, broken = False, True
        kept_before.append(kept_before[-1] + (0 if system or broken else 1))
        broken_before.append(broken_before[-1] + (1 if broken else 0))

    def pop() -> None:
        node = stack.pop()
        depth = len(stack)
        kept_before.pop()
        broken_before.pop()
        if compactions and compactions[-1] == depth:
            compactions.pop()
        try:
            if position.get(node.get("id")) == depth:
                del position[node.get("id")]
        except TypeError:
            pass

    def find(key: Any, below: int) -> int | None:
        try:
            found = position.get(key)
        except TypeError:
            return None
        return found if found is not None and found < below else None

    def spans_add(node: dict[str, Any], depth: int) -> None:
        # ``stack`` is the compaction's parent path (``depth`` entries).
        first_kept = node.get("firstKeptEntryId")
        if not compactions:
            spans[id(node)] = _CompactionSpan(depth, depth, None, 0, find(first_kept, depth))
            return
        ci = compactions[-1]
        previous = stack[ci]
        s = find(previous.get("firstKeptEntryId", _NO_KEY), ci)
        if s is None:
            s = ci
        if broken_before[ci] - broken_before[s]:
            return  # Pi's function throws here: leave it to the walk, which throws the same way
        kept = kept_before[ci] - kept_before[s]
        p = find(first_kept, depth)
        kept_index = None
        if p is not None:
            if s <= p < ci and kept_before[p + 1] - kept_before[p]:
                kept_index = 1 + kept_before[p] - kept_before[s]
            elif ci < p:
                kept_index = 1 + kept + (p - ci - 1)
        spans[id(node)] = _CompactionSpan(depth, 1 + kept + (depth - ci - 1), previous, 1, kept_index)

    for root in roots:
        push(root)
        pending = [iter(children.get(id(root), ()))]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                pending.pop()
                pop()
                continue
            push(child)
            pending.append(iter(children.get(id(child), ())))
    return spans


COMPACTION_COLUMNS = [
    Column("id", "string"),
    Column("timestamp", "datetime64[ns, UTC]"),
    Column("first_kept_entry_id", "string"),
    Column("first_kept_found", "bool", "that entry is in the span Pi would have cut"),
    Column("tokens_before", "Int64"),
    Column("summary_chars", "Int64", "UTF-16 units"),
    Column("summary_est_tokens", "Int64", "``estimate_tokens`` of the compaction summary message"),
    Column("read_files", "Int64", "length of ``details.readFiles``"),
    Column("modified_files", "Int64", "length of ``details.modifiedFiles``"),
    Column("from_hook", "boolean"),
    Column("has_system_message", "bool"),
    Column("on_active_path", "bool"),
    Column("previous_compaction_id", "string", "the latest compaction on its path before it"),
    Column("path_length", "Int64", "entries from the root to the compaction's parent"),
    Column("entries_summarized", "Int64", "context entries before the first kept entry; NA when it is not found"),
    Column("entries_kept", "Int64", "context entries from the first kept entry; NA when it is not found"),
    Column("summary_input", "Int64", "the summary request's recorded usage, if any"),
    Column("summary_output", "Int64", "the summary request's recorded usage, if any"),
]


def compactions_df(session: "Session") -> pd.DataFrame:
    """One row per ``compaction`` entry, in file order.

    The span counts replay what Pi's ``prepareCompaction`` saw: the context entries of the
    compaction's parent path (``buildContextEntries``), summarized from just after the previous
    compaction's summary up to ``firstKeptEntryId``, kept from there to the end.
    A compaction whose ``firstKeptEntryId`` is its own id kept nothing (Pi's projection keeps no
    entry before it; imported Claude Code and Codex compactions are such): everything is summarized.
    """
    tree = _Tree(session)
    rows = _rows(COMPACTION_COLUMNS)
    spans = _compaction_spans(session) if any(e.get("type") == "compaction" for e in session.entries) else {}
    for e in session.entries:
        if e.get("type") != "compaction":
            continue
        eid = e.get("id")
        summary = e.get("summary")
        first_kept = e.get("firstKeptEntryId")
        details = e["details"] if isinstance(e.get("details"), dict) else {}
        span = spans.get(id(e)) if eid and session.get_entry(eid) is e else None
        if span is None:
            span = _compaction_span_by_walk(session, e)
        previous, start, kept_index = span.previous, span.start, span.kept_index
        found = kept_index is not None and kept_index < span.context_length
        if kept_index is None and first_kept == eid and isinstance(eid, str):
            kept_index = span.context_length  # its own id: nothing kept (as first_kept_index says)
        try:
            est = estimate_tokens(create_compaction_summary_message(summary, e.get("tokensBefore"), e.get("timestamp")))
        except (TypeError, AttributeError, ValueError):
            est = None
        usage = e["usage"] if isinstance(e.get("usage"), dict) else {}
        rows["id"].append(eid)
        rows["timestamp"].append(e.get("timestamp"))
        rows["first_kept_entry_id"].append(first_kept)
        rows["first_kept_found"].append(found)
        rows["tokens_before"].append(e.get("tokensBefore"))
        rows["summary_chars"].append(_u16(summary) if isinstance(summary, str) else None)
        rows["summary_est_tokens"].append(est)
        rf, mf = details.get("readFiles"), details.get("modifiedFiles")
        rows["read_files"].append(len(rf) if isinstance(rf, list) else None)
        rows["modified_files"].append(len(mf) if isinstance(mf, list) else None)
        rows["from_hook"].append(e.get("fromHook"))
        rows["has_system_message"].append(bool(e.get("systemMessage")))
        rows["on_active_path"].append(eid in tree.active)
        rows["previous_compaction_id"].append(previous.get("id") if previous is not None else None)
        rows["path_length"].append(span.path_length)
        rows["entries_summarized"].append(None if kept_index is None else kept_index - start)
        rows["entries_kept"].append(None if kept_index is None else span.context_length - kept_index)
        rows["summary_input"].append(usage.get("input"))
        rows["summary_output"].append(usage.get("output"))
    return _table(COMPACTION_COLUMNS, rows)


_document(COMPACTION_COLUMNS, compactions_df)
