"""Notes as values: a stored note, a note to save, search hits and supersession edges, and
the row conversions between them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from store.db.seam import RowLike

NoteStatus = Literal["pending", "accepted", "rejected"]
StatusFilter = str | Sequence[str]

MAX_BODY_BYTES = 64 * 1024
MAX_TAGS = 16
MAX_LABEL_CHARS = 128
MAX_REASON_CHARS = 2_000
DEFAULT_SEARCH_LIMIT = 20
MAX_SEARCH_LIMIT = 1_000


class Note(NamedTuple):
    """One note as stored. ``tags`` is a tuple; provenance is (run_id, node_id, iteration)."""

    id: str
    namespace: str
    body: str
    kind: str | None
    tags: tuple[str, ...]
    author: str | None
    status: str
    status_changed_at_ms: int | None
    status_reason: str | None
    created_at_ms: int
    run_id: str | None
    node_id: str | None
    iteration: int | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict for ``--format json`` and the dashboard."""
        document = self._asdict()
        document["tags"] = list(self.tags)
        return document


class SearchHit(NamedTuple):
    """A search result: the note, its BM25 relevance (higher is more relevant), the query
    terms it holds and the search mode that found it (all words, or the any-word fallback)."""

    note: Note
    score: float
    matched: tuple[str, ...] = ()
    mode: str = "all words"


class NoteSearch(NamedTuple):
    """What a note search found and how: ``mode`` says which search answered (all words, the
    any-word fallback, or both); ``terms`` are the stemmed query terms."""

    hits: list[SearchHit]
    mode: str
    terms: tuple[str, ...]


class SupersessionEdge(NamedTuple):
    """``note_id`` supersedes ``supersedes_id``; the statuses of both notes right now."""

    note_id: str
    supersedes_id: str
    note_status: str
    target_status: str


class NoteInput(NamedTuple):
    """One note to save in a batch (:meth:`NoteOps.save_notes`); the fields of
    :meth:`NoteOps.save_note`, plus an optional creation time (imports keep their dates)."""

    namespace: str
    body: str
    id: str | None = None
    kind: str | None = None
    tags: tuple[str, ...] = ()
    author: str | None = None
    status: str = "accepted"
    supersedes: tuple[str, ...] = ()
    created_at_ms: int | None = None


def note_tags(tags_json: str | None) -> tuple[str, ...]:
    """A note's tags from its ``tags_json`` column (NULL when it has none)."""
    return tuple(json.loads(tags_json)) if tags_json else ()


def note_from_row(row: RowLike) -> Note:
    """Build a :class:`Note` from a row selected with ``NOTE_COLUMNS`` (in that order)."""
    values = list(tuple(row))[:13]
    values[4] = note_tags(values[4])
    return Note(*values)
