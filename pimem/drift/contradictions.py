"""Contradictions: a summary's claim that the conversation states otherwise.

:func:`find_contradiction` compares one claim (:class:`pimem.drift.faithfulness.Claim`) with the text the
summarizer was given (:class:`pimem.drift.faithfulness.SourceText`). "Near lines" are the lines of the
given text that hold one of the claim's names (a path's file name counts) or two of its words.

================= =====================================================================================
kind              rule
================= =====================================================================================
``state``         the claim says something is done, passes, builds, succeeded, or fails now, and the span's
                  last evidence on it says otherwise (:func:`pimem.drift.evidence.state_conflict`: the
                  latest run of its kind failed, was refused or was still going; the work's latest event
                  is the user's open ask or an unfinished plan)
``number``        a number of the claim (with a unit, ``~20k``, a bare value of 2+ digits, an ordinal such as
                  ``3rd``, ``#288``) that no
                  near line holds, where a near line (a bare value: a line sharing three words) holds
                  another number in the same slot: the same unit, or the same word before or after
                  it ("Line ~918" against "line 768"); for line counts a ``wc -l`` line of the same file
                  counts too
``version``       a version (``0.27.5``) the given text never states, where it states one that differs in
                  one part only (``0.27.4``, ``0.28.5``)
``path``          a path of the claim that the given text never names, where it names the same file name
                  in another folder, or in the same folder a file name that differs by a few letters or
                  a sibling (same extension and first word: ``push_remote.go`` / ``push_common.go``)
``name``          a code name or a command of the claim that the given text never states, where it states
                  a name of the same length (6+) with one letter replaced or two swapped (``getModel`` for
                  ``setModel``), the same words in another order, one word turned into its opposite
                  (``after_compact`` for ``before_compact``), one of three or more words replaced
                  (``getLatestPrompt`` for ``getLastPrompt``), or a command that starts the same way; a
                  quoted label (2-5 words) the given text never quotes, where it quotes one with one word
                  replaced (``"Entire Checkpoints"`` for ``"Entire Sessions"``)
``reversal``      the claim says "A instead of / rather than / over B", "B → A", "rename / replace /
                  change B to A", "A, not B", "not B but A" (``mv B A`` in a command), and a near line of
                  the given text says it the other way round more firmly (on more words) than any says it
                  this way (``44 → 46`` against ``46 → 44``); A and B are the three words next to the
                  connector. Not directions: chains of arrows (a hierarchy), comment arrows, a read
                  tool's line numbers ("125→"), sentences that describe a fault ("using A instead of B
                  causes bugs"). Also: two opposite words the other way round in a line that otherwise
                  says the same ("current branch collapsed, others expanded" against "... expanded,
                  others collapsed")
``negation``      every near line (not a question) that holds 60% of the claim's words (a claim of 4+
                  words outside its paths; at least 3; 40% of the words of both together) states them
                  with the other polarity (two or more words stated plainly on one side and only after
                  ``not``, ``no``, ``never``, ``without``, ``dropped``, ``reverted``..., or after
                  "instead of" / "rather than", on the other; "not only X" affirms X; a sentence that
                  describes a fault counts on neither side); or a near line holding 60%
                  of the claim's other words (at least 3, a quarter of the words of both) has a word of the
                  opposite sense (:data:`OPPOSITES`: keep / remove, pass / fail, stay / move...; as written,
                  not through synonym groups; a line that says what is to happen once something holds —
                  "when everything works, delete the old code" — states no fact). Not where the claim's
                  direction ("A, not B") is stated the same way in the given text; a claim that tells what
                  went wrong ("the test failed: X used A instead of B") decides no direction
================= =====================================================================================

A chat model's verdict (:class:`pimem.drift.faithfulness.ClaimJudge`, optional) is recorded as kind ``judge``.

What it rewards and how it fails: it catches values edited, negated or turned round against the
conversation. It reads words, not meaning: a contradiction stated in other words than the span's ("may
fail" against "must pass") is missed, a value that changed during the span can be called a contradiction
when the summary gives the older one, and a name that the span uses for something else (an edited claim
that names a real but wrong function) is not caught. Every claim it calls contradicted is also
unfaithful. Precision and recall on the held-out halves of ``datasets/labels/contradictions.jsonl`` (Pi) and
``contradictions-claude-code.jsonl``: see that folder's README (the rules were adjusted on the tuning
halves only; about 0.79 precision and 0.26 recall pooled, most reworded negations missed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pimem.base.files import labelled_rows
from pimem.base.tables import frame
from pimem.drift.evidence import state_conflict
from pimem.errors import LabelFormatError
from pimem.text.facts import numbers_in_text
from pimem.text.normalize import canonical_word, normal_words, split_identifier, stem

if TYPE_CHECKING:
    from pimem.drift.faithfulness import Claim, SourceText

__all__ = ["Contradiction", "CONTRADICTION_KINDS", "OPPOSITES", "find_contradiction", "load_contradiction_labels",
           "CONTRADICTION_LABELS"]

CONTRADICTION_KINDS: tuple[str, ...] = ("state", "number", "version", "path", "name", "negation", "reversal", "judge")

# pairs of words of opposite sense (compared after normalisation)
OPPOSITES: tuple[tuple[str, str], ...] = (
    ("keep", "remove"), ("keep", "delete"), ("pass", "fail"), ("pass", "error"),
    ("before", "after"), ("first", "last"), ("enable", "disable"), ("include", "exclude"), ("show", "hide"),
    ("success", "error"), ("concise", "long"), ("concise", "verbose"), ("concise", "exhaustive"),
    ("allow", "block"), ("public", "private"), ("sync", "async"), ("true", "false"), ("open", "close"),
    ("increase", "decrease"), ("always", "never"), ("must", "may"), ("required", "optional"),
    ("internal", "external"), ("local", "remote"), ("get", "set"), ("min", "max"), ("input", "output"),
    ("start", "end"), ("old", "new"), ("light", "dark"), ("upper", "lower"), ("freeform", "fixed"),
    ("stay", "move"), ("concise", "detailed"), ("expanded", "collapsed"), ("ours", "theirs"), ("oldest", "newest"),
    ("oldest", "latest"), ("start", "stop"), ("add", "remove"), ("succeed", "fail"), ("allow", "forbid"),
    ("hide", "display"), ("visible", "hidden"),
)
# negations that turn a statement round (not actions such as "remove X", which the facts matcher also counts)
_NOT = frozenset("""not no never don't dont doesn't doesnt didn't didnt won't wont can't cant cannot shouldn't
    shouldnt mustn't mustnt isn't isnt aren't arent wasn't wasnt weren't werent haven't havent hasn't hasnt
    hadn't hadnt wouldn't wouldnt couldn't couldnt needn't neednt without none neither nor dropped reverted
    abandoned""".split())
_POLARITY_WORD = re.compile(r"[A-Za-z0-9_$']+")
_NOT_MERELY = frozenset("merely just only simply".split())
_PROBLEM = re.compile(r"\b(?:bugs?|causes?|caused|wrong|broken|incorrect(?:ly)?|problems?)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_FAILED = re.compile(r"\b(?:failed|fails|failing|failure)\b", re.I)
_CONDITIONAL = re.compile(r"\b(?:when|once|after|until|eventually|finally|later|will|would)\b", re.I)
_REJECTING = re.compile(r"\b(?:instead\s+of|rather\s+than)\b", re.I)


def _polarity(text: str) -> tuple[set[str], set[str]]:
    """(words only ever stated plainly, words only ever stated within three words after a negation),
    normalised."""
    affirmed: set[str] = set()
    negated: set[str] = set()
    scope = 0
    # "A instead of B" rejects B; a sentence that describes a fault ("uses A instead of B, a bug") states
    # what went wrong, not what holds, and counts on neither side
    decided = " ".join(_REJECTING.sub(" not ", t) for t in _SENTENCE.split(text.lower()) if not _PROBLEM.search(t))
    words = _POLARITY_WORD.findall(decided)
    for i, w in enumerate(words):
        if w in _NOT:
            scope = 0 if i + 1 < len(words) and words[i + 1] in _NOT_MERELY else 3  # "not only X" affirms X
            continue
        if len(w) >= 3 and not w.isdigit():
            (negated if scope else affirmed).add(canonical_word(w))
        scope = max(0, scope - 1)
    return affirmed - negated, negated - affirmed
_NAME_ONLY_OPPOSITES = frozenset({("get", "set")})  # opposite in code names, not in prose ("check it is set")
_OPPOSITE: dict[str, set[str]] = {}
for _a, _b in OPPOSITES:
    if (_a, _b) in _NAME_ONLY_OPPOSITES:
        continue
    _ca, _cb = canonical_word(_a), canonical_word(_b)
    if _ca != _cb:
        _OPPOSITE.setdefault(_ca, set()).add(_cb)
        _OPPOSITE.setdefault(_cb, set()).add(_ca)
_RAW_OPPOSITE: dict[str, set[str]] = {}
for _a, _b in OPPOSITES:
    _RAW_OPPOSITE.setdefault(_a, set()).add(_b)
    _RAW_OPPOSITE.setdefault(_b, set()).add(_a)

_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)*)(?![\w]|\.\d)")
_DIGITS = re.compile(r"(?<![\w.#/-])(\d{2,}k?|\d+(?:st|nd|rd|th))(?![\w.%/-]|\.\d)", re.I)
_REF = re.compile(r"(?<![\w&])#(\d{1,6})\b")
_WC_LINE = re.compile(r"^\s*(\d+)\s+\S")
_CONNECTOR = re.compile(r"\b(instead of|rather than|in favou?r of|over)\b|(→|->)|,\s*(not)\b", re.I)
_FROM_TO = re.compile(r"\b(?:renamed?|moved?|changed?|switch(?:ed)?|replaced?|corrected|updated|turned)\s+(?:the\s+)?"
                      r"(.{1,80}?)\s+(?:to|with|into|by)\s+(.{1,80})", re.I)
_INFINITIVES = frozenset("""show use make be have include support handle accept return call read write pass take
    work match avoid allow keep add remove fix check get set run load save find display print point reflect""".split())
_QUOTED = re.compile(r'"([A-Za-z][^"\n]{2,60})"')
_KEY = re.compile(r"[A-Za-z_$][\w$.-]*[\w$]|\d+(?:\.\d+)*|[A-Za-z]")
_KEY_SKIP = frozenset("the and use using with a an to of class file section field method function".split())


@dataclass(frozen=True)
class Contradiction:
    """What the claim says (``claimed``), what the given text says (``given``) and the line that says it."""

    kind: str
    claimed: str
    given: str
    evidence: str


def _anchors(claim: Claim) -> list[str]:
    out = [n for n in claim.identifiers if len(n) >= 3]
    for p in claim.paths:
        out.append(p)
        name = p.rsplit("/", 1)[-1]
        if len(name) >= 4:
            out.append(name)
    return out


def _slots(text: str, start: int, end: int) -> set[str]:
    """The words right before and after a value (``line`` in "Line ~918", ``tokens`` in "~20k tokens")."""
    before = re.findall(r"[A-Za-z]{2,}", text[max(0, start - 24):start])
    after = re.findall(r"[A-Za-z]{2,}", text[end:end + 24])
    out = set()
    if before:
        out.add(canonical_word(before[-1]))
    if after:
        out.add(canonical_word(after[0]))
    return out - {"the", "and", "from", "with", "to"}


def _values(text: str) -> list[tuple[str, set[str]]]:
    return [(m.group(1).lower(), _slots(text, m.start(1), m.end(1))) for m in _DIGITS.finditer(text)]


def _number_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    lines = given.lines
    near = lines.near(claim.words, _anchors(claim))
    near_text = [lines.lines[i] for i in near]
    names = [p.rsplit("/", 1)[-1] for p in claim.paths]
    near_tokens = {t for ln in near_text for t in re.findall(r"\d+(?:k|st|nd|rd|th)?", ln.lower().replace(",", ""))}
    for number in claim.numbers:
        if number in given.index.numbers or number.split(" ")[0].replace(",", "") in near_tokens:
            continue
        unit = number.split(" ", 1)[1] if " " in number else ""
        for line in near_text:
            for value, _, _ in numbers_in_text(line):
                if value != number and (value.split(" ", 1)[1] if " " in value else "") == unit:
                    return Contradiction("number", number, value, line[:200])
        if unit == "lines":
            for line in near_text:
                m = _WC_LINE.match(line)
                if m and any(n and n in line for n in names) and m.group(1) != number.split(" ")[0]:
                    return Contradiction("number", number, f"{m.group(1)} lines", line[:200])
    strong = [lines.lines[i] for i in lines.near(claim.words | {w for n in claim.identifiers for w in normal_words(n)},
                                                  (), min_words=3)]
    for value, slots in _values(claim.text):
        if not slots or value in near_tokens:
            continue
        for line in strong:  # the same statement (three words in common) with another value in the slot
            for other, other_slots in _values(line):
                if other != value and slots & other_slots:
                    return Contradiction("number", value, other, line[:200])
    for ref in claim.refs:
        if any(f"#{ref}" in ln for ln in near_text):
            continue
        for line in near_text:
            for m in _REF.finditer(line):
                if m.group(1) != ref:
                    return Contradiction("number", f"#{ref}", f"#{m.group(1)}", line[:200])
    return None


def _version_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    if not claim.versions:
        return None
    versions = given.versions
    for v in claim.versions:
        if v in versions:
            continue
        parts = v.split(".")
        for other in sorted(versions):
            o = other.split(".")
            if len(o) == len(parts) and sum(a != b for a, b in zip(parts, o)) == 1:
                return Contradiction("version", v, other, other)
    return None


def _sibling_name(a: str, b: str) -> bool:
    """Two file names of one kind: the same extension and the same first word (``push_common.go`` /
    ``push_remote.go``, ``cli_version_test.go`` / ``cli_version_metadata_test.go``)."""
    (a_stem, _, a_ext), (b_stem, _, b_ext) = a.rpartition("."), b.rpartition(".")
    a_words, b_words = re.split(r"[-_.]", a_stem or a_ext), re.split(r"[-_.]", b_stem or b_ext)
    return a_ext == b_ext and len(a_words) > 1 and len(b_words) > 1 and a_words[0] == b_words[0]


def _path_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    import difflib

    wanted = [p for p in claim.paths if not given.has_path(p)]
    if not wanted:
        return None
    paths = given.index.paths
    for p in wanted:
        name = p.rsplit("/", 1)[-1]
        folder = p.rsplit("/", 1)[0] if "/" in p else ""
        parent = folder.rsplit("/", 1)[-1]
        for q in sorted(paths):
            qname = q.rsplit("/", 1)[-1]
            qfolder = q.rsplit("/", 1)[0] if "/" in q else ""
            if qname == name and folder and qfolder and qfolder.rsplit("/", 1)[-1] != parent:
                return Contradiction("path", p, q, q)
            if qname != name and folder and qfolder and qfolder.rsplit("/", 1)[-1] == parent:
                ratio = difflib.SequenceMatcher(None, name, qname).ratio()
                if ratio >= 0.85 or (ratio >= 0.7 and _sibling_name(name, qname)):
                    return Contradiction("path", p, q, q)
    return None


def _one_letter_apart(a: str, b: str) -> bool:
    """Same length (6+), one letter replaced or two neighbours swapped: ``setModel`` / ``getModel``."""
    if len(a) != len(b) or len(a) < 6 or a == b:
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(diff) == 1:
        return a[diff[0]].isalpha() == b[diff[0]].isalpha()
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def _opposite_words(a: list[str], b: list[str]) -> bool:
    """Same words but one, which is the other's opposite (``before_compact`` / ``after_compact``)."""
    if len(a) != len(b) or len(a) < 2:
        return False
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    return len(diff) == 1 and diff[0][1] in _RAW_OPPOSITE.get(diff[0][0], set())


def _one_word_replaced(a: list[str], b: list[str]) -> bool:
    """Three words or more, the same but one, which is another word of 3+ letters (``getLatestPrompt``
    / ``getLastPrompt``, ``formatSessionLabel`` / ``formatCheckpointLabel``)."""
    if len(a) != len(b) or len(a) < 3:
        return False
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    return len(diff) == 1 and min(len(diff[0][0]), len(diff[0][1])) >= 3 and not diff[0][0].isdigit()


def _quoted_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    """A quoted label of the claim ("Entire Checkpoints") that the given text never states, where it
    quotes one of the same words but one ("Entire Sessions")."""
    if '"' not in claim.text:
        return None
    for m in _QUOTED.finditer(claim.text):
        label = m.group(1)
        words = label.split()
        if not 2 <= len(words) <= 5 or label.lower() in given.lowered:  # the label is in the span, quoted or not
            continue
        for k, word in ((0, words[0]), (len(words) - 1, words[-1])):
            pattern = (rf'"{re.escape(word)}(?: [^"\n]{{1,60}})?"' if k == 0 else rf'"(?:[^"\n]{{1,60}} )?{re.escape(word)}"')
            for hit in re.finditer(pattern, given.text):
                other = hit.group(0)[1:-1].split()
                diff = [(x, y) for x, y in zip(words, other) if x.lower() != y.lower()]
                if len(other) == len(words) and len(diff) == 1 and len(diff[0][1]) >= 3:
                    return Contradiction("name", label, " ".join(other), hit.group(0))
    return None


def _name_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    for n in claim.identifiers:
        if len(n) < 5 or given.has_identifier(n):
            continue
        base = n.split(".")[-1].rstrip("()")
        parts = split_identifier(base)
        pool: set[str] = set()
        for w in parts:
            pool |= given.names_by_word.get(w, set())
        for other in sorted(pool):
            if other == base:
                continue
            other_parts = split_identifier(other)
            if (len(parts) > 1 and sorted(other_parts) == sorted(parts)) or _one_letter_apart(base, other) or \
                    _opposite_words(parts, other_parts) or _one_word_replaced(parts, other_parts):
                return Contradiction("name", n, other, other)
    quoted = _quoted_conflict(claim, given)
    if quoted is not None:
        return quoted
    for command in claim.commands:
        if command.lower() in given.folded:
            continue
        head = command.split()[:2]
        if len(head) < 2:
            continue
        prefix = " ".join(head).lower()
        for line in given.command_lines(prefix):
            other = line[line.lower().index(prefix):].split("`")[0].strip()
            if other.lower() != command.lower() and not other.lower().startswith(command.lower()):
                return Contradiction("name", command, other[:80], line[:200])
    return None


def _phrase(text: str, last: bool) -> frozenset[str]:
    """Up to three normalised words (or numbers) next to a connector: the last ones before it or the
    first ones after it."""
    tokens = [t for t in _KEY.findall(text) if t.lower() not in _KEY_SKIP and (len(t) >= 3 or t.isdigit())]
    picked = tokens[-3:] if last else tokens[:3]
    out: set[str] = set()
    for t in picked:
        out |= normal_words(t) if not t.isdigit() else {t}
    return frozenset(out)


_CODE_NOT = re.compile(r"`([^`]+)`\s*,?\s+(?:not|instead of|rather than|over)\s+`([^`]+)`")
_LINE_NUMBER = re.compile(r"^\s*\d+→")  # a file line as a read tool shows it ("  125→code")
_COMMENT_ARROW = re.compile(r"(?://|#)\s*(?:→|->)")  # "// → /repo/file": an annotation, not a change
_ARROW = re.compile(r"→|->")
_NOT_BUT = re.compile(r"\bnot\s+(.{1,60}?)\s*,?\s+but\s+(.{1,60})", re.I)  # "not A but B"
_MOVE = re.compile(r"\b(?:git\s+)?mv\s+(\S+)\s+(\S+)")
Direction = tuple[frozenset[str], frozenset[str]]


def _directions(line: str) -> list[Direction]:
    """(preferred, rejected) word sets a line states: "A instead of B", "B → A", "rename B to A",
    "A, not B", "`A` not `B`", ``mv B A``."""
    out: list[Direction] = []
    line = _COMMENT_ARROW.sub(" ", _LINE_NUMBER.sub("", line))
    for m in _CODE_NOT.finditer(line):
        out.append((_phrase(m.group(1), True), _phrase(m.group(2), False)))
    chain = len(_ARROW.findall(line)) > 1  # "Branch → Sessions → Checkpoints": a hierarchy, not a change
    not_but = [m.span() for m in _NOT_BUT.finditer(line)]
    for m in _CONNECTOR.finditer(line):
        if (chain and m.group(2)) or (m.group(3) and any(a <= m.start(3) < b for a, b in not_but)):
            continue
        a, b = _phrase(line[: m.start()], last=True), _phrase(line[m.end():], last=False)
        out.append((b, a) if m.group(2) else (a, b))
    for m in _NOT_BUT.finditer(line):
        out.append((_phrase(m.group(2), False), _phrase(m.group(1), True)))
    for m in _FROM_TO.finditer(line):
        if m.group(2).split(" ", 1)[0].lower() in _INFINITIVES or re.search(r"\bnot\b", m.group(1), re.I):
            continue  # "updated the title to show ...": a purpose, not a new value
        out.append((_phrase(m.group(2), last=False), _phrase(m.group(1), last=True)))
    for m in _MOVE.finditer(line):
        new, old = m.group(2).rsplit("/", 1)[-1], m.group(1).rsplit("/", 1)[-1]
        out.append((frozenset(normal_words(new)), frozenset(normal_words(old))))
    return [(p - r, r - p) for p, r in out if p - r and r - p]


def _decided_directions(line: str) -> list[Direction]:
    """The directions of a line's sentences, except those that describe a fault ("using A instead of B
    causes bugs"), which state what went wrong, not what was decided."""
    return [d for sentence in _SENTENCE.split(line) if not _PROBLEM.search(sentence) for d in _directions(sentence)]


def _overlap(claim: Direction, line: Direction) -> str:
    """``agree``, ``against`` or ``""`` for two directions."""
    (p, r), (lp, lr) = claim, line
    if p & lp and r & lr and not (p & lr or r & lp):
        return "agree"
    if (p & lr and r & lp) or (len(p & lr) >= 2 and 3 * len(p & lr) >= 2 * len(p)):
        return "against"  # crossed, or most of what the claim prefers is what the line rejects
    return ""


def _keys_of(direction: Direction) -> list[str]:
    return sorted(direction[0] | direction[1], key=len, reverse=True)[:1]


def _strength(claim: Direction, line: Direction, verdict: str) -> int:
    """How many words a verdict rests on: both sides matched the same way (agree) or crossed (against)."""
    (p, r), (lp, lr) = claim, line
    return len(p & lp) + len(r & lr) if verdict == "agree" else len(p & lr) + len(r & lp)


def _reversal_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    lines = given.lines
    # a claim that tells what went wrong ("the test failed: X used A instead of B") decides nothing either
    for direction in _decided_directions(_FAILED.sub(" bug ", claim.text)):
        against: str | None = None
        against_strength = agree_strength = 0
        for i in lines.near(direction[0] | direction[1], (), min_words=2):
            for other in _decided_directions(lines.lines[i]):
                verdict = _overlap(direction, other)
                if not verdict:
                    continue
                strength = _strength(direction, other, verdict)
                if verdict == "agree":
                    agree_strength = max(agree_strength, strength)
                elif strength > against_strength:
                    against, against_strength = lines.lines[i], strength
        # the other way round, and more firmly than any line that says it this way
        if against is not None and against_strength > agree_strength:
            p, r = direction
            return Contradiction("reversal", f"{' '.join(sorted(p))} over {' '.join(sorted(r))}",
                                 "the other way round", against[:200])
    return None


_STEM_OPPOSITE: dict[str, set[str]] = {}
for _a, _b in OPPOSITES:
    if (_a, _b) not in _NAME_ONLY_OPPOSITES and stem(_a) != stem(_b):
        _STEM_OPPOSITE.setdefault(stem(_a), set()).add(stem(_b))
        _STEM_OPPOSITE.setdefault(stem(_b), set()).add(stem(_a))


def _opposed_as_written(claim_text: str, line: str) -> bool:
    """Two words of :data:`OPPOSITES` as written (stemmed, no synonym groups), one on each side."""
    a, b = normal_words(claim_text, synonyms=False), normal_words(line, synonyms=False)
    return any(_STEM_OPPOSITE.get(w, set()) & (b - a) for w in a - b)


def _negated(text: str) -> bool:
    return any(w in _NOT for w in _POLARITY_WORD.findall(text.lower()))


def _sequence(text: str) -> list[str]:
    return [canonical_word(w) for w in _POLARITY_WORD.findall(text.lower()) if len(w) >= 3]


def _swap_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    """Two opposite words the other way round in a line that otherwise says the same ("current branch
    collapsed, the others expanded" against "current branch expanded, others collapsed")."""
    if _directions(claim.text) or _negated(claim.text):
        return None  # a decision or a negation: the reversal and negation rules judge it
    order = _sequence(claim.text)
    first = {w: i for i, w in reversed(list(enumerate(order)))}
    pairs = [(a, b) for a in first for b in _OPPOSITE.get(a, ()) if b in first and first[a] < first[b]]
    if not pairs:
        return None
    words = frozenset(claim.words)
    lines = given.lines
    against: str | None = None
    for i in lines.near(words, (), min_words=3):
        common = words & lines.words[i]
        if len(common) < 3 or len(common) / len(words) < 0.6 or "?" in lines.lines[i] or _negated(lines.lines[i]):
            continue
        seq = _sequence(lines.lines[i])
        where = {w: j for j, w in reversed(list(enumerate(seq)))}
        for a, b in pairs:
            if a in where and b in where:
                if where[a] < where[b]:
                    return None  # stated the same way
                against = against or lines.lines[i]
    if against is not None:
        return Contradiction("reversal", claim.text[:200], "the other way round", against[:200])
    return None


def _negation_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    words = frozenset(claim.words | {w for n in claim.identifiers for w in normal_words(n)})
    if len(words) < 4:
        return None
    claim_plain, claim_neg = _polarity(claim.text)
    lines = given.lines
    opposite: str | None = None
    for i in lines.near(words, (), min_words=2):
        line = lines.lines[i]
        if "?" in line:
            continue  # a question states nothing
        line_norm = lines.words[i]
        common = words & line_norm
        # a word of the claim whose opposite the line holds (and not the word itself); a line that says
        # what is to happen once something holds ("when everything works, delete the old code") states no fact
        flipped = {w for w in words - line_norm if _OPPOSITE.get(w, set()) & (line_norm - words)}
        if flipped and (_CONDITIONAL.search(line) or not _opposed_as_written(claim.text, line)):
            continue  # ("drops" and "write" are opposite only through their synonym groups: remove / add)
        if flipped:
            if len(common) >= 3 and len(common) / max(1, len(words - flipped)) >= 0.6 and \
                    len(common) / len(words | line_norm) >= 0.25:
                opposite = opposite or line
            continue
        if len(common) < 3 or len(common) / len(words) < 0.6 or len(common) / len(words | line_norm) < 0.4:
            continue
        line_plain, line_neg = _polarity(line)
        turned = (claim_plain & line_neg) | (claim_neg & line_plain)
        if len(turned) < 2:
            return None  # stated the same way somewhere
        opposite = opposite or line
    if opposite is not None:
        return Contradiction("negation", claim.text[:200], opposite[:200], opposite[:200])
    return None


def _state_conflict(claim: Claim, given: SourceText) -> Contradiction | None:
    found = state_conflict(claim, getattr(given, "events", ()))
    return Contradiction("state", found.claimed, found.given, found.evidence) if found is not None else None


def find_contradiction(claim: Claim, given: SourceText) -> Contradiction | None:
    """The first contradiction between ``claim`` and ``given`` (see module docs), or None."""
    for check in (_state_conflict, _number_conflict, _version_conflict, _path_conflict, _name_conflict,
                  _reversal_conflict, _swap_conflict):
        found = check(claim, given)
        if found is not None:
            return found
    if _direction_agrees(claim, given):
        return None  # "A, not B" stated the same way: its "not" is no negation of the span
    return _negation_conflict(claim, given)


def _direction_agrees(claim: Claim, given: SourceText) -> bool:
    for direction in _directions(claim.text):
        for i in given.lines.near(direction[0] | direction[1], (), min_words=2):
            if any(_overlap(direction, other) == "agree" for other in _directions(given.lines.lines[i])):
                return True
    return False


# --------------------------------------------------------------------------- the labelled set

CONTRADICTION_LABELS: tuple[str, ...] = ("supported", "contradicted", "unsupported")
LABEL_FIELDS: tuple[str, ...] = ("id", "session", "compaction_index", "claim", "origin", "source_id", "edit", "label",
                                 "evidence", "split", "notes")


def load_contradiction_labels(path: str | Any) -> Any:
    """The labelled claims (``datasets/labels/contradictions.jsonl``) as a DataFrame; a malformed line
    raises :class:`pimem.errors.LabelFormatError` naming file and line."""
    import os

    file = os.fspath(path)
    rows = []
    for where, row in labelled_rows(file, LABEL_FIELDS):
        if row["label"] not in CONTRADICTION_LABELS:
            raise LabelFormatError(f"{where}: label {row['label']!r} is not one of {list(CONTRADICTION_LABELS)}")
        if row["split"] not in ("tune", "heldout"):
            raise LabelFormatError(f"{where}: split must be 'tune' or 'heldout'")
        rows.append(row)
    if not rows:
        raise LabelFormatError(f"{file}: no labelled claims")
    return frame(rows)
