"""A session's paths from an index kept beside it, and the context calls that take them.

The port walks a path from the leaf up, one parent look-up per entry (``buildSessionPath``). A session's
entries mostly come in runs, each the child of the one before it in the file; a :class:`SessionIndex`
records, per position, the entry's type and where its run starts, and the position of every indexed id,
so that the path to a leaf is a few slices of the session's entries (one for a session without
branches), with the path's entry types sliced alongside. It is built once per session, the first time a
path is asked for, and brought up to date with the entries appended since (``Session.append_entry``).

The index answers only where it is exact: every entry went through the session's index, no id was taken
twice, no parentId cycle; otherwise the port walks. :func:`build_session_path`,
:func:`build_session_context`, :func:`build_session_projection` and :func:`build_context_entries` take a
session's path from it (for any :class:`~pimem.core.session_manager.Session`, subclasses included: what
``pimem.load_session`` returns) and do the rest with the port's own functions; any other source goes to
the port as it is. They are what ``pimem.build_session_context`` and its siblings are.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, NamedTuple, Sequence, TypeVar
from weakref import WeakKeyDictionary

from pimem.base.js import js_truthy
from pimem.core import session_manager as sm
from pimem.core.compaction import compaction as cp
from pimem.core.porting import derived
from pimem.core.session_manager import NULL_LEAF, Session, SessionContext, SessionProjection

__all__ = [
    "SessionIndex",
    "session_index",
    "IndexedPath",
    "indexed_path",
    "walked_path",
    "build_session_path",
    "build_session_context",
    "build_session_projection",
    "build_context_entries",
    "find_cut_point",
    "prepare_compaction",
]


class SessionIndex:
    """Per position of a session's entries: the entry's type and where the run of entries ending there
    starts (within a run each entry's parentId finds the entry just before it in the session's index);
    the positions of the indexed ids; whether every message entry holds a message object.

    Args:
        session: the session indexed (its entries are read as far as it has indexed them).
    """

    __slots__ = ("entries", "count", "types", "run_start", "positions", "exact", "checked")

    def __init__(self, session: Session) -> None:
        self.entries = session.entries
        self.count = 0
        self.types: list[Any] = []
        self.run_start: list[int] = []
        self.positions: dict[str, int] = {}
        self.exact = True  # no id taken twice, every entry indexed by the session
        self.checked = True  # every message entry holds a message object

    def catch_up(self, session: Session) -> bool:
        """Index the entries appended since the last call; whether the index can answer for the session."""
        entries = session.entries
        if session._indexed != len(entries):
            return False  # entries added to the list without Session.append_entry: only the port knows
        by_id = session._by_id
        types, run_start, positions = self.types, self.run_start, self.positions
        for position in range(self.count, len(entries)):
            entry = entries[position]
            eid = entry.get("id")
            if isinstance(eid, str):
                if eid in positions or by_id.get(eid) is not entry:
                    self.exact = False  # an id taken again: walks through the earlier entry change
                positions[eid] = position
            types.append(entry.get("type"))
            parent = entry.get("parentId")
            if position and parent.__class__ is str and parent and by_id.get(parent) is entries[position - 1]:
                run_start.append(run_start[position - 1])
            else:
                run_start.append(position)
            if self.checked and sm.lacks_message_object(entry):
                self.checked = False
        self.count = len(entries)
        return self.exact

    def path(self, session: Session, leaf_id: Any = None) -> tuple[list[dict], list, list[int]] | None:
        """(the port's ``build_session_path(session, leaf_id)``, the path's entry types, the slices of the
        session's entries it is made of as ``[start, end, start, end, ...]`` root first) from the runs, or None
        where they cannot answer (a parentId cycle: the port stops that walk)."""
        entries = session.entries
        if leaf_id is None:
            leaf_id = NULL_LEAF if session._leaf_id is None else session._leaf_id
        if leaf_id is NULL_LEAF or not entries:
            return [], [], []
        pieces = self.pieces(session, leaf_id)
        if pieces is None:
            return None
        types = self.types
        if len(pieces) == 2:
            return entries[pieces[0]:pieces[1]], types[pieces[0]:pieces[1]], pieces
        path: list[dict] = []
        path_types: list = []
        slices: list[int] = []
        for k in range(len(pieces) - 2, -1, -2):
            path.extend(entries[pieces[k]:pieces[k + 1]])
            path_types.extend(types[pieces[k]:pieces[k + 1]])
            slices += pieces[k : k + 2]
        return path, path_types, slices

    def pieces(self, session: Session, leaf_id: Any) -> list[int] | None:
        """The runs of the session's entries on the path to the leaf (a leaf id the index does not hold: the last
        entry), leaf first, as ``[start, end, start, end, ...]``; None at a parentId cycle."""
        entries = session.entries
        positions = self.positions
        at = None
        if js_truthy(leaf_id):
            try:
                at = positions.get(leaf_id)
            except TypeError:  # an unhashable leaf id finds nothing
                pass
        if at is None:
            at = len(entries) - 1
        run_start = self.run_start
        pieces = []
        total = 0
        while True:
            start = run_start[at]
            pieces.append(start)
            pieces.append(at + 1)
            total += at + 1 - start
            if total > len(entries):
                return None  # a parentId cycle: the walk that stops at it
            parent = entries[start].get("parentId")
            if not isinstance(parent, str) or not parent:
                break  # the index has string keys only: any other parentId finds nothing
            at = positions.get(parent)
            if at is None:
                break
        return pieces

    def finder(self, slices: list[int]) -> Callable[[str], int | None]:
        """``id -> where on the path made of ``slices`` the session's entry with that id is`` (None: not on it)."""
        positions = self.positions

        def position_of(eid: str) -> int | None:
            at = positions.get(eid)
            if at is not None:
                offset = 0
                for k in range(0, len(slices), 2):
                    start, end = slices[k], slices[k + 1]
                    if start <= at < end:
                        return offset + at - start
                    offset += end - start
            return None

        return position_of


T = TypeVar("T")
_INDEXES: WeakKeyDictionary[Session, SessionIndex] = WeakKeyDictionary()


def session_index(session: Session) -> SessionIndex | None:
    """The session's index, brought up to date; None where it cannot answer (see :class:`SessionIndex`).

    Args:
        session: a session.
    """
    index = _INDEXES.get(session)
    if index is None or index.entries is not session.entries or index.count > len(session.entries):
        index = _INDEXES[session] = SessionIndex(session)
    return index if index.catch_up(session) else None


class IndexedPath(NamedTuple):
    """A session's path from its index, with what the port's steps after the walk can use."""

    path: list[dict]
    """The port's ``build_session_path(session, leaf)``."""
    types: list
    """The path's entry types."""
    checked: bool
    """Whether every message entry of the path holds a message object."""
    position_of: Callable[[str], int | None]
    """Where on the path the entry with a given string id is (None: not on it)."""


def indexed_path(session: Session, leaf_id: Any = None) -> IndexedPath | None:
    """The path to the leaf and what the index knows of it, or None where the index cannot answer.

    Args:
        session: a session.
        leaf_id: the leaf (as :func:`~pimem.core.session_manager.build_session_path` takes it).
    """
    index = session_index(session)
    if index is None:
        return None
    found = index.path(session, leaf_id)
    return None if found is None else IndexedPath(found[0], found[1], index.checked, index.finder(found[2]))


def walked_path(path: Sequence[dict]) -> IndexedPath | None:
    """What a session's index knows of ``path`` where ``path`` is, entry for entry, the path it gives to its last
    entry, and starts where a path ``session.get_branch()`` returned starts: then ``path`` is its own walk (Pi's
    ``buildSessionPath`` of it is itself). None otherwise, or where the index cannot answer. One comparison of
    the entries by identity, no read of their fields beyond the ends (the index is built on first use).

    Args:
        path: a list of entries, root first.
    """
    if path.__class__ is not list or not path:
        return None
    owner = sm.BRANCH_ROOTS.get(id(path[0]))
    session = owner() if owner is not None else None
    if session is None:
        return None
    leaf, root = path[-1], path[0]
    if leaf.__class__ is not dict or root.__class__ is not dict:
        return None
    leaf_id, root_parent = leaf.get("id"), root.get("parentId")
    # the index names entries by string ids; a root whose parentId is of another kind is left to the port
    if leaf_id.__class__ is not str or not leaf_id or (root_parent.__class__ is not str and js_truthy(root_parent)):
        return None
    index = session_index(session)
    if index is None or index.positions.get(leaf_id) is None:
        return None
    entries = session.entries
    pieces = index.pieces(session, leaf_id)
    if pieces is not None and pieces[0] == 0 and len(pieces) == 2 and pieces[1] == len(entries):
        # the path is every entry of the session (no branch): compared, and typed, without copies
        if path != entries:  # the same entries (compared by identity first)
            return None
        return IndexedPath(path, index.types, index.checked, index.finder(pieces))
    found = index.path(session, leaf_id)
    if found is None or found[0] != path:
        return None
    return IndexedPath(path, found[1], index.checked, index.finder(found[2]))


def _from_index(source: Any, leaf_id: Any, on_path: Callable[[IndexedPath], T], port: Callable[[Any, Any], T]) -> T:
    """``on_path`` of a session's indexed path to the leaf; ``port(source, leaf_id)`` for anything else, or where
    the index cannot answer."""
    if isinstance(source, Session):
        found = indexed_path(source, leaf_id)
        if found is not None:
            return on_path(found)
    return port(source, leaf_id)


@derived("session-manager.js", "buildSessionPath", port=sm.build_session_path)
def build_session_path(source: Any, leaf_id: Any = None) -> list[dict]:
    """``buildSessionPath``: :func:`~pimem.core.session_manager.build_session_path`, a session's path taken
    from its index.

    Args:
        source: a session, or a list of entries (its last entry is the default leaf).
        leaf_id: the leaf (as the port takes it).
    """
    return _from_index(source, leaf_id, _PATH, sm.build_session_path)


@derived("session-manager.js", "buildSessionContext", port=sm.build_session_context)
def build_session_context(source: Any, leaf_id: Any = None) -> SessionContext:
    """``buildSessionContext``: the messages the model sees at the leaf, thinking level, model
    (:func:`~pimem.core.session_manager.build_session_context`, a session's path taken from its index).

    Args:
        source: a session, or a list of entries (its last entry is the default leaf).
        leaf_id: the leaf; ``None`` is Pi's default leaf (the last entry of a list, or the session's
            current leaf), :data:`~pimem.core.session_manager.NULL_LEAF` Pi's ``null`` leaf (an empty context).
    """
    return _from_index(source, leaf_id, _context, sm.build_session_context)


@derived("session-manager.js", "buildSessionProjection", port=sm.build_session_projection)
def build_session_projection(source: Any, leaf_id: Any = None) -> SessionProjection:
    """``buildSessionProjection``: projected entries (each keeps its source entry) + messages
    (:func:`~pimem.core.session_manager.build_session_projection`, a session's path taken from its index).

    Args:
        source: a session, or a list of entries (its last entry is the default leaf).
        leaf_id: the leaf (as the port takes it).
    """
    return _from_index(source, leaf_id, _projection, sm.build_session_projection)


@derived("session-manager.js", "buildContextEntries", port=sm.build_context_entries)
def build_context_entries(source: Any, leaf_id: Any = None) -> list[dict]:
    """``buildContextEntries``: the latest compaction, its kept entries, then everything after it
    (:func:`~pimem.core.session_manager.build_context_entries`, a session's path taken from its index).

    Args:
        source: a session, or a list of entries.
        leaf_id: the leaf (as the port takes it).
    """
    return _from_index(source, leaf_id, _context_entries, sm.build_context_entries)


# What the port does with a walked path, given what the index knows of it.
_PATH: Callable[[IndexedPath], list[dict]] = itemgetter(0)


def _context(found: IndexedPath) -> SessionContext:
    return sm.session_path_context(found.path, found.types, checked=found.checked, position_of=found.position_of)


def _projection(found: IndexedPath) -> SessionProjection:
    return sm.project_session_path(found.path, found.types, checked=found.checked, position_of=found.position_of)


def _context_entries(found: IndexedPath) -> list[dict]:
    return sm.select_context_entries(found.path, found.types, found.position_of)[0]


@derived("compaction/compaction.js", "findCutPoint", port=cp.find_cut_point)
def find_cut_point(entries: Sequence[dict], start_index: int, end_index: int,
                   keep_recent_tokens: float) -> cp.CutPointResult:
    """``findCutPoint``: :func:`~pimem.core.compaction.compaction.find_cut_point`, told by the session's index
    (where ``entries`` is a session's path, as ``get_branch`` returns it) the entries' types and whether every
    message entry holds a message object.

    Args:
        entries: the entries to cut.
        start_index: the first entry that may be summarized.
        end_index: the entry after the last.
        keep_recent_tokens: the tokens to keep.
    """
    found = walked_path(entries)
    if found is None:
        return cp.find_cut_point(entries, start_index, end_index, keep_recent_tokens)
    return cp.find_cut_point(entries, start_index, end_index, keep_recent_tokens, checked=found.checked,
                             types=found.types)


@derived("compaction/compaction.js", "prepareCompaction", port=cp.prepare_compaction)
def prepare_compaction(path_entries: Sequence[dict], settings: cp.CompactionSettings = cp.DEFAULT_COMPACTION_SETTINGS
                       ) -> cp.CompactionPreparation | None:
    """``prepareCompaction``: :func:`~pimem.core.compaction.compaction.prepare_compaction`, where
    ``path_entries`` is a session's path (as ``get_branch`` returns it) with what the index knows of it (it is
    its own walk; its entry types; whether its message entries hold message objects; where each id is).

    Args:
        path_entries: the active path (``session.get_branch()``), root first.
        settings: Pi's ``reserveTokens`` / ``keepRecentTokens``.
    """
    if path_entries and path_entries[-1].get("type") != "compaction":  # else the port answers at once
        found = walked_path(path_entries)
        if found is not None:
            projection = sm.project_session_path(found.path, found.types, checked=found.checked, pairs=True,
                                                 position_of=found.position_of)
            return cp.preparation_of_projection(projection, path_entries, settings, True)
    return cp.prepare_compaction(path_entries, settings)
