"""Word normalisation for code sessions: light stems, identifier splitting and common synonyms.

Used where a summary's wording is compared with the conversation's (faithfulness, paraphrase-tolerant
matching). Three steps, each small enough to read:

* **identifier splitting**: ``AgentSession`` → ``agent session``, ``max_tokens`` → ``max tokens``,
  ``settings-manager.ts`` → ``settings manager ts``; the whole name is kept too;
* **stems**: a suffix stripper for English inflections (``-ing``, ``-ed``, ``-es``, ``-s``, ``-ly``,
  ``-ation``...), conservative on short words (``class`` stays, ``uses`` → ``use``);
* **synonyms**: :data:`SYNONYMS`, groups of words that code sessions use for one action or thing
  (``add / create / introduce``, ``remove / delete / drop``, ``fix / repair / resolve``...); each word
  maps to the group's first word.

What it rewards and how it fails: a paraphrase that keeps the names and uses common synonyms is read as
the same words; a paraphrase through rarer words, or that names things differently, is not. The synonym
groups merge words that are not always interchangeable (``move`` and ``rename``), so a matcher built on it
trades some precision for recall.
"""

from __future__ import annotations

import re

from pimem.base.memo import memoised

__all__ = ["SYNONYMS", "split_identifier", "stem", "canonical_word", "normal_words", "STOPWORDS"]

STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto as is are was were be been
    being it its this that these those there here we you i he she they them our your my me us do does did
    done so too very can could would should will shall may might must just also any all some each every both
    few more most other such own same than when where which who whom why how what about above below after
    before again further once up down out off over under while have has had having let lets now want need
    like get got use used using make made sure please ok okay via per etc one two""".split()
)

# groups of words code sessions use for one thing; each maps to its first word
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("add", "create", "introduce", "implement", "write", "new", "insert", "append"),
    ("remove", "delete", "drop", "eliminate", "strip", "erase", "discard"),
    ("change", "modify", "update", "edit", "adjust", "alter", "tweak", "revise", "refine"),
    ("fix", "repair", "resolve", "correct", "patch", "solve"),
    ("move", "relocate", "rename", "reorganize", "reorganise", "restructure", "migrate"),
    ("refactor", "rework", "rewrite", "cleanup", "clean", "tidy", "simplify"),
    ("test", "check", "verify", "validate", "confirm", "assert"),
    ("run", "execute", "invoke", "launch", "start", "call"),
    ("error", "failure", "fail", "exception", "crash", "bug", "broken"),
    ("file", "module", "source"),
    ("function", "method", "helper", "routine", "func", "fn"),
    ("folder", "directory", "dir"),
    ("document", "doc", "docs", "documentation", "readme"),
    ("config", "configuration", "setting", "settings", "option", "options"),
    ("show", "display", "render", "print", "output"),
    ("keep", "preserve", "retain", "maintain"),
    ("prefer", "want", "like", "favor", "favour"),
    ("avoid", "prevent", "skip"),
    ("decide", "choose", "chose", "chosen", "pick", "select", "opt"),
    ("user", "developer"),
    ("finish", "complete", "completed", "done", "finished"),
    ("next", "todo", "pending", "remaining"),
    ("read", "load", "open", "parse"),
    ("save", "store", "persist", "write"),
    ("big", "large", "huge"),
    ("small", "little", "tiny", "short"),
    ("fast", "quick", "speed"),
    ("use", "utilize", "utilise", "employ", "adopt"),
    ("support", "handle", "accept"),
    ("allow", "enable", "permit", "let"),
    ("disable", "turn off"),
    ("argument", "arg", "parameter", "param"),
    ("type", "interface"),
    ("command", "cmd"),
)
_CANONICAL: dict[str, str] = {}
for _group in SYNONYMS:
    for _w in _group:
        _CANONICAL.setdefault(_w, _group[0])

_CAMEL_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_$'-]*[A-Za-z0-9]|[A-Za-z]")


def split_identifier(name: str) -> list[str]:
    """The words of a code name: camelCase, PascalCase, snake_case, kebab-case and dotted names split,
    lower-cased (``AgentSession.setModel`` → ``agent session set model``)."""
    out: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", name):
        out.extend(p.lower() for p in _CAMEL_PARTS.findall(part))
    return out


_SUFFIXES = (("ational", "ate"), ("ization", "ize"), ("isation", "ize"), ("ations", "ate"), ("ation", "ate"),
             ("ments", ""), ("ment", ""), ("ings", ""), ("ing", ""), ("edly", ""), ("ied", "y"), ("ies", "y"),
             ("ed", ""), ("ly", ""), ("es", ""), ("s", ""))


@memoised(65536)
def stem(word: str) -> str:
    """A light English stem: the first matching inflectional suffix off, the stem kept at 3+ letters;
    ``ss`` and ``us`` endings stay (``class``, ``status``); a doubled final consonant is undone
    (``running`` → ``run``); a dropped ``e`` is not restored (``created`` → ``creat``, as ``create`` → ``creat``)."""
    w = word.lower()
    if len(w) <= 3 or w.endswith(("ss", "us", "is")):
        return w
    for suffix, repl in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            base = w[: len(w) - len(suffix)] + repl
            if suffix in ("ing", "ed", "ings") and len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]
            return _drop_e(base)
    return _drop_e(w)


def _drop_e(w: str) -> str:
    return w[:-1] if len(w) > 4 and w.endswith("e") and not w.endswith("ee") else w


@memoised(65536)
def canonical_word(word: str) -> str:
    """The word's synonym group (its first word) if it has one, else its stem."""
    w = word.lower()
    if w in _CANONICAL:
        return stem(_CANONICAL[w])
    s = stem(w)
    for form in (s, s + "e"):
        if form in _CANONICAL:
            return stem(_CANONICAL[form])
    return s


def normal_words(text: str, *, synonyms: bool = True) -> set[str]:
    """The content words of a text, normalised: code names split into their words (the whole name kept
    too, lower-cased and stemmed), stop words and words under 3 letters dropped, each stemmed and (with
    ``synonyms``) mapped to its synonym group."""
    out: set[str] = set()
    norm = canonical_word if synonyms else stem
    for token in _WORD.findall(text):
        parts = split_identifier(token)
        if len(parts) > 1:
            whole = token.lower()
            if len(whole) >= 3:
                out.add(stem(whole))
        for p in parts or [token.lower()]:
            if len(p) >= 3 and p not in STOPWORDS and not p.isdigit():
                out.add(norm(p))
    return out
