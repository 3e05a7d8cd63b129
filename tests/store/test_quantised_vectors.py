"""The int8 vector search returns exactly the float32 ranking (store/search/quantised.py)."""

from __future__ import annotations

import numpy as np
import pytest

from store.search import quantised

needs_simsimd = pytest.mark.skipif(not quantised.available(), reason="simsimd not installed")


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@needs_simsimd
def test_the_bound_is_never_below_the_true_cosine() -> None:
    matrix = _unit(3000, 384, 1)
    codes = quantised.encode(matrix)
    for query in _unit(20, 384, 2):
        upper = quantised.upper_bounds(codes, query)
        exact = matrix @ query
        assert np.all(upper >= exact - 1e-6)
        assert float(np.max(upper - exact)) < 0.05  # tight enough to prune


@needs_simsimd
@pytest.mark.parametrize("structured", [False, True])
def test_exact_top_equals_the_brute_force_ranking(structured: bool) -> None:
    """Random vectors (the worst case for pruning) and clustered ones (like real embeddings),
    with a third of the rows not acceptable (notes that are not live) and a floor."""
    matrix = _unit(20_000, 384, 3)
    if structured:
        centres = _unit(8, 384, 4)
        matrix = centres[np.arange(len(matrix)) % 8] + 0.6 * matrix
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    codes = quantised.encode(matrix)
    rejected = set(range(0, len(matrix), 3))
    for query in _unit(10, 384, 5):
        exact = matrix @ query
        for limit, floor in ((10, -1.0), (50, 0.05)):
            got = quantised.exact_top(
                quantised.upper_bounds(codes, query), lambda at, q=query: matrix[at] @ q,
                lambda at: at not in rejected, limit, floor)
            want = [int(at) for at in np.argsort(-exact, kind="stable")
                    if int(at) not in rejected and exact[at] >= floor][:limit]
            assert [at for at, _ in got] == want
            assert [score for _, score in got] == pytest.approx([float(exact[at]) for at in want])


@needs_simsimd
def test_nothing_above_the_floor_returns_nothing() -> None:
    matrix = _unit(500, 64, 6)
    query = _unit(1, 64, 7)[0]
    got = quantised.exact_top(quantised.upper_bounds(quantised.encode(matrix), query),
                              lambda at: matrix[at] @ query, lambda at: True, 10, 0.99)
    assert got == []


def test_without_codes_the_exact_scores_are_their_own_bounds() -> None:
    """The path without simsimd: one float32 product, ranked in one round."""
    matrix = _unit(2000, 64, 8)
    query = _unit(1, 64, 9)[0]
    exact = matrix @ query
    rounds: list[int] = []

    def scores(at: np.ndarray) -> np.ndarray:
        rounds.append(len(at))
        return matrix[at] @ query

    got = quantised.exact_top(exact, scores, lambda at: True, 10, -1.0)
    assert [at for at, _ in got] == [int(at) for at in np.argsort(-exact, kind="stable")[:10]]
    assert rounds == [64]
