"""A bank's vectors grow by appending into spare capacity, not by copying the whole matrix for
each note (which fragmented the dashboard's heap over a long session)."""

from __future__ import annotations

import numpy as np

from store.search import quantised
from store.search.growing_rows import GrowingRows, grown_capacity
from store.search.vector_store import _BankVectors

DIM = 8


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_capacity_doubles_until_it_holds_the_rows() -> None:
    assert grown_capacity(0, 1) == 16
    assert grown_capacity(16, 17) == 32
    assert grown_capacity(32, 200) == 256


def test_appended_rows_read_as_stacked_and_earlier_views_do_not_change() -> None:
    rows = GrowingRows((2,), np.int64)
    stacked = np.zeros((0, 2), np.int64)
    views = []
    for i in range(40):
        block = np.full((i % 3 + 1, 2), i, np.int64)
        rows.append(block)
        stacked = np.vstack([stacked, block])
        views.append((rows.rows, stacked.copy()))
    assert np.array_equal(rows.rows, stacked)
    for view, then in views:
        assert np.array_equal(view, then)


def test_a_bank_growing_a_note_at_a_time_reallocates_its_matrix_rarely() -> None:
    bank = _BankVectors(DIM)
    buffers = set()
    for i in range(300):
        bank.add([(f"note:{i}", i + 1, unit(i).astype("<f4").tobytes())], DIM)
        buffers.add(bank.matrix.__array_interface__["data"][0])
    # One buffer per doubling (16 .. 512 rows), not one per note.
    assert len(buffers) <= 6
    assert np.array_equal(bank.matrix, np.stack([unit(i) for i in range(300)]))
    assert bank.rowids.tolist() == list(range(1, 301))
    codes = bank.codes
    if codes is not None:
        expected = quantised.encode(bank.matrix)
        assert np.array_equal(codes.codes, expected.codes)
        assert np.array_equal(codes.scales, expected.scales)
        assert np.array_equal(codes.residuals, expected.residuals)


def test_a_re_embedded_fact_rewrites_its_row_in_place() -> None:
    bank = _BankVectors(DIM)
    bank.add([("fact:a/k", 1, unit(1).tobytes()), ("note:2", 2, unit(2).tobytes())], DIM)
    bank.add([("fact:a/k", 3, unit(3).tobytes())], DIM)
    assert bank.refs == ["fact:a/k", "note:2"]
    assert np.array_equal(bank.matrix, np.stack([unit(3), unit(2)]))
    assert bank.rowids.tolist() == [3, 2]
    if bank.codes is not None:
        assert np.array_equal(bank.codes.codes, quantised.encode(bank.matrix).codes)
