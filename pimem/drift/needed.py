"""Needed-later facts: what the recorded trajectory actually used after a compaction.

A fact of a compaction's summarized span is **needed later** when

1. the recording *uses* it after the compaction entry (``record.later``) — or, for a user's standing
   preference or prohibition (a constraint with never, always, don't, only, prefer, avoid, must,
   should, keep…), the session goes on after the compaction at all: it holds for the rest of the
   session whether or not a later message repeats it (``how == "standing"``) — and
2. the kept tail (``record.kept``, still in the agent's context after the compaction) does not
   show it — otherwise the agent had it without any summary.

**Use** is read from what the user and the model say and do after the compaction: user text,
assistant text and thinking, every string argument of tool calls (paths, commands, code written),
and user ``!`` commands; a user's constraint (a request is long) is used by a later message holding
half its words. Tool output is not use (a file in a listing is not a use), with one
exception: an *error* is also needed when the same error comes back in a later tool result (the
summary could have prevented the repeat) — if the line is specific (a quoted name, an error code, a
path or a code-shaped name; "Command aborted" coming back says nothing). Matching follows :func:`pimem.text.facts.fact_present`
(paths by segments, identifiers by case-sensitive name, free text by content words with polarity);
an error counts as mentioned only by its two or more quoted names together or 70% of its words.
Whether the kept tail shows a fact is the same test against everything in the kept messages,
tool results included (the agent sees them).

Paths that name the same file in different spellings count once. Facts fall into five classes; the headline (:func:`weighted_recall`) is the weighted mean of the
per-class recalls, so a class counts by its weight and not by its number of facts (a span has
dozens of names and a handful of constraints). Default weights:

============== ====== ==================================================================
class          weight facts
============== ====== ==================================================================
``constraint`` 3      user constraints and preferences
``decision``   3      assistant decisions
``error``      2      errors of tool results and failed commands
``artifact``   2      paths the span wrote or edited (Pi's modified-files list of the span)
``reference``  1      every other path, identifier, command and number
============== ====== ==================================================================

What this rewards and how it can be gamed: it rewards keeping exactly what the session went on to
need, so a summary gets no credit for trivia the agent never touched again, nor for what the kept
tail already shows. It cannot be gamed by length alone (see the length-matched reporting in
:mod:`pimem.drift.measures`), but a summarizer that saw the future — or a dump of every name in the
span — would score well; compare at matched summary length and read the per-class columns. It is
only as good as the recording: a fact the agent should have used but did not counts as not needed,
and the horizon is the end of the recorded path. The extractive summarizer shares the extractor's
marker rules for constraints and decisions, but not this test: whether a fact is needed is decided
by the trajectory, not by those rules.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pimem.base.memo import memoised, on_forget
from pimem.text.facts import (Fact, SummaryIndex, extract_facts, fact_present, fold, index_of, joined_index,
                              negated_words)
from pimem.drift.records import CompactionRecord, source_text
from pimem.replays.recording import recordings_shared
from pimem.errors import ConfigurationError

__all__ = ["FACT_CLASSES", "DEFAULT_WEIGHTS", "NeededFact", "fact_class", "needed_later_facts", "span_needed_facts",
           "carried_later_facts", "used_later", "weighted_recall"]

FACT_CLASSES: tuple[str, ...] = ("constraint", "decision", "error", "artifact", "reference")
DEFAULT_WEIGHTS: dict[str, float] = {"constraint": 3.0, "decision": 3.0, "error": 2.0, "artifact": 2.0,
                                     "reference": 1.0}


@dataclass(frozen=True)
class NeededFact:
    """A span fact with its class, weight and first later use (entry id, and how it was used)."""

    fact: Fact
    cls: str
    weight: float
    used_at: str | None
    how: str  # "mentioned" | "recurred" | "standing"


def fact_class(fact: Fact, modified_files: Sequence[str] = ()) -> str:
    """The class of a fact (see module docs)."""
    if fact.kind in ("constraint", "decision", "error"):
        return fact.kind
    if fact.kind == "path" and modified_files:
        index = index_of("\n".join(modified_files))
        if index.has_path(fact.value):
            return "artifact"
    return "reference"


_LINE_COL = re.compile(r"\(\d+,\d+\)|:\d+(?::\d+)?")
# what makes an error line specific: a quoted name, an error code, a path, a code-shaped name
_SPECIFIC = re.compile(r"'[^'\s]{3,}'|\"[^\"\s]{3,}\"|`[^`\s]{3,}`|\b[A-Z]{1,4}\d{3,5}\b|[\w.-]+/[\w./-]+|"
                       r"\b[a-z]+[A-Z]\w*|\b\w+_\w+")


def _error_key(line: str) -> str:
    return fold(_LINE_COL.sub("", line))[:120]


_TOKEN = re.compile(r"[a-z0-9_$]+")


@memoised(1 << 15)
def _tokens(text: str) -> frozenset[str]:
    out = set()
    for t in _TOKEN.findall(text.lower()):
        out.add(t)
        if len(t) > 3 and t.endswith("s") and not t.endswith("ss"):
            out.add(t[:-1])
    return frozenset(out)


@memoised(1 << 14)
def _result_text(text: str) -> str:
    return fold(_LINE_COL.sub("", text))


def _texts(messages: Sequence[tuple[str | None, dict]]) -> tuple[list[str], list[str | None]]:
    """What each message uses (text, thinking, tool arguments) and its tool output (None if it has none)."""
    use = [source_text(m, results=False) for _, m in messages]
    results = [source_text(m) if m.get("role") in ("toolResult", "bashExecution") else None for _, m in messages]
    return use, results


class Trajectory:
    """Messages as look-up structures: what each one uses (text, thinking, tool arguments) with a
    token index to find candidates fast, and tool output (for errors that come back)."""

    def __init__(self, messages: Sequence[tuple[str | None, dict]],
                 texts: tuple[list[str], list[str | None]] | None = None) -> None:
        self.messages = list(messages)
        self.use_texts, self._results = texts if texts is not None else _texts(self.messages)
        self.result_texts = ["" if t is None else _result_text(t) for t in self._results]
        self.postings: dict[str, list[int]] = {}  # token -> the messages using it, in increasing order
        for i, text in enumerate(self.use_texts):
            for t in _tokens(text):
                self.postings.setdefault(t, []).append(i)
        self._indexes: dict[int, SummaryIndex] = {}
        # per fact (kind, value, surface): the messages that may mention it, and whether each one does
        self._mentions: dict[tuple[str, str, str], tuple[Sequence[int], list[bool | None]]] = {}
        # the tool outputs joined by line breaks (a folded text holds none), with each one's offset
        self.results_joined = "\n".join(self.result_texts)
        self.result_offsets = list(itertools.accumulate((len(t) + 1 for t in self.result_texts[:-1]), initial=0))

    def _index(self, i: int) -> SummaryIndex:
        index = self._indexes.get(i)
        if index is None:
            index = self._indexes[i] = index_of(self.use_texts[i])
        return index

    def _first_mention(self, fact: Fact, start: int, end: int) -> int | None:
        """The first message in ``[start, end)`` that mentions the fact, or None.

        The messages that may mention it are found once per fact over the whole trajectory (which
        ones qualify does not depend on the range), and whether each one does is kept beside them:
        the compactions of one replay, and the replays of one recording, ask again from other starts.
        """
        key = (fact.kind, fact.value, fact.surface)
        known = self._mentions.get(key)
        if known is None:
            found = self._find_candidates(fact, 0, len(self.messages))
            known = self._mentions[key] = (found, [None] * len(found))
        found, flags = known
        for j in range(bisect_left(found, start), len(found)):
            i = found[j]
            if i >= end:
                break
            hit = flags[j]
            if hit is None:
                hit = flags[j] = self.mentioned(fact, self._index(i))
            if hit:
                return i
        return None

    def _find_candidates(self, fact: Fact, start: int, end: int) -> Sequence[int]:
        if fact.kind in ("constraint", "decision", "error"):
            words = _tokens(" ".join(negated_words(fact.surface or fact.value)[0]))
            counts: dict[int, int] = {}
            for w in words:
                for i in _within(self.postings.get(w, ()), start, end):
                    counts[i] = counts.get(i, 0) + 1
            return sorted(i for i, n in counts.items() if n >= 2)
        if fact.kind == "path":
            anchor = _tokens(fact.value.rsplit("/", 1)[-1])
        elif fact.kind == "number":
            anchor = _tokens(fact.value.split(" ", 1)[0])
        else:
            anchor = _tokens(fact.value)
        if not anchor:
            return list(range(start, end))
        lists = sorted((self.postings.get(t, []) for t in anchor), key=len)
        found = _within(lists[0], start, end)
        for other in lists[1:]:
            found = [i for i in found if _contains(other, i)]
        return found

    def mentioned(self, fact: Fact, index: SummaryIndex) -> bool:
        if fact.kind == "constraint":  # acted on: a later message holds half its words (a user's ask is long)
            key = ("acted on", fact.value, fact.surface or fact.value)
            hit = index.answers.get(key)
            if hit is None:
                words = negated_words(fact.surface or fact.value)[0]
                common = len(words & index.all_words)
                hit = index.answers[key] = common >= 2 and 2 * common >= len(words)
            return hit
        if fact.kind != "error":
            return fact_present(fact, index)
        key = ("mentioned error", fact.value, fact.surface or fact.value)  # memoised beside fact_present's
        hit = index.answers.get(key)
        if hit is None:
            hit = index.answers[key] = (index.has_error(fact.surface or fact.value)
                                        or index.has_words(fact.value, 0.7))
        return hit

    def first_use(self, fact: Fact, start: int = 0, end: int | None = None) -> tuple[str | None, str] | None:
        """(entry id, how) of the first message in ``[start, end)`` that uses the fact, or None."""
        end = len(self.messages) if end is None else end
        i = self._first_mention(fact, start, end)
        if i is not None:
            return self.messages[i][0], "mentioned"
        if fact.kind == "error" and _SPECIFIC.search(fact.surface or fact.value):
            key = _error_key(fact.surface or fact.value)
            if len(key) >= 12 and start < end:
                # the first tool output from ``start`` on holding the key (it holds no line break)
                at = self.results_joined.find(key, self.result_offsets[start])
                i = bisect_right(self.result_offsets, at) - 1
                if at >= 0 and i < end:
                    return self.messages[i][0], "recurred"
        return None


def _within(sorted_ids: Sequence[int], start: int, end: int) -> Sequence[int]:
    """The ids in ``[start, end)`` of an increasing sequence."""
    return sorted_ids[bisect_left(sorted_ids, start):bisect_left(sorted_ids, end)]


def _contains(sorted_ids: Sequence[int], i: int) -> bool:
    """Whether an increasing sequence holds ``i``."""
    k = bisect_left(sorted_ids, i)
    return k < len(sorted_ids) and sorted_ids[k] == i


_SHARED: OrderedDict[tuple[str | None, ...], Trajectory] = OrderedDict()
_SHARED_MAX = 4
_SHARED_LOCK = threading.Lock()


def shared_trajectory(messages: Sequence[tuple[str | None, dict]]) -> Trajectory:
    """The :class:`Trajectory` of ``messages``, shared with the last few built: the replays of one
    recording under other settings have the same messages on their paths (a compaction entry adds
    none), so their trajectory is built once. Shared only when the entry ids and every text it reads
    are the same (a message edited in place gets a trajectory of its own); inside
    :func:`pimem.replays.recording.shared_recordings`, where messages do not change, when the entry
    ids and the message objects are."""
    key = tuple(eid for eid, _ in messages)
    texts = None
    with _SHARED_LOCK:
        trajectory = _SHARED.get(key)
    if trajectory is not None:
        if recordings_shared():
            same = all(map(operator.is_, (m for _, m in trajectory.messages), (m for _, m in messages)))
        else:
            texts = _texts(messages)
            same = trajectory.use_texts == texts[0] and trajectory._results == texts[1]
        if same:
            with _SHARED_LOCK:
                if key in _SHARED:  # another thread may have let it go meanwhile
                    _SHARED.move_to_end(key)
            return trajectory
    trajectory = Trajectory(messages, texts)
    with _SHARED_LOCK:
        _SHARED[key] = trajectory
        _SHARED.move_to_end(key)
        while len(_SHARED) > _SHARED_MAX:
            _SHARED.popitem(last=False)
    return trajectory


def _trajectory(record: CompactionRecord) -> tuple[Trajectory, int, int]:
    """The trajectory of the record's path (built once per path, shared by the paths of the same
    messages) and the record's later range in it."""
    if record.path is None:
        return Trajectory(record.later), 0, len(record.later)
    trajectory = record.path.cache.get("trajectory")
    if trajectory is None:
        trajectory = record.path.cache["trajectory"] = shared_trajectory(record.path.messages)
    return trajectory, record.later_start, record.later_start + len(record.later)


def used_later(record: CompactionRecord, facts: Sequence[Fact] | None = None) -> dict[tuple[str, str], tuple[str | None, str]]:
    """For the span's facts (or ``facts``) that the later trajectory uses: key → (first entry id, how)."""
    trajectory, start, end = _trajectory(record)
    span_facts = list(facts) if facts is not None else extract_facts(record.span)
    out: dict[tuple[str, str], tuple[str | None, str]] = {}
    for f in span_facts:
        hit = trajectory.first_use(f, start, end)
        if hit is not None:
            out[f.key] = hit
    return out


def kept_index(record: CompactionRecord) -> SummaryIndex:
    """Everything the kept tail shows the agent, tool results included (one index per message, shared)."""
    if record.path is None:
        return joined_index([source_text(m) for _, m in record.kept])
    # the kept tails of a path's compactions overlap: each message's text is read once per path
    texts: dict[int, tuple[dict, str]] = record.path.cache.setdefault("source_texts", {})
    parts = []
    for _, m in record.kept:
        known = texts.get(id(m))
        if known is None or known[0] is not m:
            known = texts[id(m)] = (m, source_text(m))
        parts.append(known[1])
    return joined_index(parts)


def needed_later_facts(
    record: CompactionRecord,
    *,
    weights: Mapping[str, float] | None = None,
    facts: Sequence[Fact] | None = None,
) -> list[NeededFact]:
    """The span's facts that the recording used after the compaction and the kept tail does not show."""
    w = dict(DEFAULT_WEIGHTS)
    if weights:
        unknown = set(weights) - set(FACT_CLASSES)
        if unknown:
            raise ConfigurationError(f"unknown fact classes {sorted(unknown)}; known: {list(FACT_CLASSES)}")
        w.update(weights)
    cache_key = ("needed", record.index, record.later_start, tuple(sorted(w.items())))
    if facts is None and record.path is not None and cache_key in record.path.cache:
        return list(record.path.cache[cache_key])
    result = _needed(record, w, list(facts) if facts is not None else extract_facts(record.span))
    if facts is None and record.path is not None:
        record.path.cache[cache_key] = list(result)
    return result


_SPANS: OrderedDict[tuple, tuple[Any, list[Fact], list[NeededFact]]] = OrderedDict()
_SPANS_MAX = 256
_SPANS_LOCK = threading.Lock()


def _forget_trajectories() -> None:
    with _SHARED_LOCK:
        _SHARED.clear()
    with _SPANS_LOCK:
        _SPANS.clear()


on_forget(_forget_trajectories)


def span_needed_facts(record: CompactionRecord, *,
                      include_thinking: bool = False) -> tuple[list[Fact], list[NeededFact]]:
    """The facts of the record's span and its :func:`needed_later_facts` (default weights).

    Inside :func:`pimem.replays.recording.shared_recordings` (messages do not change), a compaction
    whose span, kept tail and later trajectory are the same message objects as one answered before
    (another setting's replay of the recording cut at the same places) is answered once.
    """
    if record.path is None or not recordings_shared():
        facts = extract_facts(record.span, include_thinking=include_thinking)
        return facts, needed_later_facts(record, facts=facts)
    trajectory, start, end = _trajectory(record)
    key = (include_thinking, id(trajectory), start, end, tuple(record.modified_files),
           tuple([eid for eid, _ in record.span]), tuple([id(m) for _, m in record.span]),
           tuple([id(m) for _, m in record.kept]))
    with _SPANS_LOCK:
        hit = _SPANS.get(key)
        if hit is not None:
            _SPANS.move_to_end(key)
    if hit is None:
        facts = extract_facts(record.span, include_thinking=include_thinking)
        # held with the answer: the messages and the trajectory whose ids make the key stay alive
        hit = ((trajectory, record.span, record.kept), facts, needed_later_facts(record, facts=facts))
        with _SPANS_LOCK:
            _SPANS[key] = hit
            while len(_SPANS) > _SPANS_MAX:
                _SPANS.popitem(last=False)
    return list(hit[1]), list(hit[2])


def _needed(record: CompactionRecord, w: dict[str, float], span_facts: list[Fact]) -> list[NeededFact]:
    # the facts not shown by the kept tail that the later trajectory uses, the first use by key. The
    # kept tail (long) is searched only for the facts of a key that is used at all (few).
    trajectory, start, end = _trajectory(record)
    hits = [trajectory.first_use(f, start, end) for f in span_facts]
    if start < end:  # a standing preference holds for as long as the session goes on, obeyed silently or not
        first = trajectory.messages[start][0]
        hits = [hit if hit is not None or not _standing(f) else (first, "standing") for f, hit in zip(span_facts, hits)]
    used_keys = {f.key for f, hit in zip(span_facts, hits) if hit is not None}
    kept = kept_index(record)
    used: dict[tuple[str, str], tuple[str | None, str]] = {}
    candidates = []
    for f, hit in zip(span_facts, hits):
        if f.key in used_keys and not fact_present(f, kept):
            candidates.append(f)
            if hit is not None:
                used[f.key] = hit
    out: list[NeededFact] = []
    for f in candidates:
        hit = used.get(f.key)
        if hit is None:
            continue
        cls = fact_class(f, record.modified_files)
        out.append(NeededFact(f, cls, float(w[cls]), hit[0], hit[1]))
    return _one_per_file(out)


_STANDING = re.compile(r"\b(?:never|always|don'?t|do not|only|prefer\w*|avoid|must|mustn'?t|shouldn'?t|"
                       r"make sure|no need|keep)\b", re.I)


def _standing(fact: Fact) -> bool:
    """A user's constraint that states a standing preference or prohibition (never, always, don't, only…),
    not a one-off request ("should" is not enough: "propose where these should go" is a request)."""
    return fact.kind == "constraint" and fact.role == "user" and bool(_STANDING.search(fact.surface or fact.value))


def _one_per_file(needed: list[NeededFact]) -> list[NeededFact]:
    """Paths that name the same file (``@src/a.ts``, ``/repo/src/a.ts``, ``src/a.ts``) count once,
    as the most specific spelling (the matcher accepts any of them for all)."""
    paths = [n for n in needed if n.fact.kind == "path"]
    paths.sort(key=lambda n: -len(n.fact.value.strip("@/").split("/")))
    kept: list[NeededFact] = []
    for n in paths:
        tail = tuple(n.fact.value.lstrip("@").split("/"))
        same = False
        for k in kept:
            other = tuple(k.fact.value.lstrip("@").split("/"))
            if other[-len(tail):] == tail or (len(tail) >= 2 and other[-2:] == tail[-2:]):
                same = True
                break
        if not same:
            kept.append(n)
    keep_ids = {id(n) for n in kept}
    return [n for n in needed if n.fact.kind != "path" or id(n) in keep_ids]


def weighted_recall(needed: Sequence[NeededFact], present: Sequence[bool]) -> float:
    """The class-weighted mean of the per-class recalls, over the classes with a needed fact.

    Σ_c w_c · recall_c ÷ Σ_c w_c: each class counts by its weight, not by how many facts it has,
    so the many trivial names of a span cannot outweigh its few constraints and decisions.
    NaN when nothing is needed.
    """
    by_class: dict[str, list[bool]] = {}
    weight: dict[str, float] = {}
    for n, p in zip(needed, present):
        by_class.setdefault(n.cls, []).append(bool(p))
        weight[n.cls] = n.weight
    total = sum(weight[c] for c in by_class)
    if not total:
        return math.nan
    return sum(weight[c] * sum(flags) / len(flags) for c, flags in by_class.items()) / total


def carried_later_facts(records: Sequence[CompactionRecord], k: int,
                        *, weights: Mapping[str, float] | None = None) -> list[NeededFact]:
    """Facts of the *earlier* spans of a chain that the recording used after compaction ``k``.

    A summary replaces everything before its first kept entry: through the previous summary it
    must carry what the session needs from older spans too. Facts of span ``k`` itself and facts
    the kept tail of ``k`` shows are left out (they are :func:`needed_later_facts`' business).
    """
    record = records[k]
    if k == 0:
        return []
    w = dict(DEFAULT_WEIGHTS)
    w.update(weights or {})
    own = {f.key for f in extract_facts(record.span)}
    kept = kept_index(record)
    trajectory, start, end = _trajectory(record)
    seen: set[tuple[str, str]] = set()
    out: list[NeededFact] = []
    for earlier in records[:k]:
        for f in extract_facts(earlier.span):
            if f.key in own or f.key in seen:
                continue
            seen.add(f.key)
            if fact_present(f, kept):
                continue
            hit = trajectory.first_use(f, start, end)
            if hit is not None:
                cls = fact_class(f, earlier.modified_files)
                out.append(NeededFact(f, cls, float(w[cls]), hit[0], hit[1]))
    return _one_per_file(out)
