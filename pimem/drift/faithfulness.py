"""Faithfulness: is every claim of a summary supported by what the summarizer was given?

A summarizer is given the compaction's span (every message, tool results included) and the previous
summary. :func:`summary_claims` splits what it wrote (file blocks and Claude Code's wrapper lines stripped)
into **claims** — one per line, bullet or table row; headings (markdown or Claude Code's numbered titles
such as ``4. Errors and fixes:``) and ``(none)`` are not claims — each with its checkable **names** (paths,
code names, numbers, versions, ``#123`` references, commands, hex ids such as ``7f3e90bc``, counts such as
"4 issues", labelled numbers such as "option 2"), its **quotes** (code spans that name nothing: a value, a
message, kept as written — ``**`` and ``__`` inside a code span stay) and its **words** (content words
outside the names, normalised by :func:`pimem.text.normalize.normal_words`). A claim is **specific** when it
has a name or a quote. :func:`check_claims` gives each claim one verdict:

================ ======================================================================================
verdict          rule
================ ======================================================================================
``supported``    every name occurs in the given text, and (claims with 2+ words) one message of the span
                 or one section of the previous summary — a window of 40 lines of a longer one — holds
                 at least half of the claim's words, and at least two of them; or the units naming its
                 paths and code names hold 60% of its words together (a terse line tying several
                 messages' facts to its names); or a quote of it occurs as written
``contradicted`` the claim states a value, polarity, direction or **state** that the given text states
                 otherwise (:mod:`pimem.drift.contradictions`: changed numbers, versions, paths, names;
                 negations; reversed decisions; :mod:`pimem.drift.evidence`: done, passes, builds, fails
                 against the span's last evidence). A contradiction wins over support
``unverifiable`` nothing to check: a line worded as a step to take ("Run…", "Next: …"), or a claim that
                 names nothing and whose words the span does not hold together (filler such as "the work
                 went well"). Neutral: neither false nor true
``later``        a specific claim not supported by the given text, but by the session after the compaction:
                 the summary states what it could not have known (a leak from the future, or a summary of
                 another span of the same session)
``other_session`` not supported by the given text nor the later session, but by another session's text
                 (when such texts are passed): a summary of something else
``invented``     a specific claim none of the above holds: a name, number or result absent from the span
``uncheckable``  no name and fewer than 2 words: nothing to check (lead-ins such as ``**New files:**``)
================ ======================================================================================

**Faithfulness** is the share of the counted claims that are supported; the counted claims are the
specific ones that are supported, contradicted, from later, from another session or invented, and the
claims that name nothing only when contradicted (a claim that names nothing can only be found false, so
unless it is, it weighs nothing: filler is neither rewarded for length nor punished as false). A claim is
**informative** when it says something about its names: two or more words of its own or of its lead-in
line (the bold label or the table header above it; a heading's title never counts), or two names a word of
it relates ("`A` in b.go, used by `C`"). A bare list of names is faithful but not informative.

Optionally a chat model judges the claims instead of the rules (:class:`ClaimJudge`, any OpenAI-compatible
endpoint, cached): it reads the excerpts of the given text that bear on each claim and the span's last
evidence on state, and answers supported, contradicted or unverifiable; :func:`judge_agreement` sets its
verdicts beside the rules'. The default is the rules, offline. The judge is only as good as its model: the
bundled Qwen2.5-Coder-0.5B, on 144 claims of the rewrites written by reading, never answers contradicted and
calls 0.20 of the real summaries' true claims supported (balanced accuracy 0.49, the rules 0.76; Cohen's
kappa with the rules 0.01; ``benchmarks/measures_judge.py``). A capable model plugs in through any
OpenAI-compatible endpoint.

What it rewards and how it can be gamed: it rewards stating only what the conversation shows, in the state
the conversation ended in. Copying the span verbatim is perfectly faithful (recall and length must be read
beside it, as the headline does); a claim that recombines true names with false words passes when half its
words occur in one message; a false claim that names nothing is unverifiable, not false, unless the rules
find it contradicted. The support test is lexical: a faithful paraphrase in rare words can fail it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from pimem.base.memo import memoised
from pimem.base.tables import frame
from pimem.drift.chat import JudgeError, ask, require_chat_model
from pimem.drift.contradictions import CONTRADICTION_KINDS, Contradiction, find_contradiction
from pimem.drift.embedding import embedding_matcher
from pimem.drift.evidence import Event, claim_state, span_events
from pimem.drift.intervals import cohen_kappa
from pimem.drift.paraphrase import normalized_holds
from pimem.errors import ConfigurationError, LabelFormatError
from pimem.drift.needed import needed_later_facts
from pimem.drift.records import source_text
from pimem.text.facts import (
    Fact,
    SummaryIndex,
    identifiers_in_text,
    normalize_path,
    numbers_in_text,
    paths_in_text,
    fact_present,
)
from pimem.text.normalize import normal_words, split_identifier
from pimem.text.sections import plain_line, summarizer_text

__all__ = ["contradiction_check", "Claim", "ClaimVerdict", "SourceText", "LineIndex", "VERDICTS", "summary_claims", "parse_claim",
           "check_claims", "given_source", "later_source", "held_text", "faithfulness_measures", "is_plan",
           "ClaimJudge", "judge_agreement", "JUDGE_VERDICTS"]

VERDICTS: tuple[str, ...] = ("supported", "contradicted", "later", "other_session", "invented", "unverifiable",
                             "uncheckable")

_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)*)(?![\w]|\.\d)")
_REF = re.compile(r"(?<![\w&])#(\d{1,6})\b")
_VALUE = re.compile(r"(?<![\w.#/-])(\d{2,}(?:,\d{3})*)(?![\w.%/-]|\.\d)")
_HEX_ID = re.compile(r"(?<![\w./-])[0-9a-f]{7,40}(?![\w/-])", re.I)  # a commit or checkpoint id
_COUNT_NOUNS = ("issue|comment|finding|test|subtest|file|commit|error|warning|failure|session|checkpoint|hook|step|"
                "task|agent|thread|package|call site|occurrence|instance|item|case|change|review|option|bug|lint")
_COUNTED = re.compile(rf"(?<![\w.#/,:-])(\d{{1,4}})\s+(?:[A-Za-z][\w-]*\s+){{0,2}}?({_COUNT_NOUNS})s?\b", re.I)
_LABELLED = re.compile(r"\b(option|step|phase|round|wp|p|fix|bug|issue|pr|task)\s*#?(\d{1,4})\b(?!\.\d)", re.I)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")
# a numbered title of Claude Code's summaries: "4. Errors and fixes:"
_NUMBERED_TITLE = re.compile(r"^\s{0,3}\d{1,2}\.\s+(?:\*\*)?([A-Z][\w &/,'-]{1,60}?)(?:\*\*)?:(?:\*\*)?\s*$")
_LEAD_IN = re.compile(r"^\s*(?:\*\*[^*]+\*\*:?|[^|]{2,80}:)\s*$")
_CODE_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_CODE_SPAN = re.compile(r"`([^`\n]{1,200})`")
_LINKING_WORD = re.compile(r"[A-Za-z]{2,}")
_NUMBER_TOKEN = re.compile(r"\d+(?:\.\d+)*")


@dataclass(frozen=True)
class Claim:
    """One line of a summary with its names and words (see module docs)."""

    text: str
    line: int
    section: str
    context: str
    paths: tuple[str, ...]
    identifiers: tuple[str, ...]
    numbers: tuple[str, ...]
    versions: tuple[str, ...]
    values: tuple[str, ...]
    refs: tuple[str, ...]
    commands: tuple[str, ...]
    words: frozenset[str]
    context_words: frozenset[str]
    quotes: tuple[str, ...] = ()  # code spans that name nothing (a value, a message): matched as written
    literals: tuple[str, ...] = ()  # hex ids (``7f3e90bc``), counts ("4 issues"), labelled numbers ("option 2")
    fenced: bool = False  # a line of a fenced code block

    @property
    def names(self) -> tuple[str, ...]:
        return (self.paths + self.identifiers + self.numbers + self.versions + self.values + self.refs + self.commands
                + self.literals)

    @property
    def checkable(self) -> bool:
        return bool(self.names) or len(self.words) >= 2

    @property
    def specific(self) -> bool:
        """It names something (a path, a code name, a number, a command, a quoted value) that the span must hold."""
        return bool(self.names or self.quotes)

    @property
    def informative(self) -> bool:
        """Two words of its own or of its lead-in, or two names that a word of it relates ("`A` in b.go,
        used by `C`"): it says something about its names."""
        if len(self.words | self.context_words) >= 2:
            return True
        names = self.paths + self.identifiers + self.commands
        return len(names) >= 2 and bool(_LINKING_WORD.search(_name_words(self.text, names)))


def _name_words(claim_text: str, names: Iterable[str]) -> str:
    """The text without its names; what is left of a code span (a quoted value, a message) keeps its words."""
    out = claim_text
    for n in sorted(set(names), key=len, reverse=True):
        out = out.replace(n, " ")
    return out.replace("`", " ")


def _claim(text: str, line: int, section: str, context: str) -> Claim:
    paths = tuple(dict.fromkeys(p for p, _, _ in paths_in_text(text)))
    idents = tuple(dict.fromkeys(i for i, _, _ in identifiers_in_text(text)))
    for m in re.finditer(r"`([^`\n]{1,80})`", text):  # a code span that is a name
        span = m.group(1).strip().rstrip("()")
        if re.fullmatch(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*", span) and span not in idents and len(span) >= 3:
            if not any(span in p for p in paths):
                idents += (span,)
    numbers = tuple(dict.fromkeys(v for v, _, _ in numbers_in_text(text)))
    no_paths = text
    for p in sorted(paths, key=len, reverse=True):
        no_paths = no_paths.replace(p, " ")
    versions = tuple(dict.fromkeys(m.group(1) for m in _VERSION.finditer(no_paths) if "." in m.group(1)))
    refs = tuple(dict.fromkeys(m.group(1) for m in _REF.finditer(no_paths)))
    rest = _VERSION.sub(" ", _REF.sub(" ", no_paths))
    number_digits = {re.sub(r"\D", "", n.split(" ")[0]) for n in numbers}
    values = tuple(dict.fromkeys(v.replace(",", "") for v in _VALUE.findall(rest)
                                 if v.replace(",", "") not in number_digits))
    commands = tuple(dict.fromkeys(m.group(1).strip() for m in re.finditer(r"`([^`\n]{3,120})`", text)
                                   if " " in m.group(1).strip() and re.match(r"[a-z][\w.-]*\s", m.group(1).strip())))
    named = set(paths) | set(idents) | set(commands)
    quotes = tuple(dict.fromkeys(q for q in (m.group(1).strip() for m in _CODE_SPAN.finditer(text))
                                 if len(q) >= 3 and q not in named and normalize_path(q) not in named
                                 and q.rstrip("()") not in named))
    literals = tuple(dict.fromkeys(
        [f"id:{m.group(0).lower()}" for m in _HEX_ID.finditer(rest) if re.search(r"[a-f]", m.group(0), re.I)]
        + [f"count:{m.group(1)}:{m.group(2).lower()}" for m in _COUNTED.finditer(rest)]
        + [f"label:{m.group(1).lower()}:{m.group(2)}" for m in _LABELLED.finditer(rest)]))
    words = frozenset(normal_words(_name_words(text, paths + idents + commands)))
    ctx_words = frozenset(normal_words(_name_words(context, ()))) if context else frozenset()
    return Claim(text, line, section, context, paths, idents, numbers, versions, values, refs, commands, words,
                 ctx_words, quotes, literals)


def parse_claim(text: str, context: str = "") -> Claim:
    """One line of text as a :class:`Claim` (its names and words; no section)."""
    return _claim(text, 0, "", context)


def summary_claims(summary: str) -> list[Claim]:
    """The claims of a summary (file blocks stripped first; see module docs)."""
    written = summarizer_text(summary)
    claims: list[Claim] = []
    section, context = "", ""
    in_fence = False
    for number, raw in enumerate(written.split("\n"), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
            continue
        if not stripped or re.fullmatch(r"[-*_=]{3,}", stripped):
            continue
        heading = (_HEADING.match(raw) or _NUMBERED_TITLE.match(raw)) if not in_fence else None
        if heading:  # a section's title names it; it says nothing about the lines under it
            section = heading.group(1).strip().strip("*#: ")
            context = ""
            continue
        text = plain_line(stripped) if not in_fence else stripped
        if not text or re.fullmatch(r"\(?none\)?\.?", text, re.I):
            continue
        if not in_fence and (_LEAD_IN.match(stripped) or re.fullmatch(r"\|.*\|", stripped) and _is_table_header(
                written.split("\n"), number)):
            context = text
            continue
        claim = _claim(text, number, section, context)
        claims.append(dataclasses.replace(claim, fenced=True) if in_fence else claim)
    return claims


def _is_table_header(lines: list[str], number: int) -> bool:
    following = lines[number] if number < len(lines) else ""
    return bool(re.fullmatch(r"\s*\|?\s*:?-{2,}.*", following))


# --------------------------------------------------------------------------- what the summarizer was given


@memoised(65536)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(normal_words(text))


class LineIndex:
    """The lines of a text (3 to 400 characters) with their normalised words, indexed by word."""

    def __init__(self, text: str) -> None:
        self.lines = [ln.strip() for ln in text.split("\n") if 3 <= len(ln.strip()) <= 400]

    @cached_property
    def words(self) -> list[frozenset[str]]:
        return [frozenset(normal_words(ln)) for ln in self.lines]

    @cached_property
    def postings(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, ws in enumerate(self.words):
            for w in ws:
                out.setdefault(w, []).append(i)
        return out

    def near(self, words: Iterable[str], names: Sequence[str] = (), min_words: int = 2) -> list[int]:
        """Lines that hold one of ``names`` (case kept) or ``min_words`` of ``words``."""
        key = (frozenset(words), tuple(names), min_words)
        cached = self._near.get(key)
        if cached is None:
            cached = self._near[key] = self._find_near(key[0], names, min_words)
        return cached

    @cached_property
    def _near(self) -> dict[tuple, list[int]]:
        return {}

    @cached_property
    def _arrays(self) -> dict[str, np.ndarray]:
        return {w: np.asarray(ids, dtype=np.int64) for w, ids in self.postings.items()}

    @cached_property
    def lowered(self) -> list[str]:
        return [ln.lower() for ln in self.lines]

    def _find_near(self, words: frozenset[str], names: Sequence[str], min_words: int) -> list[int]:
        lists = [self._arrays[w] for w in words if w in self._arrays]
        hits: set[int] = set()
        if lists:
            counts = np.bincount(np.concatenate(lists), minlength=len(self.lines))
            hits = set(np.flatnonzero(counts >= min_words).tolist())
        for name in names:
            for i in self.near_words([name]):
                if name in self.lines[i]:
                    hits.add(i)
        return sorted(hits)

    def near_words(self, keys: Sequence[str]) -> list[int]:
        """Lines whose words hold every key (a key is split like a code name; case ignored)."""
        found: set[int] | None = None
        for key in keys:
            parts = _words_of(key)
            lowered = key.lower()
            ids: set[int] = set()
            if not parts:  # a number or a short word: no index entry
                ids = {i for i, ln in enumerate(self.lowered) if lowered in ln}
            for w in parts:
                ids |= set(self.postings.get(w, ()))
            ids = {i for i in ids if lowered in self.lowered[i]}
            found = ids if found is None else found & ids
        return sorted(found or ())


ANCHORED_SHARE = 0.6  # of a claim's words, held by the units that name its names (:meth:`SourceText.anchored_cover`)
ANCHOR_UNITS = 60  # the first so many units naming them are read
WINDOW_LINES = 40  # a long message (a file read, a file written) is read in windows of this many lines, half overlapping


def _windows(text: str, size: int = WINDOW_LINES) -> list[str]:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if len(lines) <= size:
        return ["\n".join(lines)] if lines else []
    step = size // 2
    return ["\n".join(lines[i:i + size]) for i in range(0, len(lines) - step, step)]


class SourceText:
    """Texts (one per message or section) prepared for claim look-ups: names over all of them, words per
    unit (a message, or a window of :data:`WINDOW_LINES` lines of a long one) with an inverted index."""

    def __init__(self, units: Sequence[str], events: Sequence[Event] = ()) -> None:
        texts = [u for u in units if u and u.strip()]
        self.text = "\n".join(texts)
        self.units = [w for u in texts for w in _windows(u)]
        self.events = list(events)  # the span's evidence on state (:func:`pimem.drift.evidence.span_events`)

    @cached_property
    def index(self) -> SummaryIndex:
        return SummaryIndex(self.text)

    @cached_property
    def unit_words(self) -> list[frozenset[str]]:
        return [frozenset(normal_words(u)) for u in self.units]

    @cached_property
    def postings(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, words in enumerate(self.unit_words):
            for w in words:
                out.setdefault(w, []).append(i)
        return out

    @cached_property
    def code_names(self) -> frozenset[str]:
        return frozenset(_CODE_NAME.findall(self.text))

    @cached_property
    def number_tokens(self) -> frozenset[str]:
        return frozenset(t for t in _NUMBER_TOKEN.findall(self.text.replace(",", "")))

    @cached_property
    def lines(self) -> LineIndex:
        return LineIndex(self.text)

    @cached_property
    def folded(self) -> str:
        return re.sub(r"\s+", " ", self.text.replace("`", "")).lower()

    @cached_property
    def lowered(self) -> str:
        return self.text.lower()

    @cached_property
    def versions(self) -> frozenset[str]:
        return frozenset(m.group(1) for m in _VERSION.finditer(self.text))

    @cached_property
    def names_by_word(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for n in self.code_names:
            for w in split_identifier(n):
                out.setdefault(w, set()).add(n)
        return out

    def command_lines(self, prefix: str) -> list[str]:
        """Lines that hold a command starting with ``prefix`` (lower case)."""
        return [ln for ln in self.lines.lines if prefix in ln.lower()]

    def has_identifier(self, name: str) -> bool:
        parts = [p for p in re.split(r"[.()]", name) if p]
        return bool(parts) and all(p in self.code_names for p in parts)

    def has_number(self, value: str) -> bool:
        """The number with its unit, or its digits anywhere when they are distinctive (three digits or more)."""
        if value in self.index.numbers:
            return True
        digits = value.split(" ")[0].replace(",", "")
        return len(digits.replace(".", "")) >= 3 and digits in self.number_tokens

    def has_literal(self, literal: str) -> bool:
        """A hex id as written, a count with its noun ("4 issues", "4 new issues") or a labelled number
        ("option 2", "P1") in the text."""
        kind, _, rest = literal.partition(":")
        if kind == "id":
            return rest in self.lowered
        if kind == "count":
            number, noun = rest.split(":", 1)
            rx = rf"(?<![\w.,]){number}\s+(?:[a-z-]+\s+){{0,2}}{re.escape(noun)}"
        else:
            label, number = rest.split(":", 1)
            rx = rf"\b{re.escape(label)}\s*#?{number}\b(?!\.\d)"
        return re.search(rx, self.lowered) is not None

    @cached_property
    def _paths_held(self) -> dict[str, bool]:
        return {}

    def has_path(self, path: str) -> bool:
        held = self._paths_held.get(path)
        if held is None:
            held = self._paths_held[path] = self.index.has_path(path)
        return held

    @cached_property
    def verdicts(self) -> dict[tuple, ClaimVerdict]:
        """Verdicts already given on this text (claims repeat across rewrites of one summary)."""
        return {}

    def missing_names(self, claim: Claim) -> list[str]:
        """The claim's names this text does not hold (bare values and ``#refs``: not on a line near the
        claim, i.e. one holding one of its names or two of its words)."""
        out = [p for p in claim.paths if not self.has_path(p)]
        out += [i for i in claim.identifiers if not self.has_identifier(i)]
        out += [v for v in claim.versions if v not in self.versions]
        out += [c for c in claim.commands if c.lower() not in self.folded]
        out += [lit for lit in claim.literals if not self.has_literal(lit)]
        numbers = [n for n in claim.numbers if not self.has_number(n)]
        if claim.values or claim.refs or numbers:  # a small number: its digits on a line near the claim
            anchors = [n for n in claim.paths + claim.identifiers if len(n) >= 3]
            near = [self.lines.lines[i] for i in self.lines.near(claim.words, anchors)]
            tokens = {t for ln in near for t in _NUMBER_TOKEN.findall(ln.replace(",", ""))}
            out += [n for n in numbers if n.split(" ")[0].replace(",", "") not in tokens]
            out += [v for v in claim.values + claim.refs if v not in tokens]
        return out

    def word_cover(self, words: Iterable[str]) -> int:
        """The largest number of ``words`` that one unit holds."""
        counts: dict[int, int] = {}
        for w in set(words):
            for i in self.postings.get(w, ()):
                counts[i] = counts.get(i, 0) + 1
        return max(counts.values(), default=0)

    def words_supported(self, words: frozenset[str], threshold: float = 0.5) -> bool:
        """One unit holds ``threshold`` of the words, and at least two (a claim of fewer than two words
        has nothing to check here)."""
        if len(words) < 2:
            return True
        return self.word_cover(words) >= max(2.0, threshold * len(words))

    def has_quote(self, quote: str) -> bool:
        """Whether the text holds a code span's content as written (case and spacing aside)."""
        return " ".join(quote.split()).lower() in self.folded

    def supports(self, claim: Claim, threshold: float = 0.5) -> bool:
        """No name of the claim is missing, and its words are supported (:meth:`words_supported`, or
        :meth:`anchored_cover`) or a quote of it is found as written."""
        if self.missing_names(claim):
            return False
        return (self.words_supported(claim.words, threshold) or any(self.has_quote(q) for q in claim.quotes)
                or self.anchored_cover(claim) >= ANCHORED_SHARE)

    def anchored_cover(self, claim: Claim) -> float:
        """The share of the claim's words (2 or more) that the units naming its paths or code names hold
        together: a terse line that ties several messages' facts to its names."""
        names = [n for n in claim.paths + claim.identifiers if len(n) >= 3]
        if len(claim.words) < 2 or not names:
            return 0.0
        held: set[str] = set()
        for i in self.units_naming(tuple(names))[:ANCHOR_UNITS]:
            held |= self.unit_words[i] & claim.words
        return len(held) / len(claim.words)

    def units_naming(self, names: tuple[str, ...]) -> list[int]:
        """The units that hold one of ``names`` as written (a path's file name counts)."""
        found = self._units_naming.get(names)
        if found is None:
            keys = {n.rsplit("/", 1)[-1] for n in names}
            found = self._units_naming[names] = [i for i, u in enumerate(self.units) if any(k in u for k in keys)]
        return found

    @cached_property
    def _units_naming(self) -> dict[tuple[str, ...], list[int]]:
        return {}


def _message_texts(messages: Sequence[tuple[str | None, dict]]) -> list[str]:
    return [source_text(m) for _, m in messages]


def _sections(summary: str | None) -> list[str]:
    if not summary:
        return []
    return [part for part in re.split(r"\n(?=#{1,6}\s)", summary) if part.strip()]


def given_source(record: object) -> SourceText:
    """What the summarizer of a compaction was given: its span and the previous summary."""
    cache = getattr(getattr(record, "path", None), "cache", None)
    key = ("given-source", getattr(record, "index", None), getattr(record, "later_start", None))
    if cache is not None and key in cache:
        return cache[key]
    source = SourceText(_message_texts(record.span) + _sections(record.previous_summary),  # type: ignore[attr-defined]
                        span_events(record.span))  # type: ignore[attr-defined]
    if cache is not None:
        cache[key] = source
    return source


def later_source(record: object) -> SourceText:
    """What the session did after the compaction (the kept tail and the later trajectory)."""
    cache = getattr(getattr(record, "path", None), "cache", None)
    key = ("later-source", getattr(record, "index", None), getattr(record, "later_start", None), len(record.later))  # type: ignore[attr-defined]
    if cache is not None and key in cache:
        return cache[key]
    source = SourceText(_message_texts(list(record.kept) + list(record.later)))  # type: ignore[attr-defined]
    if cache is not None:
        cache[key] = source
    return source


@dataclass
class ClaimVerdict:
    """A claim, its verdict, the names the given text lacks and the contradiction found (if any)."""

    claim: Claim
    verdict: str
    missing: list[str] = field(default_factory=list)
    contradiction: object | None = None


def check_claims(
    claims: Sequence[Claim],
    given: SourceText,
    *,
    later: SourceText | None = None,
    others: Sequence[SourceText] = (),
    threshold: float = 0.5,
    judge: ClaimJudge | None = None,
) -> list[ClaimVerdict]:
    """One verdict per claim (see module docs); verdicts are kept on ``given`` for the next call.
    ``judge``: a :class:`ClaimJudge` whose verdict replaces the rules' for every checkable claim."""

    out: list[ClaimVerdict] = []
    for claim in claims:
        key = (claim.text, claim.section, claim.fenced, id(later), tuple(id(o) for o in others), threshold,
               id(judge))
        done = given.verdicts.get(key)
        if done is None:
            done = _verdict(claim, given, later, others, threshold)
            if judge is not None and done.verdict != "uncheckable":
                done = _judged(done, judge(claim, given))
            given.verdicts[key] = done
        out.append(ClaimVerdict(claim, done.verdict, done.missing, done.contradiction))
    return out


def _judged(rule: ClaimVerdict, answer: str) -> ClaimVerdict:
    """The judge's answer as a verdict: an unverifiable claim whose names the span lacks stays invented."""
    if answer == "supported":
        return ClaimVerdict(rule.claim, "supported")
    if answer == "contradicted":
        return ClaimVerdict(rule.claim, "contradicted", rule.missing,
                            Contradiction("judge", rule.claim.text[:200], "the judge", ""))
    if rule.missing:
        return ClaimVerdict(rule.claim, rule.verdict if rule.verdict in UNSUPPORTED else "invented", rule.missing)
    return ClaimVerdict(rule.claim, "unverifiable")


def _verdict(claim: Claim, given: SourceText, later: SourceText | None, others: Sequence[SourceText],
             threshold: float) -> ClaimVerdict:
    if not claim.checkable:
        return ClaimVerdict(claim, "uncheckable")
    missing = given.missing_names(claim)
    supported = not missing and given.supports(claim, threshold)
    found = find_contradiction(claim, given)
    if found is not None:
        return ClaimVerdict(claim, "contradicted", missing, found)
    if supported:
        return ClaimVerdict(claim, "supported")
    if is_plan(claim):
        return ClaimVerdict(claim, "unverifiable", missing)  # an intention is not a statement about the span
    if not claim.names and not claim.quotes:
        # no name, no value, words the span does not hold together: nothing to check, nor to trace elsewhere
        return ClaimVerdict(claim, "unverifiable")
    if later is not None and later.supports(claim, threshold):
        return ClaimVerdict(claim, "later", missing)
    if any(o.supports(claim, threshold) for o in others):
        return ClaimVerdict(claim, "other_session", missing)
    return ClaimVerdict(claim, "invented", missing)


_PLAN_LINE = re.compile(r"^(?:next(?: step)?s?\b|then\b|todo\b|to do\b|need(?:s)? to\b|should\b|will\b|plan\b|"
                        r"(?:re-?)?(?:run|write|add|create|update|fix|investigate|check|verify|implement|consider|"
                        r"decide|ask|commit|push|reply|document|move|remove|delete|rename|test|review|wait|continue)\b)",
                        re.I)


def is_plan(claim: Claim) -> bool:
    """A line worded as an intention (a step to take: "Run…", "Next: …", "Need to…") that states no state:
    it says what is to be done, not what the span shows. Its section's title is not read: a renamed
    heading must not change a verdict."""
    if claim_state(claim.text) is not None:
        return False
    return bool(_PLAN_LINE.match(claim.text.lstrip("*_>:- ")))


# --------------------------------------------------------------------------- a model as judge (optional)

JUDGE_VERDICTS: tuple[str, ...] = ("supported", "contradicted", "unverifiable")
CLAIM_JUDGE_SYSTEM = ("You check one claim of a summary of a coding-agent conversation against excerpts of that "
                      "conversation, oldest first. Answer with exactly one word.")
CLAIM_JUDGE_PROMPT = """<excerpts>
{evidence}
</excerpts>

<claim section="{section}">
{claim}
</claim>

Answer SUPPORTED if the excerpts state the claim; CONTRADICTED if they state otherwise (a changed name or value, \
the opposite decision, or a state such as done, passing, failing or pending that the latest excerpt on it \
contradicts); UNVERIFIABLE if they say nothing either way."""


class ClaimJudge:
    """A chat model's verdict on one claim (supported / contradicted / unverifiable), asked with the
    excerpts of what the summarizer was given that bear on it: the lines naming the claim's names or
    holding two of its words, and the span's last evidence on state (:mod:`pimem.drift.evidence`).

    Anything that is not a chat model raises :class:`~pimem.drift.chat.NotAChatModelError`; an unreadable
    answer raises :class:`~pimem.drift.chat.JudgeError` (:meth:`answer` gives None instead). Optional: the
    default check is the offline rules; the bundled 0.5B model is too weak to judge (module docs).

    Args:
        model: an :class:`~pimem.summarizers.OpenAISummarizer` for any OpenAI-compatible endpoint, wrapped
            in a :class:`~pimem.summarizers.CachedSummarizer` to keep its answers across runs (answers are
            also kept in memory per claim and excerpts).
        max_tokens: the room for the judge's one-word answer.
        evidence_chars: the most characters of excerpts the judge reads (the last ones are kept).
    """

    def __init__(self, model: Any, *, max_tokens: int = 16, evidence_chars: int = 12_000) -> None:
        require_chat_model(model, "claim judge")
        self.model = model
        self.max_tokens = max_tokens
        self.evidence_chars = evidence_chars
        self.answers: dict[tuple[str, str, str], str | None] = {}
        self.raw: dict[tuple[str, str, str], str] = {}

    def evidence(self, claim: Claim, given: SourceText) -> str:
        """The excerpts the judge reads (see class docs), cut to ``evidence_chars``."""
        anchors = [n for n in claim.paths + claim.identifiers + claim.commands if len(n) >= 3]
        near = [given.lines.lines[i] for i in given.lines.near(claim.words, anchors)][-60:]
        events = [f"[{e.kind}: {e.status}] {e.text}" for e in given.events[-15:]]
        text = "\n".join(near + (["--- the span's last evidence ---"] + events if events else []))
        return text[-self.evidence_chars:]

    def answer(self, claim: Claim, given: SourceText) -> str | None:
        """The judge's verdict, or None when its answer names no single verdict (a failed request raises
        :class:`~pimem.drift.chat.JudgeError`)."""
        evidence = self.evidence(claim, given)
        key = (claim.text, claim.section, evidence)
        if key not in self.answers:
            text = ask(self.model, CLAIM_JUDGE_SYSTEM,
                       CLAIM_JUDGE_PROMPT.format(evidence=evidence, section=claim.section, claim=claim.text),
                       max_tokens=self.max_tokens)
            words = set(re.findall(r"\b(SUPPORTED|CONTRADICTED|UNVERIFIABLE)\b", text.upper()))
            self.answers[key] = words.pop().lower() if len(words) == 1 else None
            self.raw[key] = text
        return self.answers[key]

    def __call__(self, claim: Claim, given: SourceText) -> str:
        verdict = self.answer(claim, given)
        if verdict is None:
            raw = self.raw[(claim.text, claim.section, self.evidence(claim, given))]
            raise JudgeError(f"expected one of SUPPORTED, CONTRADICTED, UNVERIFIABLE; got {raw[:80]!r}")
        return verdict


def judge_agreement(record: object, summary: str, judge: ClaimJudge, *,
                    only: Container[str] | None = None) -> tuple[Any, float]:
    """The rules' and the judge's verdicts on every checkable claim of ``summary`` side by side, as
    (table, Cohen's kappa). Both read as supported / contradicted / unsupported (unverifiable, invented,
    from later, from another session): columns ``claim``, ``section``, ``rules``, ``judge``, ``agree``.
    An answer the judge gives in no readable form is kept as ``"no answer"`` (never agreeing) and left
    out of the kappa.

    Args:
        record: the compaction (a :class:`~pimem.drift.records.CompactionRecord`) whose span the claims are
            checked against.
        summary: the summary text whose claims are judged.
        judge: the :class:`ClaimJudge` to set beside the rules.
        only: the texts of the claims to judge (default: every checkable claim); a claim keeps the section
            and lead-in it has in ``summary``.
    """
    claims = [c for c in summary_claims(summary) if c.checkable and (only is None or c.text in only)]
    given = given_source(record)
    rules = check_claims(claims, given, later=later_source(record))

    def three(verdict: str) -> str:
        return verdict if verdict in ("supported", "contradicted") else "unsupported"

    rows = []
    for v in rules:
        verdict = judge.answer(v.claim, given)
        answer = three(verdict) if verdict is not None else "no answer"
        rows.append({"claim": v.claim.text, "section": v.claim.section, "rules": three(v.verdict),
                     "judge": answer, "agree": three(v.verdict) == answer})
    table = frame(rows, columns=["claim", "section", "rules", "judge", "agree"])
    answered = table[table["judge"] != "no answer"]
    kappa = cohen_kappa(list(answered["rules"]), list(answered["judge"])) if len(answered) else math.nan
    return table, kappa


# --------------------------------------------------------------------------- measures of one summary

UNSUPPORTED: tuple[str, ...] = ("later", "other_session", "invented")


def held_text(verdicts: Sequence[ClaimVerdict]) -> str:
    """The supported, informative claims as one text: what recall may count. A lead-in or a heading
    makes a claim informative but never holds a fact for it (a renamed heading moves nothing)."""
    return "\n".join(v.claim.text for v in verdicts if v.verdict == "supported" and v.claim.informative)


def faithfulness_measures(
    record: object,
    summary: str,
    *,
    needed: Sequence[object] | None = None,
    others: Sequence[SourceText] = (),
    with_later: bool = True,
    matcher: str | Callable[[Fact, str], str] = "normalized",
    judge: ClaimJudge | None = None,
) -> dict[str, float | int]:
    """Faithfulness counts, the needed-later recall of the supported claims and the headline ``score``
    (columns in :data:`pimem.drift.measures.MEASURES`).

    ``matcher`` decides whether the supported claims hold a needed fact: ``"normalized"`` (the default:
    the exact rules, then free-text facts by normalised words, :func:`pimem.drift.paraphrase.normalized_holds`),
    ``"rules"`` (:func:`~pimem.text.facts.fact_present` only), ``"embedding"`` (normalised, then free text by
    sentence-embedding similarity, :func:`pimem.drift.embedding.embedding_matcher`; needs ``pimem[embeddings]``)
    or a callable ``(fact, text) -> "present" | "absent"``. ``judge``: a :class:`ClaimJudge` (a chat model)
    whose verdicts replace the rules' (default: the rules, offline)."""

    holds = _holds(matcher)

    claims = summary_claims(summary)
    verdicts = check_claims(claims, given_source(record), later=later_source(record) if with_later else None,
                            others=others, judge=judge)
    counts = {k: 0 for k in VERDICTS}
    kinds = {k: 0 for k in CONTRADICTION_KINDS}
    for v in verdicts:
        counts[v.verdict] += 1
        if v.contradiction is not None:
            kinds[v.contradiction.kind] += 1  # type: ignore[attr-defined]
    # a claim that names nothing can only be found false: unless contradicted it weighs nothing either way
    counted = [v for v in verdicts if v.verdict not in ("uncheckable", "unverifiable")
               and (v.claim.specific or v.verdict == "contradicted")]
    checkable = len(counted)
    row: dict[str, float | int] = {
        "n_claims": checkable,
        "faithfulness": sum(v.verdict == "supported" for v in counted) / checkable if checkable else math.nan,
        "claims_supported": counts["supported"],
        "claims_contradicted": counts["contradicted"],
        "claims_from_later": counts["later"],
        "claims_other_session": counts["other_session"],
        "claims_invented": counts["invented"],
        "claims_unverifiable": counts["unverifiable"],
        "claims_bare": sum(1 for v in verdicts if v.verdict == "supported" and not v.claim.informative),
    }
    for kind, n in kinds.items():
        row[f"contradicted_{kind}"] = n
    facts = list(needed) if needed is not None else needed_later_facts(record)  # type: ignore[arg-type]
    text = held_text(verdicts)
    index = SummaryIndex(text)
    held = [holds(n.fact, text, index) for n in facts]  # type: ignore[attr-defined]
    total = sum(n.weight for n in facts)  # type: ignore[attr-defined]
    row["needed_weight"] = total
    row["recall_faithful"] = sum(n.weight for n, h in zip(facts, held) if h) / total if total else math.nan  # type: ignore[attr-defined]
    faith = row["faithfulness"]
    row["score"] = (row["recall_faithful"] * (faith if checkable else 1.0)
                    if not math.isnan(row["recall_faithful"]) else math.nan)
    if getattr(record, "span_in_file", True) is False:  # the span is not in the file: no claim can be checked
        row["faithfulness"] = row["recall_faithful"] = row["score"] = math.nan
    return row


def _holds(matcher: str | Callable[[Fact, str], str]) -> Callable[[Fact, str, SummaryIndex], bool]:
    """``(fact, text, index) -> held`` for a matcher name or callable (see :func:`faithfulness_measures`)."""
    if matcher == "rules":
        return lambda fact, text, index: fact_present(fact, index)
    if matcher == "normalized":
        return normalized_holds
    if matcher == "embedding":
        matcher = embedding_matcher()
    if callable(matcher):
        match = matcher
        return lambda fact, text, index: match(fact, text) == "present"
    raise ConfigurationError(f"matcher must be 'normalized', 'rules', 'embedding' or a callable (fact, text) -> "
                             f"'present' | 'absent'; got {matcher!r}")


def contradiction_check(labels: Any, records: dict[str, Sequence[Any]]) -> Any:
    """Run :func:`find_contradiction` on every labelled claim against what its compaction's summarizer
    was given. ``records``: session file name (as in the labels' ``session``) → compaction records.
    Adds ``predicted`` (a contradiction found), ``kind`` (its kind), ``truth`` (labelled contradicted)."""
    df = labels.copy()
    predicted, kinds = [], []
    for _, row in df.iterrows():
        recs = records.get(row["session"])
        if recs is None or not 0 <= int(row["compaction_index"]) < len(recs):
            raise LabelFormatError(f"label {row['id']}: no compaction {row['compaction_index']} of {row['session']}")
        found = find_contradiction(parse_claim(row["claim"]), given_source(recs[int(row["compaction_index"])]))
        predicted.append(found is not None)
        kinds.append(found.kind if found is not None else None)
    df["predicted"] = predicted
    df["kind"] = kinds
    df["truth"] = df["label"] == "contradicted"
    return df
