"""Matchers that tolerate paraphrase: "the summary holds this fact" in other words.

:func:`normalized_matcher` is the rule matcher (:func:`rule_matcher`) with one more way
for a free-text fact (constraint, decision, error, goal, progress, artifact) to be present: some line of
the summary holds at least half of the fact's words after :func:`pimem.text.normalize.normal_words`
(stems, code names split, synonym groups), at least two of them, with the same polarity. Names (paths,
code names, commands, numbers) keep the exact rules: a paraphrase keeps names, and loosening them costs
precision (``run()`` against "run modes").

What it rewards and how it fails: a summary that says the same thing in common other words ("added" for
"created", "directory" for "folder", "get rid of" against "eliminate" only through "remove") is credited;
rarer wording is still missed, and synonym groups merge words that are not always interchangeable, so
some lines that share topic words but say something else are credited too. Its precision and recall on
the labelled facts are in ``benchmarks/README.md`` beside the rule matcher's (:func:`pimem.drift.labels.matcher_accuracy`).
"""

from __future__ import annotations

import re
from typing import Any

from pimem.text.facts import Fact, SummaryIndex, fact_present, numbers_in_text
from pimem.text.normalize import normal_words

__all__ = ["rule_matcher", "normalized_matcher", "normalized_present", "normalized_holds", "FREE_TEXT_KINDS"]

FREE_TEXT_KINDS: tuple[str, ...] = ("constraint", "decision", "error", "goal", "progress", "artifact")
_NOT = re.compile(r"\b(?:not|no|never|don'?t|doesn'?t|didn'?t|won'?t|can'?t|cannot|without|none)\b", re.I)


def _negated(text: str) -> bool:
    return bool(_NOT.search(text))


def rule_matcher(fact: Fact, summary: str) -> str:
    """``"present"`` or ``"absent"`` by :func:`~pimem.text.facts.fact_present` (a number reader fact
    counts when any number of its text is present)."""
    index = SummaryIndex(summary)
    if fact.kind == "number" and fact.source == "label":
        numbers = [v for v, _, _ in numbers_in_text(fact.surface)]
        if numbers:
            return "present" if any(v in index.numbers for v in numbers) else "absent"
    return "present" if fact_present(fact, index) else "absent"


def normalized_present(text: str, summary: str, threshold: float = 0.5) -> bool:
    """Some line of ``summary`` holds ``threshold`` of the normalised words of ``text`` (at least two),
    and both negate or neither does."""
    words = normal_words(text)
    if len(words) < 2:
        return False
    polarity = _negated(text)
    for line in summary.split("\n"):
        if not line.strip():
            continue
        common = words & normal_words(line)
        if len(common) >= 2 and len(common) >= threshold * len(words) and _negated(line) == polarity:
            return True
    return False


def normalized_matcher(fact: Fact, summary: str) -> str:
    """``"present"`` or ``"absent"``: the rule matcher, then (free-text facts) :func:`normalized_present`."""
    if rule_matcher(fact, summary) == "present":
        return "present"
    if fact.kind in FREE_TEXT_KINDS:
        return "present" if normalized_present(fact.surface or fact.value, summary) else "absent"
    return "absent"


def normalized_holds(fact: Fact, summary: str, index: SummaryIndex | None = None) -> bool:
    """:func:`normalized_matcher` for facts of a span (not labelled facts), with the summary's index built
    once by the caller: :func:`~pimem.text.facts.fact_present`, then free text by normalised words."""
    if fact_present(fact, index if index is not None else SummaryIndex(summary)):
        return True
    return fact.kind in FREE_TEXT_KINDS and normalized_present(fact.surface or fact.value, summary)
