"""The vocabulary of one term index: term text to a dense term number.

An index built in this process keeps a plain dict. An index read from a snapshot
(:mod:`store.search.term_snapshot`) does not rebuild that dict: 100k terms cost about 40 ms to put
in a dict, most of a fresh process's budget. It keeps the snapshot's terms as a sorted array of
fixed-width byte strings (memory-mapped, searched by binary search: a query's few terms, or a
tail's words in one vectorised call), the few terms too long for that width in a small dict,
and the terms added since in another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

# Terms up to this share of the vocabulary go in the fixed-width array; longer ones in a dict.
WIDTH_QUANTILE = 0.99
MIN_WIDTH = 8
MAX_WIDTH = 64


class Vocabulary:
    """Term -> number; numbers are dense from 0 and never change while the index lives."""

    def __init__(self) -> None:
        self._added: dict[str, int] = {}  # every term of a built index, or added since a load
        # Snapshot terms already looked up (a tail's next note with the word needs no search);
        # not counted in the length: their numbers are the snapshot's.
        self._found: dict[str, int] = {}
        self._base = 0  # terms held by the sorted array (and the long-term dict)
        self._sorted: np.ndarray | None = None  # fixed-width UTF-8, ascending
        self._sorted_ids: np.ndarray | None = None
        self._long: dict[str, int] = {}
        self._width = 0

    @classmethod
    def from_snapshot(
        cls, sorted_terms: np.ndarray, sorted_ids: np.ndarray, long_terms: dict[str, int]
    ) -> Vocabulary:
        """A vocabulary over a snapshot's arrays (see :meth:`to_snapshot`)."""
        vocabulary = cls()
        vocabulary._sorted = sorted_terms
        vocabulary._sorted_ids = sorted_ids
        vocabulary._long = long_terms
        vocabulary._width = sorted_terms.dtype.itemsize
        vocabulary._base = int(sorted_terms.shape[0]) + len(long_terms)
        return vocabulary

    def __len__(self) -> int:
        return self._base + len(self._added)

    def get(self, term: str) -> int | None:
        """The number of ``term``, or None when the index has never seen it."""
        found = self._added.get(term)
        if found is None:
            found = self._found.get(term)
        if found is not None or self._sorted is None:
            return found
        encoded = term.encode()
        if len(encoded) > self._width:
            return self._long.get(term)
        at = int(np.searchsorted(self._sorted, encoded))
        if at < self._sorted.shape[0] and self._sorted[at] == encoded:
            return int(self._sorted_ids[at])  # type: ignore[index]
        return None

    def add(self, term: str) -> int:
        """The number of ``term``, given a new one when unseen."""
        found = self.get(term)
        if found is None:
            found = self._added[term] = len(self)
        return found

    def add_all(self, terms: Sequence[str]) -> list[int]:
        """:meth:`add` for many terms at once (one binary search over the snapshot's array for
        all those not seen since it was read)."""
        if self._sorted is None:
            added = self._added
            out = []
            for term in terms:
                found = added.get(term)
                if found is None:
                    found = added[term] = len(self)
                out.append(found)
            return out
        known = self._found
        unknown = sorted({t for t in terms
                          if t not in self._added and t not in known and t not in self._long})
        if unknown:
            encoded = [t.encode() for t in unknown]
            short = [(t, e) for t, e in zip(unknown, encoded, strict=True)
                     if len(e) <= self._width]
            if short:
                needles = np.asarray([e for _, e in short], dtype=self._sorted.dtype)
                at = np.minimum(np.searchsorted(self._sorted, needles),
                                self._sorted.shape[0] - 1)
                hit = self._sorted[at] == needles if self._sorted.shape[0] else (
                    np.zeros(len(short), dtype=bool))
                for (term, _), position, found in zip(short, at.tolist(), hit.tolist(),
                                                      strict=True):
                    if found:
                        known[term] = int(self._sorted_ids[position])  # type: ignore[index]
            for term in unknown:
                if term not in known:
                    self.add(term)
        # Every term is now in exactly one of the three dicts (term number 0 included).
        return [self._added[t] if t in self._added else known[t] if t in known
                else self._long[t] for t in terms]

    def terms(self) -> list[str]:
        """Every term, by number."""
        out: list[str] = [""] * len(self)
        if self._sorted is not None and self._sorted_ids is not None:
            for term, number in zip(self._sorted.tolist(), self._sorted_ids.tolist(),
                                    strict=True):
                out[number] = term.decode()
        for term, number in self._long.items():
            out[number] = term
        for term, number in self._added.items():
            out[number] = term
        return out

    def to_snapshot(self) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
        """The arrays a snapshot stores: terms short enough for the fixed width, sorted by
        their UTF-8 bytes, their numbers, and the longer terms."""
        return sorted_arrays(self.terms())


def sorted_arrays(terms: Iterable[str]) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """``terms`` (by number) as a sorted fixed-width byte array, the numbers in that order,
    and a dict of the terms longer than the width (see :data:`WIDTH_QUANTILE`)."""
    encoded = [t.encode() for t in terms]
    lengths = np.asarray([len(e) for e in encoded], dtype=np.int64)
    width = MIN_WIDTH
    if lengths.shape[0]:
        width = int(min(MAX_WIDTH, max(MIN_WIDTH, np.quantile(lengths, WIDTH_QUANTILE))))
    short = np.flatnonzero(lengths <= width)
    long_terms = {encoded[i].decode(): i for i in np.flatnonzero(lengths > width).tolist()}
    values = np.asarray([encoded[i] for i in short.tolist()], dtype=f"S{width}")
    order = np.argsort(values, kind="stable")
    return values[order], short[order].astype(np.int32), long_terms
