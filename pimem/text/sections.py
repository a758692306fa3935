"""Parse compaction and branch summaries into the sections of Pi's template.

Pi 0.87.1 asks the model for this layout (``SUMMARIZATION_PROMPT`` and
``UPDATE_SUMMARIZATION_INSTRUCTIONS`` in ``core/compaction/compaction.js``)::

    ## Goal / ## Constraints & Preferences / ## Progress (### Done, ### In Progress,
    ### Blocked) / ## Key Decisions / ## Next Steps / ## Critical Context

A branch summary (``branch-summarization.js``) has the same layout without *Critical Context*
and starts with a fixed preamble. A stored compaction summary is::

    model text
    [+ "\\n\\n---\\n\\n**Turn Context (split turn):**\\n\\n" + turn-prefix text]
    [+ "\\n\\n<read-files>\\n...\\n</read-files>"] [+ "\\n\\n<modified-files>\\n...\\n</modified-files>"]

where the turn-prefix text follows ``TURN_PREFIX_SUMMARIZATION_PROMPT`` (## Original Request,
## Progress So Far, ## Context Needed to Continue).

Heading rules (documented, deterministic):

* CRLF and lone CR become LF before anything else.
* A heading is a Markdown ATX line (``#`` to ``######``). A line that is bold and nothing else
  (``**Goal**`` or ``**Goal:**``) is a heading too when the summary has no ATX heading at all, or
  when its title names a template section; otherwise it is content of the enclosing section.
  A plain line ``Goal:`` is a heading only when it names a template section exactly.
* Titles are normalized: leading numbering (``1.``, ``2)``) and Markdown emphasis are dropped,
  ``&`` reads ``and``, case and spacing are folded, and a trailing ``(...)`` or ``: ...`` qualifier
  is ignored for matching.
* A normalized title equal to a section's name is an exact match; one equal to a known alias
  (``Key Decisions Made``, ``User Preferences``, ``Completed Work`` ...) or starting with the name or
  an alias followed by a qualifier (``(...)``, ``: ...``, ``- ...``) is a *renamed* match, reported in the conformance report.
* A first level-1 heading that names no section is the summary's *title*, not an extra section.
* A section's text runs to the next heading of the same or a higher level; a parent section
  (``Progress``) therefore includes its subsections.
* Empty: no text after removing sub-headings, bullets, checkboxes and bracketed template
  placeholders. ``(none)`` is not empty; it is recorded in ``none_sections``.

This is the one summary parser of the package: :func:`section_items` (the items of each section)
is what the extractive summarizer reads previous summaries with, and :func:`summarizer_text` (a
stored summary without Pi's file blocks) is the only text the drift measures score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pimem.base.memo import memoised
from pimem.errors import ArgumentTypeError, ConfigurationError

BRANCH_SUMMARY_PREAMBLE = (
    "The user explored a different conversation branch before returning here.\n"
    "Summary of that exploration:\n\n"
)
SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"

# canonical key -> display title (the template's own words)
SECTION_TITLES: dict[str, str] = {
    "goal": "Goal",
    "constraints": "Constraints & Preferences",
    "progress": "Progress",
    "done": "Done",
    "in_progress": "In Progress",
    "blocked": "Blocked",
    "key_decisions": "Key Decisions",
    "next_steps": "Next Steps",
    "critical_context": "Critical Context",
}
TURN_SECTION_TITLES: dict[str, str] = {
    "original_request": "Original Request",
    "progress_so_far": "Progress So Far",
    "context_needed": "Context Needed to Continue",
}
COMPACTION_SECTIONS: tuple[str, ...] = tuple(SECTION_TITLES)
BRANCH_SECTIONS: tuple[str, ...] = tuple(k for k in SECTION_TITLES if k != "critical_context")
TURN_SECTIONS: tuple[str, ...] = tuple(TURN_SECTION_TITLES)

# Renamed forms seen in real model output (normalized titles).
SECTION_ALIASES: dict[str, tuple[str, ...]] = {
    "goal": ("goals", "objective", "objectives", "overall goal", "main goal", "current goal"),
    "constraints": (
        "constraints",
        "preferences",
        "user preferences",
        "constraints and requirements",
        "requirements",
        "user constraints",
    ),
    "progress": ("status", "progress summary", "current progress"),
    "done": ("completed", "completed work", "completed tasks", "work completed", "completed work packages"),
    "in_progress": ("current task", "current work", "ongoing", "in-progress", "work in progress"),
    "blocked": ("blockers", "blocking issues", "issues"),
    "key_decisions": ("decisions", "key decisions made", "decisions made", "design decisions"),
    "next_steps": ("next step", "todo", "to do", "remaining work", "remaining steps", "upcoming"),
    "critical_context": ("context", "important context", "key context", "key files", "reference"),
    "original_request": ("request", "user request"),
    "progress_so_far": ("progress",),
    "context_needed": ("context needed", "context"),
}

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+)$")  # the title's closing #s are removed by _atx
_BOLD_LINE = re.compile(r"^[ \t]*(?:\*\*|__)(.+?)(?:\*\*|__)[ \t]*:?[ \t]*$")
_COLON_LINE = re.compile(r"^[ \t]*([A-Za-z][A-Za-z &/-]{1,40}):[ \t]*$")
_NUMBERING = re.compile(r"^\s*(?:\d+|[ivx]+|[a-z])[.)]\s+", re.I)
_FILE_BLOCK = {
    # the lines inside are stripped one by one, so the pattern needs no whitespace of its own
    # (surrounding whitespace classes made it cubic on a long unclosed block)
    "read": re.compile(r"<read-files>(.*?)</read-files>", re.S),
    "modified": re.compile(r"<modified-files>(.*?)</modified-files>", re.S),
}
_SPLIT_TURN = re.compile(r"\n[ \t]*-{3,}[ \t]*\n+[ \t]*\*\*Turn Context \(split turn\):?\*\*:?[ \t]*\n", re.I)
_QUALIFIER = re.compile(r"^\s*(?:[(:\[]|[-\u2013\u2014]\s)")
_PLACEHOLDER = re.compile(r"^\[[^\]]*\]$")
_NONE = re.compile(r"^\(?\s*(none|n/a|nothing|none yet|none mentioned)\s*\)?\.?$", re.I)


def normalize_text(text: str) -> str:
    """CRLF / CR to LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@memoised(1 << 12)
def normalize_title(title: str) -> str:
    """Fold a heading title for matching (see module docs; memoised: the template's own titles are
    folded again for every heading)."""
    t = title.strip()
    t = re.sub(r"[*_`]+", "", t)
    t = _NUMBERING.sub("", t)
    t = t.replace("&", " and ")
    t = re.sub(r"\s+", " ", t).strip().lower()
    return t.rstrip(":").strip()


@memoised(1 << 12)
def _match_title(norm: str, keys: tuple[str, ...]) -> tuple[str | None, bool]:
    """Return (canonical key, exact) for a normalized title, or (None, False)."""
    titles = {**SECTION_TITLES, **TURN_SECTION_TITLES}
    for key in keys:
        if norm == normalize_title(titles[key]):
            return key, True
    # prefix / alias matches, longest candidate first so "in progress" beats "progress"
    candidates: list[tuple[str, str]] = []
    for key in keys:
        candidates.append((normalize_title(titles[key]), key))
        candidates.extend((a, key) for a in SECTION_ALIASES.get(key, ()))
    candidates.sort(key=lambda c: -len(c[0]))
    for name, key in candidates:
        if norm == name:
            return key, False
    for name, key in candidates:
        if norm.startswith(name) and _QUALIFIER.match(norm[len(name) :]):
            return key, False
    return None, False


@dataclass
class Heading:
    """One heading line found in a summary."""

    level: int
    title: str
    key: str | None
    exact: bool
    line: int
    style: str  # "atx" | "bold" | "colon"


@dataclass
class Conformance:
    """How far a summary follows the template.

    ``missing``: template sections not found; ``extra``: headings naming no section;
    ``renamed``: (title, section) pairs matched by alias or prefix; ``reordered``: True when the
    sections found are out of template order (``order_inversions`` adjacent inversions);
    ``empty``: sections found with no content; ``duplicated``: sections found more than once;
    ``score``: found ÷ expected.
    """

    expected: tuple[str, ...]
    found: list[str]
    missing: list[str]
    extra: list[str]
    renamed: list[tuple[str, str]]
    reordered: bool
    order_inversions: int
    empty: list[str]
    duplicated: list[str]
    none_sections: list[str]
    files_block_present: bool
    score: float

    @property
    def is_conformant(self) -> bool:
        """Every section present under its own name, in order, none empty, nothing extra."""
        return not (self.missing or self.extra or self.renamed or self.reordered or self.empty)

    def as_dict(self) -> dict:
        return {
            "n_expected": len(self.expected),
            "n_found": len(self.found),
            "missing": list(self.missing),
            "extra": list(self.extra),
            "renamed": [f"{t} -> {k}" for t, k in self.renamed],
            "reordered": self.reordered,
            "order_inversions": self.order_inversions,
            "empty": list(self.empty),
            "duplicated": list(self.duplicated),
            "conformance": self.score,
            "conformant": self.is_conformant,
            "files_block_present": self.files_block_present,
        }


@dataclass
class SummarySections:
    """A parsed summary: template sections, split-turn part, file blocks and conformance.

    Args:
        text: the summary as given.
        kind: ``"compaction"`` or ``"branch"``.
        body: the history part: without the branch preamble, the file blocks and the split-turn part.
        title: the body's level-1 heading when it names no section, else None.
        headings: every heading found in the body, in order.
        sections: template section key → its text (sub-headings included).
        extra_sections: the text under headings that name no template section, by title.
        preamble: whether the text starts with Pi's branch-summary preamble.
        turn_context: the split-turn part, or None.
        turn_sections: the split-turn part's sections, by key.
        read_files: the ``<read-files>`` block's paths (None without the block).
        modified_files: the ``<modified-files>`` block's paths (None without the block).
        conformance: how the body follows its template.
        turn_conformance: how the split-turn part follows its template (None without one).
        notes: what else is odd (no preamble on a branch summary, Pi's "No prior history." placeholder).
        own_sections: section key → the text under its heading before any sub-heading.
        turn_own_sections: the same for the split-turn part.
    """

    text: str
    kind: str  # "compaction" | "branch"
    body: str
    title: str | None
    headings: list[Heading]
    sections: dict[str, str]
    extra_sections: dict[str, str]
    preamble: bool
    turn_context: str | None
    turn_sections: dict[str, str]
    read_files: list[str] | None
    modified_files: list[str] | None
    conformance: Conformance
    turn_conformance: Conformance | None = None
    notes: list[str] = field(default_factory=list)
    own_sections: dict[str, str] = field(default_factory=dict)
    turn_own_sections: dict[str, str] = field(default_factory=dict)

    @property
    def written_text(self) -> str:
        """What the summarizer wrote: the body and the split-turn part, without Pi's file blocks."""
        if self.turn_context is None:
            return self.body
        return self.body + SPLIT_TURN_SEPARATOR + self.turn_context

    def get(self, key: str, default: str = "") -> str:
        """Text of a section by canonical key (``"goal"``, ``"next_steps"`` ...)."""
        return self.sections.get(key, default)

    @property
    def goal(self) -> str:
        return self.get("goal")

    @property
    def files_listed(self) -> list[str]:
        """Read and modified files from the blocks (empty when there are none)."""
        return list(self.read_files or []) + list(self.modified_files or [])


def _split_file_blocks(text: str) -> tuple[str, list[str] | None, list[str] | None]:
    lists: dict[str, list[str] | None] = {"read": None, "modified": None}
    for name, rx in _FILE_BLOCK.items():
        matches = list(rx.finditer(text))
        if matches:
            last = matches[-1]
            lists[name] = [ln.strip() for ln in last.group(1).split("\n") if ln.strip()]
            text = text[: last.start()] + text[last.end() :]
    return text.rstrip(), lists["read"], lists["modified"]


@memoised(1 << 15)
def _atx(line: str) -> tuple[int, str] | None:
    """(level, title) of a Markdown ``#`` heading, or None.

    A closing run of ``#`` is dropped only after white space (CommonMark), so "C#" stays "C#".
    Done in Python: trailing-whitespace classes in one pattern backtrack cubically on long lines.
    """
    m = _ATX.match(line)
    if m is None:
        return None
    title = m.group(2).rstrip(" \t")
    without_hashes = title.rstrip("#")
    if without_hashes != title and (not without_hashes or without_hashes[-1] in " \t"):
        title = without_hashes.rstrip(" \t")
    if not title:
        return None
    return len(m.group(1)), title


def _find_headings(lines: list[str], keys: tuple[str, ...]) -> list[Heading]:
    has_atx = any(_atx(ln) for ln in lines)
    found: list[Heading] = []
    in_fence = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        atx = _atx(line)
        if atx:
            level, title = atx
            key, exact = _match_title(normalize_title(title), keys)
            found.append(Heading(level, title.strip(), key, exact, i, "atx"))
            continue
        m = _BOLD_LINE.match(line)
        if m:
            title = m.group(1)
            key, exact = _match_title(normalize_title(title), keys)
            if not has_atx or (key is not None and exact):
                # bold titles sit below any ATX level so they nest inside Markdown sections
                found.append(Heading(2 if not has_atx else 7, title.strip(), key, exact, i, "bold"))
            continue
        m = _COLON_LINE.match(line)
        if m:
            key, exact = _match_title(normalize_title(m.group(1)), keys)
            if key is not None and exact:
                found.append(Heading(2 if not has_atx else 7, m.group(1).strip(), key, exact, i, "colon"))
    return found


def _content_is_empty(text: str) -> bool:
    return not any(map(_line_has_content, text.split("\n")))


@memoised(1 << 15)
def _line_has_content(line: str) -> bool:
    """A line of a section that is neither blank, a heading, nor an empty item or placeholder."""
    s = line.strip()
    if not s or _atx(line) or _BOLD_LINE.match(line):
        return False
    s = re.sub(r"^(?:[-*+]|\d+[.)])\s*", "", s)
    s = re.sub(r"^\[[ xX]?\]\s*", "", s).strip()
    return bool(s and not _PLACEHOLDER.match(s))


def _enclosed_by_section(headings: list[Heading], idx: int) -> bool:
    """True when a template-section heading encloses ``headings[idx]``."""
    level = headings[idx].level
    for prev in reversed(headings[:idx]):
        if prev.level < level:
            if prev.key is not None:
                return True
            level = prev.level
    return False


def _parse_block(
    text: str, keys: tuple[str, ...]
) -> tuple[str | None, list[Heading], dict[str, str], dict[str, str], Conformance, dict[str, str]]:
    lines = text.split("\n")
    headings = _find_headings(lines, keys)
    title: str | None = None
    if headings and headings[0].level == 1 and headings[0].key is None:
        title = headings[0].title
    sections: dict[str, str] = {}
    extra: dict[str, str] = {}
    order: list[str] = []
    duplicated: list[str] = []
    renamed: list[tuple[str, str]] = []
    own_text: dict[str, str] = {}
    for idx, h in enumerate(headings):
        end = len(lines)
        for later in headings[idx + 1 :]:
            if later.level <= h.level:
                end = later.line
                break
        content = "\n".join(lines[h.line + 1 : end]).strip("\n")
        own_end = headings[idx + 1].line if idx + 1 < len(headings) else len(lines)
        own = "\n".join(lines[h.line + 1 : min(end, own_end)])
        if h.key is None:
            if h is headings[0] and title is not None:
                continue
            if _enclosed_by_section(headings, idx):
                continue  # a sub-heading inside a template section is that section's content
            name = h.title
            extra[name] = (extra[name] + "\n" + content) if name in extra else content
            continue
        own_text[h.key] = own_text.get(h.key, "") + "\n" + own
        if h.key in sections:
            duplicated.append(h.key)
            sections[h.key] = sections[h.key] + "\n" + content
        else:
            sections[h.key] = content
            order.append(h.key)
        if not h.exact:
            renamed.append((h.title, h.key))
    # A Progress parent that is absent while its subsections exist is still "missing" by name.
    expected_pos = {k: i for i, k in enumerate(keys)}
    positions = [expected_pos[k] for k in order]
    inversions = sum(1 for a, b in zip(positions, positions[1:]) if b < a)
    empty = [k for k in order if _content_is_empty(sections[k])]
    none_sections = [
        k
        for k in order
        if any(_is_none_line(ln) for ln in own_text[k].split("\n") if ln.strip())
    ]
    missing = [k for k in keys if k not in sections]
    conf = Conformance(
        expected=keys,
        found=order,
        missing=missing,
        extra=list(extra),
        renamed=renamed,
        reordered=inversions > 0,
        order_inversions=inversions,
        empty=empty,
        duplicated=sorted(set(duplicated)),
        none_sections=none_sections,
        files_block_present=False,
        score=(len(keys) - len(missing)) / len(keys) if keys else 1.0,
    )
    return title, headings, sections, extra, conf, {k: v.strip("\n") for k, v in own_text.items()}


@memoised(1 << 14)
def _is_none_line(line: str) -> bool:
    """A line that says a section holds nothing (``- (none)``, ``N/A``...)."""
    return bool(_NONE.match(re.sub(r"^[-*+]\s*", "", line.strip())))


def parse_summary(text: str, kind: str = "auto") -> SummarySections:
    """Parse a stored summary into template sections with a conformance report.

    ``kind`` is ``"compaction"``, ``"branch"`` or ``"auto"`` (branch when the text starts
    with Pi's branch preamble).

    Args:
        text: the stored summary.
        kind: ``"compaction"``, ``"branch"`` or ``"auto"``.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"summary must be a string, not {type(text).__name__}")
    norm = normalize_text(text)
    preamble = norm.startswith(BRANCH_SUMMARY_PREAMBLE) or norm.startswith(BRANCH_SUMMARY_PREAMBLE.rstrip("\n"))
    if kind == "auto":
        kind = "branch" if preamble else "compaction"
    if kind not in ("compaction", "branch"):
        raise ConfigurationError(f"kind must be 'compaction', 'branch' or 'auto', not {kind!r}")
    notes: list[str] = []
    rest = norm
    if preamble:
        rest = rest[len(BRANCH_SUMMARY_PREAMBLE.rstrip("\n")) :].lstrip("\n")
    elif kind == "branch":
        notes.append("branch summary without Pi's preamble")
    rest, read_files, modified_files = _split_file_blocks(rest)
    turn_text: str | None = None
    m = _SPLIT_TURN.search(rest)
    if m:
        body, turn_text = rest[: m.start()], rest[m.end() :].strip("\n")
    else:
        body = rest
    body = body.strip("\n")
    keys = COMPACTION_SECTIONS if kind == "compaction" else BRANCH_SECTIONS
    title, headings, sections, extra, conf, own = _parse_block(body, keys)
    conf.files_block_present = read_files is not None or modified_files is not None
    turn_sections: dict[str, str] = {}
    turn_conf: Conformance | None = None
    turn_own: dict[str, str] = {}
    if turn_text is not None:
        _, _, turn_sections, _, turn_conf, turn_own = _parse_block(turn_text, TURN_SECTIONS)
    if body.strip() == "No prior history.":
        notes.append("history part is Pi's 'No prior history.' placeholder")
    return SummarySections(
        text=text,
        kind=kind,
        body=body,
        title=title,
        headings=headings,
        sections=sections,
        extra_sections=extra,
        preamble=preamble,
        turn_context=turn_text,
        turn_sections=turn_sections,
        read_files=read_files,
        modified_files=modified_files,
        conformance=conf,
        turn_conformance=turn_conf,
        notes=notes,
        own_sections=own,
        turn_own_sections=turn_own,
    )


# --------------------------------------------------------------------------- what the summarizer wrote

# The newlines before a block are matched only from the first one of a run (the lookbehind): starting
# inside a run of newlines would rescan it from every position, quadratic in a flood of blank lines.
_ANY_FILE_BLOCK = re.compile(r"(?<!\n)\n*<(read-files|modified-files)>\n?.*?</\1>[ \t]*", re.S)


def parsed_summary(text: str, kind: str = "auto") -> SummarySections:
    """:func:`parse_summary`, memoised for readers that only read the result (it is shared: do not
    change it). The summarizer that reads its previous summary and the measures that read every
    summary of a run meet the same texts."""
    if not isinstance(text, str):
        return parse_summary(text, kind)  # its error
    if kind == "auto":  # resolved first, so that both spellings share a parse
        head = normalize_text(text[: 2 * len(BRANCH_SUMMARY_PREAMBLE)])  # CRLF at most halves it
        kind = "branch" if head.startswith(BRANCH_SUMMARY_PREAMBLE.rstrip("\n")) else "compaction"
    return _parsed_summary(text, kind)


@memoised(256)
def _parsed_summary(text: str, kind: str) -> SummarySections:
    return parse_summary(text, kind)


def summarizer_text(summary: str) -> str:
    """The text a summarizer wrote: a stored summary without ``<read-files>``/``<modified-files>`` blocks.

    ``compact()`` appends those blocks from its own file operations, so any summarizer (even one
    that answers nothing) gets them; a model that copies them from the previous summary copies
    Pi's text. Content measures read this text only; the file lists are a pipeline check. The lines
    Claude Code puts around its model's summary (an imported compaction: "This session is being
    continued…", "…read the full transcript at: …", "Please continue the conversation…") go too.
    CRLF / CR become LF; trailing white space is dropped.
    """
    if not isinstance(summary, str):
        raise ArgumentTypeError(f"summary must be a string, not {type(summary).__name__}")
    text = _ANY_FILE_BLOCK.sub("", normalize_text(summary))
    if "This session is being continued" in text or "read the full transcript at" in text:
        text = _CLAUDE_CODE_WRAPPER.sub("", text).lstrip("\n")
    return text.rstrip()


# the lines Claude Code puts around its model's summary (its own, like Pi's file blocks): never the summarizer's
_CLAUDE_CODE_WRAPPER = re.compile(
    r"^This session is being continued from a previous conversation that ran out of context\.[^\n]*\n?|"
    r"^If you need specific details from before compaction \(like exact code snippets, error messages, or content "
    r"you generated\), read the full transcript at: [^\n]*\n?|"
    r"^Please continue the conversation from where we left (?:it )?off without asking the user any further "
    r"questions\.[^\n]*\n?", re.M)


# --------------------------------------------------------------------------- items per section

ITEM_KEYS: tuple[str, ...] = COMPACTION_SECTIONS + TURN_SECTIONS + ("other",)
_TABLE_RULE = re.compile(r"^\s*\|?[-:| ]+\|?\s*$")
_ITEM_MARK = re.compile(r"^(?:[-*+]\s+)?(?:\[[ xX]\]\s+)?(?:\d+[.)]\s+)?")


def _items(text: str) -> list[str]:
    return [item for item in map(_line_item, text.split("\n")) if item is not None]


@memoised(1 << 15)
def _line_item(line: str) -> str | None:
    """The item one line of a section holds, or None (memoised: summaries repeat their lines)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("```") or (_TABLE_RULE.match(stripped) and "-" in stripped):
        return None
    atx = _atx(line)
    item = atx[1].strip() if atx else _ITEM_MARK.sub("", stripped, count=1).strip()
    if not item or _NONE.match(item) or _PLACEHOLDER.match(item):
        return None
    return item


def section_items(summary: str | SummarySections) -> dict[str, list[str]]:
    """The items of each template section: one per non-empty line, bullets, checkboxes and numbering removed.

    Keys: every compaction section (``progress`` holds only the lines above its subsections), the
    split-turn sections, and ``other`` (text before the first heading and sections that name no
    template section, as ``Title: item``; the summary's own title is dropped). Sub-headings inside a
    section become items; ``(none)`` lines, placeholders, fences and table rules are dropped; file
    blocks are never read. Used by the extractive summarizer to read previous summaries and by the
    drift measures, so both read a summary the same way.
    """
    # a string is read with every compaction section (a branch summary may carry Critical Context too)
    parsed = summary if isinstance(summary, SummarySections) else parsed_summary(summary, kind="compaction")
    out: dict[str, list[str]] = {k: [] for k in ITEM_KEYS}
    for key, text in parsed.sections.items():
        out[key] = _items(parsed.own_sections.get(key, "") if key == "progress" else text)
    for key, text in parsed.turn_sections.items():
        out[key] = _items(text)
    lines = parsed.body.split("\n")
    first = parsed.headings[0].line if parsed.headings else len(lines)
    if parsed.body.strip() != "No prior history.":  # Pi's placeholder, not summarizer text
        out["other"] = _items("\n".join(lines[:first]))
    for title, text in parsed.extra_sections.items():
        out["other"].extend(f"{title}: {item}" for item in _items(text))
    if parsed.turn_context is not None and not parsed.turn_sections:
        out["other"].extend(_items(parsed.turn_context))
    return out


_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s*)?")


def plain_line(line: str) -> str:
    """A summary line as plain words: no list mark or checkbox, a table row's cells joined by " ; "
    (its separator row empty), no bold markers outside code spans."""
    t = _LIST_MARK.sub("", line)
    if t.lstrip().startswith("|"):
        cells = [c.strip() for c in t.strip().strip("|").split("|")]
        t = " ; ".join(c for c in cells if c and not re.fullmatch(r":?-{2,}:?", c))
    return _EMPHASIS.sub(lambda m: m.group(0) if m.group(0).startswith("`") else "", t).strip()


_EMPHASIS = re.compile(r"`[^`\n]*`|\*\*|__")  # a code span is kept as written (``__init__``, ``**kwargs``)
