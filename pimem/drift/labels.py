"""The automatic matcher against a hand-labelled set: how far to trust "the summary holds this fact".

A labelled set (``datasets/labels/*.facts.jsonl``, made by reading the summaries; see the README
beside it) lists facts of recorded compaction spans, each marked ``present`` / ``absent`` /
``contradicted`` in the summary that compaction wrote, with ``used_later`` from the recording.
:func:`matcher_check` runs a matcher over every labelled fact against that summary's text (file
blocks stripped) and scores it with ``present`` as the positive class (contradicted counts as not
present): precision = share of the matcher's "present" calls the reader agrees with, recall =
share of the reader's "present" facts the matcher finds. It does the same for the automatic
"used later" test of :mod:`pimem.drift.needed`.

Matchers: ``"rules"`` (:func:`pimem.text.facts.fact_present`; reader facts of kinds it has no rule
for — goal, progress, artifact — are matched as free text), ``"normalized"``
(:func:`pimem.drift.paraphrase.normalized_matcher`), ``"embedding"`` (:func:`pimem.drift.embedding.embedding_matcher`,
the optional sentence-embedding model) or an :class:`EntailmentMatcher`, which asks a chat model whether the
summary states the fact. :func:`label_split` gives each fact its half (tune / held-out).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pimem.base.files import labelled_rows
from pimem.base.bundled import bundled_dir
from pimem.drift.chat import JudgeError, ask, require_chat_model
from pimem.text.facts import FACT_KINDS, Fact, SummaryIndex, numbers_in_text, fact_present, fold, normalize_path
from pimem.errors import ConfigurationError, LabelFormatError
from pimem.base.tables import Column, Table, frame
from pimem.drift.needed import used_later as auto_used
from pimem.drift.embedding import EmbeddingModel, embedding_matcher, load_embedding_model, max_similarity, tune_threshold
from pimem.drift.intervals import cluster_interval, cohen_kappa  # cohen_kappa: also read from here
from pimem.drift.metaeval import pi_records
from pimem.drift.paraphrase import FREE_TEXT_KINDS, normalized_matcher, rule_matcher
from pimem.drift.records import compaction_records
from pimem.sessions.load import load_session as load_any_session, session_or_entries
from pimem.text.sections import summarizer_text

__all__ = ["cohen_kappa", "LABEL_FIELDS", "LabelFormatError", "labels_dir", "load_labels", "label_split", "label_fact", "rule_matcher", "matcher_accuracy", "tuned_thresholds", "label_records", "contradiction_figures", "EntailmentMatcher",
           "MatcherCheck", "matcher_check", "precision_recall"]

LABEL_FIELDS: tuple[str, ...] = ("id", "compaction_id", "compaction_index", "kind", "text", "source_entry_id",
                                 "source_quote", "origin", "label", "evidence", "important", "used_later",
                                 "used_later_entry_id", "notes")
LABELS = ("present", "absent", "contradicted")


def labels_dir() -> Path:
    """The bundled hand-labelled sets (``datasets/labels`` of a source checkout, ``pimem/data/labels`` of a wheel)."""
    return bundled_dir("labels", "*.facts.jsonl")


def load_labels(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a labelled-facts JSONL file into a DataFrame (one row per fact, the fields of :data:`LABEL_FIELDS`
    plus ``extractor_value`` when present). Raises :class:`LabelFormatError` naming file and line."""
    path = Path(path)
    rows: list[dict] = []
    for where, row in labelled_rows(path, LABEL_FIELDS):
        if row["label"] not in LABELS:
            raise LabelFormatError(f"{where}: label {row['label']!r} is not one of {list(LABELS)}")
        if not isinstance(row["text"], str) or not row["text"].strip():
            raise LabelFormatError(f"{where}: empty text")
        if not isinstance(row["used_later"], bool) and row["used_later"] is not None:
            raise LabelFormatError(f"{where}: used_later must be true, false or null")
        rows.append(row)
    if not rows:
        raise LabelFormatError(f"{path}: no labelled facts")
    return frame(rows)


def label_split(fact_id: str) -> str:
    """``"heldout"`` when the SHA-256 of the fact's id is odd, else ``"tune"``: the fixed halves of a labelled
    set (the contradiction set's rule), so that a threshold chosen on one half is judged on the other."""
    return "heldout" if int(hashlib.sha256(fact_id.encode("utf-8")).hexdigest(), 16) % 2 else "tune"


def label_fact(row: Any) -> Fact:
    """The labelled fact as a :class:`~pimem.text.facts.Fact` the matchers read.

    Extractor facts keep the extractor's value (their text is the surface); reader facts of a kind
    the rules have no test for (goal, progress, artifact) are free text, judged like decisions.
    """
    kind = str(row["kind"])
    text = str(row["text"])
    value = row.get("extractor_value") if hasattr(row, "get") else None
    if isinstance(value, float) and math.isnan(value):
        value = None
    if kind not in FACT_KINDS:
        kind = "decision"
    if not value:
        if kind == "path":
            value = normalize_path(text) or text
        elif kind == "number":
            numbers = numbers_in_text(text)
            value = numbers[0][0] if numbers else fold(text)
        elif kind == "identifier":
            value = re.sub(r"\(\)$", "", text.strip())
        else:
            value = fold(text)
    return Fact(kind, str(value), row.get("source_entry_id"), -1, 0, "user", "label", text)


ENTAILMENT_SYSTEM = (
    "You check whether a summary of a coding session states a fact. Judge meaning, not wording: a paraphrase "
    "or a more specific statement counts as stating it. Reply with exactly one word: PRESENT if the summary "
    "states the fact, CONTRADICTED if it states something incompatible with it, ABSENT otherwise."
)
ENTAILMENT_PROMPT = "<summary>\n{summary}\n</summary>\n\n<fact kind=\"{kind}\">\n{fact}\n</fact>\n\nPRESENT, ABSENT or CONTRADICTED?"


class EntailmentMatcher:
    """Asks a chat model whether a summary states a fact (PRESENT / ABSENT / CONTRADICTED).

    ``model``: an :class:`~pimem.summarizers.OpenAISummarizer` for any OpenAI-compatible endpoint
    (wrap it in :class:`~pimem.summarizers.CachedSummarizer` to cache); anything that is not a chat
    model raises :class:`~pimem.drift.chat.NotAChatModelError`. An unreadable answer raises
    :class:`~pimem.drift.chat.JudgeError` (recorded per fact by :func:`matcher_check`).
    """

    def __init__(self, model: Any, *, max_tokens: int = 16) -> None:
        require_chat_model(model, "entailment matcher")
        self.model = model
        self.max_tokens = max_tokens

    def __call__(self, fact: Fact, summary: str) -> str:
        answer = ask(self.model, ENTAILMENT_SYSTEM,
                     ENTAILMENT_PROMPT.format(summary=summary, kind=fact.kind, fact=fact.surface or fact.value),
                     max_tokens=self.max_tokens)
        words = re.findall(r"\b(PRESENT|ABSENT|CONTRADICTED)\b", answer.upper())
        if len(set(words)) != 1:
            raise JudgeError(f"expected one of PRESENT, ABSENT, CONTRADICTED; got {answer[:80]!r}")
        return words[0].lower()


def precision_recall(truth: Sequence[bool], predicted: Sequence[bool]) -> dict[str, float]:
    """TP, FP, FN, TN, precision (NaN with no positive call) and recall (NaN with no positive truth)."""
    tp = sum(t and p for t, p in zip(truth, predicted))
    fp = sum((not t) and p for t, p in zip(truth, predicted))
    fn = sum(t and not p for t, p in zip(truth, predicted))
    tn = sum((not t) and (not p) for t, p in zip(truth, predicted))
    return {"n": tp + fp + fn + tn, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": tp / (tp + fp) if tp + fp else math.nan,
            "recall": tp / (tp + fn) if tp + fn else math.nan}


@dataclass
class MatcherCheck:
    """Per-fact verdicts (``facts``) and the precision/recall tables."""

    facts: pd.DataFrame

    def table(self, by: str = "kind", column: str = "predicted_present", truth: str = "label_present") -> pd.DataFrame:
        """Precision/recall of ``column`` against ``truth`` per value of ``by`` and over all facts."""
        df = self.facts[self.facts[column].notna()]
        rows = []
        for key, group in list(df.groupby(by, sort=True)) + [("all", df)]:
            rows.append({by: key, **precision_recall(list(group[truth].astype(bool)), list(group[column].astype(bool)))})
        return frame(rows)

    def used_later_table(self, by: str = "kind") -> pd.DataFrame:
        """The automatic used-later test against the reader's ``used_later``."""
        df = self.facts[self.facts["label_used_later"].notna() & self.facts["auto_used_later"].notna()]
        rows = []
        for key, group in list(df.groupby(by, sort=True)) + [("all", df)]:
            rows.append({by: key, **precision_recall(list(group["label_used_later"].astype(bool)),
                                                     list(group["auto_used_later"].astype(bool)))})
        return frame(rows)

    @property
    def errors(self) -> pd.DataFrame:
        return self.facts[self.facts["error"].notna()]


def matcher_check(
    labels: pd.DataFrame | str | os.PathLike[str],
    session: Any,
    matcher: str | Callable[[Fact, str], str] = "rules",
    *,
    used_later: bool = True,
) -> MatcherCheck:
    """Run ``matcher`` over every labelled fact against its compaction's summary (see module docs).

    Columns of ``.facts``: the label fields, ``predicted`` (present / absent / contradicted, None on
    error), ``predicted_present``, ``label_present``, ``split`` (:func:`label_split`), ``agree``, ``error``, and — with ``used_later`` —
    ``auto_used_later`` against ``label_used_later``.

    Args:
        labels: the labelled facts (a table, or the file :func:`load_labels` reads).
        session: the recorded session the labels were made on (its compaction ids must match).
        matcher: ``"rules"``, ``"normalized"``, ``"embedding"`` or a callable (fact, summary) → label.
        used_later: also check the automatic needed-later decision against the labels'.
    """
    df = load_labels(labels) if not isinstance(labels, pd.DataFrame) else labels.copy()
    session = session_or_entries(session)
    records = {r.entry.get("id"): r for r in compaction_records(session)}
    unknown = sorted(set(df["compaction_id"]) - set(records))
    if unknown:
        raise LabelFormatError(f"labels name compaction(s) {unknown} that are not on the session's active path")
    match: Any = matcher
    if matcher == "rules":
        match = rule_matcher
    elif matcher == "normalized":
        match = normalized_matcher
    elif matcher == "embedding":
        match = embedding_matcher()
    if not callable(match):
        raise ConfigurationError(f"matcher must be 'rules', 'normalized', 'embedding' or a callable (fact, summary) "
                                 f"-> label; got {matcher!r}")
    texts = {cid: summarizer_text(r.summary) for cid, r in records.items()}
    facts = [label_fact(row) for _, row in df.iterrows()]
    predicted: list[str | None] = []
    errors: list[str | None] = []
    for fact, cid in zip(facts, df["compaction_id"]):
        try:
            verdict = match(fact, texts[cid])
            if verdict not in LABELS:
                raise JudgeError(f"matcher returned {verdict!r}")
            predicted.append(verdict)
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 - a failed verdict is recorded per fact
            predicted.append(None)
            errors.append(f"{type(exc).__name__}: {exc}")
    df["predicted"] = predicted
    df["error"] = errors
    df["predicted_present"] = [None if p is None else p == "present" for p in predicted]
    df["label_present"] = df["label"] == "present"
    df["split"] = [label_split(str(i)) for i in df["id"]]
    df["agree"] = [None if p is None else p == t for p, t in zip(predicted, df["label"])]
    df["label_used_later"] = df["used_later"]
    if used_later:
        auto: list[bool] = []
        by_compaction: dict[str, list[int]] = {}
        for i, cid in enumerate(df["compaction_id"]):
            by_compaction.setdefault(cid, []).append(i)
        flags: dict[int, bool] = {}
        for cid, rows in by_compaction.items():
            chosen = [facts[i] for i in rows]
            used = auto_used(records[cid], chosen)
            for i, f in zip(rows, chosen):
                flags[i] = f.key in used
        auto = [flags[i] for i in range(len(df))]
        df["auto_used_later"] = auto
    else:
        df["auto_used_later"] = None
    return MatcherCheck(df)


_CONFUSION = [
    Column("n", description="facts or claims checked"),
    Column("tp", description="true positives"),
    Column("fp", description="false positives"),
    Column("fn", description="false negatives"),
    Column("tn", description="true negatives"),
]

MATCHER_ACCURACY = Table("matcher_accuracy", [
    Column("matcher", description="the matcher's name"),
    Column("facts", description="``all`` or ``free text``"),
    *_CONFUSION,
    Column("precision", description="tp ÷ (tp + fp)"),
    Column("recall", description="tp ÷ (tp + fn)"),
], "Precision and recall of \"present\" per matcher and subset of facts.")

CONTRADICTION_FIGURES = Table("contradiction_figures", [
    Column("split", description="the labels' split"),
    Column("n", description="claims checked"),
    Column("n_contradicted", description="claims labelled contradicted"),
    Column("n_sessions", description="sessions"),
    Column("n_compactions", description="compactions"),
    *_CONFUSION[1:],
    *(Column(f"{name}{part}", description=f"{name}{what}")
      for name in ("precision", "recall")
      for part, what in (("", ""), ("_low", ", interval's low end"), ("_high", ", interval's high end"),
                         ("_note", ": why the interval is NaN, if it is")))
], "Precision and recall of \"contradicted\" per split, with bootstrap intervals.")


def matcher_accuracy(labels: Any, session: Any, matchers: dict[str, Any]) -> Any:
    """Precision and recall of "present" for each named matcher on a labelled-facts set
    (:func:`pimem.drift.labels.matcher_check`), over all facts and over the free-text ones: one row per
    matcher and subset, with n, TP, FP, FN, TN."""
    rows = []
    for name, matcher in matchers.items():
        facts = matcher_check(labels, session, matcher, used_later=False).facts
        facts = facts[facts["predicted_present"].notna()]
        free = facts[facts["kind"].isin(FREE_TEXT_KINDS)]
        for subset, part in (("all", facts), ("free text", free)):
            rows.append({"matcher": name, "facts": subset,
                         **precision_recall(list(part["label_present"].astype(bool)),
                                            list(part["predicted_present"].astype(bool)))})
    return MATCHER_ACCURACY.frame(rows)


def tuned_thresholds(labels: Any, session: Any, *, split: str = "tune",
                     model: EmbeddingModel | None = None) -> dict[str, float]:
    """The thresholds :func:`pimem.drift.embedding.tune_threshold` picks on one half of a labelled-facts set (see
    :func:`label_split`): ``"rules"`` for the default matcher (facts the normalised matcher
    finds count as found, names it misses stay missed), ``"embedding"`` for similarity alone."""
    session = session_or_entries(session)
    texts = {r.entry.get("id"): summarizer_text(r.summary) for r in compaction_records(session)}
    facts = matcher_check(labels, session, "normalized", used_later=False).facts
    rows = [row for _, row in facts[facts["split"] == split].iterrows()]
    model = model or load_embedding_model()
    label_facts = [label_fact(row) for row in rows]
    sims = [max_similarity([(f.surface or f.value)], texts[row["compaction_id"]], model)[0] for f, row in zip(label_facts, rows)]
    truth = [bool(row["label_present"]) for row in rows]
    found = [bool(row["predicted_present"]) for row in rows]
    free = [f.kind in FREE_TEXT_KINDS for f in label_facts]
    return {"rules": tune_threshold([s if k else -1.0 for s, k in zip(sims, free)], truth, decided=found),
            "embedding": tune_threshold(sims, truth)}


def label_records(labels: Any, shared_dir: str | Any) -> dict[str, list[Any]]:
    """The compaction records the labelled claims refer to, by their ``session``: the real Pi sessions
    (a file name of ``datasets/pi-mono``) and Claude Code transcripts (a path under ``datasets/``, such as
    ``claude-code/entireio-cli/…jsonl``) of the shared folder. A label whose ``compaction_uuid`` is not the
    id of compaction ``compaction_index`` of its file raises :class:`LabelFormatError`."""
    root = os.path.join(os.fspath(shared_dir), "datasets")
    records: dict[str, list[Any]] = dict(pi_records(os.path.join(root, "pi-mono")))
    for session in sorted(set(labels["session"]) - set(records)):
        file = os.path.join(root, session)
        if not os.path.exists(file):
            raise LabelFormatError(f"labels refer to {session}, which is not in {root}")
        records[session] = compaction_records(load_any_session(file))
    if "compaction_uuid" in labels:
        for _, row in labels.iterrows():
            uuid = row["compaction_uuid"]
            recs = records[row["session"]]
            index = int(row["compaction_index"])
            if isinstance(uuid, str) and (index >= len(recs) or str(recs[index].entry.get("id")) != uuid):
                raise LabelFormatError(f"label {row['id']}: compaction {index} of {row['session']} is not {uuid}")
    return records


def contradiction_figures(checked: Any, *, level: float = 0.95, seed: int = 0) -> Any:
    """Precision and recall of "contradicted" per ``split`` of a :func:`pimem.drift.faithfulness.contradiction_check` result, with
    n, the confusion counts and a two-stage bootstrap interval over sessions and compactions
    (:func:`pimem.drift.intervals.cluster_interval`; NaN with a note where its coverage does not support
    ``level``)."""
    rows = []
    for split, part in checked.groupby("split", sort=True):
        truth, predicted = part["truth"].astype(bool), part["predicted"].astype(bool)
        sessions = list(part["session"])
        compactions = [f"{s}#{i}" for s, i in zip(part["session"], part["compaction_index"])]
        tp, fp = int((truth & predicted).sum()), int((~truth & predicted).sum())
        fn, tn = int((truth & ~predicted).sum()), int((~truth & ~predicted).sum())
        row: dict[str, Any] = {"split": split, "n": len(part), "n_contradicted": tp + fn,
                               "n_sessions": len(set(sessions)), "n_compactions": len(set(compactions)),
                               "tp": tp, "fp": fp, "fn": fn, "tn": tn}
        for name, mask, values in (("precision", predicted, truth), ("recall", truth, predicted)):
            keep = list(mask)
            if not any(keep):
                row.update({name: math.nan, f"{name}_low": math.nan, f"{name}_high": math.nan, f"{name}_note": "none"})
                continue
            iv = cluster_interval([float(v) for v, k in zip(values, keep) if k],
                                  [g for g, k in zip(sessions, keep) if k],
                                  [c for c, k in zip(compactions, keep) if k], level=level, seed=seed)
            row.update({name: iv.estimate, f"{name}_low": iv.low, f"{name}_high": iv.high, f"{name}_note": iv.note})
        rows.append(row)
    return CONTRADICTION_FIGURES.frame(rows)
