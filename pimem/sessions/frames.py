"""DataFrame views of one session: entries, messages, tool calls, usage, compactions.

Every function takes a :class:`~pimem.core.session_manager.Session` and returns a new DataFrame; nothing
is cached and the session is never changed. Each table's columns are declared once
(:class:`~pimem.base.tables.Column`: name, dtype, description and where the value is read); the
declarations build the DataFrame and write the ``Columns:`` paragraph of each function's docstring
(``pimem.columns("entries")`` shows them as a table). ``columns=[...]`` builds only the columns
named, in that order, and skips the work of the others (the tree walk, Pi's token estimates).

Columns are typed: categoricals for small vocabularies (entry type, role, model, tool name),
nullable ``Int64``/``boolean`` where a value can be missing, ``datetime64[ns, UTC]`` for times
(entry ``timestamp`` strings are parsed as JavaScript's ``new Date(iso)`` does). Character counts
are JavaScript string lengths (UTF-16 code units), and token estimates are Pi's ``estimateTokens``
(``pimem.core.compaction.compaction``).

Entries whose content is too broken for Pi's own functions (which would throw) get NA in
the derived columns instead of an exception; a value that is not of its column's type (a usage
count written as a string) is NA as well. ``strict=False`` returns ``(DataFrame, errors)``, the
errors (:class:`~pimem.errors.ColumnError`) naming each such value's entry, file line and column.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence, overload

import numpy as np
import pandas as pd

from pimem.base.js import parse_iso_ms, utf16_len
from pimem.base.tables import DATETIME, Column, Table, as_float
from pimem.core.compaction.compaction import (
    calculate_context_tokens,
    estimate_chars,
    estimate_tokens,
    get_assistant_usage,
)
from pimem.core.messages import create_compaction_summary_message
from pimem.core.session_manager import build_context_entries, session_entry_to_context_messages
from pimem.errors import ColumnError
from pimem.sessions.spans import first_kept_index
from pimem.text.messages import message_preview

if TYPE_CHECKING:  # pragma: no cover
    from pimem.core.session_manager import Session

__all__ = [
    "COMPACTIONS",
    "ENTRIES",
    "MESSAGES",
    "TABLES",
    "TOOL_CALLS",
    "USAGE",
    "compactions_df",
    "entries_df",
    "message_chars",
    "messages_df",
    "tool_calls_df",
    "usage_df",
]

PREVIEW_WIDTH = 120

# Where Pi's own functions throw on a broken entry: the cell is NA (listed with ``strict=False``).
_PI_THROWS: tuple[type[Exception], ...] = (TypeError, AttributeError, KeyError, ValueError)


# --------------------------------------------------------------------------- helpers


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


def _sizes(messages: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(chars, Pi's token estimate) summed over messages; raises where Pi would throw."""
    chars = tokens = 0
    for m in messages:
        c = estimate_chars(m)
        chars += c
        tokens += -(-c // 4)  # estimate_tokens(m) == ceil(message_chars(m) / 4)
    return chars, tokens


def _entry_lines(session: "Session") -> list[int | None]:
    """File line number (1-based) of each entry, when the session knows it."""
    lines = getattr(session, "_lines", None)  # kept by ``load_session``, None for appended entries
    if lines is None or len(lines) != len(session.entries):
        return [None] * len(session.entries)
    return list(lines)


def _where(session: "Session") -> str:
    """The session's file, for error messages."""
    path = getattr(session, "path", None)
    return str(path) if path else ""


def _place(entry: Any, line: Any) -> str:
    """An entry as an error message names it."""
    eid = entry.get("id") if isinstance(entry, dict) else None
    return f"entry {eid!r}" + (f" (line {line})" if line is not None else "")


def _get(value: Any, key: str) -> Any:
    """``value[key]`` of a dict, else None."""
    return value.get(key) if isinstance(value, dict) else None


# --------------------------------------------------------------------------- what the tables read of the whole session


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


class _View:
    """What a session's rows read of the whole session, each part made once, on first need
    (a selection of columns that reads no tree walks no tree)."""

    def __init__(self, session: "Session") -> None:
        self.session = session

    @cached_property
    def tree(self) -> "_Tree":
        return _Tree(self.session)

    @cached_property
    def lines(self) -> list[int | None]:
        return _entry_lines(self.session)

    @cached_property
    def results(self) -> "_ResultIndex":
        """Tool results by ``toolCallId``."""
        results: dict[Any, list[dict[str, Any]]] = {}
        for e in self.session.entries:
            if e.get("type") != "message":
                continue
            m = e.get("message")
            if isinstance(m, dict) and m.get("role") == "toolResult":
                results.setdefault(m.get("toolCallId"), []).append(e)
        return _ResultIndex(self.tree, results)

    @cached_property
    def spans(self) -> dict[int, "_CompactionSpan"]:
        session = self.session
        has = any(e.get("type") == "compaction" for e in session.entries)
        return _compaction_spans(session) if has else {}


# --------------------------------------------------------------------------- entries


class _EntryRow:
    """One entry as the entries table reads it."""

    __slots__ = ("entry", "id", "index", "view", "kind", "message", "role", "usage", "_sizes")

    def __init__(self, entry: dict[str, Any], index: int, view: _View) -> None:
        self.entry = entry
        self.id = entry.get("id")
        self.index = index
        self.view = view
        kind = self.kind = entry.get("type")
        m = entry.get("message") if kind == "message" else None
        self.message: dict[str, Any] | None = m if isinstance(m, dict) else None
        role = self.role = m.get("role") if isinstance(m, dict) else None
        # an assistant message's or a ``usage`` entry's usage ({} when it is no object)
        usage = m.get("usage") if role == "assistant" else entry.get("usage") if kind == "usage" else None  # type: ignore[union-attr]
        self.usage: dict[str, Any] = usage if isinstance(usage, dict) else {}
        self._sizes: tuple[int, int] | None = None

    def sizes(self) -> tuple[int, int]:
        """(chars, tokens) of the context messages the entry makes; raises where Pi would throw."""
        if self._sizes is None:
            self._sizes = _sizes(session_entry_to_context_messages(self.entry))
        return self._sizes

    def where(self) -> str:
        return _place(self.entry, self.view.lines[self.index])


def _of_kinds(kinds: tuple[str, ...], key: str) -> Any:
    """The entry's ``key`` on entries of these types."""
    return lambda r: r.entry.get(key) if r.kind in kinds else None


def _of_role(role: str, key: str) -> Any:
    """The message's ``key`` on messages of this role."""
    return lambda r: r.message.get(key) if r.role == role else None


def _usage_of(key: str) -> Any:
    return lambda r: r.usage.get(key)


def _summary_chars(r: Any) -> int | None:
    s = r.entry.get("summary") if r.kind in ("compaction", "branch_summary") else None
    return _u16(s) if isinstance(s, str) else None


def _entry_provider(r: _EntryRow) -> Any:
    if r.kind == "message":
        return r.message.get("provider") if r.role == "assistant" else None  # type: ignore[union-attr]
    return r.entry.get("provider") if r.kind in ("model_change", "usage") else None


def _entry_model(r: _EntryRow) -> Any:
    if r.kind == "message":
        return r.message.get("model") if r.role == "assistant" else None  # type: ignore[union-attr]
    if r.kind == "model_change":
        return r.entry.get("modelId")
    return r.entry.get("model") if r.kind == "usage" else None


def _entry_custom_type(r: _EntryRow) -> Any:
    if r.kind == "message":
        return r.message.get("customType") if r.role == "custom" else None  # type: ignore[union-attr]
    return r.entry.get("customType") if r.kind in ("custom", "custom_message") else None


def _label(r: _EntryRow) -> Any:
    return r.view.session.get_label(r.id) if r.id is not None else None


_USAGE_AS_RECORDED = "usage of an assistant message or ``usage`` entry, as recorded"

ENTRIES = Table("entries", [
    Column("line", "Int64", "line in the file, when the session was loaded from one",
           path=lambda r: r.view.lines[r.index]),
    Column("id", "string", "tree link", path=lambda r: r.id),
    Column("parent_id", "string", "tree link", path=lambda r: r.entry.get("parentId")),
    Column("type", "category", "entry type (``message``, ``compaction``, ``label``, …, unknown kept)",
           path=lambda r: r.kind),
    Column("timestamp", DATETIME, "the entry's ``timestamp``; NaT if invalid", path=lambda r: r.entry.get("timestamp"),
           value=parse_iso_ms),
    Column("depth", "Int64", "ancestors above the entry (a root is 0; a dangling parent ends the count)",
           path=lambda r: r.view.tree.depth.get(r.id)),
    Column("child_count", "Int64", "entries whose ``parentId`` is this id",
           path=lambda r: r.view.tree.children.get(r.id, 0)),
    Column("on_active_path", "bool", "on ``Session.get_branch()`` (root → current leaf)",
           path=lambda r: r.id in r.view.tree.active),
    Column("role", "category", "the message role, for ``message`` entries", path=lambda r: r.role),
    Column("message_chars", "Int64", "characters Pi's estimator counts (UTF-16 units) over the context messages "
           "the entry makes (``session_entry_to_context_messages``; 0 for entries outside context, NA where Pi "
           "would throw)", path=lambda r: r.sizes()[0], na_on=_PI_THROWS),
    Column("est_tokens", "Int64", "``estimate_tokens`` summed over those messages", path=lambda r: r.sizes()[1],
           na_on=_PI_THROWS),
    Column("tool_names", "string", "an assistant's tool calls, comma-joined; a tool result's tool",
           path=lambda r: _tool_names(r.message) if r.message is not None else None),
    Column("is_error", "boolean", "a tool result's ``isError``", path=_of_role("toolResult", "isError")),
    Column("stop_reason", "category", "an assistant's ``stopReason``", path=_of_role("assistant", "stopReason")),
    Column("input", "Int64", _USAGE_AS_RECORDED, path=_usage_of("input")),
    Column("output", "Int64", "usage, as recorded", path=_usage_of("output")),
    Column("cache_read", "Int64", "usage, as recorded", path=_usage_of("cacheRead")),
    Column("cache_write", "Int64", "usage, as recorded", path=_usage_of("cacheWrite")),
    Column("total_tokens", "Int64", "usage, as recorded (NA when absent)", path=_usage_of("totalTokens")),
    Column("cost_total", "float", "``usage.cost.total``", path=lambda r: _get(r.usage.get("cost"), "total")),
    Column("provider", "category", "of an assistant message, ``model_change`` or ``usage``", path=_entry_provider),
    Column("model", "category", "of an assistant message, ``model_change`` or ``usage``", path=_entry_model),
    Column("thinking_level", "category", "of a ``thinking_level_change``",
           path=_of_kinds(("thinking_level_change",), "thinkingLevel")),
    Column("first_kept_entry_id", "string", "of a compaction", path=_of_kinds(("compaction",), "firstKeptEntryId")),
    Column("tokens_before", "Int64", "of a compaction", path=_of_kinds(("compaction",), "tokensBefore")),
    Column("from_id", "string", "a branch summary's ``fromId``", path=_of_kinds(("branch_summary",), "fromId")),
    Column("from_hook", "boolean", "a compaction's or branch summary's ``fromHook``",
           path=_of_kinds(("compaction", "branch_summary"), "fromHook")),
    Column("summary_chars", "Int64", "UTF-16 length of a compaction's or branch summary's summary",
           path=_summary_chars),
    Column("target_id", "string", "a ``label``'s or ``context_edit``'s target",
           path=_of_kinds(("label", "context_edit"), "targetId")),
    Column("custom_type", "category", "of ``custom`` / ``custom_message`` entries and custom messages",
           path=_entry_custom_type),
    Column("label", "string", "the entry's current label (``Session.get_label``)", path=_label),
], "One row per entry, in file order (the header is not an entry).", locate=lambda r: r.where())


@overload
def entries_df(session: "Session", columns: Iterable[str] | None = None, *,
               strict: Literal[True] = True) -> pd.DataFrame: ...
@overload
def entries_df(session: "Session", columns: Iterable[str] | None = None, *,
               strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
def entries_df(session: "Session", columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
    """One row per entry, in file order (the header is not an entry).

    Args:
        session: the session.
        columns: the columns to build, in this order (default: all).
        strict: False: return ``(DataFrame, errors)``, the values that could not be read.
    """
    view = _View(session)
    rows = [_EntryRow(e, i, view) for i, e in enumerate(session.entries)]
    return ENTRIES.frame(rows, columns, strict=strict, where=_where(session))


ENTRIES.document(entries_df)


# --------------------------------------------------------------------------- messages


class _MessageRow:
    """One ``message`` entry as the messages table reads it (a message that is no object reads as ``{}``)."""

    __slots__ = ("entry", "index", "view", "message", "role", "_sizes", "_blocks")

    def __init__(self, entry: dict[str, Any], index: int, view: _View) -> None:
        self.entry = entry
        self.index = index
        self.view = view
        m = entry.get("message")
        self.message: dict[str, Any] = m if isinstance(m, dict) else {}
        self.role = self.message.get("role")
        self._sizes: tuple[int, int] | None = None
        self._blocks: tuple[int, int, int, int, int] | None = None

    def sizes(self) -> tuple[int, int]:
        if self._sizes is None:
            self._sizes = _sizes([self.message])
        return self._sizes

    def blocks(self) -> tuple[int, int, int, int, int]:
        if self._blocks is None:
            self._blocks = _block_counts(self.message.get("content"))
        return self._blocks

    def where(self) -> str:
        return _place(self.entry, self.view.lines[self.index])


def _message_role(role: str, key: str) -> Any:
    return lambda r: r.message.get(key) if r.role == role else None


def _block(i: int) -> Any:
    return lambda r: r.blocks()[i]


MESSAGES = Table("messages", [
    Column("line", "Int64", "line in the file, when the session was loaded from one",
           path=lambda r: r.view.lines[r.index]),
    Column("entry_id", "string", "the entry's ``id``", path=lambda r: r.entry.get("id")),
    Column("parent_id", "string", "the entry's ``parentId``", path=lambda r: r.entry.get("parentId")),
    Column("timestamp", DATETIME, "entry time", path=lambda r: r.entry.get("timestamp"), value=parse_iso_ms),
    Column("message_timestamp", DATETIME, "the message's own epoch-ms ``timestamp``; for assistants "
           "this is when the request started", path=lambda r: r.message.get("timestamp")),
    Column("role", "category", "the message's ``role``", path=lambda r: r.role),
    Column("depth", "Int64", "ancestors above the entry", path=lambda r: r.view.tree.depth.get(r.entry.get("id"))),
    Column("on_active_path", "bool", "on ``Session.get_branch()``",
           path=lambda r: r.entry.get("id") in r.view.tree.active),
    Column("preview", "string", f"one line of readable text, at most {PREVIEW_WIDTH} characters",
           path=lambda r: message_preview(r.message, PREVIEW_WIDTH), na_on=(TypeError, AttributeError, ValueError)),
    Column("chars", "Int64", "Pi's estimator over the message, NA where Pi would throw", path=lambda r: r.sizes()[0],
           na_on=_PI_THROWS),
    Column("est_tokens", "Int64", "Pi's estimator over the message, NA where Pi would throw",
           path=lambda r: r.sizes()[1], na_on=_PI_THROWS),
    Column("content_blocks", "Int64", "a string content counts as one text block", path=_block(0)),
    Column("text_blocks", "Int64", "``text`` blocks", path=_block(1)),
    Column("thinking_blocks", "Int64", "``thinking`` blocks", path=_block(2)),
    Column("tool_call_blocks", "Int64", "``toolCall`` blocks", path=_block(3)),
    Column("image_blocks", "Int64", "``image`` blocks", path=_block(4)),
    Column("tool_name", "category", "of a tool result", path=_message_role("toolResult", "toolName")),
    Column("tool_call_id", "string", "of a tool result", path=_message_role("toolResult", "toolCallId")),
    Column("is_error", "boolean", "of a tool result", path=_message_role("toolResult", "isError")),
    Column("stop_reason", "category", "of an assistant", path=_message_role("assistant", "stopReason")),
    Column("provider", "category", "of an assistant", path=_message_role("assistant", "provider")),
    Column("model", "category", "of an assistant", path=_message_role("assistant", "model")),
    Column("custom_type", "category", "of a custom message", path=_message_role("custom", "customType")),
    Column("error_message", "string", "an assistant's ``errorMessage``",
           path=_message_role("assistant", "errorMessage")),
], "One row per ``message`` entry, in file order.", locate=lambda r: r.where())


@overload
def messages_df(session: "Session", columns: Iterable[str] | None = None, *,
                strict: Literal[True] = True) -> pd.DataFrame: ...
@overload
def messages_df(session: "Session", columns: Iterable[str] | None = None, *,
                strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
def messages_df(session: "Session", columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
    """One row per ``message`` entry, in file order.

    Args:
        session: the session.
        columns: the columns to build, in this order (default: all).
        strict: False: return ``(DataFrame, errors)``, the values that could not be read.
    """
    view = _View(session)
    rows = [_MessageRow(e, i, view) for i, e in enumerate(session.entries) if e.get("type") == "message"]
    return MESSAGES.frame(rows, columns, strict=strict, where=_where(session))


MESSAGES.document(messages_df)


# --------------------------------------------------------------------------- tool calls


class _CallRow:
    """One ``toolCall`` block of an assistant message, with its tool result entry (or None)."""

    __slots__ = ("entry", "message", "block", "index", "view", "result", "result_message", "_sizes")

    def __init__(self, entry: dict[str, Any], message: dict[str, Any], block: dict[str, Any], index: int,
                 view: _View, result: dict[str, Any] | None) -> None:
        self.entry, self.message, self.block, self.index, self.view = entry, message, block, index, view
        self.result = result
        self.result_message: dict[str, Any] | None = result["message"] if result is not None else None
        self._sizes: tuple[int, int] | None = None

    def sizes(self) -> tuple[int, int] | None:
        """(chars, tokens) of the result message, None without a result; raises where Pi would throw."""
        rm = self.result_message
        if rm is None:
            return None
        if self._sizes is None:
            self._sizes = _sizes([rm])
        return self._sizes

    def where(self) -> str:
        return _place(self.entry, None) + f", tool call {self.index}"


def _argument(r: _CallRow, key: str) -> Any:
    args = r.block.get("arguments")
    return args.get(key) if isinstance(args, dict) else None


def _result_size(i: int) -> Any:
    def get(r: _CallRow) -> int | None:
        sizes = r.sizes()
        return sizes[i] if sizes is not None else None

    return get


def _seconds_between(r: _CallRow) -> float:
    """Result message ``timestamp`` − assistant message ``timestamp``, in seconds (NaN if either is no number)."""
    rm = r.result_message
    if rm is None:
        return math.nan
    end, start = rm.get("timestamp"), r.message.get("timestamp")
    if end.__class__ is int and start.__class__ is int:  # epoch milliseconds, as Pi writes them
        return (as_float(end) - as_float(start)) / 1000.0
    return (_ms(end) - _ms(start)) / 1000.0


def _ms(value: Any) -> float:
    return as_float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _latency(columns: dict[str, Any]) -> Any:
    return (columns["result_timestamp"] - columns["call_timestamp"]).dt.total_seconds().astype("float64")


TOOL_CALLS = Table("tool_calls", [
    Column("call_entry_id", "string", "the assistant entry", path=lambda r: r.entry.get("id")),
    Column("call_index", "Int64", "position among the message's tool calls", path=lambda r: r.index),
    Column("call_id", "string", "the block's ``id`` (a result's ``toolCallId``)", path=lambda r: r.block.get("id")),
    Column("name", "category", "the tool", path=lambda r: r.block.get("name")),
    Column("arguments", "object", "the dict as recorded", path=lambda r: r.block.get("arguments")),
    Column("file_path", "string", "``arguments.path``, as ``read``/``write``/``edit`` take it; named so that "
           "corpus frames can carry the session's ``path``", path=lambda r: _argument(r, "path")),
    Column("command", "string", "``arguments.command`` of ``bash`` calls",
           path=lambda r: _argument(r, "command") if r.block.get("name") == "bash" else None),
    Column("call_timestamp", DATETIME, "the assistant entry's time, i.e. when the response finished",
           path=lambda r: r.entry.get("timestamp"), value=parse_iso_ms),
    Column("result_entry_id", "string", "the tool result entry (NA: no result)", path=lambda r: _get(r.result, "id")),
    Column("result_timestamp", DATETIME, "the result entry's time", path=lambda r: _get(r.result, "timestamp"),
           value=parse_iso_ms),
    Column("result_chars", "Int64", "what Pi's estimator counts of the result content, UTF-16 units, images 4800",
           path=_result_size(0), na_on=_PI_THROWS),
    Column("result_est_tokens", "Int64", "``estimate_tokens`` of the result", path=_result_size(1), na_on=_PI_THROWS),
    Column("is_error", "boolean", "the result's ``isError``", path=lambda r: _get(r.result_message, "isError")),
    Column("latency_s", "float", "result entry time − assistant entry time, the tool's run time", path=_latency,
           needs=("call_timestamp", "result_timestamp")),
    Column("since_request_s", "float", "result message ``timestamp`` − assistant message ``timestamp``, from the "
           "start of the model request to the result", path=_seconds_between),
    Column("model", "category", "the assistant's model", path=lambda r: r.message.get("model")),
    Column("on_active_path", "bool", "the calling entry", path=lambda r: r.entry.get("id") in r.view.tree.active),
    Column("result_on_active_path", "boolean", "the result entry",
           path=lambda r: r.result.get("id") in r.view.tree.active if r.result is not None else None),
], "One row per ``toolCall`` block of an assistant message, joined with its tool result.",
    locate=lambda r: r.where())
_READS_RESULT = frozenset(("result_entry_id", "result_timestamp", "result_chars", "result_est_tokens", "is_error",
                           "latency_s", "since_request_s", "result_on_active_path"))


@overload
def tool_calls_df(session: "Session", columns: Iterable[str] | None = None, *,
                  strict: Literal[True] = True) -> pd.DataFrame: ...
@overload
def tool_calls_df(session: "Session", columns: Iterable[str] | None = None, *,
                  strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
def tool_calls_df(session: "Session", columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
    """One row per ``toolCall`` block of an assistant message, joined with its tool result.

    The result is the ``toolResult`` message with the same ``toolCallId`` that descends from
    the calling entry (the first in file order); failing that, the first with that id anywhere.
    Calls without a result keep NA in the result columns.

    Args:
        session: the session.
        columns: the columns to build, in this order (default: all).
        strict: False: return ``(DataFrame, errors)``, the values that could not be read.
    """
    view = _View(session)
    # results are looked up only for the columns that read them
    find = view.results.find if _READS_RESULT.intersection(c.name for c in TOOL_CALLS.select(columns)) else None
    rows: list[_CallRow] = []
    for e in session.entries:
        if e.get("type") != "message":
            continue
        m = e.get("message")
        if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        index = 0
        eid = e.get("id")
        for block in m["content"]:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                result = find(block.get("id"), eid) if find is not None else None
                rows.append(_CallRow(e, m, block, index, view, result))
                index += 1
    return TOOL_CALLS.frame(rows, columns, strict=strict, where=_where(session))


TOOL_CALLS.document(tool_calls_df)


# --------------------------------------------------------------------------- usage


class _UsageRow:
    """An assistant message with a ``usage``, or a ``usage`` entry."""

    __slots__ = ("entry", "message", "usage", "view")

    def __init__(self, entry: dict[str, Any], message: dict[str, Any] | None, view: _View) -> None:
        self.entry, self.message, self.view = entry, message, view
        self.usage: Any = message["usage"] if message is not None else entry.get("usage")

    def of(self, message_key: str, entry_key: str | None) -> Any:
        """The assistant message's ``message_key``, or the ``usage`` entry's ``entry_key``."""
        if self.message is not None:
            return self.message.get(message_key)
        return self.entry.get(entry_key) if entry_key is not None else None

    def context_tokens(self) -> Any:
        return calculate_context_tokens(self.usage) if self.message is not None else None

    def valid_for_context(self) -> bool:
        if self.message is None:
            return False
        try:  # it throws where calculateContextTokens throws: not valid
            return get_assistant_usage(self.message) is not None
        except (TypeError, ValueError):
            return False

    def where(self) -> str:
        return _place(self.entry, None)


def _usage_rows(session: "Session", view: _View) -> list[_UsageRow]:
    rows = []
    for e in session.entries:
        kind = e.get("type")
        if kind == "message":
            m = e.get("message")
            if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("usage"), dict):
                rows.append(_UsageRow(e, m, view))
        elif kind == "usage":
            rows.append(_UsageRow(e, None, view))
    return rows


def _cumulative_cost(columns: dict[str, Any]) -> Any:
    return np.cumsum(np.nan_to_num(columns["cost_total"], nan=0.0))


USAGE = Table("usage", [
    Column("entry_id", "string", "the entry", path=lambda r: r.entry.get("id")),
    Column("timestamp", DATETIME, "the entry's time", path=lambda r: r.entry.get("timestamp"), value=parse_iso_ms),
    Column("kind", "category", "``assistant`` or the ``usage`` entry's ``kind``, e.g. ``cache_warm``",
           path=lambda r: "assistant" if r.message is not None else r.entry.get("kind")),
    Column("provider", "category", "the message's or entry's provider", path=lambda r: r.of("provider", "provider")),
    Column("model", "category", "the message's or entry's model", path=lambda r: r.of("model", "model")),
    Column("stop_reason", "category", "an assistant's ``stopReason``", path=lambda r: r.of("stopReason", None)),
    Column("input", "Int64", "as recorded", path=lambda r: _get(r.usage, "input")),
    Column("output", "Int64", "as recorded", path=lambda r: _get(r.usage, "output")),
    Column("cache_read", "Int64", "as recorded", path=lambda r: _get(r.usage, "cacheRead")),
    Column("cache_write", "Int64", "as recorded", path=lambda r: _get(r.usage, "cacheWrite")),
    Column("total_tokens", "Int64", "as recorded", path=lambda r: _get(r.usage, "totalTokens")),
    Column("cost_total", "float", "``usage.cost.total``", path=lambda r: _get(_get(r.usage, "cost"), "total")),
    Column("context_tokens", "Int64", "Pi's ``calculateContextTokens`` — ``totalTokens`` or the sum of the four "
           "counts; NA for ``usage`` entries", path=lambda r: r.context_tokens(), na_on=(TypeError, ValueError)),
    Column("valid_for_context", "bool", "Pi's ``getAssistantUsage`` accepts it — not aborted, not error, context "
           "tokens > 0", path=lambda r: r.valid_for_context()),
    Column("on_active_path", "bool", "on ``Session.get_branch()``",
           path=lambda r: r.entry.get("id") in r.view.tree.active),
    Column("cumulative_cost", "float", "running sum of ``cost_total`` in file order, missing costs counting 0",
           path=_cumulative_cost, needs=("cost_total",)),
], "Recorded token usage over time: assistant messages with a ``usage``, and ``usage`` entries, in file order.",
    locate=lambda r: r.where())


@overload
def usage_df(session: "Session", columns: Iterable[str] | None = None, *,
             strict: Literal[True] = True) -> pd.DataFrame: ...
@overload
def usage_df(session: "Session", columns: Iterable[str] | None = None, *,
             strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
def usage_df(session: "Session", columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
    """Recorded token usage over time: assistant messages with a ``usage``, and ``usage`` entries,
    in file order.

    Args:
        session: the session.
        columns: the columns to build, in this order (default: all).
        strict: False: return ``(DataFrame, errors)``, the values that could not be read.
    """
    view = _View(session)
    return USAGE.frame(_usage_rows(session, view), columns, strict=strict, where=_where(session))


USAGE.document(usage_df)


# --------------------------------------------------------------------------- compactions


class _CompactionRow:
    """One ``compaction`` entry, with the span Pi's ``prepareCompaction`` saw found on first need."""

    __slots__ = ("entry", "view", "_span")

    def __init__(self, entry: dict[str, Any], view: _View) -> None:
        self.entry, self.view = entry, view
        self._span: _SpanCounts | None = None

    def span(self) -> "_SpanCounts":
        if self._span is None:
            e, session = self.entry, self.view.session
            eid = e.get("id")
            span = self.view.spans.get(id(e)) if eid and session.get_entry(eid) is e else None
            if span is None:
                span = _compaction_span_by_walk(session, e)
            self._span = _SpanCounts(span, e)
        return self._span

    def details(self, key: str) -> Any:
        details = self.entry.get("details")
        return details.get(key) if isinstance(details, dict) else None

    def where(self) -> str:
        return _place(self.entry, None)


class _SpanCounts:
    """A compaction's span as the table counts it: found, summarized, kept."""

    __slots__ = ("span", "found", "summarized", "kept")

    def __init__(self, span: _CompactionSpan, entry: dict[str, Any]) -> None:
        self.span = span
        eid = entry.get("id")
        kept_index = span.kept_index
        self.found = kept_index is not None and kept_index < span.context_length
        if kept_index is None and entry.get("firstKeptEntryId") == eid and isinstance(eid, str):
            kept_index = span.context_length  # its own id: nothing kept (as first_kept_index says)
        self.summarized = None if kept_index is None else kept_index - span.start
        self.kept = None if kept_index is None else span.context_length - kept_index


def _summary_tokens(r: _CompactionRow) -> int:
    e = r.entry
    return estimate_tokens(create_compaction_summary_message(e.get("summary"), e.get("tokensBefore"), e.get("timestamp")))


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


COMPACTIONS = Table("compactions", [
    Column("id", "string", "the compaction entry", path=lambda r: r.entry.get("id")),
    Column("timestamp", DATETIME, "its time", path=lambda r: r.entry.get("timestamp"), value=parse_iso_ms),
    Column("first_kept_entry_id", "string", "its ``firstKeptEntryId``", path=lambda r: r.entry.get("firstKeptEntryId")),
    Column("first_kept_found", "bool", "that entry is in the span Pi would have cut", path=lambda r: r.span().found),
    Column("tokens_before", "Int64", "its ``tokensBefore``", path=lambda r: r.entry.get("tokensBefore")),
    Column("summary_chars", "Int64", "UTF-16 units",
           path=lambda r: _u16(r.entry.get("summary")) if isinstance(r.entry.get("summary"), str) else None),
    Column("summary_est_tokens", "Int64", "``estimate_tokens`` of the compaction summary message",
           path=_summary_tokens, na_on=(TypeError, AttributeError, ValueError)),
    Column("read_files", "Int64", "length of ``details.readFiles``", path=lambda r: _length(r.details("readFiles"))),
    Column("modified_files", "Int64", "length of ``details.modifiedFiles``",
           path=lambda r: _length(r.details("modifiedFiles"))),
    Column("from_hook", "boolean", "its ``fromHook``", path=lambda r: r.entry.get("fromHook")),
    Column("has_system_message", "bool", "it carries a ``systemMessage``",
           path=lambda r: bool(r.entry.get("systemMessage"))),
    Column("on_active_path", "bool", "on ``Session.get_branch()``",
           path=lambda r: r.entry.get("id") in r.view.tree.active),
    Column("previous_compaction_id", "string", "the latest compaction on its path before it",
           path=lambda r: _get(r.span().span.previous, "id")),
    Column("path_length", "Int64", "entries from the root to the compaction's parent",
           path=lambda r: r.span().span.path_length),
    Column("entries_summarized", "Int64", "context entries before the first kept entry; NA when it is not found",
           path=lambda r: r.span().summarized),
    Column("entries_kept", "Int64", "context entries from the first kept entry; NA when it is not found",
           path=lambda r: r.span().kept),
    Column("summary_input", "Int64", "the summary request's recorded usage, if any",
           path=lambda r: _get(r.entry.get("usage"), "input")),
    Column("summary_output", "Int64", "the summary request's recorded usage, if any",
           path=lambda r: _get(r.entry.get("usage"), "output")),
], "One row per ``compaction`` entry, in file order.", locate=lambda r: r.where())


@overload
def compactions_df(session: "Session", columns: Iterable[str] | None = None, *,
                   strict: Literal[True] = True) -> pd.DataFrame: ...
@overload
def compactions_df(session: "Session", columns: Iterable[str] | None = None, *,
                   strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
def compactions_df(session: "Session", columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
    """One row per ``compaction`` entry, in file order.

    The span counts replay what Pi's ``prepareCompaction`` saw: the context entries of the
    compaction's parent path (``buildContextEntries``), summarized from just after the previous
    compaction's summary up to ``firstKeptEntryId``, kept from there to the end.
    A compaction whose ``firstKeptEntryId`` is its own id kept nothing (Pi's projection keeps no
    entry before it; imported Claude Code and Codex compactions are such): everything is summarized.

    Args:
        session: the session.
        columns: the columns to build, in this order (default: all).
        strict: False: return ``(DataFrame, errors)``, the values that could not be read.
    """
    view = _View(session)
    rows = [_CompactionRow(e, view) for e in session.entries if e.get("type") == "compaction"]
    return COMPACTIONS.frame(rows, columns, strict=strict, where=_where(session))


COMPACTIONS.document(compactions_df)

# The session's tables, by name.
TABLES: dict[str, Table] = {t.name: t for t in (ENTRIES, MESSAGES, TOOL_CALLS, USAGE, COMPACTIONS)}
