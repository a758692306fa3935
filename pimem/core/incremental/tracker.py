"""The incremental engine's tracker: Pi 0.87.1's projection, estimates and preparation along a growing path.

:class:`ContextTracker` keeps a branch's projection, its token sums, cut points and file
operations up to date entry by entry, so that asking "should Pi compact now, and what would it
prepare?" after every entry of a long session is cheap: ``context_estimate`` is O(1) and
``prepare`` O(log n) plus the copies of its result lists. Every answer comes from the port's
functions (:mod:`pimem.core.session_manager`, :mod:`pimem.core.compaction.compaction`) applied once
per entry, kept in sums and sorted positions; each method standing for a Pi function is declared
(``pimem.core.porting.derived``) and checked against that function's port at every prefix of the
samples, the real sessions and generated trees (``tests/core/test_tracker.py``,
``tests/core/test_porting.py``); the replay runs on it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any, Callable, Sequence

from pimem.base.js import UNDEFINED, js_truthy
from pimem.base.types import SystemMessage
from pimem.core import session_manager as sm
from pimem.core.compaction import compaction as cp
from pimem.core.compaction.compaction import (
    DEFAULT_COMPACTION_SETTINGS,
    CompactionPreparation,
    CompactionSettings,
    ContextUsageEstimate,
    CutPointResult,
    calculate_context_tokens,
    estimate_tokens,
    get_assistant_usage,
    is_projected_cut_point,
    is_projected_turn_start,
    previous_compaction_file_ops,
    settle_projected_cut,
    should_compact,
)
from pimem.core.compaction.utils import FileOperations, extract_file_ops_from_messages
from pimem.core.incremental.caches import SerializationCache, TokenCache, serialize_messages
from pimem.core.pi_ai import get_current_system_message
from pimem.core.porting import derived
from pimem.core.session_manager import (
    SessionProjection,
    build_session_path,
    edit_target,
    get_session_context_settings,
    project_context_entry,
    project_session_path,
    projected_entry,
    session_entry_to_context_messages,
)
from pimem.errors import InvalidEntryError

__all__ = ["ContextTracker"]


@derived("session-manager.js", "buildSessionProjection", port=sm.build_session_projection)
class ContextTracker:
    """The projection of a growing path with running token sums, for cheap repeated preparations.

    ``append(entry)`` adds a child of the current last entry in O(messages of the entry)
    (a compaction or ``context_edit`` rebuilds the projection once). ``context_estimate()``
    equals ``estimate_projected_context_tokens(projection, path)`` in O(1); ``prepare()``
    equals ``prepare_compaction(path, settings)`` in O(log n) plus the copies of its result
    lists: per-entry token sums are kept as prefix sums (the cut point is a binary search),
    cut points and turn starts as sorted positions, the messages to summarize as one list
    (a preparation takes a slice) and file operations as a running union.
    ``serialize(messages)`` is ``serialize_conversation(convert_to_llm(messages))`` with
    each message's text cached.

    For simulations the estimates can read an assistant's usage through a function
    (``usage_tokens``: what the model would have reported for the simulated request), and
    ``counter`` keeps the sum of any other per-message measure (a tokenizer's counts) over the
    projected messages in :attr:`counted_total`.

    Entries are Pi's JSON and are never mutated by the pipeline; estimates and texts are
    cached per message object (by identity, holding a reference). An entry or message must
    not be changed after it has been appended; call :meth:`reset` to start over.
    Every message is estimated when appended, so a message Pi could not estimate raises
    here even where a single ``prepare_compaction`` would not have reached it.

    Args:
        path_entries: the path to start from, root first (``session.get_branch()``).
        cache: per-message token estimates to share (default: a new :class:`TokenCache`).
        serialization_cache: per-message serialized texts to share (default: a new one).
        counter: a per-message measure summed over the projected messages (:attr:`counted_total`).
    """

    def __init__(
        self,
        path_entries: Sequence[dict] = (),
        *,
        cache: TokenCache | None = None,
        serialization_cache: SerializationCache | None = None,
        counter: Callable[[dict], int] | None = None,
    ):
        self.cache = cache if cache is not None else TokenCache()
        self.counter = counter
        self.serialization_cache = serialization_cache if serialization_cache is not None else SerializationCache()
        self.path: list[dict] = []
        self.reset(path_entries)

    # -- building ---------------------------------------------------------
    def reset(self, path_entries: Sequence[dict]) -> None:
        """Start over from a root-first path (``session.get_branch()``)."""
        self.path = list(path_entries)
        self._first_index: dict[Any, int] = {}
        self._latest_invalidating = -1
        self._latest_compaction = -1
        for i, e in enumerate(self.path):
            self._first_index.setdefault(e.get("id"), i)
            if e.get("type") in ("context_edit", "compaction"):
                self._latest_invalidating = i
                if e.get("type") == "compaction":
                    self._latest_compaction = i
        # following parent links from the last entry walks exactly ``path`` back
        self._chain = sm.is_walked_path(self.path)
        self._settings: tuple[Any, dict | None] = ("off", None)  # the path's, kept along a chain
        self._rebuild()

    def _rebuild(self) -> None:
        if self.path:
            projection = project_session_path(self.path if self._chain else build_session_path(self.path))
            sources = [e[0] for e in projection.entries]
            per_entry = [e[1] for e in projection.entries]
            thinking_level, model, messages = projection.thinking_level, projection.model, projection.messages
            if self._chain:
                self._settings = (thinking_level, model)
        else:
            thinking_level, model, sources, per_entry, messages = "off", None, [], [], []
        self._start(sources, [s.get("type") for s in sources], per_entry, messages, thinking_level, model)
        for pos in range(len(sources)):
            self._account(pos)

    def _start(self, sources: list[dict], types: list[Any], per_entry: list[list[dict]], messages: list[dict],
               thinking_level: Any, model: dict | None) -> None:
        """A new projection of ``sources`` with empty sums (:meth:`_account` adds each entry)."""
        self.projection = SessionProjection(
            list(map(projected_entry, zip(sources, per_entry))), messages, thinking_level, model
        )
        self._edits = {edit_target(s): s for s, t in zip(sources, types) if t == "context_edit"}
        # Parallel lists over projected entries.
        self._sources: list[dict] = sources
        self._types: list[Any] = types
        self._per_entry: list[list[dict]] = per_entry
        self._entry_tokens: list[int] = []
        self._cum: list[int] = [0]  # _cum[k]: tokens of entries [0, k)
        self._counted: list[int] = []  # the counter's total per entry (with a counter)
        self._ns_messages: list[dict] = []  # non-system messages, in order
        self._ns_off: list[int] = [0]  # _ns_off[k]: non-system messages of entries [0, k)
        self._system_positions: list[int] = []  # entries holding a system message
        self._cut_positions: list[int] = []
        self._turn_positions: list[int] = []
        # Running sums for the context estimate.
        self.counted_total = 0
        self._total = 0
        self._non_system = 0
        self._system: list[dict] = []
        self._system_tokens: tuple[list, int, int] | None = None  # (_system, its length, the current one's tokens)
        self._usage: dict | None = None
        self._usage_index: int | None = None
        self._usage_entry_pos = -1
        self._trailing = 0
        self._message_count = 0
        # File operations of entries [_fo_start, _fo_end).
        self._fo_start = -1
        self._fo_end = -1
        self._fo = FileOperations()

    def _compact_from_kept(self, previous_compaction: int) -> bool:
        """The projection after a compaction appended to a chain, from the previous projection's
        entries it keeps: the state :meth:`_rebuild` gives, by list copies (no estimate,
        projection or account of a kept entry). False, with nothing changed, where the kept
        entries do not all project the same in the previous projection: they reach before it,
        hold a system message entry, or lose a ``context_edit``; the caller rebuilds then."""
        path, c = self.path, len(self.path) - 1
        compaction = path[c]
        first_kept = compaction.get("firstKeptEntryId", UNDEFINED)
        start = min(self._first_index.get(first_kept, c) if first_kept.__class__ is str else c, c)
        sources, count = self._sources, len(self._sources)
        # The previous projection: [its compaction, its kept entries], then path[previous + 1 : c].
        tail = count - (c - previous_compaction - 1) if previous_compaction >= 0 else 0
        if start > previous_compaction:
            q, inserted = count - (c - start), None
            if q < tail or (q < count and sources[q] is not path[start]):
                return False
        else:
            # The kept entries reach back over the previous compaction: it stays, with no messages.
            previous = sources[0]
            kept_from = previous.get("firstKeptEntryId", UNDEFINED)
            kept_from = min(self._first_index.get(kept_from, previous_compaction)
                            if kept_from.__class__ is str else previous_compaction, previous_compaction)
            if start < kept_from or previous is not path[previous_compaction] or tail < 1:
                return False
            index = self._first_index
            q = bisect_left(sources, start, 1, tail, key=lambda e: index[e["id"]])
            inserted = previous
        if self._system_positions and self._system_positions[-1] >= q:
            return False  # a system message entry among the kept ones: the compaction leaves it out
        kept_to = tail if inserted is not None else count  # kept entries before the inserted one
        edits: dict[Any, dict] = {}
        if self._edits:
            first_index = self._first_index
            edits = {edit_target(s): s for s, t in zip(sources[q:], self._types[q:]) if t == "context_edit"}
            for target, edit in self._edits.items():
                if edits.get(target) is not edit and start <= first_index.get(target, -1) < c:
                    return False  # a kept entry loses its edit: its messages change
            for target in edits:
                i = first_index.get(target, -1)
                if i == c or (start <= i and path[i].get("type") == "message"
                              and path[i]["message"].get("role") == "system"):
                    return False  # an edit of the compaction, or of a system message entry it leaves out
        old_types, old_per_entry, old_tokens, old_counted = self._types, self._per_entry, self._entry_tokens, self._counted
        old_entries, old_messages, old_ns = self.projection.entries, self.projection.messages, self._ns_messages
        old_usage, old_usage_pos, old_usage_index = self._usage, self._usage_entry_pos, self._usage_index
        old_trailing, old_cuts, old_turns = self._trailing, self._cut_positions, self._turn_positions
        kept_ns = self._ns_off[q]
        kept_tokens = self._cum[-1] - self._cum[q]
        thinking_level, model = self._settings
        head = session_entry_to_context_messages(compaction)
        self._start([compaction], ["compaction"], [head], list(head), thinking_level, model)
        self._account(0)
        self._edits = edits

        def kept(values: list, empty: Any) -> list:
            """``values`` of the kept entries, with ``empty`` at the previous compaction when it stays."""
            if inserted is None:
                return values[q:]
            return [*values[q:kept_to], empty, *values[kept_to:]]

        kept_per_entry = kept(old_per_entry, [])
        self._sources.extend(kept(sources, inserted))
        self._types.extend(kept(old_types, "compaction"))
        self._per_entry.extend(kept_per_entry)
        self._entry_tokens.extend(kept(old_tokens, 0))
        self._cum = [0, *accumulate(self._entry_tokens)]
        if self.counter is not None:
            self._counted.extend(kept(old_counted, 0))
            self.counted_total = sum(self._counted)
        dropped_messages = len(old_messages) - sum(map(len, kept_per_entry))
        self.projection.entries.extend(kept(old_entries, projected_entry((inserted, []))))
        self.projection.messages.extend(old_messages[dropped_messages:])
        # no system message among the kept entries: all their messages count as non-system
        self._ns_messages.extend(old_ns[kept_ns:])
        self._ns_off = [0, *accumulate(map(len, kept_per_entry), initial=self._ns_off[1])]

        def moved(p: int) -> int:
            return p - q + 1 + (inserted is not None and p >= kept_to)

        self._cut_positions.extend(map(moved, old_cuts[bisect_left(old_cuts, q):]))
        self._turn_positions.extend(map(moved, old_turns[bisect_left(old_turns, q):]))
        self._total += kept_tokens
        self._non_system += kept_tokens
        if old_usage_pos >= q:
            assert old_usage_index is not None
            self._usage, self._usage_entry_pos = old_usage, moved(old_usage_pos)
            self._usage_index = old_usage_index - dropped_messages + len(head)
            self._trailing = old_trailing
        else:
            self._trailing += kept_tokens
        self._message_count = len(self.projection.messages)
        return True

    def _edit_from_previous(self) -> bool:
        """The projection after a ``context_edit`` appended to a chain, from the previous one: the
        state :meth:`_rebuild` gives, with the entries from the edited one on accounted again and
        the ones before it copied. False, with nothing changed, where the target is not a plain
        string id; the caller rebuilds then."""
        path, e = self.path, len(self.path) - 1
        edit = path[e]
        target = edit.get("targetId", UNDEFINED)
        if target.__class__ is not str:
            return False
        sources, count, c = self._sources, len(self._sources), self._latest_compaction
        tail = count - (e - c - 1) if c >= 0 else 0  # the previous projection ends with path[c + 1 : e]
        i = self._first_index.get(target, -1)
        p = count  # the first entry whose messages change (none: only the edit is added)
        if i == e:
            return False
        if i > c:
            p = count - (e - i)
        elif i == c >= 0:
            p = 0
        elif i >= 0 and tail > 1:
            index = self._first_index
            p = bisect_left(sources, i, 1, tail, key=lambda s: index[s["id"]])
        if p < count and sources[p] is not path[i]:
            if i > c or i == c:
                return False
            p = count  # a kept entry left out (a system message entry) or one before the kept ones
        if 0 < p < count and self._types[p] == "compaction":
            p = count  # a compaction after the first entry projects no messages, edited or not
        edited = project_context_entry(path[i], edit) if p < count else None  # raises as a rebuild does
        old_per_entry, old_types, old_entries = self._per_entry, self._types, self.projection.entries
        old_messages, old_counted, old_usage_pos = self.projection.messages, self._counted, self._usage_entry_pos
        later = sum(map(len, old_per_entry[p:]))
        kept_messages = len(old_messages) - later
        est = self.cache.estimate
        # the sums of the entries before p
        later_system = [m for pos in self._system_positions[bisect_left(self._system_positions, p):]
                        for m in old_per_entry[pos] if m.get("role") == "system"]
        later_tokens = self._cum[-1] - self._cum[p]
        self._non_system -= later_tokens - sum(map(est, later_system))
        self._system = self._system[: len(self._system) - len(later_system)]
        self._system_positions = self._system_positions[: bisect_left(self._system_positions, p)]
        self._total = self._cum[p]
        if self.counter is not None:
            self._counted = old_counted[:p]
            self.counted_total -= sum(old_counted[p:])
        if old_usage_pos < p:
            self._trailing -= later_tokens
        else:
            self._usage, self._usage_index, self._usage_entry_pos, self._trailing = None, None, -1, self._total
            offset = kept_messages
            for r in range(p - 1, -1, -1):
                messages = old_per_entry[r]
                offset -= len(messages)
                for j in range(len(messages) - 1, -1, -1):
                    m = messages[j]
                    usage = get_assistant_usage(m) if m.get("role") == "assistant" else None
                    if usage is not None:
                        self._usage, self._usage_index, self._usage_entry_pos = usage, offset + j, r
                        self._trailing = sum(map(est, messages[j + 1 :])) + self._cum[p] - self._cum[r + 1]
                        break
                if self._usage is not None:
                    break
        self._message_count = kept_messages
        self._entry_tokens = self._entry_tokens[:p]
        self._cum = self._cum[: p + 1]
        self._ns_messages = self._ns_messages[: self._ns_off[p]]
        self._ns_off = self._ns_off[: p + 1]
        self._cut_positions = self._cut_positions[: bisect_left(self._cut_positions, p)]
        self._turn_positions = self._turn_positions[: bisect_left(self._turn_positions, p)]
        self._fo_start, self._fo_end, self._fo = -1, -1, FileOperations()
        self._edits = {**self._edits, target: edit}
        thinking_level, model = self._settings
        self.projection = SessionProjection(old_entries[:p], old_messages[:kept_messages], thinking_level, model)
        self._sources, self._types, self._per_entry = sources[:p], old_types[:p], old_per_entry[:p]
        for pos in range(p, count + 1):
            source = sources[pos] if pos < count else edit
            messages = edited if pos == p and edited is not None else old_per_entry[pos] if pos < count else []
            self._sources.append(source)
            self._types.append(old_types[pos] if pos < count else "context_edit")
            self._per_entry.append(messages)
            self.projection.entries.append(old_entries[pos] if pos < count and messages is old_per_entry[pos]
                                           else projected_entry((source, messages)))
            self.projection.messages.extend(messages)
            self._account(pos)
        return True

    def _account(self, pos: int) -> None:
        """Add projected entry ``pos`` (already in the lists) to the sums and positions."""
        est = self.cache.estimate
        messages = self._per_entry[pos]
        offset = self._message_count
        entry_tokens = 0
        for j, m in enumerate(messages):
            t = est(m)
            entry_tokens += t
            role = m.get("role")
            if role == "system":
                self._system.append(m)
                if not self._system_positions or self._system_positions[-1] != pos:
                    self._system_positions.append(pos)
            else:
                self._non_system += t
                self._ns_messages.append(m)
            usage = get_assistant_usage(m) if role == "assistant" else None
            if usage is not None:
                self._usage = usage
                self._usage_entry_pos = pos
                self._usage_index = offset + j
                self._trailing = 0
            else:
                self._trailing += t
        self._total += entry_tokens
        if self.counter is not None:
            counted = sum(map(self.counter, messages))
            self._counted.append(counted)
            self.counted_total += counted
        self._message_count = offset + len(messages)
        self._entry_tokens.append(entry_tokens)
        self._cum.append(self._cum[-1] + entry_tokens)
        self._ns_off.append(len(self._ns_messages))
        projected = self.projection.entries[pos]
        if is_projected_cut_point(projected):
            self._cut_positions.append(pos)
        if is_projected_turn_start(projected):
            self._turn_positions.append(pos)

    def append(self, entry: dict) -> None:
        """Add ``entry``, a child of the current last entry of the path."""
        parent = entry.get("parentId")
        if self.path:
            if parent != self.path[-1].get("id"):
                raise InvalidEntryError(
                    f"entry {entry.get('id')!r} is not a child of the path's last entry "
                    f"{self.path[-1].get('id')!r}; call reset() with the new path"
                )
        elif js_truthy(parent):
            raise InvalidEntryError(f"entry {entry.get('id')!r} has a parent but the path is empty")
        index = len(self.path)
        self.path.append(entry)
        eid = entry.get("id")
        if self._chain and (eid.__class__ is not str or not eid or eid in self._first_index
                            or eid == self.path[0].get("parentId")):
            self._chain = False
        self._first_index.setdefault(eid, index)
        etype = entry.get("type")
        # only an assistant message or a model change names a model (and a non-object message raises)
        names_model = etype == "model_change" or (etype == "message" and (
            entry.get("message").__class__ is not dict or entry["message"].get("role") == "assistant"))
        named = get_session_context_settings((entry,), (etype,))[1] if names_model else None
        if self._chain and (names_model or etype == "thinking_level_change"):
            thinking_level, model = self._settings
            if etype == "thinking_level_change":
                thinking_level = entry.get("thinkingLevel")
            elif named is not None:
                model = named
            self._settings = (thinking_level, model)
        if etype in ("compaction", "context_edit"):
            self._latest_invalidating = index
            if etype == "compaction":
                previous_compaction, self._latest_compaction = self._latest_compaction, index
                if self._chain and self._compact_from_kept(previous_compaction):
                    return
            elif self._chain and self._edit_from_previous():
                return
            self._rebuild()
            return
        proj = self.projection
        edit = self._edits.get(entry.get("id", UNDEFINED))
        messages = project_context_entry(entry, edit) if edit is not None else session_entry_to_context_messages(entry)
        proj.entries.append(projected_entry((entry, messages)))
        proj.messages.extend(messages)
        self._sources.append(entry)
        self._types.append(etype)
        self._per_entry.append(messages)
        self._account(len(self._sources) - 1)
        if etype == "thinking_level_change":
            proj.thinking_level = entry.get("thinkingLevel")
        elif named is not None:
            proj.model = named

    def extend(self, entries: Sequence[dict]) -> None:
        """``append`` each entry in turn."""
        for entry in entries:
            self.append(entry)

    # -- queries ------------------------------------------------------------
    @derived("compaction/compaction.js", "estimateContextTokens", port=cp.estimate_context_tokens)
    def context_usage_estimate(self, usage_tokens: Callable[[dict], Any] | None = None) -> ContextUsageEstimate:
        """:func:`~pimem.core.compaction.compaction.estimate_context_tokens` of the projection's messages.

        ``usage_tokens(message)``: the tokens the anchoring assistant message reports (default
        :func:`~pimem.core.compaction.compaction.calculate_context_tokens` of ``message.usage``).
        """
        if self._usage is None:
            return ContextUsageEstimate(self._total, 0, self._total, None)
        if usage_tokens is None:
            anchored = calculate_context_tokens(self._usage)
        else:
            index = self._usage_index
            assert index is not None  # set together with self._usage
            anchored = usage_tokens(self.projection.messages[index])
        return ContextUsageEstimate(anchored + self._trailing, anchored, self._trailing, self._usage_index)

    @derived("compaction/compaction.js", "estimateProjectedContextTokens", port=cp.estimate_projected_context_tokens)
    def context_estimate(self, usage_tokens: Callable[[dict], Any] | None = None) -> ContextUsageEstimate:
        """:func:`~pimem.core.compaction.compaction.estimate_projected_context_tokens` of the projection and
        the path (``usage_tokens`` as above)."""
        if self.usage_is_current():
            return self.context_usage_estimate(usage_tokens)
        tokens = self.usage_free_estimate()
        return ContextUsageEstimate(tokens, 0, tokens, None)

    def usage_is_current(self) -> bool:
        """Whether Pi trusts the last valid usage: its entry comes after the latest compaction or edit."""
        if self._usage is None:
            return False
        usage_entry_id = self._sources[self._usage_entry_pos].get("id")
        usage_entry_index = self._first_index.get(usage_entry_id, -1) if js_truthy(usage_entry_id) else -1
        return usage_entry_index > self._latest_invalidating

    def usage_free_estimate(self) -> int:
        """Pi's estimate without usage: the current system message plus every non-system message."""
        memo = self._system_tokens
        if memo is None or memo[0] is not self._system or memo[1] != len(self._system):
            system = self.current_system_message()  # a new object each time: estimated once per state
            memo = self._system_tokens = (self._system, len(self._system),
                                          estimate_tokens(system) if system is not None else 0)
        return memo[2] + self._non_system

    def usage_message(self) -> dict | None:
        """The assistant message whose usage the estimates anchor on (the last valid one)."""
        return None if self._usage_index is None else self.projection.messages[self._usage_index]

    @property
    def total_estimate(self) -> int:
        """``estimateMessagesTokens`` of every projected message (system messages included)."""
        return self._total

    @property
    def latest_compaction(self) -> dict | None:
        """The compaction entry the projection starts from, if any."""
        return self._sources[0] if self._sources and self._types[0] == "compaction" else None

    @property
    def has_context_edit(self) -> bool:
        """Whether a ``context_edit`` entry is part of the projection."""
        return bool(self._edits)

    @property
    def context_edits(self) -> dict[Any, dict]:
        """The ``context_edit`` entries of the projection by target id (the latest per target)."""
        return dict(self._edits)

    def current_system_message(self) -> SystemMessage | None:
        """``getCurrentSystemMessage(projection.messages)``."""
        return get_current_system_message(self._system) if self._system else None

    @derived("compaction/compaction.js", "shouldCompact", port=cp.should_compact)
    def should_compact(self, context_window: float, settings: CompactionSettings) -> bool:
        """:func:`~pimem.core.compaction.compaction.should_compact` of the projected estimate."""
        return should_compact(self.context_estimate().tokens, context_window, settings)

    @derived("compaction/compaction.js", "findProjectedCutPoint", port=cp.find_projected_cut_point)
    def cut_point(self, start: int, end: int, keep: float) -> CutPointResult:
        """:func:`~pimem.core.compaction.compaction.find_projected_cut_point` of the projection's entries
        ``start:end`` (``end``: every entry), from the maintained sums: the budget's entry by a binary search
        of the prefix sums, the cut points and turn starts from their sorted positions."""
        cuts = self._cut_positions
        a = bisect_left(cuts, start)
        if a == len(cuts):
            return CutPointResult(start, -1, False)
        cut_index = cuts[a]
        exceeded = False
        if keep == keep:  # NaN never compares true: the budget is never reached
            cum, tokens = self._cum, self._entry_tokens
            total = cum[end]
            # The newest entry i (with tokens) where tokens of [i, end) reach ``keep``.
            try:
                i = bisect_right(cum, total - keep, start, end) - 1
            except OverflowError:  # pragma: no cover - absurd keep values
                i = end - 1 if keep <= 0 else start - 1
            while i >= start and not total - cum[i] >= keep:
                i -= 1
            while i + 1 < end and total - cum[i + 1] >= keep:
                i += 1
            while i >= start and tokens[i] == 0:
                i -= 1
            if i >= start:
                exceeded = True
                c = bisect_left(cuts, i)
                cut_index = cuts[c] if c < len(cuts) else cuts[-1]
        entries = self.projection.entries
        cut_index = settle_projected_cut(entries, cut_index, start, end, exceeded)
        if is_projected_turn_start(entries[cut_index]):
            return CutPointResult(cut_index, -1, False)
        turns = self._turn_positions
        t = bisect_right(turns, cut_index) - 1
        turn_start = turns[t] if t >= 0 and turns[t] >= start else -1
        return CutPointResult(cut_index, turn_start, turn_start != -1)

    def _file_ops_of_range(self, start: int, end: int) -> FileOperations:
        """File operations of entries [start, end), extending the running union when it can."""
        if start != self._fo_start or end < self._fo_end:
            self._fo_start, self._fo_end, self._fo = start, start, FileOperations()
        per_entry, fo = self._per_entry, self._fo
        for k in range(self._fo_end, end):
            extract_file_ops_from_messages(per_entry[k], fo)
        self._fo_end = max(self._fo_end, end)
        return fo

    @property
    def turn_starts(self) -> Sequence[int]:
        """Indices (into the projected entries) of the entries that start a turn, ascending."""
        return self._turn_positions

    def messages_before(self, index: int) -> int:
        """How many non-system projected messages the entries before entry ``index`` hold."""
        return self._ns_off[index]

    def compaction_cut(self, settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS
                       ) -> tuple[int, CutPointResult] | None:
        """Where :meth:`prepare` cuts: (index of the first entry after the previous compaction, the cut),
        or None where it prepares nothing (the leaf is a compaction, the cut keeps every entry or falls
        on an entry without id)."""
        if self.path and self.path[-1].get("type") == "compaction":
            return None
        sources, per_entry = self._sources, self._per_entry
        count = len(sources)
        boundary_start = 1 if count and self._types[0] == "compaction" and len(per_entry[0]) > 0 else 0
        cut = self.cut_point(boundary_start, count, settings.keep_recent_tokens)
        if cut.first_kept_entry_index >= count or not js_truthy(sources[cut.first_kept_entry_index].get("id")):
            return None
        return boundary_start, cut

    @derived("compaction/compaction.js", "prepareCompaction", port=cp.prepare_compaction)
    def prepare(self, settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS) -> CompactionPreparation | None:
        """:func:`~pimem.core.compaction.compaction.prepare_compaction` of the path, from the maintained
        projection and sums."""
        found = self.compaction_cut(settings)
        return None if found is None else self.preparation_at(settings, *found)

    def preparation_at(self, settings: CompactionSettings, boundary_start: int,
                       cut: CutPointResult) -> CompactionPreparation | None:
        """The rest of :meth:`prepare` for a given cut (one of :meth:`compaction_cut`, or a strategy's
        change of it): None where the cut's entry has no id or nothing is left to summarize."""
        sources = self._sources
        prev_index = 0 if boundary_start == 1 else -1
        previous_summary = sources[0].get("summary") if prev_index == 0 else None
        tokens_before = self.context_estimate().tokens
        first_kept_index, is_split = cut.first_kept_entry_index, cut.is_split_turn
        first_kept_id: Any = sources[first_kept_index].get("id")
        if not js_truthy(first_kept_id):
            return None
        history_end = cut.turn_start_index if is_split else first_kept_index
        ns, off = self._ns_messages, self._ns_off
        to_summarize = ns[off[boundary_start] : off[history_end]]
        turn_prefix = ns[off[history_end] : off[first_kept_index]] if is_split else []
        if not to_summarize and not turn_prefix:
            return None
        file_ops = previous_compaction_file_ops(sources[0] if prev_index == 0 else None)
        done = self._file_ops_of_range(boundary_start, first_kept_index)
        file_ops.read |= done.read
        file_ops.written |= done.written
        file_ops.edited |= done.edited
        return CompactionPreparation(
            first_kept_entry_id=first_kept_id,
            messages_to_summarize=to_summarize,
            turn_prefix_messages=turn_prefix,
            is_split_turn=is_split,
            tokens_before=tokens_before,
            previous_summary=previous_summary,
            file_ops=file_ops,
            settings=settings,
        )

    @derived("compaction/utils.js", "serializeConversation", port="pimem.core.compaction.utils.serialize_conversation")
    def serialize(self, messages: Sequence[dict]) -> str:
        """``serialize_conversation(convert_to_llm(messages))`` with per-message texts cached."""
        return serialize_messages(messages, self.serialization_cache)
