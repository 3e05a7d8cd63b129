"""Int8 codes of unit vectors, scored with SIMD kernels, with a bound that keeps ranking exact.

A vector ``x`` is stored as ``scale_x * codes_x + residual_x`` (codes in -127..127, one scale
per vector: its largest component over 127), and the query the same way. The int8 dot product
of the codes times both scales is within

    bound_x = (1 + |residual_x|) * |residual_q| + |residual_x|

of the true cosine (Cauchy-Schwarz on the two residuals, unit vectors). A search therefore
ranks by the upper bound ``approx + bound``, computes the exact float32 cosine of the first
candidates only, and stops once the k-th exact score is at least the upper bound of every
candidate not computed: the result is the exact top k (:func:`exact_top`), for a quarter of the
memory traffic of a float32 scan and kernels that use the CPU's int8 instructions.

``simsimd`` (Apache-2.0, in the ``semantic`` extra) supplies the int8 kernel; without it the
codes are not built and the search is one float32 matrix-vector product.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

try:  # the semantic extra
    import simsimd
except ImportError:  # pragma: no cover - the extra is installed wherever vectors exist
    simsimd = None  # type: ignore[assignment]

CODE_MAX = 127


@dataclass
class Codes:
    """Int8 codes of a batch of vectors: codes, per-vector scale, residual norm."""

    codes: np.ndarray  # int8 (n, dim)
    scales: np.ndarray  # float32 (n,)
    residuals: np.ndarray  # float32 (n,)


def available() -> bool:
    """Whether the int8 kernel is installed."""
    return simsimd is not None


def encode(vectors: np.ndarray) -> Codes:
    """Int8 codes of float32 row vectors (see the module docstring)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    vectors = vectors.reshape(-1, vectors.shape[-1])
    peak = np.abs(vectors).max(axis=1) if len(vectors) else np.zeros(0, np.float32)
    scales = np.where(peak > 0, peak / CODE_MAX, 1.0).astype(np.float32)
    codes = np.clip(np.rint(vectors / scales[:, None]), -CODE_MAX, CODE_MAX).astype(np.int8)
    residuals = np.linalg.norm(vectors - codes * scales[:, None], axis=1).astype(np.float32)
    return Codes(codes, scales, residuals)


def upper_bounds(codes: Codes, query: np.ndarray) -> np.ndarray:
    """For every coded vector, an upper bound of its cosine with the unit ``query``."""
    q = encode(query.reshape(1, -1))
    assert simsimd is not None
    dots = np.asarray(simsimd.cdist(codes.codes, q.codes, metric="dot")).reshape(-1)
    approx = dots * codes.scales * q.scales[0]
    q_residual = float(q.residuals[0])
    return (approx + (1.0 + codes.residuals) * q_residual + codes.residuals).astype(np.float32)


def exact_top(
    upper: np.ndarray,
    exact: Callable[[np.ndarray], np.ndarray],
    accept: Callable[[int], bool],
    limit: int,
    floor: float,
) -> list[tuple[int, float]]:
    """The ``limit`` best accepted positions by exact score, at least ``floor``.

    ``upper`` bounds every position's score from above; ``exact(positions)`` computes the true
    scores of some; ``accept(position)`` says whether a position may be returned (a note
    that is not live may not). Positions are taken in the order of their upper bound, four
    times more each round, until the k-th accepted exact score is at least the upper bound of
    everything not yet computed, or nothing left can reach ``floor``."""
    n = len(upper)
    take = min(n, max(limit * 4, 64))
    while True:
        if take < n:
            split = np.argpartition(-upper, take)
            chosen, beyond = split[:take], float(upper[split[take]])
        else:
            chosen, beyond = np.arange(n), float("-inf")
        scores = exact(chosen)
        order = np.argsort(-scores, kind="stable")
        picked: list[tuple[int, float]] = []
        for at in order:
            score = float(scores[at])
            if score < floor:
                break
            position = int(chosen[at])
            if accept(position):
                picked.append((position, score))
                if len(picked) == limit:
                    break
        enough = len(picked) == limit and picked[-1][1] >= beyond
        if enough or take >= n or beyond < floor:
            return picked
        take = min(n, take * 4)
