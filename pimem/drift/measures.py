"""Summary measures a reviewer can trust, and comparisons of summary sources on the same spans.

Every content measure reads only the text the summarizer wrote (:func:`pimem.text.sections.summarizer_text`:
no ``<read-files>``/``<modified-files>`` blocks, which ``compact()`` appends for any summarizer) and
grounds "what mattered" in the recorded trajectory (:mod:`pimem.drift.needed`), never in the
extractive summarizer's marker rules. The file lists are reported apart, as a check of Pi's pipeline.

The headline is ``score`` = ``recall_faithful`` × ``faithfulness`` (:mod:`pimem.drift.faithfulness`):
needed-later recall counted only in claims that the span or the previous summary supports and that say
something about their names (a fact found by the exact rules or, free text, by normalised words:
:func:`pimem.drift.paraphrase.normalized_holds`), times the share of the summary's counted claims that are
supported. Claims get one of three verdicts that matter — supported, contradicted (a changed value, a
negation, a reversed decision, or a state — done, passes, fails — that the span's last evidence contradicts:
:mod:`pimem.drift.evidence`), or unverifiable (nothing to check: neutral) — besides the unsupported
specifics (invented, from later, from another session). Recall alone pays a dump of names; faithfulness
alone pays saying little; their product pays neither, and an invented, stale, over-claimed, negated or
altered claim costs twice (it holds no recall and lowers faithfulness). How the measures order rewrites of
real summaries — made by rules, and written by reading (``datasets/metaeval/``) — is measured by
:mod:`pimem.drift.metaeval`.

:data:`MEASURES` says, for each column, what it measures, what it rewards and how it can be gamed.
:func:`summary_measures` computes them for one summary of one compaction; :func:`compare_sources`
puts any set of named summary sources side by side on the same compactions — the summaries stored in
a session (``"recorded"``, or any session file / replay result) and any summarizer, which then
summarizes exactly the recorded spans (:func:`pimem.drift.records.resummarize`), by default at the
recorded summary's length (``max_tokens="matched"``). :func:`recall_curve` gives needed-later recall
against summary tokens (each summary's first *B* tokens), so length cannot hide in a mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pimem.base.js import utf16_len
from pimem.text.facts import FACT_KINDS, Fact, SummaryIndex, extract_facts, fact_present
from pimem.drift.intervals import MIN_COMPACTION_FACTS
from pimem.drift.needed import FACT_CLASSES, NeededFact, carried_later_facts, needed_later_facts, weighted_recall
from pimem.drift.records import CompactionRecord, compaction_records, resummarize
from pimem.text.sections import parse_summary, section_items, summarizer_text
from pimem.core.llm import Summarizer
from pimem.errors import ArgumentTypeError, ConfigurationError
from pimem.base.tables import Column, Table, frame
from pimem.drift.faithfulness import faithfulness_measures
from pimem.sessions.load import SessionLike, session_or_entries

__all__ = ["MEASURES", "CONTENT_SECTIONS", "Comparison", "summary_measures", "compare_sources", "recall_curve",
           "measure_docs", "MEASURE_DOCS", "NEEDED_FACTS", "RECALL_CURVE"]

CONTENT_SECTIONS: tuple[str, ...] = ("goal", "constraints", "done", "in_progress", "blocked", "key_decisions",
                                     "next_steps", "critical_context")

# name -> (group, what it measures, what it rewards, how it can be gamed)
MEASURES: dict[str, tuple[str, str, str, str]] = {
    "score": (
        "headline",
        "recall_faithful × faithfulness: the needed-later facts the summary states in claims the span supports "
        "(each fact weighted by its class), times the share of its counted claims that the span and previous "
        "summary support; a claim that names nothing counts only when contradicted, a state claim (done, "
        "passes, fails) is checked against the span's last evidence (faithfulness 1 when it makes no claim)",
        "stating what the session went on to need — the user's asks and standing preferences, decisions, "
        "errors, written files, names — in sentences the conversation supports, in the state it ended in",
        "neither names nor invention pays: a bare list of names earns no recall, an invented, stale, "
        "over-claimed or contradicted claim lowers faithfulness, filler weighs nothing. Still missed: text "
        "copied from the span is faithful, so a dump of the user's and assistant's sentences scores 0.55 "
        "against the real summaries' 0.65 on the 86 scorable real compactions (at or above them in 31); "
        "support and contradiction are lexical (a paraphrased ask is not held, a false claim that names "
        "nothing is unverifiable). In order on 0.95 of 946 rule-made pairs and 0.85 of 342 pairs written by "
        "reading; out of sample 0.82 and 0.86 of the 90 of each fresh split (over-claims 0.70 and 0.90, false "
        "results 0.70 and 0.70, asks dropped 0.60 and 0.90, terse 0.80 and 0.65), 0.76 of the 99 held-out "
        "ones at first reading: benchmarks/README.md. A chat model can give "
        "the verdicts instead (judge=, any OpenAI-compatible endpoint); the bundled 0.5B model is no judge: "
        "on 144 claims whose truth was written by reading it never finds a contradiction and calls 0.20 of "
        "the real summaries' true claims supported (balanced accuracy 0.49, the rules 0.76; kappa with the "
        "rules 0.01): benchmarks/measures_judge.py",
    ),
    "recall_faithful": (
        "headline part",
        "needed-later recall counted only in supported, informative claims (two or more words of their own or "
        "of their lead-in besides their names, or names a word relates), each fact weighted by its class "
        "(3/3/2/2/1), pooled over the compaction's facts; a fact is held by the exact rules, or for free-text "
        "facts (constraints, decisions, errors) by normalised words; a heading never holds a fact",
        "keeping the needed facts in statements that are true of the span",
        "a long faithful summary: compare at matched length",
    ),
    "faithfulness": (
        "headline part",
        "share of the counted claims that the span or the previous summary supports: the claims that name "
        "something (a path, code name, number, command, id or quoted value) and are supported, contradicted, "
        "from later, from another session or invented, and the claims that name nothing when contradicted "
        "(pimem.drift.faithfulness)",
        "saying only what the conversation shows, in the state it ended in",
        "copying the span, or saying little: read with recall and length; NaN without a counted claim",
    ),
    "claims_unverifiable": ("faithfulness", "claims that name nothing the span could hold and that nothing "
                            "contradicts, and steps worded as intentions: neutral", "–", "a count"),
    "claims_contradicted": ("faithfulness", "claims the span states otherwise (changed value, negation, "
                            "reversed decision; a state its last evidence contradicts: pimem.drift.contradictions, "
                            "pimem.drift.evidence)", "–",
                            "a count; see contradicted_* (contradicted_state: over-claimed progress)"),
    "claims_from_later": ("faithfulness", "claims not supported by the span but by the session after the "
                          "compaction: knowledge the summarizer could not have had", "–", "a count"),
    "claims_other_session": ("faithfulness", "claims supported only by another session's text (when given)",
                             "–", "a count"),
    "claims_invented": ("faithfulness", "claims supported by nothing the summarizer saw, nor by the later "
                        "session", "–", "a count"),
    "claims_bare": ("faithfulness", "supported claims that only name things (a list of names)", "–",
                    "a count; a name dump is mostly bare claims"),
    "n_claims": ("faithfulness", "checkable claims (the faithfulness denominator)", "–", "not a score"),
    "needed_recall": (
        "content (former headline)",
        "needed-later recall per class (facts of the span that the recording used after the compaction "
        "and the kept tail does not show), averaged over the classes present with weights constraint 3, "
        "decision 3, error 2, written file 2, other names 1; a class of one fact weighs as much as a class "
        "of fifty, so a few facts carry most of it",
        "keeping what the session went on to need, above all the user's constraints and the decisions",
        "a dump of the span's names at the real summary's length beats real summaries; wrong or negated "
        "content costs nothing (the meta-evaluation, pimem.drift.metaeval); kept for comparison with "
        "earlier results, not as a headline",
    ),
    "needed_recall_constraint": (
        "content", "needed-later recall of the user's asks, preferences and prohibitions alone (the user's own "
        "words, nothing injected into the turn; a standing preference is needed while the session goes on)",
        "carrying the user's standing instructions forward",
        "quoting every user sentence with 'only', 'must', 'don't'... (what a dump does)",
    ),
    "needed_recall_decision": (
        "content", "needed-later recall of decisions alone", "stating the decisions the session kept acting on",
        "quoting every assistant sentence with 'instead of', 'decided'...",
    ),
    "needed_recall_error": (
        "content", "needed-later recall of errors that came back or were discussed later",
        "remembering failures the agent would otherwise repeat", "pasting every error line",
    ),
    "needed_recall_artifact": (
        "content", "needed-later recall of files the span wrote or edited",
        "keeping the artifact trail", "listing every modified path (the file blocks would, so they are stripped)",
    ),
    "needed_recall_reference": (
        "content", "needed-later recall of other paths, identifiers, commands and numbers",
        "exact names the agent used again", "a list of names without meaning",
    ),
    "needed_recall_all": (
        "content", "share of all needed-later facts held, each fact counting once",
        "holding many of the names the session used again", "a dump of names: the many references dominate",
    ),
    "n_needed": ("content", "how many needed-later facts the compaction has (the denominator); n_needed_<class> "
                 "per class says when a score is only name recall", "–",
                 "not a score; few needed facts make the recall noisy"),
    "few_needed": ("content", "flag: fewer than 5 needed-later facts (pimem.drift.intervals.MIN_COMPACTION_FACTS), "
                   "too few for this compaction's recall or score to mean much on its own", "–",
                   "not a score; pool such compactions (micro) rather than reading them one by one"),
    "needed_recall_carried": (
        "chain",
        "needed-later recall (class-weighted) of facts from earlier spans of the chain that the recording "
        "used after this compaction: what an update summary must carry over from the previous one",
        "keeping older needed facts through repeated rewrites",
        "never dropping anything (a summary that only grows); read with the summary's length",
    ),
    "cumulative_loss": (
        "chain (gameable)", "share of all facts seen so far that the summary no longer holds (drift report)",
        "holding every fact ever seen", "a fact dump stays near 0; unweighted, like fact_recall",
    ),
    "prev_retention": (
        "chain", "of the facts the previous summary held, the share this one still holds (drift report)",
        "stable summaries", "repeating the previous summary verbatim scores 1.0 whatever it held",
    ),
    "fact_recall": (
        "content (gameable)",
        "share of all facts the extractor finds in the span that the summary holds, unweighted",
        "length and exhaustiveness: most facts are trivial identifiers and commands",
        "the fact dump scores 1.0 without a length limit, being made by the same extractor; only meaningful "
        "at matched length and never as a headline",
    ),
    "content_sections": (
        "format", "share of the template's eight content sections that hold something other than (none)",
        "filling every section of Pi's template", "a line of filler per section; free-form summaries score low "
        "although they may hold the content",
    ),
    "conformance": (
        "format", "share of the template's sections present by heading",
        "following the template's headings", "the empty template scores 1.0",
    ),
    "budget_tokens": ("length", "the budget a summarizer was given (max_tokens): at matched length, the "
                      "recorded summary's written_tokens", "–", "not a score; NaN for stored summaries"),
    "written_tokens": ("length", "Pi's estimate (UTF-16 length ÷ 4) of the text the summarizer wrote",
                       "–", "not a score: the length every other column must be read against"),
    "stored_tokens": ("length", "Pi's estimate of the stored summary, file blocks included (its context cost)",
                      "–", "not a score"),
    "pipeline_read_recall": (
        "pipeline check", "the <read-files> block against Pi's true read-only list",
        "nothing the summarizer does: compact() writes the block", "every summarizer scores the same",
    ),
    "pipeline_modified_recall": (
        "pipeline check", "the <modified-files> block against Pi's true modified list",
        "nothing the summarizer does: compact() writes the block", "every summarizer scores the same",
    ),
    "rework_excess": (
        "recording (not a summary measure)",
        "what the recorded agent did after a real compaction beyond matched points of the same session without "
        "one: re-reads, re-runs, reverts, repeated instructions and questions (pimem.drift.rework; recordings only, "
        "a replay cannot show it)", "–",
        "not a score: read by rules, so a check the agent would have made anyway counts (the controls say how "
        "often); agents differ in habits, so compare an agent with its own controls",
    ),
    "orphan_rate": (
        "replay (not a summary measure)",
        "after a replayed compaction, the share of the recorded agent's later uses of span facts that the replayed "
        "context did not hold (pimem.replays.orphans): how far the replay's later turns can be trusted", "–",
        "describes the replay's cut and kept tail more than the summary; for what a real compaction cost, read "
        "rework_excess on the recording",
    ),
}


MEASURE_DOCS = Table("measure_docs", [
    Column("measure", description="the column of a comparison"),
    Column("group", description="what kind of measure it is (content, format, length, pipeline check, …)"),
    Column("measures", description="what it measures"),
    Column("rewards", description="what it rewards"),
    Column("gamed_by", description="how it can be gamed"),
], "One row per measure of :data:`MEASURES`.")

NEEDED_FACTS = Table("needed_facts", [
    Column("source", description="the summary source"),
    Column("compaction", description="the compaction"),
    Column("class", description="the fact's class (:data:`pimem.drift.needed.FACT_CLASSES`)"),
    Column("kind", description="the fact's kind"),
    Column("value", description="the fact"),
    Column("used_at", description="the entry that used it later"),
    Column("how", description="how it was used"),
    Column("present", description="the source's summary holds it"),
], "One row per needed-later fact and source.")

RECALL_CURVE = Table("recall_curve", [
    Column("source", description="the summary source"),
    Column("compaction", description="the compaction"),
    Column("budget", description="the budget B, tokens"),
    Column("tokens", description="Pi's estimate of the summary's first B tokens (≤ budget)"),
    Column("needed_recall", description="needed-later recall of that prefix"),
], "Needed-later recall of each summary's first B tokens, for each budget B.")


def measure_docs() -> pd.DataFrame:
    """:data:`MEASURES` as a table."""
    return MEASURE_DOCS.frame([{"measure": k, "group": g, "measures": what, "rewards": rew, "gamed_by": gam}
                               for k, (g, what, rew, gam) in MEASURES.items()])


MEASURE_DOCS.document(measure_docs)


def _tokens(text: str) -> int:
    return math.ceil(utf16_len(text) / 4)


def _pr(predicted: list[str] | None, truth: list[str]) -> tuple[float, float]:
    if predicted is None:
        return math.nan, math.nan
    p, t = set(predicted), set(truth)
    precision = len(p & t) / len(p) if p else (1.0 if not t else 0.0)
    recall = len(p & t) / len(t) if t else math.nan
    return precision, recall


def summary_measures(
    record: CompactionRecord,
    summary: str | None = None,
    *,
    needed: Sequence[NeededFact] | None = None,
    span_facts: Sequence[Fact] | None = None,
    weights: Mapping[str, float] | None = None,
    carried: Sequence[NeededFact] | None = None,
    others: Sequence[Any] = (),
    matcher: Any = "normalized",
    judge: Any = None,
) -> dict[str, Any]:
    """The measures of :data:`MEASURES` for one summary (default: the record's stored one) of one compaction.

    ``others``: :class:`pimem.drift.faithfulness.SourceText` of other sessions, so that claims taken from
    them are counted as ``claims_other_session`` rather than invented. ``matcher``: how the headline's
    recall finds a fact in the supported claims (``"normalized"``, ``"rules"``, ``"embedding"`` or a callable;
    :func:`pimem.drift.faithfulness.faithfulness_measures`); the old recall columns always use the rules.
    ``judge``: a :class:`pimem.drift.faithfulness.ClaimJudge` (a chat model) that gives the claims' verdicts
    instead of the rules (default None: the rules, offline).
    """
    stored = record.summary if summary is None else summary
    written = summarizer_text(stored)
    parsed = parse_summary(stored)
    index = SummaryIndex(written)
    needed = list(needed) if needed is not None else needed_later_facts(record, weights=weights)
    facts = list(span_facts) if span_facts is not None else extract_facts(record.span)
    present = [fact_present(n.fact, index) for n in needed]
    row: dict[str, Any] = {
        "written_tokens": _tokens(written),
        "stored_tokens": _tokens(stored),
        "needed_recall": weighted_recall(needed, present),
        "needed_recall_all": sum(present) / len(needed) if needed else math.nan,
        "n_needed": len(needed),
        "few_needed": len(needed) < MIN_COMPACTION_FACTS,
    }
    for cls in FACT_CLASSES:
        flags = [p for n, p in zip(needed, present) if n.cls == cls]
        row[f"needed_recall_{cls}"] = sum(flags) / len(flags) if flags else math.nan
        row[f"n_needed_{cls}"] = len(flags)
    if carried is not None:
        row["needed_recall_carried"] = weighted_recall(carried, [fact_present(n.fact, index) for n in carried])
        row["n_carried"] = len(carried)
    held = [fact_present(f, index) for f in facts]
    row["fact_recall"] = sum(held) / len(facts) if facts else math.nan
    for kind in FACT_KINDS:
        flags = [h for f, h in zip(facts, held) if f.kind == kind]
        row[f"fact_recall_{kind}"] = sum(flags) / len(flags) if flags else math.nan
    items = section_items(parsed)
    row["content_sections"] = sum(bool(items[k]) for k in CONTENT_SECTIONS) / len(CONTENT_SECTIONS)
    row["conformance"] = parsed.conformance.score
    blocks = parsed.conformance.files_block_present
    row["pipeline_read_precision"], row["pipeline_read_recall"] = _pr(
        (parsed.read_files or []) if blocks else None, record.read_files)
    row["pipeline_modified_precision"], row["pipeline_modified_recall"] = _pr(
        (parsed.modified_files or []) if blocks else None, record.modified_files)
    row.update(faithfulness_measures(record, stored, needed=needed, others=others, matcher=matcher, judge=judge))
    return row


# --------------------------------------------------------------------------- sources side by side


@dataclass
class Comparison:
    """Summary sources measured on the same compactions (see :func:`compare_sources`); ``table``:
    measures × sources (mean over the compactions a source summarized).

    Args:
        per_compaction: one row per source × compaction (``source``, ``kind``, ``compaction``,
            ``max_tokens``, ``error``, then the measures).
        summaries: the stored texts per source.
        records: the compactions each source was measured on.
        needed: the needed-later facts per source and compaction.
        notes: what the comparison could not do as asked (cuts elsewhere, a record's own notes).
        summarizers: the summarizer of each source that is one.
    """

    per_compaction: pd.DataFrame
    summaries: dict[str, list[str | None]]
    records: dict[str, list[CompactionRecord]]
    needed: dict[str, list[list[NeededFact]]]
    notes: list[str] = field(default_factory=list)
    summarizers: dict[str, Any] = field(default_factory=dict)

    @property
    def sources(self) -> list[str]:
        return list(self.summaries)

    @property
    def table(self) -> pd.DataFrame:
        """Measures × sources: the mean over the compactions each source summarized (see
        :attr:`compaction_table` for each compaction apart, whose ``n_needed`` says how much each rests on)."""
        cols = [c for c in MEASURES if c in self.per_compaction.columns]
        if self.per_compaction.empty:
            return frame(index=cols, columns=self.sources, dtype=float)
        means = self.per_compaction.groupby("source", sort=False)[cols].mean(numeric_only=True)
        return means.T.reindex(columns=self.sources)

    @property
    def compaction_table(self) -> pd.DataFrame:
        """Measures × (compaction, source): :attr:`table` per compaction, so that a mean carried by one
        compaction with a single needed fact is seen as such."""
        cols = [c for c in MEASURES if c in self.per_compaction.columns]
        if self.per_compaction.empty:
            return frame(index=cols, columns=pd.MultiIndex.from_tuples([], names=["compaction", "source"]),
                         dtype=float)
        wide = self.per_compaction.set_index(["compaction", "source"])[cols].T
        order = [(c, s) for c in dict.fromkeys(self.per_compaction["compaction"]) for s in self.sources
                 if (c, s) in wide.columns]
        return wide.reindex(columns=pd.MultiIndex.from_tuples(order, names=["compaction", "source"]))

    def curve(self, budgets: Sequence[int] | None = None) -> pd.DataFrame:
        """Needed-later recall against summary tokens (see :func:`recall_curve`)."""
        return recall_curve(self, budgets)

    def facts(self) -> pd.DataFrame:
        """One row per needed-later fact and source (:data:`NEEDED_FACTS`)."""
        rows = []
        for source, per in self.needed.items():
            for rec, needed, stored in zip(self.records[source], per, self.summaries[source]):
                index = SummaryIndex(summarizer_text(stored)) if stored is not None else None
                for n in needed:
                    rows.append({"source": source, "compaction": rec.index, "class": n.cls, "kind": n.fact.kind,
                                 "value": n.fact.value, "used_at": n.used_at, "how": n.how,
                                 "present": bool(index is not None and fact_present(n.fact, index))})
        return NEEDED_FACTS.frame(rows)


def compare_sources(
    session: SessionLike | Sequence[dict],
    sources: Mapping[str, SessionLike | Summarizer],
    *,
    max_tokens: int | str | Sequence[int] | None = "matched",
    weights: Mapping[str, float] | None = None,
    leaf_id: str | None = None,
    horizon: str = "end",
    records: list[CompactionRecord] | None = None,
    matched: bool | None = None,
) -> Comparison:
    """Measure named summary sources on the compactions of ``session``.

    A source is ``"recorded"`` (the summaries stored in ``session``), another session — a
    :class:`pimem.Session`, a session file path or a replay result — whose own compactions are
    measured against its own spans, or a summarizer (anything with ``complete``), which summarizes
    the recorded spans of ``session`` exactly (:func:`pimem.drift.records.resummarize`). Adding a
    column needs only another entry. The budget each summarizer got is the ``budget_tokens`` row of
    :attr:`Comparison.table`.

    Args:
        session: the reference session (anything :func:`pimem.as_session` takes, or a list of entries).
        sources: name → source, as above.
        max_tokens: the summarizers' budget: ``"matched"`` (default) gives each compaction the length of
            the summary ``session`` recorded for it, an int or one int per compaction a fixed budget,
            None Pi's own ``0.8 × reserveTokens``.
        weights: the weight of each class of needed-later fact (default :data:`~pimem.drift.needed.DEFAULT_WEIGHTS`).
        leaf_id: the leaf whose path is measured (default: the session's current leaf).
        horizon: how far after a compaction a later use counts: ``"end"`` (to the leaf) or ``"next"`` (to the
            next compaction).
        records: the session's :func:`~pimem.drift.records.compaction_records`, to reuse them (and their
            cached needed-later facts) across comparisons.
        matched: ``True`` is ``max_tokens="matched"``, ``False`` Pi's own budget (``max_tokens=None``);
            giving both with different meanings is an error.
    """
    session = session_or_entries(session)
    reference = records if records is not None else compaction_records(session, leaf_id=leaf_id, horizon=horizon)
    notes: list[str] = []
    if matched is not None:
        if not isinstance(matched, bool):
            raise ConfigurationError(f"matched must be True or False, not {matched!r}")
        wanted: Any = "matched" if matched else None
        if max_tokens not in ("matched", wanted):
            raise ConfigurationError(f"matched={matched} contradicts max_tokens={max_tokens!r}: give one of them "
                                     f"(matched=True is max_tokens='matched', matched=False is max_tokens=None)")
        max_tokens = wanted
    if max_tokens == "matched":
        budgets: Any = [max(1, _tokens(r.written)) for r in reference]
    elif isinstance(max_tokens, str):
        raise ConfigurationError(f"max_tokens must be 'matched', an int, a list of ints or None, not {max_tokens!r}")
    else:
        budgets = max_tokens
    cache: dict[int, tuple[list[NeededFact], list[Fact], list[NeededFact]]] = {}

    def needed_for(recs: list[CompactionRecord], k: int) -> tuple[list[NeededFact], list[Fact], list[NeededFact]]:
        rec = recs[k]
        key = id(rec.span)
        if key not in cache:
            cache[key] = (needed_later_facts(rec, weights=weights), extract_facts(rec.span),
                          carried_later_facts(recs, k, weights=weights))
        return cache[key]

    rows: list[dict[str, Any]] = []
    summaries: dict[str, list[str | None]] = {}
    records_by: dict[str, list[CompactionRecord]] = {}
    needed_by: dict[str, list[list[NeededFact]]] = {}
    summarizers: dict[str, Any] = {}
    for name, src in sources.items():
        errors: list[str | None]
        limits: list[Any]
        if isinstance(src, str) and src == "recorded":
            recs, kind = reference, "recorded"
            texts: list[str | None] = [r.summary for r in recs]
            errors, limits = [None] * len(recs), [None] * len(recs)
        elif isinstance(src, Summarizer):  # anything with complete()
            out = resummarize(session, src, max_tokens=budgets, leaf_id=leaf_id)
            summarizers[name] = src
            recs, kind = reference, "summarizer"
            texts, errors, limits = out.summaries, out.errors, out.max_tokens
        else:
            try:
                other = session_or_entries(src)
            except ArgumentTypeError:
                raise ArgumentTypeError(f"source {name!r}: expected 'recorded', a session, a session file, a replay "
                                        f"result or a summarizer; got {type(src).__name__}") from None
            recs, kind = compaction_records(other, horizon=horizon), "recorded"
            texts = [r.summary for r in recs]
            errors, limits = [None] * len(recs), [None] * len(recs)
            if [r.entry.get("firstKeptEntryId") for r in recs] != [r.entry.get("firstKeptEntryId") for r in reference]:
                notes.append(f"{name}: its compactions cut elsewhere than the reference's; each is measured "
                             f"on its own span, kept tail and later trajectory")
        summaries[name] = texts
        records_by[name] = recs
        needed_by[name] = []
        for k, (rec, text, error, limit) in enumerate(zip(recs, texts, errors, limits)):
            needed, facts, carried = needed_for(recs, k)
            needed_by[name].append(needed)
            row: dict[str, Any] = {"source": name, "kind": kind, "compaction": rec.index, "max_tokens": limit,
                                   "budget_tokens": float(limit) if isinstance(limit, (int, float)) else math.nan,
                                   "error": error}
            if text is not None:
                row.update(summary_measures(rec, text, needed=needed, span_facts=facts, weights=weights,
                                            carried=carried))
            rows.append(row)
    for rec in reference:
        notes.extend(f"compaction {rec.index}: {n}" for n in rec.notes)
    return Comparison(frame(rows), summaries, records_by, needed_by, notes, summarizers)


def recall_curve(comparison: Comparison, budgets: Sequence[int] | None = None) -> pd.DataFrame:
    """Needed-later recall of each summary's first *B* tokens (Pi's estimate), for each budget *B*.

    Args:
        comparison: what :func:`compare_sources` returned.
        budgets: the budgets in tokens (default: 16 steps up to the longest summary written).
    """
    longest = max((_tokens(summarizer_text(t)) for texts in comparison.summaries.values() for t in texts
                   if t is not None), default=0)
    if budgets is None:
        budgets = sorted({max(1, round(longest * (i / 16) ** 2)) for i in range(1, 17)}) if longest else []
    rows = []
    for source, texts in comparison.summaries.items():
        for rec, needed, stored in zip(comparison.records[source], comparison.needed[source], texts):
            if stored is None:
                continue
            written = summarizer_text(stored)
            full = [fact_present(n.fact, SummaryIndex(written)) for n in needed]
            units = written.encode("utf-16-le", "surrogatepass")
            for b in budgets:
                if b * 8 >= len(units):
                    present, tokens = full, _tokens(written)
                else:
                    prefix = units[: b * 8].decode("utf-16-le", errors="ignore")
                    index = SummaryIndex(prefix)
                    # a fact the whole summary lacks is not in a prefix of it
                    present = [p and fact_present(n.fact, index) for n, p in zip(needed, full)]
                    tokens = _tokens(prefix)
                rows.append({"source": source, "compaction": rec.index, "budget": int(b),
                             "tokens": tokens, "needed_recall": weighted_recall(needed, present)})
    return RECALL_CURVE.frame(rows)


RECALL_CURVE.document(recall_curve)
