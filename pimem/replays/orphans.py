"""What a replay cannot know: it is open-loop. The orphan-reference rate measures how much that matters.

The open-loop assumption
------------------------
A replay re-runs Pi's compaction pipeline over a recorded session, but not the agent. After a
replayed compaction the recorded assistant turns are appended unchanged, although the recorded
agent never saw the replayed context (the replay's summary and kept tail): it saw the recording's.
A real agent given the replayed context might have re-read a file, asked again, or taken another
path, and every later turn — and so every later context size, check and compaction — could differ.
So a replay answers "what would Pi's memory pipeline have done with *this* conversation", not "what
would the session have become". Counts and sizes after the first replayed compaction are
conditional on the recorded conversation continuing as it did.

Orphan references
-----------------
One measure of how far that assumption is stretched: after each compaction, the recorded agent's
later turns use facts (paths, identifiers, commands, numbers, decisions — :mod:`pimem.text.facts`)
that came from the span the compaction summarized. A reference is an *orphan* when the fact is
absent from the context the agent would have had at that turn: the summary, the kept tail and
every message appended since. The agent of the recording could use it because it had seen it; an
agent given the replayed context could not have, except by guessing or re-deriving.

:func:`orphan_references` returns one row per compaction: ``references`` (distinct facts of the
summarized span the agent used later, before the next compaction; a fact counts at its first use,
after which the agent's own message holds it), ``orphans`` (those absent from the context at that
first use) and ``orphan_rate`` (NaN when there is no reference). ``span_facts`` counts the span's
facts of the kinds an assistant turn can state (paths, identifiers, numbers, decisions, commands). Compactions of the recording
itself can be measured the same way: there the agent *did* act on that context, so their rate is
a closed-loop baseline (facts the agent knew anyway, or re-derived without a visible trace).

What it describes: the replay, not the summary. A fact counts at its first later use, and most
facts the agent uses again were re-established before that use by the kept tail or by later messages
(the agent re-reads the file, the user repeats the name), so the rate hardly moves with the summary:
on ``before-compaction.jsonl`` the real summaries leave 0 orphans of 76 references, another session's
summary in their place 2, and an empty summary 2 as well. Read it as "how much of the recorded agent's behaviour a replayed
context could not have supported", a property of the replay's cut points and kept tail; to judge a
summary use :mod:`pimem.drift.measures` (``score``). The replay summary's ``references_checked``
counts the references checked (the denominator), ``orphans`` the orphans among them.

What it rewards and how it can be gamed: a summary that repeats many facts lowers it; so does a
long kept tail. Facts a capable agent can recover without the context (a conventional file name)
count as orphans, so the rate is an upper bound on dependence on forgotten context. Facts are
matched with :func:`pimem.text.facts.fact_present`, through :func:`fact_in_context` (one function, so
that a better matcher can replace it).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import pandas as pd

from pimem.base.memo import on_forget
from pimem.base.tables import Column, Table
from pimem.core.incremental.paths import build_session_path
from pimem.core.session_manager import is_walked_path, session_entry_to_context_messages
from pimem.sessions.compactions import (
    CompactionSpan,
    compaction_spans,
    messages_after_compaction,
    prefix_projection,
    projection_after,
)
from pimem.sessions.load import SessionLike, session_or_entries
from pimem.text.facts import SummaryIndex, content_words, extract_facts, fact_present, fold, fold_by_lines
from pimem.text.messages import message_text

__all__ = ["orphan_references", "orphan_rows", "orphan_rate", "fact_in_context", "OPEN_LOOP_NOTE", "ORPHANS",
           "ORPHAN_COLUMNS"]

OPEN_LOOP_NOTE = (
    "The replay is open-loop: after a replayed compaction the recorded assistant turns are appended "
    "unchanged, although the recorded agent never saw the replayed context. Counts and sizes after the "
    "first replayed compaction assume the conversation would have continued as recorded. The "
    "orphan-reference rate is the share of the agent's later uses of facts from a summarized span that "
    "the context it would have had (summary, kept tail, messages since) does not hold."
)

# the kinds an assistant message can state (tool results give errors, user messages constraints)
_REFERENCE_KINDS = ("path", "identifier", "number", "decision", "command")

ORPHANS = Table("orphans", [
    Column("compaction", description="the compaction's position among the path's compactions (0 first)"),
    Column("compaction_id", description="the compaction entry"),
    Column("first_kept_entry_id", description="its first kept entry"),
    Column("span_facts", description="facts of the summarized span of the kinds an assistant turn can state"),
    Column("references", description="distinct span facts the agent used later, before the next compaction"),
    Column("orphans", description="those absent from the context at their first use"),
    Column("orphan_rate", description="orphans / references (NaN when there is no reference)"),
    Column("orphan_examples", description="the first orphaned facts, as ``kind:value``"),
], "One row per compaction on the active path: the recorded agent's later uses of summarized facts.")
ORPHAN_COLUMNS = ORPHANS.names


def _context_text(message: dict) -> str:
    """Everything the model is shown of a message: text, tool calls with all arguments, tool
    results and bash output in full, summaries (thinking is left out: providers drop it from
    earlier turns)."""
    return message_text(message, separator="\n", thinking=None, tool_calls="json", images=False)


class _Shown:
    """One message of a context, with its folded text and its facts index made on first need."""

    __slots__ = ("message", "_folded", "_index")

    def __init__(self, message: dict) -> None:
        self.message = message  # held: the cache below is keyed by identity
        self._folded: str | None = None
        self._index: Any = None

    @property
    def folded(self) -> str:
        if self._folded is None:
            text = _context_text(self.message)
            # a summary repeats most lines of the one before it: those lines are folded once
            summary = self.message.get("role") in ("compactionSummary", "branchSummary")
            self._folded = fold_by_lines(text) if summary else fold(text)
        return self._folded

    @property
    def index(self) -> Any:
        if self._index is None:
            self._index = _lazy_index(_context_text(self.message), self.folded)
        return self._index


_LAZY_INDEX: Any = None


def _lazy_index(text: str, folded: str) -> Any:
    """A :class:`pimem.drift.SummaryIndex` of ``text`` that builds its look-up tables only when
    :func:`pimem.text.facts.fact_present` first needs one: identifiers and commands are matched on the
    folded text alone, which is known already."""
    global _LAZY_INDEX
    if _LAZY_INDEX is None:
        class LazyIndex(SummaryIndex):
            def __init__(self, text: str, folded: str) -> None:  # noqa: D107 - the tables come later
                self.__dict__.update(text=text, folded=folded)

            def __getattr__(self, name: str) -> Any:  # a table not built yet: build them all
                if name.startswith("__"):
                    raise AttributeError(name)
                full = SummaryIndex(self.__dict__["text"])
                for key, value in full.__dict__.items():
                    self.__dict__.setdefault(key, value)
                if name not in self.__dict__:
                    raise AttributeError(name)
                return self.__dict__[name]

        _LAZY_INDEX = LazyIndex
    return _LAZY_INDEX(text, folded)


def _shortcut(fact: Any) -> Any:
    """A cheap test on a message's folded text that :func:`pimem.text.facts.fact_present` can only pass
    when it holds (a path's last two segments, an identifier or command, two content words of a
    sentence); None for numbers, which have no such test."""
    if fact.kind == "path":
        # equal, a suffix of a path in the text, or sharing its last two segments with one: the last
        # two segments (or the only one) occur in the text
        tail = "/".join(fact.value.lower().split("/")[-2:]).lstrip("/")
        return (lambda folded: tail in folded) if tail else None
    if fact.kind in ("identifier", "command"):
        value = fold(fact.value)
        return (lambda folded: value in folded) if value else None
    if fact.kind == "number":
        return None
    value, words = fold(fact.value), content_words(fact.value)
    if len(words) < 2:
        return lambda folded: bool(value) and value in folded
    return lambda folded: (bool(value) and value in folded) or sum(w in folded for w in words) >= 2


def fact_in_context(fact: Any, context: Sequence[Any]) -> bool:
    """Whether ``fact`` is held by any message of the context (:func:`pimem.text.facts.fact_present`).

    ``context``: messages (dicts) or the replay's shown messages. A message whose folded text
    fails a cheap necessary test (it lacks a path's last two segments, an identifier, a command, or
    two content words of a sentence) is skipped without building its index.
    """
    could_hold = _shortcut(fact)
    for item in context:
        shown = item if isinstance(item, _Shown) else _Shown(item)
        if could_hold is not None and not could_hold(shown.folded):
            continue
        if fact_present(fact, shown.index):
            return True
    return False


class _Recent:
    """A memo of two generations: when the newer one holds ``limit`` entries it becomes the older
    one and the older one is let go; an entry found in the older one moves to the newer. What a
    sweep reads again (the session under way) stays, what it will not (sessions swept before) goes."""

    __slots__ = ("limit", "new", "old")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.new: dict[Any, Any] = {}
        self.old: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        hit = self.new.get(key)
        if hit is None:
            hit = self.old.get(key)
            if hit is not None:
                self.put(key, hit)
        return hit

    def put(self, key: Any, value: Any) -> None:
        if len(self.new) >= self.limit:
            self.old, self.new = self.new, {}
        self.new[key] = value


class _PerMessage:
    """Work done once per message object and kept across calls (runs of a sweep replay the same
    loaded messages): its shown form and its facts. Holds the messages, so ids stay unique; keeps
    about the last ``limit`` to ``2 * limit`` messages used (a session's runs use a few thousand)."""

    def __init__(self, limit: int = 8_000) -> None:
        self.limit = limit
        self.forget()

    def forget(self) -> None:
        """Let go of every message kept."""
        self._shown = _Recent(self.limit)
        self._facts = _Recent(self.limit)

    def shown(self, message: dict) -> _Shown:
        summary = message.get("role") in ("compactionSummary", "branchSummary")
        key: Any = ("summary", message.get("role"), str(message.get("summary") or "")) if summary else id(message)
        hit = self._shown.get(key)
        if hit is None or (not summary and hit.message is not message):
            hit = _Shown(message)  # a projection makes a new summary message each time
            self._shown.put(key, hit)
        return hit

    def facts(self, message: dict) -> list[Any]:
        """The facts of the kinds an assistant turn can state (a tool result states none)."""
        hit = self._facts.get(id(message))
        if hit is None or hit[0] is not message:
            found = [] if message.get("role") == "toolResult" else extract_facts([(None, message)],
                                                                                  kinds=_REFERENCE_KINDS)
            hit = (message, found)
            self._facts.put(id(message), hit)
        return hit[1]


_PER_MESSAGE = _PerMessage()
on_forget(_PER_MESSAGE.forget)


def orphan_references(result_or_session: SessionLike, *, leaf_id: str | None = None, examples: int = 3,
                      spans: Sequence[CompactionSpan] | None = None) -> pd.DataFrame:
    """One row per compaction on the active path: references, orphans, orphan rate (module docs).

    Args:
        result_or_session: a :class:`~pimem.replays.result.ReplayResult` (its replayed session), a
            ``Session`` (its own compactions: the closed-loop baseline) or a session file's path
            (:func:`pimem.as_session`).
        leaf_id: the leaf whose path is measured (default: the session's current leaf).
        examples: how many orphaned facts ``orphan_examples`` lists (as ``kind:value``).
        spans: the path's :func:`~pimem.sessions.compactions.compaction_spans`, when already computed.
    """
    return ORPHANS.frame(orphan_rows(result_or_session, leaf_id=leaf_id, examples=examples, spans=spans))


ORPHANS.document(orphan_references)


def orphan_rows(result_or_session: SessionLike, *, leaf_id: str | None = None, examples: int = 3,
                spans: Sequence[CompactionSpan] | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`orphan_references` (same arguments), without the table."""
    session = session_or_entries(result_or_session)
    path = build_session_path(session, leaf_id)
    positions = {e.get("id"): i for i, e in enumerate(path)}
    spans = list(spans) if spans is not None else compaction_spans(session, leaf_id=leaf_id)
    comp_positions = [positions[s.entry.get("id")] for s in spans]
    shown, facts_of = _PER_MESSAGE.shown, _PER_MESSAGE.facts
    walked = is_walked_path(path)
    rows: list[dict[str, Any]] = []
    for k, span in enumerate(spans):
        start = comp_positions[k]
        end = comp_positions[k + 1] if k + 1 < len(spans) else len(path)
        span_facts = {f.key: f for _, m in span.messages for f in facts_of(m)}
        context = [shown(m) for m in projection_after(span, path, start, walked).messages
                   if m.get("role") != "system"]
        used: set[tuple[str, str]] = set()
        orphans: list[Any] = []
        # the prefix to ``pos`` can be projected from the compaction's kept entries on
        tail_only = walked and span.settings_entries is not None and path[start] is span.entry
        for pos in range(start + 1, end):
            entry = path[pos]
            etype = entry.get("type")
            if etype == "context_edit":  # the projection changes: rebuild it here
                projected = (messages_after_compaction(path, pos + 1, start) if tail_only
                             else prefix_projection(path, pos + 1, walked).messages)
                context = [shown(m) for m in projected if m.get("role") != "system"]
                continue
            if etype == "message" and entry.get("message").__class__ is not dict:
                tail_only = False
            messages = [m for m in session_entry_to_context_messages(entry) if m.get("role") != "system"]
            for message in messages:
                if message.get("role") == "assistant" and span_facts:
                    for fact in facts_of(message):
                        if fact.key in span_facts and fact.key not in used:
                            used.add(fact.key)
                            if not fact_in_context(fact, context):
                                orphans.append(fact)
                context.append(shown(message))
        rows.append({
            "compaction": k,
            "compaction_id": span.entry.get("id"),
            "first_kept_entry_id": span.entry.get("firstKeptEntryId"),
            "span_facts": len(span_facts),
            "references": len(used),
            "orphans": len(orphans),
            "orphan_rate": len(orphans) / len(used) if used else float("nan"),
            "orphan_examples": ", ".join(f"{f.kind}:{f.value}" for f in orphans[:examples]),
        })
    return rows


def orphan_rate(table: pd.DataFrame | Iterable[dict]) -> float:
    """Pooled rate of an :func:`orphan_references` table or its rows: all orphans over all references
    (NaN if none)."""
    if isinstance(table, pd.DataFrame):
        references, orphans = float(table["references"].sum()), float(table["orphans"].sum())
    else:
        rows = list(table)
        references, orphans = float(sum(r["references"] for r in rows)), float(sum(r["orphans"] for r in rows))
    return orphans / references if references else float("nan")
