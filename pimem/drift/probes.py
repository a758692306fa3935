"""Probes: session-specific questions about a compaction, answered from what the agent still sees and
graded by a chat-model judge.

For each compaction, questions are generated from its span:

* **offline** (:func:`generate_probes` without a ``questioner``): from the needed-later facts
  (:mod:`pimem.drift.needed`), so every question is about something the session really went on to
  use and the kept tail does not show:

  ============== ==============================================================================
  type           question → reference
  ============== ==============================================================================
  recall         "What do you know about `X`…?" for the needed errors and names used soonest
                 → the fact, the span text it came from and how it was used later
  artifact       "What was done to `path`…?" for each needed written file → the span's edits
  decision       "What did the user require / what was decided about <words>?" for each needed
                 constraint and decision → the fact as stated in the span
  continuation   "What should be done next…?" → **what the recording did next**, after the
                 compaction (never the kept tail, which the answerer already sees)
  ============== ==============================================================================

* **with a model** (``questioner=`` a chat model): the model writes the questions and references
  from the span, the needed-later facts and what the recording did next (JSON; an unreadable
  answer is an error for that compaction, not a fallback).

:func:`probe_eval` answers every probe for every summary source from **summary + kept context**
(the summarizer's text, file blocks stripped, then the kept tail as Pi serializes it, the newest
``max_context_tokens`` of it), then has the judge grade the answer against the reference 0–5 on six
dimensions (after Factory's evaluation of context compression): accuracy, context awareness,
artifact trail, completeness, continuity, instruction following. The judge (and the answerer,
by default the judge) must be a chat model and not the summarizer being judged
(:func:`pimem.drift.chat.require_chat_model`): the extractive summarizer or a baseline as judge is
an error, never a template answer. A grade that cannot be read is recorded as an error for that
probe. Cache model calls by wrapping the models in :class:`~pimem.summarizers.CachedSummarizer`.

What the probe scores reward and how they can be gamed: they reward a summary that lets a reader
answer specific questions the session went on to face, graded against the recording. A judge may
favour long or confident answers and may know the domain without the summary; the references
come from the recording, the answerer is told to say when the context does not hold the answer,
and ``summary_coverage`` (share of each probe's facts in the summary text, no model involved) is
reported beside the grades.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pimem.drift.chat import JudgeError, ask, model_name, require_chat_model
from pimem.text.facts import Fact, STOPWORDS, SummaryIndex, fact_present
from pimem.drift.needed import NeededFact, needed_later_facts
from pimem.drift.records import CompactionRecord, compaction_records, source_text
from pimem.text.sections import summarizer_text
from pimem.text.messages import message_text
from pimem.base.tables import Column, Table
from pimem.core.compaction.utils import serialize_conversation
from pimem.core.messages import convert_to_llm
from pimem.drift.measures import Comparison

__all__ = ["PROBE_TYPES", "PROBE_DIMENSIONS", "PROBES", "PROBE_REPORT", "Probe", "generate_probes", "probe_eval",
           "probe_report",
           "ANSWER_SYSTEM_PROMPT", "JUDGE_SYSTEM_PROMPT", "QUESTION_SYSTEM_PROMPT", "PROBE_SYSTEM_PROMPT"]

PROBE_TYPES: tuple[str, ...] = ("recall", "artifact", "decision", "continuation")
PROBE_DIMENSIONS: tuple[str, ...] = ("accuracy", "context_awareness", "artifact_trail", "completeness",
                                     "continuity", "instruction_following")

PROBES = Table("probes", [
    Column("source", description="the summary source"),
    Column("compaction", description="the compaction probed"),
    Column("probe_type", description="one of :data:`PROBE_TYPES`"),
    Column("question", description="the probe"),
    Column("reference", description="its reference answer"),
    Column("answer", description="the answerer's answer from the summary and the kept context"),
    *(Column(d, description="the judge's grade, 0–5") for d in PROBE_DIMENSIONS),
    Column("score", description="the mean of the six grades"),
    Column("summary_coverage", description="share of the probe's facts the summary holds"),
    Column("generated_by", description="``rules`` or the questioner's model"),
    Column("error", description="why the probe has no grade"),
], "One row per probe and summary source: the answer and its grades.")

PROBE_REPORT = Table("probe_report", [
    Column("source", description="the summary source"),
    *(Column(d, description="the mean grade") for d in PROBE_DIMENSIONS),
    Column("score", description="the mean overall grade"),
    Column("graded", description="probes graded"),
    Column("errors", description="probes that failed"),
], "Mean grade per source and dimension.")

ANSWER_SYSTEM_PROMPT = (
    "You are a coding agent resuming a session after its history was compacted. All you know is the context "
    "given: a summary of the earlier work and the most recent messages. Answer the question from that "
    "context only. Quote exact file paths, names, commands and errors. If the context does not hold the "
    "answer, say so plainly instead of guessing."
)
PROBE_SYSTEM_PROMPT = ANSWER_SYSTEM_PROMPT
JUDGE_SYSTEM_PROMPT = (
    "You grade how well an agent resuming a compacted coding session answered a question. The reference comes "
    "from the real session record. Score each dimension from 0 (fails) to 5 (perfect):\n"
    "- accuracy: the facts, names, paths and values are correct\n"
    "- context_awareness: the answer reflects the state of the work at that point of the session\n"
    "- artifact_trail: files created or changed, and what changed, are tracked correctly\n"
    "- completeness: the answer covers everything the reference holds\n"
    "- continuity: the answer would let the work continue without redoing or contradicting earlier work\n"
    "- instruction_following: the user's constraints and preferences are respected\n"
    "An answer that says the context does not hold the answer scores 0 on completeness and accuracy unless "
    "the reference is empty. Reply with one JSON object and nothing else: "
    '{"accuracy": n, "context_awareness": n, "artifact_trail": n, "completeness": n, "continuity": n, '
    '"instruction_following": n}'
)
JUDGE_PROMPT = "<question>\n{question}\n</question>\n\n<reference>\n{reference}\n</reference>\n\n<answer>\n{answer}\n</answer>"
ANSWER_PROMPT = ("<summary>\n{summary}\n</summary>\n\n<recent-messages>\n{kept}\n</recent-messages>\n\n"
                 "Question: {question}")
QUESTION_SYSTEM_PROMPT = (
    "You write probe questions that test whether an agent resuming a compacted coding session kept what it "
    "needs. You get the conversation that was compacted, the facts the session went on to use, and what the "
    "session did next. Write {n} specific questions about this session (name its files, functions, errors, "
    "decisions), each with a short reference answer taken from the material. Types: recall, artifact, "
    "decision, continuation (what to do next; its reference is what the session did next). Reply with a JSON "
    'list only: [{{"type": "...", "question": "...", "reference": "..."}}, ...]'
)


@dataclass
class Probe:
    """One question about one compaction, with its reference and the facts it is about."""

    compaction: int
    probe_type: str
    question: str
    reference: str
    expected: list[Fact] = field(default_factory=list)
    generated_by: str = "rules"
    extra: dict[str, Any] = field(default_factory=dict)


def _excerpt(text: str, needle: str, width: int = 220) -> str:
    flat = " ".join(text.split())
    i = flat.lower().find(needle.lower()[:40]) if needle else -1
    if i < 0:
        return flat[:width]
    start = max(0, i - width // 3)
    return ("…" if start else "") + flat[start : start + width] + ("…" if start + width < len(flat) else "")


def _source_text(record: CompactionRecord, fact: Fact) -> str:
    for eid, m in record.span:
        if eid == fact.entry_id:
            return source_text(m)
    return ""


def _later_text(record: CompactionRecord, entry_id: str | None) -> str:
    for eid, m in record.later:
        if eid == entry_id:
            return source_text(m, results=False)
    return ""


def _topic(fact: Fact, words: int = 6) -> str:
    picked = [w for w in re.findall(r"[A-Za-z0-9_.$/-]+", fact.surface or fact.value)
              if len(w) > 2 and w.lower() not in STOPWORDS][:words]
    return " ".join(picked) or (fact.surface or fact.value)[:60]


def next_steps_reference(record: CompactionRecord, messages: int = 8, chars: int = 1500) -> str:
    """What the recording did right after the compaction: user requests, assistant text and tool calls."""
    lines: list[str] = []
    for _, m in record.later:
        role = m.get("role")
        if role == "user":
            lines.append("User: " + " ".join(source_text(m).split())[:400])
        elif role == "assistant":
            content = m["content"] if isinstance(m.get("content"), list) else []
            text = message_text({"content": content}, thinking=None, tool_calls=None, images=False)
            if text.strip():
                lines.append("Assistant: " + " ".join(text.split())[:300])
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    args = b["arguments"] if isinstance(b.get("arguments"), dict) else {}
                    what = args.get("path") or args.get("command") or ""
                    lines.append(f"Tool call: {b.get('name')} {str(what)[:160]}".rstrip())
        elif role == "bashExecution":
            lines.append(f"User ran: {str(m.get('command', ''))[:160]}")
        if len(lines) >= messages:
            break
    return "\n".join(lines)[:chars] or "(the recording ends at the compaction)"


def _rule_probes(record: CompactionRecord, needed: list[NeededFact], per_type: int) -> list[Probe]:
    probes: list[Probe] = []
    order = {eid: i for i, (eid, _) in enumerate(record.later)}

    def soonest(items: list[NeededFact]) -> list[NeededFact]:
        return sorted(items, key=lambda n: (order.get(n.used_at, len(order)), n.fact.position))[:per_type]

    for n in soonest([n for n in needed if n.cls in ("error", "reference")]):
        f = n.fact
        question = (f"Earlier in this session the error “{_excerpt(f.surface, '', 160)}” occurred. What caused it "
                    f"and how was it handled?" if f.kind == "error" else
                    f"What do you know about `{f.surface or f.value}` from the earlier work (what it is, where it "
                    f"is, what was done with it)?")
        reference = (f"{f.kind}: {f.surface or f.value}\nIn the span: {_excerpt(_source_text(record, f), f.surface)}\n"
                     f"Used after the compaction: {_excerpt(_later_text(record, n.used_at), f.value)}")
        probes.append(Probe(record.index, "recall", question, reference, [f]))
    for n in soonest([n for n in needed if n.cls == "artifact"]):
        f = n.fact
        edits = [b for _, m in record.span if m.get("role") == "assistant" and isinstance(m.get("content"), list)
                 for b in m["content"] if isinstance(b, dict) and b.get("type") == "toolCall"
                 and isinstance(b.get("arguments"), dict) and isinstance(b["arguments"].get("path"), str)
                 and SummaryIndex(b["arguments"]["path"]).has_path(f.value) and b.get("name") in ("edit", "write")]
        reference = f"{f.value}: {len(edits)} write/edit call(s) in the span"
        if edits:
            last = edits[-1].get("arguments", {})
            change = last.get("newText") or last.get("content") or last.get("new_string") or ""
            reference += "\nLast change: " + _excerpt(str(change), "", 400)
        probes.append(Probe(record.index, "artifact",
                            f"What was created or changed in `{f.value}` so far, and what state is it in?",
                            reference, [f]))
    for n in soonest([n for n in needed if n.cls in ("constraint", "decision")]):
        f = n.fact
        ask_what = "What did the user require or prefer about" if f.kind == "constraint" else "What was decided about"
        probes.append(Probe(record.index, "decision", f"{ask_what} {_topic(f)}?",
                            f"{f.kind}: {f.surface or f.value}", [f]))
    next_ref = next_steps_reference(record)
    expected = [n.fact for n in needed if n.used_at in {eid for eid, _ in record.later[:12]}]
    probes.append(Probe(record.index, "continuation",
                        "What exactly should be done next to continue this work? Name the files, functions and "
                        "commands involved.", next_ref, expected))
    return probes


def _model_probes(record: CompactionRecord, needed: list[NeededFact], questioner: Any, n: int,
                  span_chars: int) -> list[Probe]:
    span = serialize_conversation(convert_to_llm([m for _, m in record.span]))
    if len(span) > span_chars:
        span = span[: span_chars // 2] + "\n[…]\n" + span[-span_chars // 2 :]
    facts = "\n".join(f"- {x.cls}: {x.fact.surface or x.fact.value}" for x in needed[:60]) or "(none)"
    prompt = (f"<conversation>\n{span}\n</conversation>\n\n<facts-used-later>\n{facts}\n</facts-used-later>\n\n"
              f"<what-happened-next>\n{next_steps_reference(record)}\n</what-happened-next>")
    answer = ask(questioner, QUESTION_SYSTEM_PROMPT.format(n=n), prompt, max_tokens=2048)
    m = re.search(r"\[.*\]", answer, re.S)
    try:
        items = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        items = None
    if not isinstance(items, list) or not items:
        raise JudgeError(f"question writer did not answer with a JSON list: {answer[:120]!r}")
    probes = []
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("question"), str) and isinstance(item.get("reference"), str)):
            raise JudgeError(f"question writer gave an item without question/reference: {str(item)[:120]}")
        ptype = str(item.get("type", "recall")).lower()
        probes.append(Probe(record.index, ptype if ptype in PROBE_TYPES else "recall", item["question"],
                            item["reference"], [], generated_by=model_name(questioner)))
    return probes


def generate_probes(
    source: Any,
    *,
    questioner: Any = None,
    per_type: int = 3,
    records: list[CompactionRecord] | None = None,
    span_chars: int = 60_000,
) -> list[Probe]:
    """Session-specific probes for every compaction of ``source`` (a session, replay result or entries).

    Offline (default): from needed-later facts, up to ``per_type`` per type plus one continuation
    probe. With ``questioner`` (a chat model): written by the model from the span (the first and
    last ``span_chars // 2`` characters of it), the needed facts and what the recording did next.
    """
    if questioner is not None:
        require_chat_model(questioner, "question writer")
    records = records if records is not None else compaction_records(source)
    probes: list[Probe] = []
    for record in records:
        needed = needed_later_facts(record)
        if questioner is None:
            probes.extend(_rule_probes(record, needed, per_type))
        else:
            probes.extend(_model_probes(record, needed, questioner, 3 * per_type + 1, span_chars))
    return probes


# --------------------------------------------------------------------------- answering and grading


def _kept_context(record: CompactionRecord, max_tokens: int) -> str:
    text = serialize_conversation(convert_to_llm([m for _, m in record.kept]))
    limit = max_tokens * 4
    return text if len(text) <= limit else "[…]\n" + text[-limit:]


def parse_grades(answer: str) -> dict[str, int]:
    """The six 0–5 grades of a judge's JSON answer; raises :class:`JudgeError` when any is missing."""
    m = re.search(r"\{.*\}", answer, re.S)
    try:
        data = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise JudgeError(f"judge did not answer with a JSON object: {answer[:120]!r}")
    grades: dict[str, int] = {}
    for dim in PROBE_DIMENSIONS:
        value = data.get(dim, data.get(dim.replace("_", " ")))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 5 or value != int(value):
            raise JudgeError(f"judge gave no 0–5 integer for {dim!r}: {value!r}")
        grades[dim] = int(value)
    return grades


def _sources_of(source: Any) -> tuple[dict[str, list[str | None]], dict[str, list[CompactionRecord]], dict[str, Any],
                                      dict[str, str | None]]:
    """(summaries, records, summarizer objects, recorded model names) per source name."""
    if isinstance(source, Comparison):
        models = {}
        for name, recs in source.records.items():
            models[name] = _recorded_model(recs) if name not in source.summarizers else None
        return source.summaries, source.records, dict(source.summarizers), models
    records = compaction_records(source)
    return {"recorded": [r.summary for r in records]}, {"recorded": records}, {}, {"recorded": _recorded_model(records)}


def _recorded_model(records: list[CompactionRecord]) -> str | None:
    """The model of the session at its compactions (Pi summarizes with the session's model)."""
    for record in records:
        for _, m in reversed(record.kept):
            if m.get("role") == "assistant" and m.get("model"):
                return str(m["model"])
    return None


def probe_eval(
    source: Any,
    judge: Any,
    *,
    answerer: Any = None,
    probes: list[Probe] | None = None,
    questioner: Any = None,
    per_type: int = 3,
    max_context_tokens: int = 16_000,
) -> pd.DataFrame:
    """Answer and grade every probe for every summary source (see module docs).

    ``source``: a session / replay result (its stored summaries, source ``"recorded"``) or a
    :class:`pimem.drift.measures.Comparison` (every source it holds). ``judge`` grades, ``answerer``
    (default: the judge) answers; both must be chat models that did not write the summaries.

    Args:
        source: a session or replay result, or a :class:`pimem.drift.measures.Comparison`.
        judge: the chat model that grades.
        answerer: the chat model that answers (default: ``judge``).
        probes: the probes (default: :func:`generate_probes` of the first source).
        questioner: the chat model that writes the probes (default: none, the offline probes).
        per_type: offline probes per type.
        max_context_tokens: the answerer is given the newest this many tokens (4 characters each) of the kept context.
    """
    answerer = judge if answerer is None else answerer
    summaries, records, summarizers, models = _sources_of(source)
    for role, model in (("judge", judge), ("answerer", answerer)):
        require_chat_model(model, role)
        for name in summaries:
            require_chat_model(model, role, not_same_as=summarizers.get(name), not_model=models.get(name))
    first = next(iter(records.values()), [])
    if probes is None:
        probes = generate_probes(None, questioner=questioner, per_type=per_type, records=first)
    rows = []
    for name, texts in summaries.items():
        by_index = {r.index: (r, t) for r, t in zip(records[name], texts)}
        for probe in probes:
            record, stored = by_index.get(probe.compaction, (None, None))
            row: dict[str, Any] = {"source": name, "compaction": probe.compaction, "probe_type": probe.probe_type,
                                   "question": probe.question, "reference": probe.reference, "answer": None,
                                   **{d: math.nan for d in PROBE_DIMENSIONS}, "score": math.nan,
                                   "summary_coverage": math.nan, "generated_by": probe.generated_by, "error": None}
            if record is None or stored is None:
                row["error"] = "no summary from this source for this compaction"
                rows.append(row)
                continue
            written = summarizer_text(stored)
            if probe.expected:
                index = SummaryIndex(written)
                row["summary_coverage"] = sum(fact_present(f, index) for f in probe.expected) / len(probe.expected)
            try:
                answer = ask(answerer, ANSWER_SYSTEM_PROMPT, ANSWER_PROMPT.format(
                    summary=written, kept=_kept_context(record, max_context_tokens), question=probe.question))
                row["answer"] = answer
                grades = parse_grades(ask(judge, JUDGE_SYSTEM_PROMPT, JUDGE_PROMPT.format(
                    question=probe.question, reference=probe.reference, answer=answer), max_tokens=200))
                row.update(grades)
                row["score"] = sum(grades.values()) / len(grades)
            except Exception as exc:  # noqa: BLE001 - a failed probe is recorded, the rest still run
                row["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(row)
    return PROBES.frame(rows)


PROBES.document(probe_eval)


def probe_report(probes: pd.DataFrame) -> pd.DataFrame:
    """Mean grade per source and dimension (and overall), probes graded and failed."""
    if probes.empty:
        return PROBE_REPORT.frame([])
    g = probes.groupby("source", sort=False)
    out = g[[*PROBE_DIMENSIONS, "score"]].mean()
    out["graded"] = g["score"].apply(lambda s: int(s.notna().sum()))
    out["errors"] = g["error"].apply(lambda s: int(s.notna().sum()))
    return out.reset_index()


PROBE_REPORT.document(probe_report)
