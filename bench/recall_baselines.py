"""Public baselines of the recall quality benchmark, computed in the same run from the same
notes, and the paired comparison over questions.

* ``bm25s``: bm25s 0.3 (lucene BM25, k1 1.5, b 0.75, its defaults) over each bank's live
  notes, tokenised by ``bm25s.tokenize`` with English stop words and PyStemmer's Snowball
  stemmer;
* ``dense``: cosine similarity of the same encoder's vectors (numpy, exact);
* ``RRF``: reciprocal-rank fusion (Cormack et al. 2009, k 60, equal weights) of the top 100
  of each.

:func:`paired_bootstrap` resamples questions (2,000 times, fixed seed) for the difference of
a per-question score between two systems: its mean, 95% interval, wins and losses.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

RRF_K = 60
FUSE_DEPTH = 100


class Bm25sBank:
    """bm25s over one bank's notes (ids in order)."""

    def __init__(self, ids: list[str], texts: list[str]) -> None:
        import bm25s
        import Stemmer

        self.ids = ids
        self.stemmer = Stemmer.Stemmer("english")
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.retriever.index(tokens, show_progress=False)

    def top(self, query: str, k: int) -> list[str]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer,
                                show_progress=False)
        if not tokens.vocab:
            return []
        k = min(k, len(self.ids))
        found, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return [self.ids[int(i)] for i, s in zip(found[0], scores[0], strict=True) if s > 0]


class DenseBank:
    """Exact cosine ranking over one bank's vectors."""

    def __init__(self, ids: list[str], vectors: np.ndarray) -> None:
        self.ids = ids
        self.vectors = vectors

    def top(self, vector: np.ndarray, k: int) -> list[str]:
        if not self.ids:
            return []
        scores = self.vectors @ vector
        k = min(k, len(self.ids))
        best = np.argpartition(-scores, k - 1)[:k]
        return [self.ids[i] for i in best[np.argsort(-scores[best], kind="stable")]]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion of ``rankings`` (equal weights), best first."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda key: (-fused[key], key))


def paired_bootstrap(a: Sequence[float], b: Sequence[float], rounds: int = 2000,
                     seed: int = 7) -> dict[str, Any]:
    """Mean of ``a - b`` over questions with its 95% bootstrap interval, wins and losses."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    if not diffs:
        return {"diff": 0.0, "low": 0.0, "high": 0.0, "wins": 0, "losses": 0, "n": 0}
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return {"diff": round(sum(diffs) / n, 4), "low": round(means[int(0.025 * rounds)], 4),
            "high": round(means[int(0.975 * rounds) - 1], 4),
            "wins": sum(1 for d in diffs if d > 0), "losses": sum(1 for d in diffs if d < 0),
            "n": n}
