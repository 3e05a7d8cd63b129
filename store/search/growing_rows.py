"""Rows appended to a numpy buffer that doubles its capacity when full.

A bank's vectors grow by a note at a time: ``np.vstack`` of the whole matrix for each new row
copied it every time, and in a long-lived process (the dashboard's embedded engine) every run
freed a block of the bank's size and asked for a slightly larger one, which the allocator did
not always fit in those it had freed (the process's RSS rose in steps of 1-2 MB). Doubling
copies each row about twice in all, and the spare capacity costs no resident memory until
rows are written to it (a zeroed buffer's pages are mapped on first write).

:attr:`GrowingRows.rows` is a view of the rows written so far: rows appended later land past
its end (never seen through it), and a buffer outgrown is replaced, never moved under it.
"""

from __future__ import annotations

import numpy as np

MIN_CAPACITY = 16


def grown_capacity(capacity: int, needed: int) -> int:
    """The capacity that holds ``needed`` rows: doubled from ``capacity`` until it does."""
    capacity = max(capacity, MIN_CAPACITY)
    while capacity < needed:
        capacity *= 2
    return capacity


class GrowingRows:
    """An array of rows of one shape and dtype, appended to in blocks."""

    def __init__(self, tail: tuple[int, ...], dtype: np.dtype | type) -> None:
        self._buffer = np.zeros((0, *tail), dtype=dtype)
        self.count = 0

    @property
    def rows(self) -> np.ndarray:
        """The rows appended so far (a view: rewrite a row in place through it)."""
        return self._buffer[: self.count]

    def append(self, block: np.ndarray) -> None:
        """Add ``block``'s rows after the others."""
        needed = self.count + len(block)
        if needed > len(self._buffer):
            grown = np.zeros((grown_capacity(len(self._buffer), needed),
                              *self._buffer.shape[1:]), dtype=self._buffer.dtype)
            grown[: self.count] = self._buffer[: self.count]
            self._buffer = grown
        self._buffer[self.count : needed] = block
        self.count = needed
