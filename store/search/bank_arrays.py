"""What a bank's index is built from: note status codes, search scopes, the sizes that decide
when the delta merges and which terms go dense, and the growable arrays and name codes a bank
keeps per note."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

STATUS_CODES = {"pending": 0, "accepted": 1, "rejected": 2}
GONE = -1  # the status of a note that was deleted
# Merge the delta segment into the base arrays once it holds MERGE_AT_NOTES notes or
# 1/MERGE_SHARE of the bank: its postings are scored in full (the base's are read best-first),
# and snapshots save it unmerged, so this bound alone keeps it small.
MERGE_AT_NOTES = 2_000
MERGE_SHARE = 50
# In a bank of at least DENSE_MIN_NOTES, a term held by at least 1/DENSE_SHARE of its notes is
# looked up in a per-note array (one gather instead of a binary search per note scored); the
# DENSE_TERMS most recently used are kept (a byte per note each when frequencies fit).
DENSE_MIN_NOTES = 65_536
DENSE_SHARE = 8
DENSE_TERMS = 16

Int = np.int64
# The name of the one index holding every note of the workspace (searches over several banks
# with pooled statistics: all of them, or one namespace kind).
WORKSPACE = "*"
# Impact-order sort keys pack (term, tf, length) in 64 bits; lengths and tfs fit 16 bits
# (a note body is at most 64 KiB, so at most 32k terms).
LOW16 = 0xFFFF


@dataclass(frozen=True)
class Scope:
    """Which notes a search may return: statuses (codes) and whether superseded ones count."""

    statuses: tuple[int, ...] = (STATUS_CODES["accepted"],)
    include_superseded: bool = False
    kind: str | None = None


LIVE = Scope()


class Column:
    """A growable per-note array (room doubles), read as a view of its filled part."""

    def __init__(self, values: np.ndarray) -> None:
        self._data = values
        self._filled = int(values.shape[0])

    @property
    def values(self) -> np.ndarray:
        return self._data[: self._filled]

    def extend(self, more: np.ndarray) -> None:
        need = self._filled + int(more.shape[0])
        if need > self._data.shape[0] or not self._data.flags.writeable:
            grown = np.empty(max(need, self._filled * 2, 64), dtype=self._data.dtype)
            grown[: self._filled] = self._data[: self._filled]
            self._data = grown
        self._data[self._filled:need] = more
        self._filled = need


class Names:
    """Names (namespaces, kinds, tags) numbered densely, looked up both ways."""

    def __init__(self, names: Iterable[Any] = ()) -> None:
        self.names: list[Any] = list(names)
        self.codes: dict[Any, int] = {name: code for code, name in enumerate(self.names)}

    def code(self, name: Any) -> int:
        found = self.codes.get(name)
        if found is None:
            found = self.codes[name] = len(self.names)
            self.names.append(name)
        return found
