"""Summary drift and quality: what a compaction summary keeps, loses, and how it drifts.

* :func:`parse_summary` — template sections, split-turn part, file blocks, conformance;
  :func:`summarizer_text` — the part of a stored summary the summarizer wrote (no file blocks).
* :func:`extract_facts` — checkable facts of a span (paths, identifiers, errors, commands,
  numbers with units, user constraints, decisions), with :func:`fact_present`.
* :func:`compaction_metrics` — one summary against its span.
* :func:`drift_report` — one row per compaction of a chain, with tidy views
  :func:`retention_by_age`, :func:`survival_curves`, :func:`section_similarity`,
  :func:`lost_facts` and :func:`headline`; :func:`chain_headline` — the headline's recall,
  retention and compression numbers without the rest of the report (what a sweep row reads).
* :func:`compaction_records` — each compaction with its span, kept tail and what the recording
  did afterwards; :func:`needed_later_facts` and :func:`summary_measures` — the measures grounded
  in that trajectory; :func:`compare_sources` — measures × summary sources on the same spans;
  :func:`recall_curve` — recall against summary tokens.
* :func:`rework_points` — what the recorded agent did after each compaction (re-reads, re-runs, reverts,
  repeated instructions and questions, returns to a finished task, the way to new progress) and at
  matched points without one; :func:`rework_corpus`, :func:`rework_table` and
  :func:`rework_correlations` — over many sessions, per agent, and the measures held against it
  (:mod:`pimem.drift.rework`).
* :func:`matcher_check` — the automatic matcher against a hand-labelled set; :class:`ClaimJudge` — a
  chat model's verdicts on a summary's claims instead of the rules (optional), and
  :func:`judge_agreement` — how often they agree.
* :func:`generate_probes` / :func:`probe_eval` — session-specific questions, answered from
  summary + kept context and graded 0–5 on six dimensions by a chat-model judge.

Names are imported lazily: ``pimem.text.sections`` can be used without pulling in pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # sections
    "Conformance": "pimem.text.sections",
    "SummarySections": "pimem.text.sections",
    "parse_summary": "pimem.text.sections",
    "section_items": "pimem.text.sections",
    "summarizer_text": "pimem.text.sections",
    # facts
    "FACT_KINDS": "pimem.text.facts",
    "Fact": "pimem.text.facts",
    "SummaryIndex": "pimem.text.facts",
    "extract_facts": "pimem.text.facts",
    "fact_present": "pimem.text.facts",
    "facts_frame": "pimem.text.facts",
    "summary_facts": "pimem.text.facts",
    # chain metrics
    "CompactionSpan": "pimem.sessions.compactions",
    "chain_headline": "pimem.drift.metrics",
    "compaction_metrics": "pimem.drift.metrics",
    "compaction_spans": "pimem.sessions.compactions",
    "drift_report": "pimem.drift.metrics",
    "headline": "pimem.drift.metrics",
    "lost_facts": "pimem.drift.metrics",
    "retention_by_age": "pimem.drift.metrics",
    "section_similarity": "pimem.drift.metrics",
    "survival_curves": "pimem.drift.metrics",
    # records, needed-later facts, measures, comparisons
    "CompactionRecord": "pimem.drift.records",
    "compaction_records": "pimem.drift.records",
    "resummarize": "pimem.drift.records",
    "resummarized_session": "pimem.drift.records",
    "FACT_CLASSES": "pimem.drift.needed",
    "DEFAULT_WEIGHTS": "pimem.drift.needed",
    "needed_later_facts": "pimem.drift.needed",
    "used_later": "pimem.drift.needed",
    "MEASURES": "pimem.drift.measures",
    "Comparison": "pimem.drift.measures",
    "compare_sources": "pimem.drift.measures",
    "measure_docs": "pimem.drift.measures",
    "recall_curve": "pimem.drift.measures",
    "summary_measures": "pimem.drift.measures",
    "ClaimJudge": "pimem.drift.faithfulness",
    "judge_agreement": "pimem.drift.faithfulness",
    # what agents did after real compactions
    "rework_points": "pimem.drift.rework",
    "rework_corpus": "pimem.drift.rework",
    "rework_table": "pimem.drift.rework",
    "rework_correlations": "pimem.drift.rework",
    "compaction_measures": "pimem.drift.rework",
    "fact_reacquisition": "pimem.drift.rework",
    "rework_vs_orphans": "pimem.drift.rework",
    # the matcher against labels
    "EntailmentMatcher": "pimem.drift.labels",
    "load_labels": "pimem.drift.labels",
    "matcher_check": "pimem.drift.labels",
    # chat-model judges and probes
    "NotAChatModelError": "pimem.drift.chat",
    "JudgeError": "pimem.drift.chat",
    "is_chat_model": "pimem.drift.chat",
    "PROBE_DIMENSIONS": "pimem.drift.probes",
    "PROBE_SYSTEM_PROMPT": "pimem.drift.probes",
    "Probe": "pimem.drift.probes",
    "generate_probes": "pimem.drift.probes",
    "probe_eval": "pimem.drift.probes",
    "probe_report": "pimem.drift.probes",
    # similarity
    "TfidfSpace": "pimem.drift.similarity",
    "jaccard": "pimem.drift.similarity",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pimem.drift' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
