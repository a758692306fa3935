"""Probe evaluation: ask a judge model questions that only a good summary can answer.

For each compaction four probes are generated from the facts and the true history:

============= ===================================================== ===================================
type          question                                              expected (truth)
============= ===================================================== ===================================
recall        errors, identifiers and numbers of the span           error facts, then the most
                                                                    mentioned identifiers and numbers
artifact      files read or modified                                Pi's true file lists of the span
continuation  what to do next                                       paths, identifiers and commands of
                                                                    the messages that followed the cut
decision      decisions made and constraints set                    decision and constraint facts
============= ===================================================== ===================================

Each probe is one :class:`~pimem.core.llm.SummaryRequest` of kind ``"history"`` with
:data:`PROBE_SYSTEM_PROMPT` and the prompt ``<summary>…</summary>`` + ``Question: …``. The answer
is scored deterministically: ``score`` is the share of expected facts present in the answer by
the rules of :func:`pimem.drift.facts.fact_present`; ``ceiling`` is the same share measured on
the summary itself (what a perfect reader could reach). With ``rubric=True`` the continuation and
decision answers (where facts alone are a weak test) are also graded by the judge against the
reference with :data:`RUBRIC_PROMPT` (0, 1 or 2, reported as ``rubric`` in [0, 1]).

Model calls are cached by wrapping the judge: ``probe_eval(s, CachedSummarizer(judge, ...))``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pimem.core.llm import SummaryRequest
from pimem.drift.facts import Fact, SummaryIndex, extract_facts, fact_present
from pimem.drift.metrics import _session_of, compaction_spans

PROBE_SYSTEM_PROMPT = (
    "You answer questions about an earlier part of a coding session. The only information you have "
    "is the summary given in <summary> tags. Answer from the summary only: quote exact file paths, "
    "function names, commands and error messages as they appear there. If the summary does not "
    "contain the answer, reply exactly: NOT IN SUMMARY"
)
RUBRIC_PROMPT = (
    "Grade an answer against a reference drawn from the true session history.\n\n"
    "<question>\n{question}\n</question>\n\n<reference>\n{reference}\n</reference>\n\n"
    "<answer>\n{answer}\n</answer>\n\n"
    "Score 2 if the answer is consistent with the reference and covers its main points, 1 if it is "
    "partly right or incomplete, 0 if it is wrong, missing or NOT IN SUMMARY. Reply with the digit only."
)
RUBRIC_SYSTEM_PROMPT = "You are a strict grader. Reply with a single digit: 0, 1 or 2."

QUESTIONS = {
    "recall": "Which error messages occurred, and which functions, classes, identifiers and measured "
    "numbers were involved? Quote them exactly.",
    "artifact": "Which files were read or modified? List every file path.",
    "continuation": "What exactly should be done next to continue the work? Name the files, functions "
    "and commands involved.",
    "decision": "Which decisions were made (and why), and which constraints or preferences did the "
    "user state?",
}
PROBE_TYPES: tuple[str, ...] = tuple(QUESTIONS)


@dataclass
class Probe:
    """One question about one compaction's summary, with its expected facts."""

    compaction: int
    probe_type: str
    question: str
    expected: list[Fact]
    reference: str
    summary: str
    extra: dict[str, Any] = field(default_factory=dict)


def _ranked(facts: list[Fact], counts: Counter, kinds: tuple[str, ...], limit: int) -> list[Fact]:
    chosen = [f for f in facts if f.kind in kinds]
    chosen.sort(key=lambda f: (-counts[f.key], f.position, f.offset))
    return chosen[:limit]


def generate_probes(
    result_or_session: Any,
    *,
    leaf_id: str | None = None,
    max_expected: int = 12,
    continuation_messages: int = 6,
) -> list[Probe]:
    """The four probes per compaction on the active path (see module docs)."""
    from pimem.core.session_manager import (
        build_session_path,
        session_entry_to_context_messages,
    )

    source = _session_of(result_or_session)
    spans = compaction_spans(source, leaf_id=leaf_id)
    path = build_session_path(source, leaf_id)
    position = {e.get("id"): i for i, e in enumerate(path)}
    probes: list[Probe] = []
    for span in spans:
        all_occ = extract_facts(span.messages, unique=False)
        counts = Counter(f.key for f in all_occ)
        facts = extract_facts(span.messages)
        summary = span.summary
        # recall: every error, then the most mentioned identifiers and numbers
        recall = [f for f in facts if f.kind == "error"][: max_expected // 2]
        recall += _ranked(facts, counts, ("identifier", "number"), max_expected - len(recall))
        files = [
            Fact("path", p, None, -1, 0, "assistant", "tool_call", p) for p in span.read_files + span.modified_files
        ][:max_expected]
        # continuation: what really followed the cut (the kept entries onwards)
        start = position.get(span.entry.get("firstKeptEntryId"), position.get(span.entry.get("id"), len(path)))
        following: list[tuple[str | None, dict]] = []
        for e in path[start:]:
            if e.get("type") == "compaction":
                continue
            for m in session_entry_to_context_messages(e):
                if m.get("role") in ("assistant", "user", "bashExecution"):
                    following.append((e.get("id"), m))
            if len(following) >= continuation_messages:
                break
        follow_facts = extract_facts(following, kinds=("path", "identifier", "command"))
        follow_counts = Counter(f.key for f in extract_facts(following, unique=False))
        continuation = _ranked(follow_facts, follow_counts, ("path", "identifier", "command"), max_expected)
        decisions = [f for f in facts if f.kind in ("decision", "constraint")][:max_expected]
        for ptype, expected in (
            ("recall", recall),
            ("artifact", files),
            ("continuation", continuation),
            ("decision", decisions),
        ):
            reference = "\n".join(f"- {f.surface or f.value}" for f in expected) or "(nothing)"
            probes.append(Probe(span.index, ptype, QUESTIONS[ptype], expected, reference, summary))
    return probes


def probe_request(probe: Probe, *, model: str = "", max_tokens: int = 1024) -> SummaryRequest:
    """The request a judge answers for one probe."""
    prompt = f"<summary>\n{probe.summary}\n</summary>\n\nQuestion: {probe.question}"
    return SummaryRequest(
        kind="history", system_prompt=PROBE_SYSTEM_PROMPT, prompt=prompt, max_tokens=max_tokens, model=model
    )


def rubric_request(probe: Probe, answer: str, *, model: str = "") -> SummaryRequest:
    """The grading request for a free-text probe."""
    prompt = RUBRIC_PROMPT.format(question=probe.question, reference=probe.reference, answer=answer)
    return SummaryRequest(kind="history", system_prompt=RUBRIC_SYSTEM_PROMPT, prompt=prompt, max_tokens=8, model=model)


def _share(expected: list[Fact], text: str) -> float:
    if not expected:
        return math.nan
    index = SummaryIndex(text)
    return sum(fact_present(f, index) for f in expected) / len(expected)


def probe_eval(
    result_or_session: Any,
    judge: Any,
    *,
    leaf_id: str | None = None,
    rubric: bool = False,
    model: str = "",
    max_expected: int = 12,
) -> pd.DataFrame:
    """Ask every probe of every compaction of the judge and score the answers.

    ``judge``: any object with ``complete(SummaryRequest) -> SummaryResponse`` (wrap it in
    ``CachedSummarizer`` to cache). Columns: ``compaction``, ``probe_type``, ``question``,
    ``n_expected``, ``score``, ``ceiling``, ``rubric``, ``answer``, ``not_in_summary``, ``error``.
    """
    if not hasattr(judge, "complete"):
        raise TypeError(f"judge must have complete(SummaryRequest); got {type(judge).__name__}")
    rows = []
    for probe in generate_probes(result_or_session, leaf_id=leaf_id, max_expected=max_expected):
        error = None
        answer = ""
        try:
            response = judge.complete(probe_request(probe, model=model))
            answer = response.text or ""
            if response.stop_reason in ("error", "aborted"):
                error = response.error_message or response.stop_reason
        except Exception as exc:  # a failing judge is recorded per probe, not fatal
            error = f"{type(exc).__name__}: {exc}"
        grade = math.nan
        if rubric and error is None and probe.probe_type in ("continuation", "decision") and probe.expected:
            try:
                graded = judge.complete(rubric_request(probe, answer, model=model)).text
                m = re.search(r"[012]", graded or "")
                grade = int(m.group(0)) / 2 if m else math.nan
            except Exception as exc:
                error = f"rubric: {type(exc).__name__}: {exc}"
        rows.append(
            {
                "compaction": probe.compaction,
                "probe_type": probe.probe_type,
                "question": probe.question,
                "n_expected": len(probe.expected),
                "score": _share(probe.expected, answer) if error is None else math.nan,
                "ceiling": _share(probe.expected, probe.summary),
                "rubric": grade,
                "answer": answer,
                "not_in_summary": "NOT IN SUMMARY" in answer.upper(),
                "error": error,
            }
        )
    cols = ["compaction", "probe_type", "question", "n_expected", "score", "ceiling", "rubric", "answer",
            "not_in_summary", "error"]
    return pd.DataFrame(rows, columns=cols)


def probe_report(probes: pd.DataFrame) -> pd.DataFrame:
    """Per probe type: probes asked, mean score, mean ceiling, mean rubric grade, errors."""
    g = probes.groupby("probe_type", sort=False)
    return pd.DataFrame(
        {
            "n": g.size(),
            "score": g["score"].mean(),
            "ceiling": g["ceiling"].mean(),
            "rubric": g["rubric"].mean(),
            "errors": g["error"].apply(lambda s: int(s.notna().sum())),
        }
    ).reset_index()
