"""The fusions the fusion study (``bench/recall_fusion_study.py``) compares, as pure functions
of one question's captured candidates: each returns note ids, best first.

A :class:`Candidates` holds what hybrid recall fuses for one question: keyword recall's
candidates (exact BM25 score, matched terms, whether the note repeats the question) and the
semantic ones (cosine similarity), both 50 deep, plus the query's terms and their idf in the
bank. Every fusion applies hybrid's question-echo demotion, so only the fusion differs.

The families (issue 22: the keyword weight driven by evidence in the query itself, or score
fusion of calibrated scores instead of rank fusion):

* ``rrf``: Tether's reciprocal-rank fusion with its weak-keyword step (the default) or
  without it, at other k and keyword weights;
* ``coverage``: keyword's RRF weight is the share of the query's terms the best of its first
  three candidates holds, raised to a power (a continuous form of the weak-keyword step);
  ``idf coverage`` the same share weighted by idf, so common words count less;
* ``agreement``: keyword's weight grows with the overlap of the two top-10 lists;
* ``dense confidence``: keyword's weight (after the weak-keyword step) is cut when the best
  cosine similarity reaches a threshold (the vectors are sure of their first item);
* ``z-score``: the sum of each list's standardised scores (CombSUM);
* ``cosine + BM25``: the cosine similarity plus a bounded bonus, BM25 over the query's best
  BM25 (optionally scaled by coverage), for keyword candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from store.search.search_policy import (
    ECHO_PENALTY,
    HYBRID_RRF_K,
    WEAK_KEYWORD_LOOK,
    keyword_share,
    reciprocal_rank_fusion,
)


@dataclass
class Candidates:
    """One question's two candidate lists (ids with a ``note:`` prefix)."""

    terms: tuple[str, ...]
    keyword: list[tuple[str, float, tuple[str, ...]]]  # id, BM25, matched terms
    semantic: list[tuple[str, float]]  # id, cosine similarity
    echo: set[str] = field(default_factory=set)  # ids that repeat the question
    idf: dict[str, float] = field(default_factory=dict)


Fusion = Callable[[Candidates], list[str]]


def _ranked(c: Candidates, fused: dict[str, float]) -> list[str]:
    scored = sorted((-(s * ECHO_PENALTY if i in c.echo else s), i) for i, s in fused.items())
    return [i.removeprefix("note:") for _, i in scored]


def coverage(c: Candidates, weighted: bool = False) -> float:
    """The largest share of the query's terms (idf-weighted when ``weighted``) that one of
    keyword's first :data:`WEAK_KEYWORD_LOOK` candidates matched."""
    weight = (lambda t: c.idf.get(t, 0.0)) if weighted else (lambda t: 1.0)
    total = sum(weight(t) for t in c.terms)
    if not total:
        return 0.0
    return max((sum(weight(t) for t in set(m)) / total
                for _, _, m in c.keyword[:WEAK_KEYWORD_LOOK]), default=0.0)


def rrf(k: int = HYBRID_RRF_K, keyword_weight: float = 1.0, step: bool = True) -> Fusion:
    """Tether's fusion (``step``: its weak-keyword factor) at another k or keyword weight."""
    def fuse(c: Candidates) -> list[str]:
        factor = keyword_share([len(set(m)) for _, _, m in c.keyword], len(c.terms)) if (
            step) else 1.0
        return _ranked(c, reciprocal_rank_fusion(
            [[i for i, _, _ in c.keyword], [i for i, _ in c.semantic]],
            [keyword_weight * factor, 1.0], k))
    return fuse


def weighted_rrf(weight: Callable[[Candidates], float], k: int = HYBRID_RRF_K) -> Fusion:
    """RRF with keyword's weight computed from the question's candidates."""
    def fuse(c: Candidates) -> list[str]:
        return _ranked(c, reciprocal_rank_fusion(
            [[i for i, _, _ in c.keyword], [i for i, _ in c.semantic]], [weight(c), 1.0], k))
    return fuse


def agreement(floor: float, top: int = 10) -> Callable[[Candidates], float]:
    """Keyword's weight from ``floor`` (no overlap) to 1 (the same top ``top``)."""
    def weight(c: Candidates) -> float:
        words = {i for i, _, _ in c.keyword[:top]}
        if not words:
            return 1.0
        near = {i for i, _ in c.semantic[:top]}
        return floor + (1 - floor) * len(words & near) / top
    return weight


def confident(threshold: float, share: float) -> Fusion:
    """The default, with keyword's weight times ``share`` when dense's best similarity is at
    least ``threshold``."""
    def fuse(c: Candidates) -> list[str]:
        best = c.semantic[0][1] if c.semantic else 0.0
        return rrf(keyword_weight=share if best >= threshold else 1.0)(c)
    return fuse


def z_scores(keyword_weight: float = 1.0, top: int = 50) -> Fusion:
    """CombSUM of standardised scores; a list's missing candidate gets that list's lowest."""
    def fuse(c: Candidates) -> list[str]:
        fused: dict[str, float] = {}
        lists = [({i: s for i, s, _ in c.keyword[:top]}, keyword_weight),
                 ({i: s for i, s in c.semantic[:top]}, 1.0)]
        parts = []
        for scores, weight in lists:
            if not scores:
                continue
            mean = sum(scores.values()) / len(scores)
            spread = math.sqrt(sum((v - mean) ** 2 for v in scores.values()) / len(scores))
            spread = spread or 1.0
            parts.append(({i: (v - mean) / spread for i, v in scores.items()},
                          (min(scores.values()) - mean) / spread, weight))
        for ids in [set(p[0]) for p in parts]:
            for i in ids:
                fused[i] = sum(w * z.get(i, low) for z, low, w in parts)
        return _ranked(c, fused)
    return fuse


def cosine_plus_bm25(bonus: float, scaled: bool = False) -> Fusion:
    """Cosine similarity plus ``bonus`` times BM25 over the query's best BM25 (times the
    query's term coverage when ``scaled``); a keyword-only candidate gets the lowest cosine."""
    def fuse(c: Candidates) -> list[str]:
        near = dict(c.semantic)
        words = {i: s for i, s, _ in c.keyword}
        best = max(words.values(), default=1.0) or 1.0
        share = coverage(c) if scaled else 1.0
        low = min(near.values(), default=0.0)
        return _ranked(c, {i: near.get(i, low) + bonus * share * words.get(i, 0.0) / best
                           for i in set(near) | set(words)})
    return fuse


def fusions() -> dict[str, Fusion]:
    """Every fusion of the study, by label (``default`` is Tether's)."""
    out: dict[str, Fusion] = {"default": rrf()}
    for k in (2, 5, 10):
        for weight in (0.5, 0.75, 1.0):
            out[f"RRF k={k}, keyword {weight}, weak-keyword step"] = rrf(k, weight)
            out[f"RRF k={k}, keyword {weight}, no step"] = rrf(k, weight, step=False)
    for power in (0.5, 1.0, 2.0):
        for k in (2, 5):
            out[f"coverage^{power}, k={k}"] = weighted_rrf(
                lambda c, p=power: coverage(c) ** p, k)
            out[f"idf coverage^{power}, k={k}"] = weighted_rrf(
                lambda c, p=power: coverage(c, weighted=True) ** p, k)
    for threshold in (0.4, 0.5, 0.6):
        out[f"idf coverage < {threshold}: x0.5"] = weighted_rrf(
            lambda c, t=threshold: 0.5 if coverage(c, weighted=True) < t else 1.0)
    for floor in (0.0, 0.25, 0.5):
        out[f"agreement, floor {floor}"] = weighted_rrf(agreement(floor))
    for threshold in (0.55, 0.65):
        for share in (0.5, 0.75):
            out[f"dense confidence: best cosine >= {threshold}, keyword x{share}"] = confident(
                threshold, share)
    for weight in (0.5, 1.0):
        for top in (10, 50):
            out[f"z-score, keyword {weight}, top {top}"] = z_scores(weight, top)
    for bonus in (0.1, 0.2, 0.3):
        out[f"cosine + {bonus} BM25"] = cosine_plus_bm25(bonus)
        out[f"cosine + {bonus} BM25 x coverage"] = cosine_plus_bm25(bonus, scaled=True)
    return out
