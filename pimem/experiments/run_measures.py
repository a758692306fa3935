"""Per-run measures for comparing strategies: summary quality, what masking removed, and cost.

:func:`run_measures` gives one flat dict per replay (the sweep's run rows carry it): the values of
:data:`RUN_MEASURES` (``needed_recall`` is the headline: per compaction, the facts of the summarized span
that the recording used later and the kept tail does not show, and how many the summary holds;
:mod:`pimem.drift.needed`), then the cost columns of :func:`pimem.replays.cost.replay_cost`
(:data:`pimem.replays.cost.COST`; cache-aware, per model). A fact masked by a context edit and
later in a summarized span counts at both (the summary of a masked context cannot hold it either).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

import pandas as pd

from pimem.base.tables import Column, Table
from pimem.core.session_manager import build_session_projection
from pimem.drift.metrics import chain_headline
from pimem.drift.needed import Trajectory, fact_class
from pimem.drift.records import entry_messages, source_text
from pimem.errors import PimemWarning, UnknownPriceError
from pimem.replays.cost import replay_cost
from pimem.text.facts import SummaryIndex, extract_facts, fact_present

__all__ = ["run_measures", "masked_needed_facts", "RUN_MEASURES", "MEASURE_COLUMNS", "MASKED_NEEDED"]

RUN_MEASURES = Table("run_measures", [
    Column("needed_recall", description="mean needed-later recall of the run's compaction summaries "
           "(:mod:`pimem.drift.needed`); NaN without a compaction, or when no compaction had a needed fact"),
    Column("n_needed", description="needed facts over all compactions (:func:`pimem.drift.headline`)"),
    Column("fact_recall", description="mean fact recall of the summaries"),
    Column("retention_after_1", description="facts kept after one rewrite of a summary"),
    Column("compression_ratio", description="mean compression of the compactions"),
    Column("masked_needed", description="facts of tool outputs masked by the run's context edits that the recording "
           "used after the edit and that nothing else in the context after it shows (the placeholder holds none): "
           "what masking lost; 0 without masking"),
    Column("context_needed_recall", description="needed-later recall pooled over every reduction of the context: "
           "each compaction counts by its needed facts at its recall, every masked needed fact as lost; comparable "
           "across summaries, masking and hybrids"),
], "One run's drift measures (a sweep row carries them, then the cost columns).")
MEASURE_COLUMNS = RUN_MEASURES.names

MASKED_NEEDED = Table("masked_needed", [
    Column("edit_id", description="the context edit"),
    Column("target_id", description="the entry it masked"),
    Column("kind", description="the fact's kind"),
    Column("value", description="the fact"),
    Column("cls", description="the fact's class (:func:`pimem.drift.needed.fact_class`)"),
    Column("used_by", description="the recorded entry that used it after the edit"),
    Column("how", description="how that entry used it"),
], "One row per needed-later fact that a replay's context edits removed.")


def masked_needed_facts(result: Any) -> pd.DataFrame:
    """One row per needed-later fact that the replay's context edits removed (see module docs).

    Args:
        result: the replay.
    """
    return MASKED_NEEDED.frame(_masked_needed_rows(result))


MASKED_NEEDED.document(masked_needed_facts)


def _masked_needed_rows(result: Any) -> list[dict]:
    made = set(getattr(result, "context_edit_ids", ()) or ())
    if not made:
        return []
    path = result.session.get_branch()
    by_id = {e.get("id"): e for e in path}
    messages: list[tuple[Any, dict]] = []
    first: list[int] = []
    for e in path:
        first.append(len(messages))
        messages.extend((e.get("id"), m) for m in entry_messages(e))
    trajectory = Trajectory(messages)
    rows: list[dict] = []
    i = 0
    while i < len(path):
        if path[i].get("id") not in made:
            i += 1
            continue
        j = i
        while j < len(path) and path[j].get("id") in made:
            j += 1
        start = first[j] if j < len(path) else len(messages)
        candidates = []
        for edit in path[i:j]:
            target = by_id.get(edit.get("targetId"))
            if target is None or target.get("type") != "message":
                continue
            for fact in extract_facts([(target.get("id"), target["message"])]):
                hit = trajectory.first_use(fact, start)
                if hit is not None:
                    candidates.append((edit, fact, hit))
        if candidates:
            context = build_session_projection(path[:j]).messages
            index = SummaryIndex("\n".join(source_text(m) for m in context if m.get("role") != "system"))
            seen = set()
            for edit, fact, hit in candidates:
                if fact.key in seen or fact_present(fact, index):
                    continue
                seen.add(fact.key)
                rows.append({"edit_id": edit.get("id"), "target_id": edit.get("targetId"), "kind": fact.kind,
                             "value": fact.value, "cls": fact_class(fact), "used_by": hit[0], "how": hit[1]})
        i = j
    return rows


def _mean(values: Any) -> float:
    vals = [float(v) for v in values if v == v]
    return sum(vals) / len(vals) if vals else math.nan


def run_measures(
    result: Any,
    *,
    drift: bool = True,
    cost: bool = True,
    prices: Mapping[str, Any] | None = None,
    cost_model: str | None = None,
    summarizer_model: str | None = None,
    cache_ttl_s: float | None = 300.0,
) -> dict[str, Any]:
    """Drift and cost measures of one replay, flat: the values of :data:`RUN_MEASURES`, then those of
    :data:`pimem.replays.cost.COST`.

    Args:
        result: the replay.
        drift: measure the summaries.
        cost: price the replay.
        prices: prices by model name, looked up before the built-in table.
        cost_model: the priced model (default: the session's current model).
        summarizer_model: the model that writes summaries (default: ``cost_model``).
        cache_ttl_s: seconds a cached prefix lives (None: it never expires).
    """
    out: dict[str, Any] = {}
    if drift:
        spans = result.compaction_spans() if callable(getattr(result, "compaction_spans", None)) else None
        h = chain_headline(result, spans=spans)
        recalls, needed = h["needed_recall"], h["n_needed"]
        masked = len(_masked_needed_rows(result))
        weighted = sum(r * n for r, n in zip(recalls, needed) if r == r and n)
        total = sum(n for r, n in zip(recalls, needed) if r == r and n) + masked
        out.update({
            "needed_recall": h["mean_needed_recall"],
            "n_needed": sum(needed),
            "fact_recall": h["mean_fact_recall"],
            "retention_after_1": h["retention_after_1"],
            "compression_ratio": _mean(h["compression_ratio"]),
            "masked_needed": masked,
            "context_needed_recall": weighted / total if total else math.nan,
        })
    if cost:
        try:
            out.update(replay_cost(result, model=cost_model, summarizer_model=summarizer_model, prices=prices,
                                   cache_ttl_s=cache_ttl_s))
        except UnknownPriceError as exc:
            if cost_model is not None:  # the model asked for by name must be priced
                raise
            # the session's own model is not in the table (or it names none): no cost, said so
            warnings.warn(f"{exc}; the run's cost columns are left empty", PimemWarning, stacklevel=2)
            out["cost_total"] = math.nan
    return out
