"""Meta-evaluation: do the measures order rewrites of real summaries as a careful reader would?

For each real compaction (its span, kept tail, later trajectory and the summary the model wrote),
:func:`perturbations` makes rewrites whose order a careful reader sees at a glance:

===================== =================================================================================
rewrite               what it is
===================== =================================================================================
``real``              the summary the model wrote
``wrong_span``        the next compaction's real summary of the same session (a span the summarizer had
                      not seen yet), else a real summary of another session: right project, wrong span
``previous_summary``  the previous compaction's summary handed on unchanged (where there is one). Scored
                      but not in :data:`EXPECTED`: on ``before-compaction.jsonl`` the previous summary
                      holds more of what the session needed later (the API list the update dropped), so
                      a reader's first guess is not the answer
``other_session``     a real summary of another session
``name_dump``         the span's paths, code names, commands and error lines as bullets spread over Pi's
                      template sections, cut at the real summary's length (Pi's token estimate)
``files_only``        Pi's empty template with the span's modified files as its critical context
``empty_template``    Pi's template with ``(none)`` in every section
``truncated_half``    the real summary's first half (by tokens, whole lines)
``truncated_quarter`` its first quarter
``negated``           every decision, preference and constraint line negated ("is" → "is not", "Keep" →
                      "Do not keep", "A instead of B" → "B instead of A"...)
``changed_values``    every number, version and line count changed, one folder of each path and the
                      words of each two-word code name swapped
``shuffled``          the same sections in another order
``paraphrase``        the same facts in other words: emphasis and code marks off, common words replaced
                      (:data:`PARAPHRASES`), "X - Y" bullets rewritten as sentences; names kept
===================== =================================================================================

:data:`EXPECTED` lists the orders: the real summary above every degraded rewrite, the half above the
quarter, the shuffle equal (content measures must not read section order) and the paraphrase within
10% of the real summary. :func:`meta_evaluate` scores every rewrite with every measure
(:func:`pimem.drift.measures.summary_measures`) and :meth:`MetaEvaluation.table` gives, per measure, the
share of pairs ordered as expected with n pairs, n compactions and a cluster-bootstrap interval over
sessions and compactions (:mod:`pimem.drift.intervals`; shown only where a coverage simulation
supports its level). A tie counts as a wrong order for ``>`` pairs. Pairs whose real summary the
measure cannot score (NaN: a compaction with nothing needed later) are left out and counted
(``n_unscorable``); a NaN on the rewrite's side only counts as a wrong order (``n_nan``).

What it shows and what it does not: a measure that fails here can be fooled by a rewrite a reader sees
through; passing here does not make a measure right on summaries that differ in subtler ways. The
rewrites are made by rules, so a measure tuned to these rules can pass without being better: the
paraphrase uses its own word table, not the matcher's synonym groups (:mod:`pimem.text.normalize`), and
the held-out contradiction set (``datasets/labels/``) tests the contradiction rules on edits read by hand.

**Rewrites written by reading** (``datasets/metaeval/rewrites-*.jsonl``, :func:`load_hand_rewrites`): a
careful reader read each real summary and its span and wrote, by hand, rewrites of classes the rules above
cannot make (:data:`HAND_CLASSES`): over-claimed progress (every pending, in-progress or failing item made
done), false results, neutral filler, the user's asks dropped, renamed headings, a short faithful summary of
the whole span and one of its last stretch only. Each states its expected order (:class:`HandRewrite`);
:func:`hand_evaluate` scores them with the real summary and the extracted baseline at the same length
(:func:`extracted_summary`), and :meth:`HandEvaluation.table` gives the share in order per class and pooled
with the two-stage interval. The ``heldout`` split was written first and frozen before any measure changed;
the ``tune`` split is the one the measures were adjusted on; the ``fresh`` split was written later, on other
compactions, and frozen before the measures of its time were run on it; ``fresh2`` likewise, after that.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pimem.base.files import labelled_rows
from pimem.base.js import utf16_len
from pimem.base.tables import Column, Table, frame
from pimem.core.compaction.compaction import build_history_prompt
from pimem.core.llm import SummaryRequest
from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
from pimem.core.session_manager import Session, load_session, migrate_to_current_version
from pimem.sessions.load import load_session as load_any_session
from pimem.drift.intervals import cluster_interval
from pimem.drift.measures import summary_measures
from pimem.drift.needed import needed_later_facts
from pimem.drift.paraphrase import normalized_holds
from pimem.drift.records import CompactionRecord, compaction_records
from pimem.errors import ConfigurationError, LabelFormatError
from pimem.summarizers.extractive import ExtractiveSummarizer
from pimem.text.facts import BARE_FILE, PATH_TOKEN, SummaryIndex, extract_facts
from pimem.text.sections import summarizer_text

__all__ = ["PERTURBATIONS", "EXPECTED", "DEFAULT_MEASURES", "OLD_MEASURES", "PARAPHRASES", "perturbations",
           "MetaEvaluation", "meta_evaluate", "ordered_as_expected", "HAND_CLASSES", "HandRewrite",
           "load_hand_rewrites", "hand_evaluate", "HandEvaluation", "extracted_summary"]

PERTURBATIONS: tuple[str, ...] = ("real", "wrong_span", "previous_summary", "other_session", "name_dump", "files_only", "empty_template",
                                  "truncated_half", "truncated_quarter", "negated", "changed_values", "shuffled",
                                  "paraphrase")

# (a, relation, b): ">" a scores higher, "=" the same, "~" within 10% of a
EXPECTED: tuple[tuple[str, str, str], ...] = (
    ("real", ">", "wrong_span"),
    ("real", ">", "other_session"),
    ("real", ">", "name_dump"),
    ("real", ">", "files_only"),
    ("real", ">", "empty_template"),
    ("real", ">", "truncated_half"),
    ("truncated_half", ">", "truncated_quarter"),
    ("real", ">", "negated"),
    ("real", ">", "changed_values"),
    ("real", "=", "shuffled"),
    ("real", "~", "paraphrase"),
)
TOLERANCE = 0.10

OLD_MEASURES: tuple[str, ...] = ("needed_recall", "needed_recall_all", "fact_recall", "content_sections", "conformance")
DEFAULT_MEASURES: tuple[str, ...] = ("score", "recall_faithful", "faithfulness", "needed_recall", "needed_recall_all",
                                     "fact_recall", "content_sections", "conformance")

EMPTY_TEMPLATE = (
    "## Goal\n(none)\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n### Done\n- [x] (none)\n\n"
    "### In Progress\n- [ ] (none)\n\n### Blocked\n- (none)\n\n## Key Decisions\n- (none)\n\n"
    "## Next Steps\n1. (none)\n\n## Critical Context\n- (none)"
)
_SECTIONS = ("## Goal", "## Constraints & Preferences", "## Progress\n### Done", "### In Progress", "### Blocked",
             "## Key Decisions", "## Next Steps", "## Critical Context")


def _tokens(text: str) -> int:
    return math.ceil(utf16_len(text) / 4)


def _head_lines(text: str, budget: int) -> str:
    out: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = _tokens(line + "\n")
        if used + cost > budget and out:
            break
        out.append(line)
        used += cost
    return "\n".join(out).rstrip()


def _name_dump(record: CompactionRecord, budget: int) -> str:
    facts = [f for f in extract_facts(record.span) if f.kind in ("path", "identifier", "command", "error")]
    buckets: list[list[str]] = [[] for _ in _SECTIONS]
    for i, f in enumerate(facts):
        value = f.surface if f.kind == "error" else f.value
        buckets[i % len(_SECTIONS)].append(f"- `{value}`" if f.kind != "error" else f"- {value}")
    # fill round-robin until the budget: every section gets its share
    taken = [0] * len(_SECTIONS)
    used = sum(_tokens(h + "\n\n") for h in _SECTIONS)
    progress = True
    while progress:
        progress = False
        for k, bucket in enumerate(buckets):
            if taken[k] < len(bucket):
                cost = _tokens(bucket[taken[k]] + "\n")
                if used + cost <= budget:
                    taken[k] += 1
                    used += cost
                    progress = True
    parts = []
    for heading, bucket, n in zip(_SECTIONS, buckets, taken):
        parts.append(heading + "\n" + ("\n".join(bucket[:n]) if n else "- (none)"))
    return "\n\n".join(parts)


def _files_only(record: CompactionRecord) -> str:
    files = "\n".join(f"- {p}" for p in record.modified_files) or "- (none)"
    return EMPTY_TEMPLATE.replace("## Critical Context\n- (none)", "## Critical Context\n" + files)


def _sections_of(text: str) -> list[str]:
    parts = re.split(r"\n(?=#{1,3}\s)", text)
    return [p.strip("\n") for p in parts if p.strip()]


def _shuffled(text: str) -> str:
    parts = _sections_of(text)
    if len(parts) < 2:
        return text
    # a fixed permutation: odd sections first, then even, each reversed
    order = parts[1::2][::-1] + parts[0::2][::-1]
    return "\n\n".join(order)


_DECISION_SECTION = re.compile(r"decision|preference|constraint|prefer|rule|pattern|testing", re.I)
_MARKERS = re.compile(r"\b(?:instead of|rather than|must|should|always|never|only|prefer\w*|keep|avoid|decid\w*|"
                      r"use[sd]?|don't|do not|no)\b", re.I)
_NEGATIONS: tuple[tuple[str, str], ...] = (
    (r"\b(is|are|was|were|must|should|can|will|does|do)\b(?! not)", r"\1 not"),
    (r"\b(prefers|wants|uses|keeps|avoids|needs)\b", r"does not \1"),
    (r"^(\W*)(Keep|Use|Add|Create|Run|Prefer|Avoid|Remove|Make|Always|Read|Verify|Check|Update)\b", r"\1Do not \2"),
)


def _swap_instead(line: str) -> str | None:
    m = re.search(r"(`[^`]+`|[\w./-]+(?:\s[\w./-]+)?)\s+(instead of|rather than)\s+(`[^`]+`|[\w./-]+(?:\s[\w./-]+)?)",
                  line)
    if not m:
        return None
    return line[: m.start()] + f"{m.group(3)} {m.group(2)} {m.group(1)}" + line[m.end():]


def _negate_line(line: str) -> str:
    swapped = _swap_instead(line)
    if swapped is not None:
        return swapped
    if re.search(r"\b(?:not|no|never|don't)\b", line, re.I):
        out = re.sub(r"\b(?:not|never)\s+", "", line, count=1, flags=re.I)
        out = re.sub(r"\bdon't\s+", "", out, count=1, flags=re.I)
        out = re.sub(r"\bno\s+", "some ", out, count=1, flags=re.I)
        return out
    for rx, repl in _NEGATIONS:
        out, n = re.subn(rx, repl, line, count=1, flags=re.I if "^" not in rx else 0)
        if n:
            return out
    m = re.match(r"^(\s*(?:[-*+]|\d+[.)])\s+(?:\*\*)?)(.*)$", line)
    if m:
        return f"{m.group(1)}Not: {m.group(2)}"
    return "Not: " + line


def _negated(text: str) -> str:
    lines = text.split("\n")
    section = ""
    changed = 0
    out = []
    in_fence = False
    for line in lines:
        s = line.strip()
        if s.startswith("```"):
            in_fence = not in_fence
        if re.match(r"#{1,6}\s", s):
            section = s
            out.append(line)
            continue
        content = s and not in_fence and not s.startswith("|") and re.search(r"[A-Za-z]{3}", s)
        if content and (_DECISION_SECTION.search(section) or _MARKERS.search(s)):
            out.append(_negate_line(line))
            changed += 1
        else:
            out.append(line)
    if not changed:  # no decision line: negate the first three content lines
        for i, line in enumerate(out):
            if changed >= 3:
                break
            if line.strip() and not line.strip().startswith(("#", "|", "```")):
                out[i] = _negate_line(line)
                changed += 1
    return "\n".join(out)


def _bump_number(m: re.Match[str]) -> str:
    digits = m.group(0).replace(",", "")
    value = int(digits)
    new = value + max(1, round(value * 0.37)) if value >= 3 else value + 2
    return f"{new:,}" if "," in m.group(0) else str(new)


_FOLDER_SWAP = {"core": "utils", "utils": "core", "src": "lib", "lib": "src", "modes": "views", "docs": "guides",
                "tests": "spec", "test": "spec", "packages": "modules", "components": "widgets"}


def _change_path(m: re.Match[str]) -> str:
    path = m.group(0)
    parts = path.split("/")
    if len(parts) < 2:
        stem, dot, ext = path.rpartition(".")
        return f"{stem}-old.{ext}" if dot else path
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _FOLDER_SWAP:
            parts[i] = _FOLDER_SWAP[parts[i]]
            return "/".join(parts)
    name, dot, ext = parts[-1].rpartition(".")
    parts[-1] = f"{name}-old.{ext}" if dot else parts[-1] + "-old"
    return "/".join(parts)


def _changed_values(text: str) -> str:
    out = re.sub(r"(?<![\w.])(\d+)\.(\d+)\.(\d+)(?![\w])", lambda m: f"{m.group(1)}.{int(m.group(2)) + 1}.{m.group(3)}",
                 text)
    out = PATH_TOKEN.sub(_change_path, out)
    out = BARE_FILE.sub(lambda m: _change_path(m) if "/" not in m.group(0) else m.group(0), out)
    out = re.sub(r"(?<![\w.#/-])\d{1,3}(?:,\d{3})+(?![\w.])|(?<![\w.#/-])\d+(?![\w./-]|\.\d)", _bump_number, out)
    out = re.sub(r"(?<![\w$])([A-Z][a-z]+)([A-Z][a-z]+)(?![\w$])", r"\2\1", out)
    return out


# the paraphrase's own word table (deliberately not the matcher's synonym groups)
PARAPHRASES: tuple[tuple[str, str], ...] = (
    ("Created", "Wrote"), ("created", "written"), ("Create", "Write"), ("create", "write"), ("Modified", "Edited"),
    ("modified", "edited"), ("Updated", "Revised"), ("updated", "revised"), ("Added", "Introduced"),
    ("added", "introduced"), ("Removed", "Deleted"), ("removed", "deleted"), ("Fixed", "Repaired"),
    ("fixed", "repaired"), ("User prefers", "The user would rather have"), ("prefers", "would rather have"),
    ("eliminate", "get rid of"), ("Refactor", "Restructure"), ("refactor", "restructure"),
    ("implementation", "code"), ("documentation", "docs"), ("Completed", "Finished"), ("completed", "finished"),
    ("current", "present"), ("Current", "Present"), ("support", "handling"), ("Move", "Relocate"),
    ("move", "relocate"), ("Verify", "Confirm"), ("verify", "confirm"), ("issue", "ticket"), ("Issue", "Ticket"),
    ("important", "key"), ("Important", "Key"), ("files", "sources"), ("file", "source"), ("using", "with"),
    ("Uses", "Relies on"), ("uses", "relies on"), ("Run", "Execute"), ("run", "execute"),
    ("must pass", "has to succeed"), ("must", "has to"),
)


def _paraphrase(text: str) -> str:
    out = []
    for line in text.split("\n"):
        s = re.sub(r"\*\*([^*]+)\*\*", r"\1", line)
        s = re.sub(r"`([^`\n]+)`", r"\1", s)
        m = re.match(r"^(\s*(?:[-*+]|\d+[.)])\s+)([^–-]{3,80}?)\s+[-–]\s+(.+)$", s)
        if m:  # "- X - Y" → "- Y (X)."
            s = f"{m.group(1)}{m.group(3).rstrip('.')} ({m.group(2).strip()})."
        for words, repl in PARAPHRASES:  # whole words only: never inside a path or a code name
            s = re.sub(rf"(?<![\w./@`-]){re.escape(words)}(?![\w./@`-])", repl, s)
        out.append(s)
    return "\n".join(out)


def perturbations(record: CompactionRecord, summary: str, *, wrong_span: str | None,
                  other_session: str | None) -> dict[str, str | None]:
    """The rewrites of :data:`PERTURBATIONS` of one real summary (see module docs); ``None`` where a
    rewrite has no source (no other summary to borrow)."""
    written = summarizer_text(summary)
    budget = max(1, _tokens(written))
    return {
        "real": written,
        "wrong_span": summarizer_text(wrong_span) if wrong_span is not None else None,
        "previous_summary": summarizer_text(record.previous_summary) if record.previous_summary else None,
        "other_session": summarizer_text(other_session) if other_session is not None else None,
        "name_dump": _name_dump(record, budget),
        "files_only": _files_only(record),
        "empty_template": EMPTY_TEMPLATE,
        "truncated_half": _head_lines(written, budget // 2),
        "truncated_quarter": _head_lines(written, budget // 4),
        "negated": _negated(written),
        "changed_values": _changed_values(written),
        "shuffled": _shuffled(written),
        "paraphrase": _paraphrase(written),
    }


def ordered_as_expected(a: float, relation: str, b: float, tolerance: float = TOLERANCE) -> bool:
    """Whether scores ``a`` and ``b`` stand in ``relation`` (``>``, ``=``, ``~``); NaN is never in order."""
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return False
    if relation == ">":
        return a > b + 1e-12
    if relation == "=":
        return abs(a - b) <= 1e-9
    if relation == "~":
        return abs(a - b) <= tolerance * max(abs(a), 1e-9)
    raise ConfigurationError(f"unknown relation {relation!r} (relations: >, =, ~)")


META_PAIRS = Table("meta_pairs", [
    Column("session", description="the session"),
    Column("compaction", description="the compaction's position in its session's list"),
    Column("pair", description="the expected order, ``a <relation> b`` of two rewrites"),
    Column("measure", description="the measure"),
    Column("a", description="its value on the first rewrite"),
    Column("b", description="its value on the second"),
    Column("in_order", description="the values are in the expected order"),
    Column("nan", description="either value is NaN"),
], "One row per compaction, expected pair of rewrites and measure.")


@dataclass
class MetaEvaluation:
    """Scores of every rewrite (``scores``: one row per compaction × rewrite) and the pairs."""

    scores: pd.DataFrame
    measures: tuple[str, ...]
    texts: dict[tuple[str, int, str], str | None] = field(default_factory=dict)

    @property
    def pairs(self) -> pd.DataFrame:
        """One row per compaction × expected pair × measure (:data:`META_PAIRS`)."""
        rows = []
        wide = {(r["session"], r["compaction"], r["rewrite"]): r for r in self.scores.to_dict("records")}
        keys = sorted({(s, c) for s, c, _ in wide})
        for session, compaction in keys:
            for a, rel, b in EXPECTED:
                ra, rb = wide.get((session, compaction, a)), wide.get((session, compaction, b))
                if ra is None or rb is None:
                    continue
                for m in self.measures:
                    va, vb = float(ra.get(m, math.nan)), float(rb.get(m, math.nan))
                    rows.append({"session": session, "compaction": compaction, "pair": f"{a} {rel} {b}",
                                 "measure": m, "a": va, "b": vb, "in_order": ordered_as_expected(va, rel, vb),
                                 "nan": math.isnan(va) or math.isnan(vb)})
        return META_PAIRS.frame(rows)

    def table(self, *, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
        """Per measure: share of pairs in order, its interval (where supported), n pairs, n compactions,
        n sessions, and the share per pair type."""
        pairs = self.pairs
        rows: list[dict[str, Any]] = []
        for m in self.measures:
            every = pairs[pairs["measure"] == m]
            sub = every[every["a"].notna()]  # a compaction the measure cannot score on its real summary is left out
            if sub.empty:
                continue
            ci = cluster_interval(sub["in_order"].astype(float).tolist(), sub["session"].tolist(),
                                  [f"{s}#{c}" for s, c in zip(sub["session"], sub["compaction"])],
                                  level=level, n_boot=n_boot, seed=seed)
            row = {"measure": m, "in_order": ci.estimate, "ci_low": ci.low, "ci_high": ci.high,
                                   "interval": ci.note, "n_pairs": len(sub), "n_unscorable": len(every) - len(sub),
                   "n_nan": int(sub["nan"].sum()),
                                   "n_compactions": ci.n_clusters, "n_sessions": ci.n_groups}
            for pair, group in sub.groupby("pair", sort=False):
                row[pair] = group["in_order"].mean()
            rows.append(row)
        return frame(rows)

    def mean_scores(self) -> pd.DataFrame:
        """Mean of each measure per rewrite (rows: rewrites, in :data:`PERTURBATIONS` order)."""
        cols = [m for m in self.measures if m in self.scores.columns] + ["written_tokens"]
        means = self.scores.groupby("rewrite", sort=False)[cols].mean(numeric_only=True)
        return means.reindex([p for p in PERTURBATIONS if p in means.index])


def meta_evaluate(
    records: Mapping[str, Sequence[CompactionRecord]],
    *,
    measures: Sequence[str] = DEFAULT_MEASURES,
    score: Callable[..., Mapping[str, Any]] | None = None,
    keep_texts: bool = False,
) -> MetaEvaluation:
    """Score the rewrites of every real summary of ``records`` (session name → its compaction records).

    ``score(record, text, needed=..., span_facts=...)``: the measures of one summary (default
    :func:`pimem.drift.measures.summary_measures`). ``compaction`` in the results is the compaction's
    position in its session's list (``compaction_index``: its index on its file's path; a Claude Code
    session's compactions can come from several files). The wrong-span rewrite of a compaction is the next
    compaction's summary of the same session, else (the last compaction) the first summary of the
    next session; the other-session rewrite is the first summary of the next session (in the order
    of ``records``). At least two sessions are needed for the other-session rewrite.
    """
    scorer = score or summary_measures
    names = [n for n, recs in records.items() if recs]
    rows: list[dict[str, Any]] = []
    texts: dict[tuple[str, int, str], str | None] = {}
    for s_i, name in enumerate(names):
        recs = list(records[name])
        nxt = names[(s_i + 1) % len(names)] if len(names) > 1 else None
        other = records[nxt][0].summary if nxt is not None and nxt != name else None
        for k, rec in enumerate(recs):
            wrong = recs[k + 1].summary if k + 1 < len(recs) else other
            variants = perturbations(rec, rec.summary, wrong_span=wrong, other_session=other)
            needed = needed_later_facts(rec)
            span_facts = extract_facts(rec.span)
            for rewrite, text in variants.items():
                if keep_texts:
                    texts[(name, k, rewrite)] = text
                if text is None:
                    continue
                row: dict[str, Any] = {"session": name, "compaction": k, "compaction_index": rec.index,
                                       "rewrite": rewrite}
                row.update(scorer(rec, text, needed=needed, span_facts=span_facts))
                rows.append(row)
    return MetaEvaluation(frame(rows), tuple(measures), texts)


# --------------------------------------------------------------------------- real sessions


def load_recovering(path: str | Any) -> Any:
    """A session file as :func:`pimem.load_session` reads it, except that a line holding several JSON
    objects back to back gives each of them (Pi skips such a line with a warning; two real Pi files have
    one, and one of them holds a compaction). The file is only read; the ids of a v1 file are drawn from
    its name, so the same file gets the same ids."""
    import json
    import os
    import random

    file = os.fspath(path)
    session = load_session(file)
    if not any("malformed JSON line" in w.reason for w in session.warnings):
        return session
    decoder = json.JSONDecoder()
    objects: list[dict] = []
    with open(file, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            text, i = line.strip(), 0
            while i < len(text):
                try:
                    value, i = decoder.raw_decode(text, i)
                except ValueError:
                    break
                if isinstance(value, dict):
                    objects.append(value)
                while i < len(text) and text[i].isspace():
                    i += 1
    if not objects or objects[0].get("type") != "session":
        return session
    migrate_to_current_version(objects, random.Random(os.path.basename(file)))
    return Session(objects[0], objects[1:], path=file, warnings=list(session.warnings))


PI_REAL_FILES: tuple[str, ...] = ("before-compaction.jsonl", "history/compact.jsonl", "history/session.jsonl")


def pi_records(pi_dir: str | Any) -> dict[str, list[CompactionRecord]]:
    """The compaction records of the real Pi sessions in ``pi_dir`` (``datasets/pi-mono`` of the shared
    folder), by file name, loaded with :func:`load_recovering`: 5 compactions in 3 sessions."""
    import os


    out: dict[str, list[CompactionRecord]] = {}
    for name in PI_REAL_FILES:
        file = os.path.join(os.fspath(pi_dir), name)
        if os.path.exists(file):
            out[name] = compaction_records(load_recovering(file))
    return out


def claude_code_records(shared_dir: str | Any, *, limit: int | None = None) -> dict[str, list[CompactionRecord]]:
    """The compaction records of the real Claude Code transcripts of ``shared_dir`` (the shared folder:
    ``datasets/claude-code/entireio-cli/`` with ``datasets/real-sessions-index.json``), by Claude Code
    session id, each compaction taken once: from the file the index assigns it to (a session is
    checkpointed in several files, each holding the transcript up to then). Imported by
    :func:`pimem.load_session` (``format="auto"``). ``limit``: the first so many files only."""
    import json
    import os

    root = os.path.join(os.fspath(shared_dir), "datasets")
    with open(os.path.join(root, "real-sessions-index.json"), encoding="utf-8") as fh:
        index = json.load(fh)
    wanted: dict[str, dict[str, str]] = {}
    for c in index["compactions"]:
        if c.get("source") == "claude-code/entireio-cli":
            wanted.setdefault(c["stored"], {})[c["boundary_uuid"]] = c["session_id"]
    out: dict[str, list[tuple[str, CompactionRecord]]] = {}
    for n, stored in enumerate(sorted(wanted)):
        if limit is not None and n >= limit:
            break
        session = load_any_session(os.path.join(root, stored))
        found: set[str] = set()
        for leaf in [None] + [e.get("id") for e in session.leaves()]:
            if found >= set(wanted[stored]):
                break
            for rec in compaction_records(session, leaf_id=leaf):
                cid = str(rec.entry.get("id"))
                sid = wanted[stored].get(cid)
                if sid is not None and cid not in found:  # a compaction off the active path: from a leaf below it
                    found.add(cid)
                    out.setdefault(sid, []).append((str(rec.entry.get("timestamp", "")), rec))
    return {sid: [r for _, r in sorted(pairs, key=lambda p: p[0])] for sid, pairs in sorted(out.items())}


# --------------------------------------------------------------------------- rewrites written by reading

HAND_CLASSES: tuple[str, ...] = ("overclaim", "false_claim", "filler", "dropped_constraints", "renamed_headings",
                                 "terse", "recent_only")
HAND_FIELDS: tuple[str, ...] = ("id", "split", "session", "compaction", "summary_sha256", "class", "expected", "edits",
                                "text", "rationale")
HAND_SPLITS: tuple[str, ...] = ("heldout", "tune", "fresh", "fresh2")
RELATIONS: tuple[str, ...] = (">", "=", "~", ">~")


@dataclass(frozen=True)
class HandRewrite:
    """One rewrite of a real summary written by reading it and its span (``datasets/metaeval/``).

    ``expected``: pairs ``(a, relation, b, view)``; ``a`` and ``b`` are ``"real"``, ``"rewrite"``,
    ``"extracted"`` (the extractive summarizer on the same span at this rewrite's length) or another
    class of the same compaction; ``view`` is ``None`` (the measure) or ``"per_fact"`` (the measure per
    needed fact held anywhere in the text)."""

    id: str
    split: str
    session: str
    compaction: int
    summary_sha256: str
    cls: str
    expected: tuple[tuple[str, str, str, str | None], ...]
    edits: tuple[dict[str, str], ...] | None
    text: str | None
    rationale: str
    where: str = ""

    def apply(self, summary: str) -> str:
        """The rewrite's text: its edits applied to ``summary`` (the stored summary), or its own text."""
        import hashlib

        if self.text is not None:
            return self.text
        digest = hashlib.sha256(summary.encode("utf-8")).hexdigest()[: len(self.summary_sha256)]
        if digest != self.summary_sha256:
            raise LabelFormatError(f"{self.where}: rewrite {self.id} was written for another summary "
                                   f"(sha256 {self.summary_sha256}, found {digest})")
        out = summary
        for edit in self.edits or ():
            if "append" in edit:
                out = out.rstrip("\n") + "\n\n" + edit["append"]
                continue
            n = out.count(edit["find"])
            if n != 1:
                raise LabelFormatError(f"{self.where}: rewrite {self.id}: the text to replace occurs {n} times, "
                                       f"not once: {edit['find'][:80]!r}")
            out = out.replace(edit["find"], edit.get("replace", ""))
        return out


def load_hand_rewrites(path: str | Any) -> list[HandRewrite]:
    """The rewrites of a ``datasets/metaeval/rewrites-*.jsonl`` file; a malformed line raises
    :class:`pimem.errors.LabelFormatError` naming file and line."""
    import os

    file = os.fspath(path)
    out: list[HandRewrite] = []
    for where, row in labelled_rows(file, HAND_FIELDS):
        if row["split"] not in HAND_SPLITS:
            raise LabelFormatError(f"{where}: split must be one of {list(HAND_SPLITS)}")
        if row["class"] not in HAND_CLASSES:
            raise LabelFormatError(f"{where}: class {row['class']!r} is not one of {list(HAND_CLASSES)}")
        if (row["edits"] is None) == (row["text"] is None):
            raise LabelFormatError(f"{where}: give either edits or text")
        edits = row["edits"]
        if edits is not None and not (isinstance(edits, list) and all(
                isinstance(e, dict) and (set(e) == {"append"} or set(e) <= {"find", "replace"} and "find" in e)
                and all(isinstance(v, str) for v in e.values()) for e in edits)):
            raise LabelFormatError(f"{where}: edits must be a list of {{find, replace}} or {{append}} objects")
        expected = []
        for pair in row["expected"] if isinstance(row["expected"], list) else [None]:
            if not (isinstance(pair, list) and len(pair) in (3, 4) and pair[1] in RELATIONS
                    and (len(pair) == 3 or pair[3] == "per_fact")):
                raise LabelFormatError(f"{where}: expected pairs are [a, relation, b] or [a, relation, b, "
                                       f"\"per_fact\"] with relation in {list(RELATIONS)}; got {pair!r}")
            expected.append((str(pair[0]), str(pair[1]), str(pair[2]), pair[3] if len(pair) == 4 else None))
        out.append(HandRewrite(str(row["id"]), row["split"], str(row["session"]), int(row["compaction"]),
                               str(row["summary_sha256"]), row["class"], tuple(expected),
                               tuple(edits) if edits is not None else None, row["text"], str(row["rationale"]),
                               where))
    if not out:
        raise LabelFormatError(f"{file}: no rewrites")
    return out


def ordered(a: float, relation: str, b: float, tolerance: float = TOLERANCE) -> bool:
    """:func:`ordered_as_expected` with ``>~`` as well: ``a`` at least ``1 − tolerance`` of ``b``."""
    if relation == ">~":
        if a is None or b is None or math.isnan(a) or math.isnan(b):
            return False
        return a >= (1 - tolerance) * b - 1e-12
    return ordered_as_expected(a, relation, b, tolerance)


def extracted_summary(record: CompactionRecord, budget: int) -> str:
    """What the extractive summarizer writes for the record's span at ``budget`` tokens (Pi's estimate)."""
    prompt = build_history_prompt([m for _, m in record.span], None, record.previous_summary)
    request = SummaryRequest(kind="history", system_prompt=SUMMARIZATION_SYSTEM_PROMPT, prompt=prompt,
                             max_tokens=max(1, budget))
    return ExtractiveSummarizer().complete(request).text


def held_share(record: CompactionRecord, text: str, needed: Sequence[Any]) -> float:
    """The class-weighted share of ``needed`` facts held anywhere in ``text`` (the normalised matcher),
    whether or not a supported claim states them: what "per needed fact held" divides by."""
    total = sum(n.weight for n in needed)
    if not total:
        return math.nan
    index = SummaryIndex(text)
    return sum(n.weight for n in needed if normalized_holds(n.fact, text, index)) / total


@dataclass
class HandEvaluation:
    """Scores of the real summaries and their hand-written rewrites (``scores``: one row per item) and
    the expected pairs (``pairs``)."""

    scores: pd.DataFrame
    measures: tuple[str, ...]
    rewrites: list[HandRewrite]

    @property
    def pairs(self) -> pd.DataFrame:
        """One row per rewrite × expected pair × measure: ``split``, ``class``, ``id``, ``session``,
        ``compaction``, ``pair``, ``measure``, ``a``, ``b``, ``in_order``."""
        wide = {(r["session"], r["compaction"], r["item"]): r for r in self.scores.to_dict("records")}
        rows = []
        for rw in self.rewrites:
            by_class = {r.cls: r.id for r in self.rewrites if r.session == rw.session and r.compaction == rw.compaction}
            names = {"real": "real", "rewrite": rw.id, "extracted": f"extracted:{rw.id}", **by_class}
            for a, rel, b, view in rw.expected:
                ra = wide.get((rw.session, rw.compaction, names.get(a, a)))
                rb = wide.get((rw.session, rw.compaction, names.get(b, b)))
                if ra is None or rb is None:
                    continue
                for m in self.measures:
                    va, vb = float(ra.get(m, math.nan)), float(rb.get(m, math.nan))
                    if view == "per_fact":
                        va = va / ra["held_share"] if ra["held_share"] else math.nan
                        vb = vb / rb["held_share"] if rb["held_share"] else math.nan
                    label = f"{a} {rel} {b}" + (" per fact" if view else "")
                    rows.append({"split": rw.split, "class": rw.cls, "id": rw.id, "session": rw.session,
                                 "compaction": rw.compaction, "pair": label, "measure": m, "a": va, "b": vb,
                                 "in_order": ordered(va, rel, vb)})
        return frame(rows, columns=["split", "class", "id", "session", "compaction", "pair", "measure", "a", "b",
                                    "in_order"])

    def table(self, measure: str = "score", *, split: str | None = None, level: float = 0.95, n_boot: int = 2000,
              seed: int = 0) -> pd.DataFrame:
        """Per class and pooled: share of pairs in the expected order for ``measure``, with its two-stage
        interval where the coverage simulation supports it, n pairs, n compactions, n sessions."""
        pairs = self.pairs
        pairs = pairs[pairs["measure"] == measure]
        if split is not None:
            pairs = pairs[pairs["split"] == split]
        rows = []
        groups = [(c, pairs[pairs["class"] == c]) for c in HAND_CLASSES] + [("pooled", pairs)]
        for name, sub in groups:
            if sub.empty:
                continue
            ci = cluster_interval(sub["in_order"].astype(float).tolist(), sub["session"].tolist(),
                                  [f"{s}#{c}" for s, c in zip(sub["session"], sub["compaction"])], level=level,
                                  n_boot=n_boot, seed=seed)
            rows.append({"class": name, "in_order": ci.estimate, "ci_low": ci.low, "ci_high": ci.high,
                         "interval": ci.note, "n_pairs": len(sub), "n_in_order": int(sub["in_order"].sum()),
                         "n_compactions": ci.n_clusters, "n_sessions": ci.n_groups})
        return frame(rows)


def hand_evaluate(
    records: Mapping[str, Sequence[CompactionRecord]],
    rewrites: Sequence[HandRewrite],
    *,
    measures: Sequence[str] = DEFAULT_MEASURES,
    score: Callable[..., Mapping[str, Any]] | None = None,
) -> HandEvaluation:
    """Score every hand-written rewrite, the real summary it rewrites and the extracted baselines its
    pairs name (session name → compaction records, as :func:`claude_code_records` / :func:`pi_records`
    give them). A rewrite whose compaction is missing from ``records`` raises."""
    scorer = score or summary_measures
    by_compaction: dict[tuple[str, int], list[HandRewrite]] = {}
    for rw in rewrites:
        by_compaction.setdefault((rw.session, rw.compaction), []).append(rw)
    rows: list[dict[str, Any]] = []
    for (session, k), group in by_compaction.items():
        recs = records.get(session)
        if recs is None or not 0 <= k < len(recs):
            raise LabelFormatError(f"{group[0].where}: no compaction {k} of session {session!r} in the records given")
        rec = recs[k]
        needed = needed_later_facts(rec)
        span_facts = extract_facts(rec.span)
        items: dict[str, str] = {"real": summarizer_text(rec.summary)}
        for rw in group:
            text = rw.apply(rec.summary)
            items[rw.id] = summarizer_text(text)
            if any("extracted" in (a, b) for a, _, b, _ in rw.expected):
                items[f"extracted:{rw.id}"] = extracted_summary(rec, _tokens(items[rw.id]))
        for item, text in items.items():
            row: dict[str, Any] = {"session": session, "compaction": k, "item": item,
                                   "written_tokens": _tokens(text), "held_share": held_share(rec, text, needed)}
            row.update(scorer(rec, text, needed=needed, span_facts=span_facts))
            rows.append(row)
    return HandEvaluation(frame(rows), tuple(measures), list(rewrites))
