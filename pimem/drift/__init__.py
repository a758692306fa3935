"""Summary drift and quality: what a compaction summary keeps, loses, and how it drifts.

* :func:`parse_summary` — template sections, split-turn part, file blocks, conformance.
* :func:`extract_facts` — checkable facts of a span (paths, identifiers, errors, commands,
  numbers with units, user constraints, decisions), with :func:`fact_present`.
* :func:`compaction_metrics` — one summary against its span.
* :func:`drift_report` — one row per compaction of a chain, with tidy views
  :func:`retention_by_age`, :func:`survival_curves`, :func:`section_similarity`,
  :func:`lost_facts` and :func:`headline`.
* :func:`probe_eval` — optional question probes answered by a judge model from the summary.
"""

from pimem.drift.facts import (
    FACT_KINDS,
    Fact,
    SummaryIndex,
    extract_facts,
    fact_present,
    facts_frame,
    summary_facts,
)
from pimem.drift.metrics import (
    CompactionSpan,
    compaction_metrics,
    compaction_spans,
    drift_report,
    headline,
    lost_facts,
    retention_by_age,
    section_similarity,
    survival_curves,
)
from pimem.drift.probes import (
    PROBE_SYSTEM_PROMPT,
    Probe,
    generate_probes,
    probe_eval,
    probe_report,
)
from pimem.drift.sections import Conformance, SummarySections, parse_summary
from pimem.drift.similarity import TfidfSpace, jaccard

__all__ = [
    "FACT_KINDS",
    "CompactionSpan",
    "Conformance",
    "Fact",
    "PROBE_SYSTEM_PROMPT",
    "Probe",
    "SummaryIndex",
    "SummarySections",
    "TfidfSpace",
    "compaction_metrics",
    "compaction_spans",
    "drift_report",
    "extract_facts",
    "fact_present",
    "generate_probes",
    "facts_frame",
    "headline",
    "jaccard",
    "lost_facts",
    "parse_summary",
    "probe_eval",
    "probe_report",
    "retention_by_age",
    "section_similarity",
    "summary_facts",
    "survival_curves",
]
