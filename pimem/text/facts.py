"""Checkable facts of a span of conversation, and whether a summary still holds them.

Extraction is deterministic and rule-based. Each rule names the message parts it reads:

========== =========================================================================================
kind       rule
========== =========================================================================================
path       the ``path`` argument of any tool call; in user / assistant / custom / branch-summary text
           (never tool results): tokens with a ``/`` whose last segment has an extension, or that
           start with ``/``, ``~/`` or ``./`` and have two or more segments; bare ``name.ext`` with a
           known source extension. Leading ``@`` (Pi file mentions) and ``./``, trailing punctuation
           and ``:line:col`` suffixes are dropped. URLs are skipped.
identifier in the same text: backticked spans shaped like an identifier (``foo``, ``foo()``,
           ``Foo.bar``, ``foo(x)`` → ``foo``); outside backticks: calls ``name(...)``, dotted names
           starting with a capital (``Foo.bar``), CamelCase with two humps (``AgentSession``) and
           lowerCamel (``setModel``). snake_case counts only in backticks or as a call. ``()`` is dropped.
error      tool results with ``isError`` and bash runs with a non-zero exit code: the lines that look
           like errors (``error``, ``failed``, ``cannot``, ``could not``, ``not found``, ``exception``,
           ``traceback``, ``exited with code``, TypeScript ``TS1234``), else the first non-empty line;
           any other tool result: lines starting ``Error:`` / ``TypeError:`` / ``error:`` or holding
           ``error TS1234:``. At most 3 per message,
           cut at 160 characters.
command    ``command`` of bash tool calls and of ``bashExecution`` messages, split on ``&&``, ``||``,
           ``;`` and newlines; the part before the first pipe; redirections dropped; ``cd`` dropped.
number     numbers with a unit (ms, s, min, h, KB, MB, GB, B, tokens, lines, files, chars, %, px,
           x) in user / assistant text outside code fences. Units are canonicalised.
constraint the user's own sentences (outside code fences; text an agent or a hook injected into the
           user's turn left out: :func:`users_words`) that ask, prefer or forbid: an imperative or
           preference marker (don't, do not, never, always, must, should, make sure, prefer, avoid,
           only, I want, I'd like, need to, keep, can you, could we, let's, please, no need, go with,
           instead) or a sentence that starts with a verb (add, fix, remove, use, make, write…); also
           the user's words on a refused tool call ("the user said: …").
decision   assistant sentences with a decision marker: I'll use, I will use, let's use, we'll use,
           going with, decided, decision, instead of, rather than, chose, opted, better to.
========== =========================================================================================

Thinking blocks are skipped unless ``include_thinking=True``.

Presence in a summary (:func:`fact_present`). Pass the text the summarizer wrote
(:func:`pimem.text.sections.summarizer_text`): the file blocks ``compact()`` appends would
otherwise count for any summarizer.

* path: the fact's path equals a path in the summary, or is a ``/``-segment suffix of one (the
  summary is more specific), or both share their last two or more segments. A shared basename
  alone is *not* enough.
* identifier: case-sensitive whole-name occurrence, not as part of a file name (``main`` is not in
  ``main.ts``, ``()`` ignored). A name that reads as a plain word (``run``, ``state``, ``Agent``)
  counts only in code form (``run(``, ``.run``, a code span that is the name, a fenced block).
* command: the folded command occurs as a substring; a one-word command only as a code span.
* number: the same number with the same canonical unit occurs.
* error / constraint / decision (free text): the folded text occurs as a substring; or (error) the
  error's two or more quoted names all occur on one summary line; or some line of the summary
  covers at least ``0.5`` (error: ``0.7``) of the fact's content words (≥ 3 letters, stop words
  removed, plural ``s`` stripped) with at least 2 words in common **and the same polarity**: the
  shared words negated (within three words after ``not``, ``no``, ``never``, ``without``, ``avoid``,
  ``rejected``, ``instead``...) on one side and not on the other are no match, so "User rejected
  e2e tests" does not hold "I only want e2e tests"; when both sides negate one of the same words they
  agree ("never change the semantics" and "the semantics must not change").

What the matcher rewards and how it fails: it rewards exact names, so a summary that paraphrases
("the compiler complained about the missing field") loses credit, and free text is matched by shared
words, so a line that reuses the words with another meaning can still match (polarity catches only
negation). Its precision and recall against a hand-labelled set are measured by
:func:`pimem.drift.labels.matcher_check`; an entailment matcher through a chat model is
:class:`pimem.drift.labels.EntailmentMatcher`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from collections import OrderedDict
from functools import cached_property
from typing import Any

import pandas as pd

from pimem.base.memo import memoised, on_forget
from pimem.errors import ArgumentTypeError, ConfigurationError
from pimem.base.tables import frame
from pimem.core.session_manager import session_entry_to_context_messages
from pimem.text.messages import text_blocks

FACT_KINDS: tuple[str, ...] = ("path", "identifier", "error", "command", "number", "constraint", "decision")

SOURCE_EXTENSIONS = (
    "ts tsx js jsx mjs cjs json jsonl md py pyi ipynb rs go java kt c h cc cpp hpp cs rb php swift sh bash zsh "
    "toml yaml yml ini cfg txt html css scss vue svelte sql lock xml csv env proto gradle mk"
).split()
_EXT_RX = "|".join(sorted(SOURCE_EXTENSIONS, key=len, reverse=True))

PATH_TOKEN = re.compile(r"(?<![\w/.@:+-])@?(?:~|\.{1,2})?/?(?:[\w@.+-]+/)+[\w@.+-]*")
BARE_FILE = re.compile(rf"(?<![\w/.@-])@?[\w.-]*\w\.(?:{_EXT_RX})(?![\w/-])")
_BACKTICK = re.compile(r"`([^`\n]{1,120})`")
_IDENT_SHAPE = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\([^()]{0,60}\))?$")
_CALL = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\((?=[^()\n]{0,80}\))")
_DOTTED = re.compile(r"(?<![\w$.])([A-Z][\w$]*\.[a-z_$][\w$]*)(?![\w$])")
_CAMEL = re.compile(r"(?<![\w$.])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w$])")
_LOWER_CAMEL = re.compile(r"(?<![\w$.])([a-z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)(?![\w$])")
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_ASCII_UPPER = re.compile(r"[A-Z]")
_LINE_COL = re.compile(r"(?::\d+){1,2}$")

_UNITS = {
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "kb": "KB", "mb": "MB", "gb": "GB", "tb": "TB", "b": "B", "byte": "B", "bytes": "B",
    "token": "tokens", "tokens": "tokens", "line": "lines", "lines": "lines",
    "file": "files", "files": "files", "char": "chars", "chars": "chars",
    "character": "chars", "characters": "chars", "%": "%", "percent": "%", "px": "px", "x": "x",
}
_NUMBER = re.compile(  # (?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?), written to start with a digit (found faster)
    r"(\d(?<![\w.,]\d)(?:\d{0,2}(?:,\d{3})+|\d*(?:\.\d+)?))\s?("
    + "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
    + r")(?![\w])",
    re.I,
)
_CONSTRAINT = re.compile(  # what the user asks, prefers or forbids: a marker, or a sentence that starts with a verb
    r"\b(?:don'?t|do not|never|always|must|should|shouldn'?t|make sure|prefer|avoid|only|"
    r"i want|i'?d like|i would like|need to|keep|can you|could you|can we|could we|would you|let'?s|please|"
    r"no need|i'?d go|go with|instead)\b|"
    r"^(?:add|fix|remove|delete|use|make|write|create|update|run|commit|push|move|rename|implement|change|check|"
    r"look|review|revert|replace|put|split|merge|test|document|open|close|try|do|stop|drop|show|ignore|skip)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:i'?ll use|i will use|let'?s use|we'?ll use|going with|go with|decided|decision|instead of|"
    r"rather than|chose|choose to|opted|better to)\b",
    re.I,
)
_ERROR_LINE = re.compile(
    r"\b(?:error|errors|failed|failure|cannot|could not|couldn't|not found|exception|traceback|"
    r"exited with code|TS\d{4})\b|^\s*[×✖✗]",
    re.I,
)
_PLAIN_ERROR_LINE = re.compile(r"^\s*(?:[A-Z]\w*)?Error:\s|^\s*error(?:\[\w+\])?:\s|\berror TS\d{4}:")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z0-9_$]+")

STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto as is are was were be been
    being it its this that these those there here we you i he she they them our your my me us do does did
    done not no yes so too very can could would should will shall may might must just also only any all some
    each every both few more most other such own same than when where which who whom why how what about
    above below after before again further once up down out off over under while have has had having
    let lets let's now want need like get got use used using make made sure please ok okay""".split()
)


@dataclass(frozen=True)
class Fact:
    """One checkable fact: ``kind``, normalized ``value``, where it came from.

    Args:
        kind: one of :data:`FACT_KINDS` (``path``, ``identifier``, ``error``, ``command``, ``number``,
            ``constraint``, ``decision``).
        value: the normalized value (what a summary is checked for).
        entry_id: the source session entry (None for bare messages).
        position: the index of the message in the input sequence.
        offset: the character offset in the part it came from.
        role: the message's role.
        source: the part it came from (``text``, ``tool_call``, ``tool_result``, ``bash``, ``thinking``).
        surface: the text as it appeared, before normalization.
    """

    kind: str
    value: str
    entry_id: str | None
    position: int
    offset: int
    role: str
    source: str
    surface: str

    @property
    def key(self) -> tuple[str, str]:
        """Identity of the fact across messages and summaries."""
        return (self.kind, fold(self.value) if self.kind != "path" else self.value)


# --------------------------------------------------------------------------- normalization


def fold(text: str) -> str:
    """Lower-case, drop backticks / quotes / emphasis, collapse whitespace."""
    if len(text) <= 400:
        return _fold_short(text)
    return _fold_long(text) if len(text) <= _MEMO_CHARS else _fold(text)


_LONE_APOSTROPHE = re.compile(r"'(?:(?<!\w')|(?!\w))")  # one not between two word characters


def _fold(text: str) -> str:
    if "'" in text:  # judged by its neighbours before the other marks go
        text = _LONE_APOSTROPHE.sub("", text)
    for mark in "`*\"“”‘’":
        if mark in text:
            text = text.replace(mark, "")
    return " ".join(text.split()).lower()  # split() and \s agree on whitespace


_fold_short = memoised(1 << 15)(_fold)  # fact values and lines come back again and again
_fold_long = memoised(1 << 11)(_fold)  # and messages, in the runs of one recording


def content_words(text: str) -> set[str]:
    """Content words of a text: ≥ 3 letters, not a stop word, plural ``s`` stripped."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if len(w) < 3 or w in STOPWORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return out


@memoised(1 << 16)
def normalize_path(token: str) -> str | None:
    """Normalize a path token (see module docs); None when it is not a path."""
    t = token.strip().strip("\"'`()[]{}<>,;")
    if t.startswith("@"):
        t = t[1:]
    if "://" in t or t.startswith("//"):
        return None
    t = _LINE_COL.sub("", t)
    t = t.rstrip(".,:;!?)")
    t = t.rstrip("/")
    while t.startswith("./"):
        t = t[2:]
    if not t or t in (".", "..", "~"):
        return None
    return t


_BARE_NAME = re.compile(rf"[\w.-]*\w\.(?:{_EXT_RX})")
_LAST_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _is_path_like(token: str) -> bool:
    last = token.rsplit("/", 1)[-1]
    if "/" not in token:
        return bool(_BARE_NAME.fullmatch(token))
    if _LAST_EXT.search(last):
        return True
    segments = [s for s in token.split("/") if s and s not in (".", "..", "~")]
    return token.startswith(("/", "~/", "./", "../")) and len(segments) >= 2


def canonical_unit(unit: str) -> str:
    return _UNITS[unit.lower()] if unit.lower() in _UNITS else unit


def normalize_number(num: str, unit: str) -> str:
    n = num.replace(",", "")
    if "." in n:
        n = n.rstrip("0").rstrip(".")
    return f"{n} {canonical_unit(unit)}"


# --------------------------------------------------------------------------- message access


def _entry_messages(entry: dict) -> list[dict]:
    """Messages an entry contributes, via Pi's projection helper."""
    return [m for m in session_entry_to_context_messages(entry) if m.get("role") != "system"]


def iter_messages(items: Iterable[Any]) -> list[tuple[str | None, dict]]:
    """Normalize input to ``(entry_id, message)`` pairs.

    Accepts session entries (dicts with ``type``), AgentMessages (dicts with ``role``) or
    ``(entry_id, message)`` pairs.
    """
    out: list[tuple[str | None, dict]] = []
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            out.append((item[0], item[1]))
        elif isinstance(item, dict) and "role" in item:
            out.append((None, item))
        elif isinstance(item, dict) and "type" in item:
            if item.get("type") == "compaction":
                continue
            for m in _entry_messages(item):
                out.append((item.get("id"), m))
        else:
            raise ArgumentTypeError(f"cannot read facts from {type(item).__name__}: expected an entry or a message dict")
    return out


# --------------------------------------------------------------------------- extractors


def paths_in_text(text: str) -> list[tuple[str, int, str]]:
    """Each path named in ``text``: (normalized path, offset, text as written)."""
    return list(_paths_in_text(text))


def _paths_in_text(text: str) -> tuple[tuple[str, int, str], ...]:
    return _paths_in_short_text(text) if len(text) <= _MEMO_CHARS else tuple(_find_paths(text))


_MEMO_CHARS = 20000  # texts up to this length are memoised by the look-ups below (messages, lines)


@memoised(1 << 13)
def _paths_in_short_text(text: str) -> tuple[tuple[str, int, str], ...]:
    return tuple(_find_paths(text))


def _find_paths(text: str) -> list[tuple[str, int, str]]:
    tokens, bare = _path_groups(text)
    return [*tokens, *bare]


def _path_groups(text: str) -> tuple[tuple[tuple[str, int, str], ...], tuple[tuple[str, int, str], ...]]:
    """(path tokens, bare file names outside them) of a text, each in text order."""
    found: list[tuple[str, int, str]] = []
    seen_spans: list[tuple[int, int]] = []
    for m in PATH_TOKEN.finditer(text) if "/" in text else ():  # a path token holds a slash
        tok = m.group(0)
        norm = normalize_path(tok)
        if norm and _is_path_like(norm):
            found.append((norm, m.start(), tok))
            seen_spans.append(m.span())
    starts = [a for a, _ in seen_spans]  # finditer's spans: increasing and disjoint
    bare: list[tuple[str, int, str]] = []
    for m in BARE_FILE.finditer(text) if "." in text else ():  # a file name has a dot
        k = bisect_right(starts, m.start()) - 1
        if k >= 0 and m.start() < seen_spans[k][1]:
            continue
        norm = normalize_path(m.group(0))
        if norm:
            bare.append((norm, m.start(), m.group(0)))
    return tuple(found), tuple(bare)


def identifiers_in_text(text: str) -> list[tuple[str, int, str]]:
    return [item for group in _identifier_groups(text) for item in group]


def _identifier_groups(text: str) -> tuple[tuple[tuple[str, int, str], ...], ...]:
    """The identifiers of a text: code-span names, then the matches of each pattern (each in text order)."""
    found: list[tuple[str, int, str]] = []
    pieces: list[str] = []  # the text with every code span blanked out
    last = 0
    for m in _BACKTICK.finditer(text) if "`" in text else ():
        code = m.group(1).strip()
        if _IDENT_SHAPE.match(code) and not _is_path_like(code):
            name = re.sub(r"\(.*\)$", "", code)
            if len(name) >= 2:
                found.append((name, m.start(1), code))
        pieces.append(text[last : m.start()])
        pieces.append(" " * (m.end() - m.start()))
        last = m.end()
    pieces.append(text[last:])
    masked = "".join(pieces)
    groups = [tuple(found)]
    # what each pattern cannot match without: a call its parenthesis, a dotted name its dot, the
    # camel-case names a capital letter
    upper = _ASCII_UPPER.search(masked) is not None
    for rx, needed in ((_CALL, "(" in masked), (_DOTTED, "." in masked and upper), (_CAMEL, upper),
                       (_LOWER_CAMEL, upper)):
        matches: list[tuple[str, int, str]] = []
        for m in rx.finditer(masked) if needed else ():
            name = m.group(1)
            if _is_path_like(name) or len(name) < 3:
                continue
            matches.append((name, m.start(1), m.group(0)))
        groups.append(tuple(matches))
    return tuple(groups)


def numbers_in_text(text: str) -> list[tuple[str, int, str]]:
    """Each number with a unit in ``text``: (normalized value, offset, text as written)."""
    return [(normalize_number(m.group(1), m.group(2)), m.start(), m.group(0)) for m in _NUMBER.finditer(text)]


def _line_numbers(line: str) -> frozenset[str]:
    return frozenset(v for v, _, _ in numbers_in_text(line))


_line_numbers_short = memoised(1 << 15)(_line_numbers)


def _text_numbers(text: str) -> set[str]:
    """``{v for v, _, _ in numbers_in_text(text)}`` from its lines' values (memoised lines). A number
    meets its unit across a break only where a line ends with a digit and the next begins with a unit
    (a letter or ``%``); such pairs are read again together for the match that holds the break."""
    lines = text.split("\n")
    values: set[str] = set()
    for line in set(lines):
        found = _line_numbers_short(line) if len(line) <= _MEMO_CHARS else _line_numbers(line)
        if found:
            values |= found
    for a, b in zip(lines, lines[1:]):
        _add_break_numbers(values, a, b)
    return values


def _add_break_numbers(values: set[str], a: str, b: str) -> None:
    """Add the numbers whose match holds the break between line ``a`` and the next line ``b`` (a
    number at the end of one, its unit at the start of the other)."""
    if a and b and a[-1].isdigit() and (b[0].isalpha() or b[0] == "%"):
        cut = len(a)
        for m in _NUMBER.finditer(a + "\n" + b):
            if m.start() < cut < m.end():
                values.add(normalize_number(m.group(1), m.group(2)))


def _sentences(text: str, rx: re.Pattern[str]) -> list[tuple[str, int, str]]:
    out = []
    prose = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    pos = 0
    for part in _SENTENCE_SPLIT.split(prose):
        start = prose.find(part, pos)
        pos = start + len(part) if start >= 0 else pos
        s = part.strip()
        if 8 <= len(s) <= 400 and rx.search(s):
            out.append((fold(s)[:300], max(start, 0), s))
    return out


_COMMAND_SEPARATOR = re.compile(r"&&|\|\||;|\n")
_REDIRECTION = re.compile(r"\s\d?>>?&?\d?\s*\S+")
_SPACES = re.compile(r"\s+")


def _split_commands(command: str) -> tuple[str, ...]:
    """The simple commands of a command line (memoised up to long ones: the runs of one session read
    the same ones)."""
    return _split_short_commands(command) if len(command) <= _MEMO_CHARS else _find_commands(command)


def _find_commands(command: str) -> tuple[str, ...]:
    out = []
    for part in _COMMAND_SEPARATOR.split(command):
        simple = part.split("|", 1)[0]
        simple = _REDIRECTION.sub(" ", simple)  # redirections
        simple = _SPACES.sub(" ", simple).strip()
        if not simple or simple.startswith(("cd ", "#")) or simple == "cd":
            continue
        out.append(simple[:200])
    return tuple(out)


_split_short_commands = memoised(1 << 13)(_find_commands)


def _error_lines(text: str, is_error: bool) -> list[tuple[str, int]]:
    lines = []
    pos = 0
    for line in text.split("\n"):
        s = line.strip()
        if s and ((is_error and _ERROR_LINE.search(s)) or (not is_error and _PLAIN_ERROR_LINE.search(line))):
            lines.append((s[:160], pos))
        pos += len(line) + 1
        if len(lines) >= 3:
            break
    if is_error and not lines:
        first = next(((ln.strip(), i) for i, ln in enumerate(text.split("\n")) if ln.strip()), None)
        if first:
            lines.append((first[0][:160], 0))
    return lines


# arguments naming the file a tool call reads or writes: Pi's ``path``, Claude Code's ``file_path`` / ``notebook_path``
_PATH_ARGUMENTS = ("path", "file_path", "notebook_path")
# text an agent or its hooks put into a user turn (Claude Code): caveats, system reminders, the name and output
# of a local command, task notifications, hook output. ``<command-args>`` and ``<bash-input>`` are typed by the user.
_INJECTED_BLOCK = re.compile(
    r"<(system-reminder|local-command-caveat|local-command-stdout|local-command-stderr|command-name|"
    r"command-message|bash-stdout|bash-stderr|task-notification|user-prompt-submit-hook|[\w-]*-hook)>.*?(?:</\1>|$)",
    re.S)
_INJECTED_TAG = re.compile(r"</?(?:command-args|bash-input)>")
_INJECTED_START = ("Base directory for this skill:", "Caveat: The messages below were generated by the user",
                   "[Request interrupted by user")
_USER_SAID = re.compile(r"the user said:\s*\n(.{3,2000})", re.S | re.I)


def users_words(text: str) -> str:
    """A user turn's text without what an agent or its hooks injected into it (see :data:`_INJECTED_BLOCK`);
    empty when the whole turn is injected (a skill's instructions, a caveat)."""
    if "<" in text:
        text = _INJECTED_TAG.sub(" ", _INJECTED_BLOCK.sub(" ", text))
    stripped = text.strip()
    return "" if stripped.startswith(_INJECTED_START) else text


def _text_facts(text: str, role: str, source: str, sentences: bool = True) -> tuple[tuple[str, str, int, str], ...]:
    """(kind, value, offset, surface) of every fact of one text part, in extraction order (memoised:
    the runs and measures of one session read the same messages again and again). Without
    ``sentences`` constraints and decisions are left out."""
    if len(text) <= _MEMO_CHARS:
        return _text_facts_short(text, role, source, sentences)
    return _find_text_facts(text, role, source, sentences)


def _find_text_facts(text: str, role: str, source: str, sentences: bool = True) -> tuple[tuple[str, str, int, str], ...]:
    out: list[tuple[str, str, int, str]] = []
    if len(text) <= _LINES_FROM or "\n" not in text:
        for v, off, sur in _paths_in_text(text):
            out.append(("path", v, off, sur))
        for v, off, sur in identifiers_in_text(text):
            out.append(("identifier", v, off, sur))
    else:
        out.extend(_names_by_line(text))
    prose = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    for v, off, sur in numbers_in_text(prose):
        out.append(("number", v, off, sur))
    if role == "user" and sentences:
        for v, off, sur in _sentences(text, _CONSTRAINT):
            out.append(("constraint", v, off, sur))
    if role == "assistant" and source == "text" and sentences:
        for v, off, sur in _sentences(text, _DECISION):
            out.append(("decision", v, off, sur))
    return tuple(out)


_text_facts_short = memoised(1 << 13)(_find_text_facts)


_LINES_FROM = 2000  # longer texts find their names line by line


def _names_by_line(text: str) -> list[tuple[str, str, int, str]]:
    """The paths and identifiers of a long text, exactly as :func:`_paths_in_text` and
    :func:`identifiers_in_text` find them (same values, offsets and order), from memoised lines.

    None of their patterns reads across a line break (a break is neither a name character nor a
    code-span character, so it bounds a match like the ends of the text), so each pattern's matches
    over the text are its matches over the lines, in line order. A long text that is mostly old
    lines (an updated summary) costs only its new lines.
    """
    per_line = []
    start = 0
    for line in text.split("\n"):
        if line:
            per_line.append((start, _line_names(line) if len(line) <= _MEMO_CHARS else _find_line_names(line)))
        start += len(line) + 1
    out: list[tuple[str, str, int, str]] = []
    for group, kind in enumerate(("path", "path", "identifier", "identifier", "identifier", "identifier",
                                  "identifier")):
        for at, groups in per_line:
            found = groups[group]
            if found:  # most lines name nothing of most groups
                out.extend([(kind, v, at + off, sur) for v, off, sur in found])
    return out


def _find_line_names(line: str) -> tuple[tuple[tuple[str, int, str], ...], ...]:
    """One line's matches, grouped as the text-wide passes make them: path tokens, bare file names,
    code-span names, then the matches of each identifier pattern."""
    return (*_path_groups(line), *_identifier_groups(line))


_line_names = memoised(1 << 15)(_find_line_names)


def _error_lines_of(text: str, is_error: bool) -> tuple[tuple[str, int], ...]:
    """``_error_lines`` memoised: a tool output without an error is read to its end, and the runs of one
    recording read the same outputs again (long ones in a smaller memo)."""
    if len(text) <= _MEMO_CHARS:
        return _error_lines_short(text, is_error)
    return _error_lines_long(text, is_error)


def _error_lines_tuple(text: str, is_error: bool) -> tuple[tuple[str, int], ...]:
    return tuple(_error_lines(text, is_error))


_error_lines_short = memoised(1 << 13)(_error_lines_tuple)
_error_lines_long = memoised(1 << 7)(_error_lines_tuple)


def extract_facts(
    items: Iterable[Any],
    *,
    include_thinking: bool = False,
    unique: bool = True,
    kinds: Sequence[str] = FACT_KINDS,
) -> list[Fact]:
    """The checkable facts of a span of conversation (rules in the module docs).

    ``items``: session entries, AgentMessages or ``(entry_id, message)`` pairs, in order.
    With ``unique`` (default) only the first occurrence of each fact key is kept.

    Args:
        items: session entries, AgentMessages or ``(entry_id, message)`` pairs, in order.
        include_thinking: read thinking blocks too.
        unique: keep only the first occurrence of each fact key.
        kinds: the fact kinds to extract.
    """
    wanted = set(kinds)
    unknown = wanted - set(FACT_KINDS)
    if unknown:
        raise ConfigurationError(f"unknown fact kinds {sorted(unknown)}; known: {list(FACT_KINDS)}")
    facts: list[Fact] = []
    sentences = "constraint" in wanted or "decision" in wanted

    def add(kind: str, value: str, eid: str | None, pos: int, off: int, role: str, source: str, surface: str) -> None:
        if kind in wanted and value:
            facts.append(Fact(kind, value, eid, pos, off, role, source, surface))

    def from_text(text: str, eid: str | None, pos: int, role: str, source: str) -> None:
        for kind, v, off, sur in _text_facts(text, role, source, sentences):
            add(kind, v, eid, pos, off, role, source, sur)

    for pos, (eid, msg) in enumerate(iter_messages(items)):
        role = msg.get("role", "")
        if role in ("user", "custom"):
            text = text_blocks(msg.get("content"))
            if role == "user":  # what an agent or a hook put in the user's turn is not the user's
                text = "" if msg.get("injected") else users_words(text)
            from_text(text, eid, pos, "user" if role == "user" else role, "text")
        elif role in ("branchSummary", "compactionSummary"):
            if role == "branchSummary":
                from_text(str(msg.get("summary", "")), eid, pos, role, "text")
        elif role == "assistant":
            content = msg.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for block in content or []:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text":
                    from_text(block.get("text", ""), eid, pos, role, "text")
                elif btype == "thinking" and include_thinking:
                    from_text(block.get("thinking", ""), eid, pos, role, "thinking")
                elif btype == "toolCall":
                    args = block.get("arguments") or {}
                    if isinstance(args, dict):
                        p = next((args[k] for k in _PATH_ARGUMENTS if isinstance(args.get(k), str)), None)
                        if isinstance(p, str):
                            norm = normalize_path(p)
                            if norm:
                                add("path", norm, eid, pos, 0, role, "tool_call", p)
                        if block.get("name") == "bash" and isinstance(args.get("command"), str):
                            for c in _split_commands(args["command"]):
                                add("command", fold(c), eid, pos, 0, role, "tool_call", c)
        elif role == "toolResult":
            text = text_blocks(msg.get("content"))
            for line, off in _error_lines_of(text, bool(msg.get("isError"))):
                add("error", fold(line), eid, pos, off, role, "tool_result", line)
            said = _USER_SAID.search(text) if msg.get("isError") else None
            if said and sentences:  # the user's words on a refused tool call are the user's
                for v, off, sur in _sentences(said.group(1), _CONSTRAINT):
                    add("constraint", v, eid, pos, said.start(1) + off, "user", "tool_result", sur)
        elif role == "bashExecution":
            for c in _split_commands(str(msg.get("command", ""))):
                add("command", fold(c), eid, pos, 0, role, "bash", c)
            code = msg.get("exitCode")
            failed = code not in (0, None) and not msg.get("cancelled")
            for line, off in _error_lines_of(str(msg.get("output", "")), failed):
                add("error", fold(line), eid, pos, off, role, "bash", line)
    if unique:
        seen: set[tuple[str, str]] = set()
        out = []
        for f in facts:
            if f.key not in seen:
                seen.add(f.key)
                out.append(f)
        return out
    return facts


def summary_facts(text: str, kinds: Sequence[str] = ("path", "identifier", "number")) -> list[Fact]:
    """Facts stated by a summary itself (its text read as assistant prose): ``extract_facts`` of one
    assistant message holding the text (memoised per text)."""
    return list(_summary_facts(text, tuple(kinds)))


@memoised(256)
def _summary_facts(text: str, kinds: tuple[str, ...]) -> tuple[Fact, ...]:
    return tuple(extract_facts([{"role": "assistant", "content": [{"type": "text", "text": text}]}], kinds=kinds))


def facts_frame(facts: Sequence[Fact]) -> pd.DataFrame:
    """Facts as a DataFrame: kind, value, entry_id, position, offset, role, source, surface."""
    cols = ["kind", "value", "entry_id", "position", "offset", "role", "source", "surface"]
    return frame([asdict(f) for f in facts], columns=cols)


# --------------------------------------------------------------------------- presence


_NEGATION = frozenset(
    """not no never don't dont doesn't doesnt didn't didnt won't wont can't cant cannot shouldn't shouldnt mustn't
    mustnt isn't isnt aren't arent without avoid avoids avoided reject rejects rejected rejecting instead stop
    stopped drop dropped remove removed neither nor none""".split()
)
_POLARITY_WORD = re.compile(r"[A-Za-z0-9_$']+")
_QUOTED_NAME = re.compile(r"'([A-Za-z_$][\w$.]*)'|\"([A-Za-z_$][\w$.]*)\"|`([A-Za-z_$][\w$.]*)`")
_SOURCE_EXT_AFTER = rf"(?!\.(?:{_EXT_RX})\b)"


@memoised(1 << 16)
def _stem(word: str) -> str:
    w = word.lower()
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


def _stems_of(text: str) -> set[str]:
    """Every word of a text as :func:`negated_words` would count it (a superset check, no polarity)."""
    return {_stem(w) for w in _POLARITY_WORD.findall(text) if len(w) >= 3}


def _line_stems(line: str) -> frozenset[str]:
    """``_stems_of(line.lower())`` (the words of one line of a text)."""
    return frozenset(_stems_of(line.lower()))


_line_stems_short = memoised(1 << 15)(_line_stems)


def negated_words(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(content words, those of them every occurrence of which follows a negation within 3 words).

    A negation (``not``, ``no``, ``never``, ``don't``, ``without``, ``avoid``, ``rejected``,
    ``instead``...) negates the next three words, so "User rejected e2e tests" negates ``e2e`` and
    ``test`` while "E2E tests only - no unit tests" leaves ``test`` affirmed (one occurrence is free).
    Memoised per text (the sets are frozen).
    """
    n = len(text)
    if n <= 2000:
        return _negated_words_short(text)
    return _negated_words_long(text) if n <= _MEMO_CHARS else _negated_words(text)


def _negated_words(text: str) -> tuple[frozenset[str], frozenset[str]]:
    affirmed: set[str] = set()
    seen: set[str] = set()
    scope = 0
    content = _CONTENT_STEM
    for w in _POLARITY_WORD.findall(text.lower()):
        if w in _NEGATION:
            scope = 3
            continue
        stem = content.get(w)
        if stem is None:
            stem = _content_stem(w)
        if stem:
            seen.add(stem)
            if not scope:
                affirmed.add(stem)
        if scope:
            scope -= 1
    return frozenset(seen), frozenset(seen - affirmed)


_CONTENT_STEM: dict[str, str] = {}  # word -> its stem if a content word, else ""
on_forget(_CONTENT_STEM.clear)


def _content_stem(word: str) -> str:
    """The stem :func:`negated_words` counts for ``word`` ("" for a short or stop word), memoised."""
    stem = _stem(word) if len(word) >= 3 and word not in STOPWORDS else ""
    if len(_CONTENT_STEM) > 1 << 17:
        _CONTENT_STEM.clear()
    _CONTENT_STEM[word] = stem
    return stem


_negated_words_short = memoised(1 << 15)(_negated_words)
_negated_words_long = memoised(256)(_negated_words)  # a summary's few long lines, met again in the next


class SummaryIndex:
    """A text (a summary, or what a span shows) prepared for fast fact look-ups (each structure built
    on first use)."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def answers(self) -> dict[tuple[str, str, str], bool]:
        """:func:`fact_present`'s answers so far, by (kind, value, surface)."""
        return {}

    @cached_property
    def folded(self) -> str:
        return fold_by_lines(self.text)

    @cached_property
    def name_runs(self) -> frozenset[str]:
        """The runs of name characters (``[\\w$]``) of the text as written and without emphasis and
        quotes (:attr:`plain`); none crosses a line break, so they are the lines' (memoised)."""
        return frozenset().union(*(_line_name_runs_short(ln) if len(ln) <= _MEMO_CHARS else _line_name_runs(ln)
                                   for ln in set(self.text.split("\n"))))

    @cached_property
    def folded_runs(self) -> frozenset[str]:
        """The runs of name characters of :attr:`folded` (the lines' folded forms')."""
        return frozenset().union(*(_runs_in(_fold_line(line)) for line in set(self.text.split("\n"))))

    @cached_property
    def plain(self) -> str:
        return _PLAIN_OFF.sub("", self.text)  # emphasis and quotes off, case kept

    @cached_property
    def lower(self) -> str:
        return self.text.lower()

    @cached_property
    def raw_lines(self) -> list[str]:
        return [ln for ln in self.text.split("\n") if ln.strip()]

    @cached_property
    def _polarity(self) -> list[tuple[frozenset[str], frozenset[str]]]:
        return [negated_words(ln) for ln in self.raw_lines]

    @property
    def lines(self) -> list[frozenset[str]]:
        return [words for words, _ in self._polarity]

    @property
    def polarity(self) -> list[frozenset[str]]:
        return [negated for _, negated in self._polarity]

    @cached_property
    def all_words(self) -> set[str]:
        # ``_stems_of(self.lower)``: no word crosses a line break, so they are the lines' (memoised)
        return set().union(*(_line_stems_short(ln) if len(ln) <= _MEMO_CHARS else _line_stems(ln)
                             for ln in set(self.text.split("\n"))))

    @cached_property
    def code_spans(self) -> set[str]:
        return {m.group(1).strip() for m in _BACKTICK.finditer(self.text)}

    @cached_property
    def fenced(self) -> str:
        return "\n".join(m.group(0) for m in _FENCE.finditer(self.text))

    @cached_property
    def paths(self) -> set[str]:
        # No rule reads across a line break (path tokens, code spans and bare-path lines hold
        # none), so the paths of a text are the union of its lines' paths, memoised per line.
        paths: set[str] = set()
        for line in set(self.text.split("\n")):
            found = _line_paths_short(line) if len(line) <= _MEMO_CHARS else _line_paths(line)
            if found:
                paths |= found
        return paths

    @cached_property
    def path_segments(self) -> list[tuple[str, ...]]:
        return [tuple(p.split("/")) for p in self.paths]

    @cached_property
    def numbers(self) -> set[str]:
        return _text_numbers(self.text)

    @cached_property
    def _paths_by_last(self) -> dict[str, list[tuple[str, ...]]]:
        by_last: dict[str, list[tuple[str, ...]]] = {}
        for other in self.path_segments:
            by_last.setdefault(other[-1], []).append(other)
        return by_last

    @cached_property
    def _line_postings(self) -> dict[str, list[int]]:
        """Content word → the lines (of :attr:`raw_lines`) holding it."""
        postings: dict[str, list[int]] = {}
        get = postings.get
        for i, (words, _) in enumerate(self._polarity):
            for w in words:
                lines = get(w)
                if lines is None:
                    postings[w] = [i]
                else:
                    lines.append(i)
        return postings

    @cached_property
    def folded_code_spans(self) -> set[str]:
        return {fold(c) for c in self.code_spans}

    @cached_property
    def _lower_lines(self) -> list[str]:
        return [raw.lower() for raw in self.raw_lines]

    def has_path(self, path: str) -> bool:
        segs = tuple(path.split("/"))
        # every rule below needs the same last segment: only those paths are compared
        for other in self._paths_by_last.get(segs[-1], ()):
            if other == segs:
                return True
            n = len(segs)
            if n <= len(other) and other[-n:] == segs:
                return True  # the text names it more specifically
            shared = 0
            for a, b in zip(reversed(segs), reversed(other)):
                if a != b:
                    break
                shared += 1
            if shared >= 2:
                return True
        return False

    def has_identifier(self, name: str) -> bool:
        """Case-sensitive whole-name occurrence, not as part of a file name (``main`` is not in ``main.ts``).

        A name that reads as a plain word (``run``, ``state``, ``main``, ``Agent``: letters with at
        most a leading capital) counts only in code form: ``name(``, ``.name``, a code span that is
        the name, or inside a fenced block; prose and titles use such words in other senses.
        """
        name = name.strip()
        if name.endswith("()"):
            name = name[:-2]
        if not name or name not in self.plain:
            return False
        if not _PLAIN_WORD.fullmatch(name):
            return _whole_name_in(self.plain, name)
        if name in self.code_spans or f"{name}()" in self.code_spans:
            return True
        if _called_or_member_in(self.plain, name):
            return True
        return bool(self.fenced) and _whole_name_in(self.fenced, name)

    def has_words(self, text: str, threshold: float) -> bool:
        """Some line covers ``threshold`` of the text's content words (at least 2) with the same polarity."""
        words, negated = negated_words(text)
        if not words or len(words & self.all_words) < 2:  # the text's lines are read only past this
            return False
        n = len(words)
        # the fewest shared words a line needs (at least 2, a share of ``threshold``)
        need = next((k for k in range(2, n + 1) if k / n >= threshold), None)
        if need is None:
            return False
        polarity = self._polarity
        if len(polarity) <= _SCAN_LINES:  # a short text (a message): every line, no postings to build
            for line, line_negated in polarity:
                common = words & line
                if len(common) >= need and _same_polarity(negated & common, line_negated & common):
                    return True
            return False
        # a line holding ``need`` of the ``n`` words holds one of any ``n - need + 1`` of them: only
        # the lines of the words on the fewest lines are read
        postings = self._line_postings
        rare = sorted((postings.get(w, ()) for w in words), key=len)[: n - need + 1]
        for i in set().union(*rare):
            line, line_negated = polarity[i]
            common = words & line
            if len(common) >= need and _same_polarity(negated & common, line_negated & common):
                return True
        return False

    def has_error(self, line: str) -> bool:
        """The error's quoted names (two or more, case folded) all stated on one line of the text."""
        names = _error_names(line)
        if len(names) < 2 or not all(n in self.lower for n in names):
            return False
        for low in self._lower_lines:
            if all(_occurs_in(low, n, _NAME_CHARS, _NAME_CHARS) for n in names):
                return True
        return False


_NAME_RUN = re.compile(r"[\w$]+")
_SCAN_LINES = 16  # texts of up to this many lines are matched line by line, without word postings


def _same_polarity(negated: frozenset[str], line_negated: frozenset[str]) -> bool:
    """Two texts state their shared words with the same polarity: neither negates any of them, or both
    negate one of the same ("never change the semantics" and "the semantics must not change": a negation
    reaches a few words, not always the same ones)."""
    return negated == line_negated or bool(negated & line_negated)


def fold_by_lines(text: str) -> str:
    """``fold(text)`` from its memoised lines, for a text that repeats most lines of texts folded
    before it (a summary and its update): folding reads no further than a line's own characters,
    and a break is white space, so the text's fold is its lines' folds (empty ones left out) joined
    by one space."""
    return " ".join(f for f in map(_fold_line, text.split("\n")) if f)


def _fold_line(line: str) -> str:
    """``fold(line)``, memoised up to long lines (summaries repeat their lines from one to the next)."""
    return _fold_short_line(line) if len(line) <= _MEMO_CHARS else _fold(line)


_fold_short_line = memoised(1 << 14)(_fold)


@memoised(1 << 14)
def _runs_in(text: str) -> frozenset[str]:
    return frozenset(_NAME_RUN.findall(text))


def _line_name_runs(line: str) -> frozenset[str]:
    """The runs of name characters of one line as written and without emphasis and quotes."""
    plain = _PLAIN_OFF.sub("", line)
    runs = _runs_in(line)
    return runs if len(plain) == len(line) else runs | _runs_in(plain)  # nothing taken off: the same runs


_line_name_runs_short = memoised(1 << 15)(_line_name_runs)
_PLAIN_OFF = re.compile(r"[*\"“”‘’]")


@memoised(1 << 15)
def _error_names(line: str) -> frozenset[str]:
    """The quoted names of an error line (three characters or more), lower-cased."""
    names = {next(g for g in m.groups() if g) for m in _QUOTED_NAME.finditer(line)}
    return frozenset(n.lower() for n in names if len(n) >= 3)


_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*")
_EXT_AT = re.compile(rf"\.(?:{_EXT_RX})\b")
# characters that end a name on either side: the regex classes [\w$/-] and [\w$] (\w is str.isalnum or _)
_NAME_PATH_CHARS = frozenset("_$/-")
_NAME_CHARS = frozenset("_$")


def _occurs_in(text: str, name: str, before: frozenset[str], after: frozenset[str]) -> bool:
    """``name`` in ``text`` with no word character (nor one of ``before`` / ``after``) on either side."""
    end = len(text)
    k = len(name)
    i = text.find(name)
    while i >= 0:
        if i == 0 or not ((c := text[i - 1]).isalnum() or c in before):
            j = i + k
            if j == end or not ((c := text[j]).isalnum() or c in after):
                return True
        i = text.find(name, i + 1)
    return False


def _line_paths(line: str) -> frozenset[str]:
    """The paths one line of a text names (the three rules of :attr:`SummaryIndex.paths`)."""
    paths = {p for p, _, _ in _find_paths(line)}
    for m in _BACKTICK.finditer(line):
        n = normalize_path(m.group(1))
        if n and _is_path_like(n):
            paths.add(n)
    bare = line.strip()  # a line that is one bare path (lists, trees)
    if " " not in bare and ("/" in bare or "." in bare):  # normalising keeps inner spaces; a path has / or .
        n = normalize_path(bare)
        if n and " " not in n and _is_path_like(n):
            paths.add(n)
    return frozenset(paths)


_line_paths_short = memoised(1 << 15)(_line_paths)


def _whole_name_in(text: str, name: str) -> bool:
    r"""``(?<![\w$/-])name(?![\w$/-])`` not followed by a source extension (``main`` is not in ``main.ts``)."""
    end = len(text)
    k = len(name)
    i = text.find(name)
    while i >= 0:
        if i == 0 or not ((c := text[i - 1]).isalnum() or c in _NAME_PATH_CHARS):
            j = i + k
            if j == end or not ((c := text[j]).isalnum() or c in _NAME_PATH_CHARS):
                if _EXT_AT.match(text, j) is None:
                    return True
        i = text.find(name, i + 1)
    return False


def _called_or_member_in(text: str, name: str) -> bool:
    """``name(`` (a whole name) or ``x.name`` (a whole name, after a name or a call, not a file name)."""
    end = len(text)
    k = len(name)
    i = text.find(name)
    while i >= 0:
        j = i + k
        if j < end and text[j] == "(" and (i == 0 or not ((c := text[i - 1]).isalnum() or c in _NAME_PATH_CHARS)):
            return True
        if i >= 2 and text[i - 1] == "." and ((c := text[i - 2]).isalnum() or c in "_$)"):
            if (j == end or not ((c := text[j]).isalnum() or c in _NAME_PATH_CHARS)) and _EXT_AT.match(text, j) is None:
                return True
        i = text.find(name, i + 1)
    return False


_INDEXES: OrderedDict[str, SummaryIndex] = OrderedDict()
_INDEXES_MAX = 4096  # texts
_INDEXES_MAX_CHARS = 8_000_000  # and their characters: the least recently used go first
_indexed_chars = 0


def index_of(text: str) -> SummaryIndex:
    """The shared :class:`SummaryIndex` of ``text``: a text looked up again (the same summary, kept
    tail or message in another measure or another run of the session) is indexed once."""
    global _indexed_chars
    index = _INDEXES.get(text)
    if index is not None:
        _INDEXES.move_to_end(text)
        return index
    index = _INDEXES[text] = SummaryIndex(text)
    _indexed_chars += len(text)
    while len(_INDEXES) > 1 and (len(_INDEXES) > _INDEXES_MAX or _indexed_chars > _INDEXES_MAX_CHARS):
        old, _ = _INDEXES.popitem(last=False)
        _indexed_chars -= len(old)
    return index


class JoinedIndex(SummaryIndex):
    """The index of texts joined by line breaks (what a kept tail shows), made of the parts' shared
    indexes: a part already indexed (the same message in the previous compaction's tail, or in
    another run of the session) is not read again.

    Exactly the answers of ``SummaryIndex("\\n".join(parts))``: paths, lines, words, errors, name
    runs and code spans are per line, so they are the parts'; the folded form is the parts' folded
    forms joined by a space (as the lines' are), the plain form theirs joined by a line break; the
    numbers are the parts' and those across the breaks between them; the fenced blocks, whose rule may
    read across a line break, read the joined text.
    """

    def __init__(self, parts: Sequence[str]) -> None:
        super().__init__("\n".join(parts))
        self.parts = [index_of(p) for p in parts]

    @cached_property
    def folded(self) -> str:
        return " ".join(f for f in (p.folded for p in self.parts) if f)

    @cached_property
    def raw_lines(self) -> list[str]:
        return [ln for p in self.parts for ln in p.raw_lines]

    @cached_property
    def _polarity(self) -> list[tuple[frozenset[str], frozenset[str]]]:
        return [pol for p in self.parts for pol in p._polarity]

    @cached_property
    def all_words(self) -> set[str]:
        return set().union(*(p.all_words for p in self.parts))

    @cached_property
    def paths(self) -> set[str]:
        return set().union(*(p.paths for p in self.parts))

    @cached_property
    def name_runs(self) -> frozenset[str]:
        return frozenset().union(*(p.name_runs for p in self.parts))  # the lines' runs

    @cached_property
    def folded_runs(self) -> frozenset[str]:
        return frozenset().union(*(p.folded_runs for p in self.parts))

    @cached_property
    def code_spans(self) -> set[str]:
        return set().union(*(p.code_spans for p in self.parts))  # a code span holds no line break

    @cached_property
    def plain(self) -> str:
        return "\n".join(p.plain for p in self.parts)  # characters dropped one by one, never a break

    @cached_property
    def numbers(self) -> set[str]:
        # the joined text's lines are the parts' lines: their numbers, and those across the breaks
        # between a part's last line and the next part's first
        values: set[str] = set().union(*(p.numbers for p in self.parts))
        for a, b in zip(self.parts, self.parts[1:]):
            _add_break_numbers(values, a.text[a.text.rfind("\n") + 1:], b.text.split("\n", 1)[0])
        return values

    def has_path(self, path: str) -> bool:
        # each rule compares the path with one path of the text, and the text's paths are the parts'
        return any(p.has_path(path) for p in self.parts)

    def has_words(self, text: str, threshold: float) -> bool:
        # a line that qualifies shares two words with its part, so the part's own check passes
        return any(p.has_words(text, threshold) for p in self.parts)

    def has_error(self, line: str) -> bool:
        return any(p.has_error(line) for p in self.parts)


_JOINED: OrderedDict[tuple[str, ...], JoinedIndex] = OrderedDict()


def _forget_indexes() -> None:
    global _indexed_chars
    _INDEXES.clear()
    _indexed_chars = 0
    _JOINED.clear()


on_forget(_forget_indexes)


def joined_index(parts: Sequence[str]) -> JoinedIndex:
    """The shared :class:`JoinedIndex` of ``parts`` (the few most recent are kept)."""
    key = tuple(parts)
    index = _JOINED.get(key)
    if index is None:
        index = _JOINED[key] = JoinedIndex(parts)
        if len(_JOINED) > 32:
            _JOINED.popitem(last=False)
    else:
        _JOINED.move_to_end(key)
    return index


def fact_present(fact: Fact | tuple[str, str], summary: str | SummaryIndex) -> bool:
    """Whether a summary (text or :class:`SummaryIndex`) still holds a fact (rules in module docs).

    Pass the text the summarizer wrote (:func:`pimem.text.sections.summarizer_text`): file blocks
    that ``compact()`` appends would otherwise count for any summarizer. The answer is memoised on
    the index (it depends only on the text and the fact's kind, value and surface).
    """
    index = summary if isinstance(summary, SummaryIndex) else index_of(summary)
    kind, value = (fact.kind, fact.value) if isinstance(fact, Fact) else fact
    surface = fact.surface if isinstance(fact, Fact) and fact.surface else value
    answers = index.answers
    key = (kind, value, surface)
    held = answers.get(key)
    if held is None:
        held = answers[key] = _holds(index, kind, value, surface)
    return held


def facts_present(facts: Sequence[Fact], summary: str | SummaryIndex) -> list[bool]:
    """``[fact_present(f, summary) for f in facts]``, for many facts against one text: a fact whose
    necessary name (:func:`_probe`) the text does not hold is absent without a search."""
    index = summary if isinstance(summary, SummaryIndex) else index_of(summary)
    answers = index.answers
    out = []
    for f in facts:
        kind, value = f.kind, f.value
        key = (kind, value, f.surface or value)  # fact_present's memo, read here
        held = answers.get(key)
        if held is None:
            probe = _probe(kind, value)
            if probe is not None and probe[1] not in getattr(index, probe[0]):
                held = False  # what _holds would answer (it needs the probed name)
            else:
                held = answers[key] = _holds(index, kind, value, key[2])
        out.append(held)
    return out


@memoised(1 << 15)
def _probe(kind: str, value: str) -> tuple[str, str] | None:
    """(the index's set, a member of it) that :func:`fact_present` needs to answer True, or None.

    A path needs its last segment among the last segments of the text's paths, a number its value;
    an identifier is found whole, so each of its runs of name characters is a run of the text; a
    command of one word must be a code span, a longer one occurs in the folded text, where every run
    it holds that touches neither of its ends is a run too.
    """
    if kind == "path":
        return "_paths_by_last", value.split("/")[-1]
    if kind == "number":
        return "numbers", value
    if kind == "identifier":
        name = value.strip()
        name = name[:-2] if name.endswith("()") else name
        runs = _NAME_RUN.findall(name)
        return ("name_runs", runs[0]) if runs else None
    if kind == "command":
        v = fold(value)
        if " " not in v:
            return "folded_code_spans", v
        inner = [m.group(0) for m in _NAME_RUN.finditer(v) if m.start() > 0 and m.end() < len(v)]
        return ("folded_runs", inner[0]) if inner else None
    return None


def _holds(index: SummaryIndex, kind: str, value: str, surface: str) -> bool:
    """:func:`fact_present` without the memo."""
    if kind == "path":
        return index.has_path(value)
    if kind == "identifier":
        return index.has_identifier(value)
    if kind == "command":
        v = fold(value)
        if " " not in v:  # a one-word command counts only as code
            return v in index.folded_code_spans
        return v in index.folded
    if kind == "number":
        return value in index.numbers
    v = fold(value)
    if v and v in index.folded:
        return True
    if kind == "error" and index.has_error(surface):
        return True
    return index.has_words(value, 0.7 if kind == "error" else 0.5)
