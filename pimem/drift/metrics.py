"""Per-compaction metrics and the drift report over a chain of compactions.

**Spans.** For a compaction ``C`` on the active path, the summarized messages are recomputed with
Pi's own projection (:func:`pimem.core.session_manager.build_session_projection`) of the path entries before
``C``: exactly what ``prepareCompaction`` saw. If that projection holds a previous compaction
``P``, the span starts right after it (at ``P.firstKeptEntryId``), else at the start; it ends
before ``C.firstKeptEntryId``. Compaction entries and ``system`` messages are skipped, as Pi
does. The span therefore covers the history messages *and* the split-turn prefix, whatever the
settings were; it needs no settings, so it works on recorded sessions. Context edits on the path
are applied, as in Pi. When ``C.firstKeptEntryId`` is not found among the projected entries, the
span runs to ``C`` and a note is recorded.

**True file lists** follow Pi's ``extractFileOperations``: read / write / edit tool calls of the
span plus the previous compaction's ``details`` (unless ``fromHook``), through
:func:`pimem.core.compaction.utils.compute_file_lists`.

**Tokens** are Pi's estimates (:func:`pimem.core.compaction.compaction.estimate_tokens`, chars ÷ 4 in UTF-16 units).

The report has one row per compaction, in path order; its columns are declared once in
:data:`DRIFT_REPORT` (``pimem.columns("drift_report")`` lists them; :func:`drift_report`'s
docstring too).

Every content measure reads the text the summarizer wrote (:func:`pimem.text.sections.summarizer_text`),
never the file blocks ``compact()`` appends. What each measure rewards and how it can be gamed:
:data:`pimem.drift.measures.MEASURES`.

``report.attrs`` holds the long frames that the helper functions read: ``"facts"`` (:data:`FACTS`,
one row per fact), ``"presence"`` (:data:`PRESENCE`, fact × compaction), ``"sections"``
(:data:`SECTIONS`, compaction × section), ``"rework"`` (what the recorded agent did after each
compaction and at matched points without one: :func:`pimem.drift.rework.rework_points`; empty for a
replay, whose recorded turns never saw its compactions) and ``"notes"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pimem.base.js import utf16_len
from pimem.base.tables import Column, Table
from pimem.core.compaction.compaction import estimate_tokens
from pimem.core.session_manager import build_session_path
from pimem.drift.faithfulness import faithfulness_measures
from pimem.drift.needed import FACT_CLASSES, needed_later_facts, span_needed_facts, weighted_recall
from pimem.drift.records import compaction_records
from pimem.drift.rework import POINTS, rework_points
from pimem.drift.similarity import TfidfSpace, jaccard
from pimem.errors import ConfigurationError
from pimem.sessions.compactions import CompactionSpan, compaction_spans
from pimem.sessions.load import SessionLike, session_or_entries
from pimem.text.facts import (
    FACT_KINDS,
    Fact,
    SummaryIndex,
    index_of,
    extract_facts,
    fact_present,
    facts_present,
    iter_messages,
    summary_facts,
)
from pimem.text.messages import text_blocks
from pimem.text.sections import (COMPACTION_SECTIONS, SummarySections, parse_summary, parsed_summary, section_items,
                                 summarizer_text)


HEADLINE_COLUMNS: tuple[str, ...] = ("score", "recall_faithful", "faithfulness")  # pimem.drift.faithfulness
_CONTENT_SECTIONS = ("goal", "constraints", "done", "in_progress", "blocked", "key_decisions", "next_steps",
                     "critical_context")

_CONFORMANCE = "see :class:`pimem.text.sections.Conformance`"
_PIPELINE = ("a check of Pi's pipeline, not of the summary: the file block ``compact()`` appends against the true "
             "list (NaN when there is no block / no truth); every summarizer gets the same")

# What :func:`compaction_metrics` returns, in order.
METRIC_COLUMNS = [
    Column("n_messages", description="messages summarized"),
    Column("span_tokens", description="estimated tokens of the summarized messages"),
    Column("summary_tokens", description="estimated tokens of the stored summary (its context cost)"),
    Column("written_tokens", description="estimated tokens of what the summarizer wrote (no file blocks)"),
    Column("prev_summary_tokens", description="estimated tokens of the previous summary (0 for the first)"),
    Column("compression_ratio", description="span_tokens ÷ summary_tokens"),
    Column("compression_ratio_with_prev", description="(span_tokens + prev_summary_tokens) ÷ summary_tokens"),
    Column("compresses", description="compression_ratio_with_prev > 1"),
    Column("split_turn", description="the summary holds a split-turn part"),
    Column("n_expected", description="template sections expected; " + _CONFORMANCE),
    Column("n_found", description="template sections found"),
    Column("missing", description="template sections not found"),
    Column("extra", description="headings naming no section"),
    Column("renamed", description="sections found by alias or prefix, as ``title -> section``"),
    Column("reordered", description="the sections found are out of template order"),
    Column("order_inversions", description="adjacent inversions of that order"),
    Column("empty", description="sections found with no content"),
    Column("duplicated", description="sections found more than once"),
    Column("conformance", description="found ÷ expected"),
    Column("conformant", description="every section under its own name, in order, none empty, nothing extra"),
    Column("files_block_present", description="the summary holds a ``<read-files>`` or ``<modified-files>`` block"),
    Column("pipeline_read_precision", description="``<read-files>``: " + _PIPELINE),
    Column("pipeline_read_recall", description="``<read-files>``, recall"),
    Column("pipeline_modified_precision", description="``<modified-files>``: " + _PIPELINE),
    Column("pipeline_modified_recall", description="``<modified-files>``, recall"),
    Column("file_mention_recall", description="true files (read ∪ modified) named in the summarizer's text"),
    Column("n_facts", description="facts of the span"),
    Column("fact_recall", description="the share of them present in the summarizer's text: unweighted, grows with "
           "length (a fact dump scores 1.0)"),
    *(Column(f"recall_{kind}", description=f"fact_recall of the {kind} facts (NaN when the span has none)")
      for kind in FACT_KINDS),
    Column("prev_summary_retention", description="of the facts the previous summary's text states (paths, "
           "identifiers, numbers), the share still present"),
    Column("sim_prev_jaccard", description="body similarity to the previous summary, Jaccard"),
    Column("sim_prev_cosine", description="body similarity to the previous summary, TF-IDF cosine"),
]

DRIFT_REPORT = Table("drift_report", [
    Column("compaction", description="0-based index in the chain"),
    Column("entry_id", description="the compaction entry"),
    Column("first_kept_entry_id", description="its first kept entry"),
    Column("span_start_id", description="first entry of the summarized span (None if empty)"),
    Column("n_entries", description="entries summarized"),
    Column("tokens_before", description="recorded ``tokensBefore``"),
    *METRIC_COLUMNS,
    Column("score", description="the headline (:mod:`pimem.drift.faithfulness`): recall_faithful × faithfulness"),
    Column("recall_faithful", description="needed-later recall held by the summary's supported claims"),
    Column("faithfulness", description="the share of the summary's checkable claims that the span supports"),
    Column("n_needed", description="facts the recording used after the compaction and the kept tail does not show "
           "(:mod:`pimem.drift.needed`)"),
    Column("needed_recall", description="their class-weighted share held anywhere in the text (the former headline)"),
    *(c for cls in FACT_CLASSES for c in (
        Column(f"needed_recall_{cls}", description=f"needed_recall of the {cls} facts"),
        Column(f"n_needed_{cls}", description=f"needed-later {cls} facts: when only names are counted, the score "
               "is only names"))),
    Column("content_sections", description="share of the eight content sections holding something"),
    Column("n_new_facts", description="facts first seen in this span"),
    Column("new_fact_recall", description="the share of them this summary holds"),
    Column("n_seen", description="facts seen in any span so far"),
    Column("n_held", description="those this summary holds"),
    Column("cumulative_loss", description="1 − held ÷ seen"),
    Column("prev_retention", description="of the true facts the previous summary held, the share still held"),
    Column("n_lost", description="how many of those were dropped"),
    Column("goal_present", description="the summary has a Goal section"),
    Column("goal_sim_request_jaccard", description="Goal section vs the first user request on the path, Jaccard"),
    Column("goal_sim_request_cosine", description="the same, TF-IDF cosine"),
    Column("goal_sim_first_jaccard", description="Goal section vs the first summary's Goal, Jaccard"),
    Column("goal_sim_first_cosine", description="the same, TF-IDF cosine"),
], "One row per compaction on the active path, in path order.")

FACTS = Table("facts", [
    Column("key", description="``kind:normalized value``, one per fact"),
    Column("kind", description="the fact's kind"),
    Column("value", description="the normalized value"),
    Column("surface", description="the text as written"),
    Column("entry_id", description="the entry it was first seen in"),
    Column("role", description="that message's role"),
    Column("source", description="the part of the message it came from"),
    Column("introduced_at", description="the compaction whose span first held it"),
], "One row per fact of the summarized spans (``report.attrs[\"facts\"]``).")

PRESENCE = Table("presence", [
    Column("key", description="the fact"),
    Column("kind", description="its kind"),
    Column("compaction", description="the summary"),
    Column("introduced_at", description="the compaction whose span first held the fact"),
    Column("age", description="compaction − introduced_at"),
    Column("present", description="the summary holds the fact"),
    Column("in_span", description="the fact is in this compaction's own span"),
], "One row per fact and compaction since it was seen (``report.attrs[\"presence\"]``).")

SECTIONS = Table("sections", [
    Column("compaction", description="the summary"),
    Column("section", description="the template section"),
    Column("present", description="the summary has it"),
    Column("present_prev", description="the previous summary has it"),
    Column("tokens", description="its chars/4"),
    Column("jaccard_prev", description="similarity to the previous version, Jaccard"),
    Column("cosine_prev", description="similarity to the previous version, TF-IDF cosine"),
], "One row per compaction and template section (``report.attrs[\"sections\"]``).")

LOST_FACTS = Table("lost_facts", [
    Column("key", description="the fact"),
    Column("kind", description="its kind"),
    Column("lost_at", description="the compaction whose summary dropped it"),
], "One row per fact held by one summary and dropped by the next.")

RETENTION = Table("retention", [
    Column("age", description="rewrites since the compaction whose span introduced the fact"),
    Column("kind", description="the fact kind (``by_kind=True``)"),
    Column("n", description="facts observed at that age"),
    Column("n_present", description="those still present"),
    Column("retention", description="n_present ÷ n"),
], "Share of facts still present k compactions after the one that first covered them.")

SURVIVAL = Table("survival", [
    Column("kind", description="the fact kind, or ``all``"),
    Column("age", description="rewrites since capture"),
    Column("at_risk", description="facts present at every earlier age and observed at this one"),
    Column("survived", description="those still present"),
    Column("survival", description="Kaplan–Meier survival"),
], "Kaplan–Meier survival of captured facts per kind.")


def _tokens(messages: Iterable[dict]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def _summary_tokens(summary: str) -> int:
    return estimate_tokens({"role": "compactionSummary", "summary": summary})


def _pr(predicted: list[str] | None, truth: list[str]) -> tuple[float, float]:
    if predicted is None:
        return (math.nan, math.nan)
    p, t = set(predicted), set(truth)
    precision = len(p & t) / len(p) if p else (1.0 if not t else 0.0)
    recall = len(p & t) / len(t) if t else math.nan
    return precision, recall


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def compaction_metrics(
    summary: str | SummarySections,
    messages: Sequence[Any],
    *,
    previous_summary: str | None = None,
    read_files: Sequence[str] | None = None,
    modified_files: Sequence[str] | None = None,
    facts: Sequence[Fact] | None = None,
    previous_parsed: SummarySections | None = None,
) -> dict[str, Any]:
    """Metrics of one summary against the span it summarized.

    ``messages``: the summarized span (entries, messages or ``(entry_id, message)`` pairs);
    ``read_files`` / ``modified_files``: the true lists (Pi's, when known); ``facts``: the span's
    facts if already extracted. Returns a flat dict with the per-compaction columns of the
    module docs (chain columns excluded).

    Args:
        summary: the summary, as text or parsed.
        messages: the summarized span (entries, messages or ``(entry_id, message)`` pairs).
        previous_summary: the summary this one updated, if any.
        read_files: the true list of files read (Pi's, when known).
        modified_files: the true list of files modified (Pi's, when known).
        facts: the span's facts, if already extracted.
        previous_parsed: ``parse_summary(previous_summary)``, if already parsed.
    """
    parsed = summary if isinstance(summary, SummarySections) else parse_summary(summary)
    pairs = iter_messages(messages)
    span_facts = list(facts) if facts is not None else extract_facts(pairs)
    index = index_of(parsed.written_text)  # never the file blocks compact() appends
    span_tokens = _tokens(m for _, m in pairs)
    summary_tokens = _summary_tokens(parsed.text)
    prev_tokens = _summary_tokens(previous_summary) if previous_summary else 0
    row: dict[str, Any] = {
        "n_messages": len(pairs),
        "span_tokens": span_tokens,
        "summary_tokens": summary_tokens,
        "written_tokens": _summary_tokens(parsed.written_text) if parsed.written_text else 0,
        "prev_summary_tokens": prev_tokens,
        "compression_ratio": _ratio(span_tokens, summary_tokens),
        "compression_ratio_with_prev": _ratio(span_tokens + prev_tokens, summary_tokens),
    }
    row["compresses"] = bool(row["compression_ratio_with_prev"] > 1) if summary_tokens else False
    row["split_turn"] = parsed.turn_context is not None
    row.update(parsed.conformance.as_dict())
    truth_read = list(read_files or [])
    truth_mod = list(modified_files or [])
    # a pipeline check: compact() writes these blocks, whatever the summarizer answered
    row["pipeline_read_precision"], row["pipeline_read_recall"] = _pr(
        parsed.read_files if parsed.conformance.files_block_present else None, truth_read)
    row["pipeline_modified_precision"], row["pipeline_modified_recall"] = _pr(
        parsed.modified_files if parsed.conformance.files_block_present else None, truth_mod
    )
    if parsed.conformance.files_block_present:
        # a missing block next to a present one means "no files of that kind"
        if parsed.read_files is None:
            row["pipeline_read_precision"], row["pipeline_read_recall"] = _pr([], truth_read)
        if parsed.modified_files is None:
            row["pipeline_modified_precision"], row["pipeline_modified_recall"] = _pr([], truth_mod)
    all_true = sorted(set(truth_read) | set(truth_mod))
    row["file_mention_recall"] = (
        sum(index.has_path(p) for p in all_true) / len(all_true) if all_true else math.nan
    )
    present = facts_present(span_facts, index)
    row["n_facts"] = len(span_facts)
    row["fact_recall"] = _ratio(sum(present), len(span_facts))
    for kind in FACT_KINDS:
        flags = [p for f, p in zip(span_facts, present) if f.kind == kind]
        row[f"recall_{kind}"] = _ratio(sum(flags), len(flags))
    if previous_summary:
        prev_stated = summary_facts(summarizer_text(previous_summary))
        kept = facts_present(prev_stated, index)
        row["prev_summary_retention"] = _ratio(sum(kept), len(kept))
        prev_body = (previous_parsed or parse_summary(previous_summary)).body
        space = TfidfSpace([prev_body, parsed.body])
        row["sim_prev_jaccard"] = jaccard(prev_body, parsed.body)
        row["sim_prev_cosine"] = space.cosine(prev_body, parsed.body)
    else:
        row["prev_summary_retention"] = math.nan
        row["sim_prev_jaccard"] = math.nan
        row["sim_prev_cosine"] = math.nan
    return row


def _first_user_request(path: Sequence[dict]) -> str:
    for e in path:
        if e.get("type") == "message" and e["message"].get("role") == "user":
            text = text_blocks(e["message"].get("content"))
            if text.strip():
                return text
    return ""


def drift_report(
    result_or_session: SessionLike | Sequence[dict],
    *,
    leaf_id: str | None = None,
    include_thinking: bool = False,
    spans: Sequence[CompactionSpan] | None = None,
) -> pd.DataFrame:
    """One row per compaction on the active path, with chain metrics (module docs).

    Args:
        result_or_session: a :class:`pimem.Session`, a replay result (its replayed session), a session
            file's path (:func:`pimem.as_session`), or a list of entries.
        leaf_id: the leaf whose path is measured (default: the session's current leaf).
        include_thinking: count the assistant's thinking among the facts of a span.
        spans: the path's :func:`~pimem.sessions.compactions.compaction_spans`, when already computed.

    Long frames are in ``report.attrs``.
    """
    source = session_or_entries(result_or_session)
    spans = list(spans) if spans is not None else compaction_spans(source, leaf_id=leaf_id)
    records = compaction_records(source, leaf_id=leaf_id, spans=spans)
    path = build_session_path(source, leaf_id)
    first_request = _first_user_request(path)
    parsed = [parse_summary(s.summary) for s in spans]
    # one TF-IDF space over all sections of all summaries and the first request
    docs = [first_request] + [p.body for p in parsed] + [t for p in parsed for t in p.sections.values()]
    space = TfidfSpace(docs)
    fact_rows: list[dict] = []
    introduced: dict[tuple[str, str], int] = {}
    fact_by_key: dict[tuple[str, str], Fact] = {}
    span_keys: list[set[tuple[str, str]]] = []
    rows: list[dict] = []
    section_rows: list[dict] = []
    presence: dict[str, list[Any]] = {c: [] for c in PRESENCE.names}  # one row per fact and compaction
    fact_names: list[str] = []  # of the facts seen so far, in the order first seen
    fact_kinds: list[str] = []
    fact_introduced: list[int] = []
    notes: list[str] = []
    held_prev: set[tuple[str, str]] = set()
    first_goal: str | None = None
    for span, summ in zip(spans, parsed):
        facts = extract_facts(records[span.index].span, include_thinking=include_thinking)  # injected turns marked
        keys = {f.key for f in facts}
        span_keys.append(keys)
        new = [f for f in facts if f.key not in introduced]
        for f in new:
            introduced[f.key] = span.index
            fact_by_key[f.key] = f
            fact_names.append(f"{f.kind}:{f.key[1]}")
            fact_kinds.append(f.kind)
            fact_introduced.append(span.index)
            fact_rows.append(
                {"key": f"{f.kind}:{f.key[1]}", "kind": f.kind, "value": f.value, "surface": f.surface,
                 "entry_id": f.entry_id, "role": f.role, "source": f.source, "introduced_at": span.index}
            )
        prev = spans[span.index - 1].summary if span.index > 0 else None
        row: dict[str, Any] = {
            "compaction": span.index,
            "entry_id": span.entry.get("id"),
            "first_kept_entry_id": span.entry.get("firstKeptEntryId"),
            "span_start_id": span.entry_ids[0] if span.entry_ids else None,
            "n_entries": len(span.entry_ids),
            "tokens_before": span.entry.get("tokensBefore"),
        }
        row.update(
            compaction_metrics(
                summ,
                span.messages,
                previous_summary=prev,
                read_files=span.read_files,
                modified_files=span.modified_files,
                facts=facts,
                previous_parsed=parsed[span.index - 1] if span.index > 0 else None,
            )
        )
        index = index_of(summ.written_text)
        needed = needed_later_facts(records[span.index], facts=facts)
        flags = [fact_present(n.fact, index) for n in needed]
        faithful = faithfulness_measures(records[span.index], span.summary, needed=needed)
        for column in HEADLINE_COLUMNS:
            row[column] = faithful[column]
        row["n_needed"] = len(needed)
        row["needed_recall"] = weighted_recall(needed, flags)
        for cls in FACT_CLASSES:
            of_class = [p for n, p in zip(needed, flags) if n.cls == cls]
            row[f"needed_recall_{cls}"] = _ratio(sum(of_class), len(of_class))
            row[f"n_needed_{cls}"] = len(of_class)
        items = section_items(summ)
        row["content_sections"] = sum(bool(items[k]) for k in _CONTENT_SECTIONS) / len(_CONTENT_SECTIONS)
        held: set[tuple[str, str]] = set()
        present = facts_present(list(fact_by_key.values()), index)
        for key, p in zip(fact_by_key, present):
            if p:
                held.add(key)
            presence["in_span"].append(key in keys)
        presence["key"].extend(fact_names)
        presence["kind"].extend(fact_kinds)
        presence["compaction"].extend([span.index] * len(present))
        presence["introduced_at"].extend(fact_introduced)
        presence["age"].extend(span.index - at for at in fact_introduced)
        presence["present"].extend(present)
        row["n_new_facts"] = len(new)
        row["new_fact_recall"] = _ratio(sum(f.key in held for f in new), len(new))
        row["n_seen"] = len(fact_by_key)
        row["n_held"] = len(held)
        row["cumulative_loss"] = 1 - _ratio(len(held), len(fact_by_key)) if fact_by_key else math.nan
        if span.index > 0:
            row["prev_retention"] = _ratio(len(held & held_prev), len(held_prev))
            row["n_lost"] = len(held_prev - held)
        else:
            row["prev_retention"] = math.nan
            row["n_lost"] = 0
        held_prev = held
        goal = summ.sections.get("goal", "")
        if first_goal is None and goal:
            first_goal = goal
        row["goal_present"] = "goal" in summ.sections
        row["goal_sim_request_jaccard"] = jaccard(goal, first_request) if goal and first_request else math.nan
        row["goal_sim_request_cosine"] = space.cosine(goal, first_request) if goal and first_request else math.nan
        row["goal_sim_first_jaccard"] = jaccard(goal, first_goal) if goal and first_goal else math.nan
        row["goal_sim_first_cosine"] = space.cosine(goal, first_goal) if goal and first_goal else math.nan
        prev_parsed = parsed[span.index - 1] if span.index > 0 else None
        for section in COMPACTION_SECTIONS:
            text = summ.sections.get(section)
            prev_text = prev_parsed.sections.get(section) if prev_parsed else None
            section_rows.append(
                {"compaction": span.index, "section": section, "present": text is not None,
                 "present_prev": prev_text is not None,
                 "tokens": math.ceil(utf16_len(text) / 4) if text else 0,
                 "jaccard_prev": jaccard(text, prev_text) if text is not None and prev_text is not None else math.nan,
                 "cosine_prev": (space.cosine(text, prev_text) if text is not None and prev_text is not None
                                 else math.nan)}
            )
        notes.extend(f"compaction {span.index}: {n}" for n in records[span.index].notes + summ.notes)
        rows.append(row)
    report = DRIFT_REPORT.frame(rows)
    report.attrs["facts"] = FACTS.frame(fact_rows)
    report.attrs["presence"] = PRESENCE.frame(presence if presence["key"] else [])
    report.attrs["sections"] = SECTIONS.frame(section_rows)
    report.attrs["rework"] = _rework(result_or_session, source, leaf_id, records)
    report.attrs["notes"] = notes
    return report


def _rework(given: Any, source: Any, leaf_id: str | None, records: Sequence[Any]) -> pd.DataFrame:
    """The rework after the recording's own compactions on the measured path; empty for a replay (open
    loop) or a bare entry list."""
    if (hasattr(given, "session") and hasattr(given, "events")) or not hasattr(source, "header"):
        return POINTS.frame([])
    return rework_points(source, leaf_id=leaf_id if leaf_id is not None else source.leaf_id, records=records)


# --------------------------------------------------------------------------- tidy views


def _presence(report: pd.DataFrame) -> pd.DataFrame:
    presence = report.attrs.get("presence")
    if presence is None:
        raise ConfigurationError("not a drift report: report.attrs has no 'presence' frame (use drift_report)")
    return presence


def lost_facts(report: pd.DataFrame) -> pd.DataFrame:
    """Facts held by one summary and dropped by the next: key, kind, lost_at (compaction)."""
    p = _presence(report)
    if p.empty:
        return LOST_FACTS.frame([])
    wide = p.pivot_table(index=["key", "kind"], columns="compaction", values="present", aggfunc="first")
    wide = wide.reindex(columns=sorted(wide.columns))
    # cells are bool, numpy bool or NaN (fact not yet seen): held = exactly True, dropped = exactly False
    cells = wide.to_numpy(dtype=object)
    held = np.vectorize(lambda v: v is True or v is np.True_, otypes=[bool])(cells)
    dropped = np.vectorize(lambda v: v is False or v is np.False_, otypes=[bool])(cells)
    rows, cols = np.nonzero(held[:, :-1] & dropped[:, 1:])
    index = wide.index
    return LOST_FACTS.frame({"key": index.get_level_values("key")[rows], "kind": index.get_level_values("kind")[rows],
                             "lost_at": np.asarray(wide.columns)[cols + 1]})


def retention_by_age(
    report: pd.DataFrame,
    *,
    by_kind: bool = False,
    given_captured: bool = True,
    exclude_rementioned: bool = False,
) -> pd.DataFrame:
    """Share of facts still present k compactions after the one that first covered them.

    Age 0 is the compaction whose span introduced the fact. ``given_captured`` counts only facts
    that summary captured; ``exclude_rementioned`` drops observations where the fact appears
    again in the newer span (so only survival through rewriting counts).

    Args:
        report: the drift report (one row per fact and compaction).
        by_kind: one curve per fact kind.
        given_captured: count only facts the first summary captured.
        exclude_rementioned: drop observations where the fact appears again in the newer span.
    """
    p = _presence(report).copy()
    cols = ["age"] + (["kind"] if by_kind else [])
    if p.empty:
        return RETENTION.frame([], columns=cols + ["n", "n_present", "retention"])
    if given_captured:
        captured = set(p[(p["age"] == 0) & p["present"]]["key"])
        p = p[p["key"].isin(captured)]
    if exclude_rementioned:
        p = p[(p["age"] == 0) | ~p["in_span"]]
    g = p.groupby(cols, sort=True)["present"].agg(n="size", n_present="sum").reset_index()
    g["n_present"] = g["n_present"].astype(int)
    g["retention"] = g["n_present"] / g["n"]
    return g


def survival_curves(report: pd.DataFrame, *, exclude_rementioned: bool = False) -> pd.DataFrame:
    """Kaplan–Meier survival of captured facts per kind (and ``"all"``).

    A fact is at risk at age k if it was present at every age before k and is observed at age k
    (facts introduced late are censored).

    Args:
        report: the drift report (one row per fact and compaction).
        exclude_rementioned: drop observations where the fact appears again in the newer span.
    """
    p = _presence(report)
    if exclude_rementioned:
        p = p[(p["age"] == 0) | ~p["in_span"]]
    rows = []
    if p.empty:
        return SURVIVAL.frame([])
    captured = set(p[(p["age"] == 0) & p["present"]]["key"])
    p = p[p["key"].isin(captured)].sort_values(["key", "age"])
    series = {key: (kind, dict(zip(g["age"], g["present"]))) for (key, kind), g in p.groupby(["key", "kind"])}
    max_age = int(p["age"].max()) if not p.empty else 0
    for kind in ["all", *FACT_KINDS]:
        members = [obs for k, obs in series.values() if kind == "all" or k == kind]
        if not members:
            continue
        surv = 1.0
        rows.append({"kind": kind, "age": 0, "at_risk": len(members), "survived": len(members), "survival": 1.0})
        for age in range(1, max_age + 1):
            at_risk = [o for o in members if age in o and all(o.get(a, False) for a in range(age))]
            if not at_risk:
                break
            survived = sum(bool(o[age]) for o in at_risk)
            surv *= survived / len(at_risk)
            rows.append({"kind": kind, "age": age, "at_risk": len(at_risk), "survived": survived, "survival": surv})
    return SURVIVAL.frame(rows)


DRIFT_REPORT.document(drift_report)
LOST_FACTS.document(lost_facts)
RETENTION.document(retention_by_age)
SURVIVAL.document(survival_curves)


def section_similarity(report: pd.DataFrame) -> pd.DataFrame:
    """Per compaction and template section: present, tokens, similarity to the previous version."""
    s = report.attrs.get("sections")
    if s is None:
        raise ConfigurationError("not a drift report: report.attrs has no 'sections' frame (use drift_report)")
    return s


def chain_headline(
    result_or_session: Any,
    *,
    leaf_id: str | None = None,
    include_thinking: bool = False,
    spans: Sequence[CompactionSpan] | None = None,
) -> dict[str, Any]:
    """What a sweep row reads of :func:`drift_report` and :func:`headline`, without the rest.

    The report's ``needed_recall``, ``n_needed``, ``fact_recall`` and ``compression_ratio`` columns
    (as lists) and the headline's ``compactions``, ``mean_needed_recall``, ``mean_fact_recall`` and
    ``retention_after_1``, equal to theirs. Of the presence of every fact seen in every summary it
    checks only what retention after one rewrite needs: each summary's new facts that it holds,
    in the next summary. Arguments as :func:`drift_report`.
    """
    source = session_or_entries(result_or_session)
    spans = list(spans) if spans is not None else compaction_spans(source, leaf_id=leaf_id)
    records = compaction_records(source, leaf_id=leaf_id, spans=spans)
    needed_recall: list[float] = []
    n_needed: list[int] = []
    fact_recall: list[float] = []
    compression: list[float] = []
    introduced: set[tuple[str, str]] = set()
    captured: list[Fact] = []  # the previous summary's new facts that it held
    at_risk = kept = 0
    for span in spans:
        summ = parsed_summary(span.summary)
        facts, needed = span_needed_facts(records[span.index], include_thinking=include_thinking)
        index = index_of(summ.written_text)
        present = facts_present(facts, index)
        fact_recall.append(_ratio(sum(present), len(facts)))
        compression.append(_ratio(_tokens(m for _, m in iter_messages(span.messages)),
                                  _summary_tokens(summ.text)))
        needed_recall.append(weighted_recall(needed, [fact_present(n.fact, index) for n in needed]))
        n_needed.append(len(needed))
        if captured:
            held = facts_present(captured, index)
            at_risk, kept = at_risk + len(held), kept + sum(held)
        new: dict[tuple[str, str], tuple[Fact, bool]] = {}  # the report keeps a key's last fact
        for f, p in zip(facts, present):
            if f.key not in introduced:
                new[f.key] = (f, p)
        introduced.update(new)
        captured = [f for f, p in new.values() if p]

    def mean(values: list[float]) -> float:
        return float(np.nanmean(values)) if any(v == v for v in values) else math.nan

    return {
        "compactions": len(spans),
        "needed_recall": needed_recall,
        "n_needed": n_needed,
        "mean_needed_recall": mean(needed_recall),
        "fact_recall": fact_recall,
        "mean_fact_recall": mean(fact_recall),
        "retention_after_1": kept / at_risk if at_risk else math.nan,
        "compression_ratio": compression,
    }


def headline(report: pd.DataFrame) -> dict[str, Any]:
    """The headline numbers of a report: the ``score`` per compaction and its mean (the measure to quote:
    faithful needed-later recall × faithfulness), needed-later recall (the former headline: any fact held
    anywhere), mean fact recall (unweighted, length-sensitive), retention after 1/2/3 rewrites,
    compression ratios, conformance (format only)."""
    r = retention_by_age(report)
    ret = {int(a): float(v) for a, v in zip(r["age"], r["retention"])} if not r.empty else {}
    def col(name: str) -> list[float]:
        return [float(x) for x in report[name]] if name in report else []
    def mean(name: str) -> float:
        values = col(name)
        return float(np.nanmean(values)) if any(v == v for v in values) else math.nan

    return {
        "compactions": int(len(report)),
        "score": col("score"),  # the headline (pimem.drift.faithfulness), first
        "mean_score": mean("score"),
        "needed_recall": col("needed_recall"),
        "mean_needed_recall": float(np.nanmean(col("needed_recall")))
        if len(report) and "needed_recall" in report and report["needed_recall"].notna().any() else math.nan,
        "fact_recall": col("fact_recall"),
        "mean_fact_recall": float(np.nanmean(col("fact_recall"))) if len(report) else math.nan,
        "retention_after_1": ret.get(1, math.nan),
        "retention_after_2": ret.get(2, math.nan),
        "retention_after_3": ret.get(3, math.nan),
        "compression_ratio": col("compression_ratio"),
        "compression_ratio_with_prev": col("compression_ratio_with_prev"),
        "conformance": col("conformance"),
        "cumulative_loss": col("cumulative_loss"),
    }
