"""Text similarity for drift: token-set Jaccard and TF-IDF cosine (numpy only).

Tokens: lower-cased runs of letters, digits, ``_`` and ``$`` of length ≥ 2, stop words removed
(:data:`pimem.text.facts.STOPWORDS`).

* ``jaccard(a, b)`` = |A ∩ B| / |A ∪ B| over token sets; 1.0 when both are empty.
* :class:`TfidfSpace` fits smoothed IDF on a list of documents,
  ``idf(t) = ln((1 + N) / (1 + df(t))) + 1`` (scikit-learn's ``smooth_idf``), term frequency is
  the raw count, vectors are L2-normalised; ``cosine(a, b)`` is their dot product (0.0 when either
  is empty, 1.0 when both are empty).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from pimem.base.memo import memoised
from pimem.text.facts import STOPWORDS

_TOKEN = re.compile(r"[a-z0-9_$]{2,}")


def tokenize(text: str) -> list[str]:
    """Similarity tokens of a text (see module docs)."""
    return list(_tokens(text))


@memoised(1 << 12)
def _tokens(text: str) -> tuple[str, ...]:
    # memoised: the drift report reads each summary's body and sections several times; a token
    # never crosses a line break, so they are the lines' tokens (summaries repeat their lines)
    if "\n" not in text:
        return _line_tokens(text)
    return tuple(itertools.chain.from_iterable(map(_line_tokens, text.split("\n"))))


@memoised(1 << 14)
def _line_tokens(line: str) -> tuple[str, ...]:
    return tuple(t for t in _TOKEN.findall(line.lower()) if t not in STOPWORDS)


@memoised(1 << 12)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(_tokens(text))


@memoised(1 << 12)
def _token_counts(text: str) -> tuple[tuple[str, int], ...]:
    return tuple(Counter(_tokens(text)).items())


def jaccard(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two texts."""
    sa, sb = _token_set(a), _token_set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


class TfidfSpace:
    """Smoothed TF-IDF fitted on a fixed list of documents."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.vocab: dict[str, int] = {}
        df: Counter[str] = Counter()
        vocab = self.vocab
        for doc in documents:
            toks = _token_set(doc)
            df.update(toks)
            # in sorted order: the same sums in every process (sets follow the hash seed)
            new = sorted(toks.difference(vocab))
            vocab.update(zip(new, range(len(vocab), len(vocab) + len(new))))
        n = len(documents)
        self.idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in self.vocab], dtype=float)
        self._units: dict[str, tuple[np.ndarray, float]] = {}

    def _unit(self, text: str) -> tuple[np.ndarray, float]:
        """The L2-normalised vector of a text and its norm (memoised: the report compares the same
        texts again and again). The vector is dense over the vocabulary, its sums as they always were."""
        hit = self._units.get(text)
        if hit is not None:
            return hit
        v = np.zeros(len(self.vocab))
        vocab = self.vocab
        found = [(i, c) for t, c in _token_counts(text) if (i := vocab.get(t)) is not None]
        if found:
            at = np.fromiter((i for i, _ in found), dtype=np.intp, count=len(found))
            counts = np.fromiter((c for _, c in found), dtype=float, count=len(found))
            v[at] = counts * self.idf[at]  # each cell the product c · idf, as one by one
        norm = float(np.linalg.norm(v))
        if norm > 0:
            v = v / norm
        hit = self._units[text] = (v, float(np.linalg.norm(v)))
        return hit

    def vector(self, text: str) -> np.ndarray:
        """The L2-normalised TF-IDF vector of a text (zeros when it has no token of the vocabulary)."""
        return self._unit(text)[0].copy()

    def cosine(self, a: str, b: str) -> float:
        """The cosine of two texts' vectors (see module docs for the empty cases)."""
        (va, na), (vb, nb) = self._unit(a), self._unit(b)
        if na == 0 and nb == 0:
            return 1.0 if not _tokens(a) and not _tokens(b) else 0.0
        if na == 0 or nb == 0:
            return 0.0
        return float(np.clip(va @ vb, 0.0, 1.0))
