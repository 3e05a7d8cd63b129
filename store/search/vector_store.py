"""Semantic vectors of notes and facts: stored in the workspace database, searched per bank in
memory with numpy.

The store knows nothing of the model: an embedder (``engine/memory/semantic.py``) reads what
lacks a vector (:meth:`VectorStore.pending`), embeds it and saves the vectors
(:meth:`VectorStore.save`). Notes are append-only, so "what lacks a vector" is every note above a
per-model rowid mark; a fact gets a new vector whenever it is written again (an update-time
mark).

Search (:class:`VectorIndex`): one float32 matrix of unit vectors per bank, loaded on the bank's
first search and kept current from the table's tail (rowids grow: a replaced vector is a new
row), with its int8 codes beside it (:mod:`store.search.quantised`): a query scores the codes,
then computes the exact cosine of the first candidates only, so the ranking is the exact one
for about a quarter of a float32 scan. Notes that are not live (per the term index's
read-contract arrays) are skipped.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from store.db.seam import Connection
from store.search import quantised
from store.search import vectors_sql as sql
from store.search.bank_arrays import LIVE
from store.search.term_index import TermIndex

if TYPE_CHECKING:
    from store.db.seam import Database


@dataclass(frozen=True)
class PendingRecord:
    """A note or fact that needs a vector: its ref, namespace, rowid, text and mark."""

    ref: str
    namespace: str
    source_rowid: int
    text: str
    mark: int


@dataclass(frozen=True)
class Similar:
    """A semantic candidate: ``note:<id>`` or ``fact:<ns>/<key>``, with its cosine similarity."""

    ref: str
    namespace: str
    source_rowid: int
    similarity: float


def fact_embedding_text(key: str, value_json: str) -> str:
    """What a fact is embedded as: its key and the text of its value."""
    value: Any = json.loads(value_json)
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        text = value["content"]
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return f"{key}: {text}"


class VectorStore:
    """Reads what needs embedding and writes vectors (one model at a time)."""

    def __init__(self, db: Database, model: str, dim: int) -> None:
        self.db = db
        self.model = model
        self.dim = dim

    async def pending_count(self) -> int:
        """How many notes and facts need a vector (for a progress bar)."""

        def read(conn: Connection) -> int:
            notes_mark = self._mark(conn, "note")
            facts_mark = self._mark(conn, "fact")
            notes = conn.execute(sql.COUNT_NOTES_TO_EMBED, {"mark": notes_mark}).fetchone()[0]
            facts = conn.execute(
                sql.COUNT_FACTS_TO_EMBED,
                {"mark": facts_mark, "now": self.db.clock.now_ms(), "model": self.model},
            ).fetchone()[0]
            return int(notes) + int(facts)

        return await self.db.run_read(read)

    def _mark(self, conn: Connection, source: str) -> int:
        row = conn.execute(sql.GET_MARK, {"model": self.model, "source": source}).fetchone()
        return int(row[0]) if row else (0 if source == "note" else -1)

    async def pending(self, limit: int) -> list[PendingRecord]:
        """Up to ``limit`` records lacking a vector: notes first (by rowid), then facts."""

        def read(conn: Connection) -> list[PendingRecord]:
            out = [
                PendingRecord(f"note:{r['id']}", r["namespace"], int(r["rowid"]), r["body"],
                              int(r["rowid"]))
                for r in conn.execute(
                    sql.NOTES_TO_EMBED, {"mark": self._mark(conn, "note"), "limit": limit}
                )
            ]
            if len(out) < limit:
                params = {"mark": self._mark(conn, "fact"), "limit": limit - len(out),
                          "now": self.db.clock.now_ms(),
                          "model": self.model}
                out += [
                    PendingRecord(f"fact:{r['namespace']}/{r['key']}", r["namespace"],
                                  int(r["rowid"]), fact_embedding_text(r["key"], r["value_json"]),
                                  int(r["updated_at_ms"]))
                    for r in conn.execute(sql.FACTS_TO_EMBED, params)
                ]
            return out

        return await self.db.run_read(read)

    async def save(self, records: Sequence[PendingRecord], vectors: np.ndarray) -> None:
        """Store one vector per record and move the marks past them, in one transaction."""
        if not records:
            return
        model, dim, clock = self.model, self.dim, self.db.clock
        rows = [
            {"ref": r.ref, "model": model, "namespace": r.namespace,
             "source_rowid": r.source_rowid, "dim": dim,
             "vector": np.asarray(v, dtype="<f4").tobytes()}
            for r, v in zip(records, vectors, strict=True)
        ]
        note_marks = [r.mark for r in records if r.ref.startswith("note:")]

        def write(conn: Connection) -> None:
            now = clock.now_ms()
            conn.executemany(sql.SAVE_VECTOR, [{**row, "now": now} for row in rows])
            if note_marks:
                conn.execute(sql.SET_MARK, {"model": model, "source": "note",
                                            "mark": max(note_marks)})

        await self.db.run_in_transaction(write)

    async def finish_facts(self, mark: int) -> None:
        """Every live fact written before ``mark`` has a vector now (the embedder calls this
        after a pass with the time the pass started; re-embedding a fact is harmless)."""
        model = self.model

        def write(conn: Connection) -> None:
            conn.execute(sql.SET_MARK, {"model": model, "source": "fact", "mark": mark})

        await self.db.run_in_transaction(write)


class _BankVectors:
    def __init__(self, dim: int) -> None:
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.codes = quantised.encode(self.matrix) if quantised.available() else None
        self.refs: list[str] = []
        self.rowids = np.zeros(0, dtype=np.int64)
        self.position: dict[str, int] = {}

    def add(self, rows: Sequence[tuple[str, int, bytes]], dim: int) -> None:
        fresh: list[np.ndarray] = []
        refs: list[str] = []
        sources: list[int] = []
        replaced: list[int] = []
        for ref, source_rowid, blob in rows:
            vector = np.frombuffer(blob, dtype="<f4")
            at = self.position.get(ref)
            if at is not None:  # a re-embedded fact replaces its row
                self.matrix[at] = vector
                self.rowids[at] = source_rowid
                replaced.append(at)
                continue
            self.position[ref] = len(self.refs) + len(refs)
            fresh.append(vector)
            refs.append(ref)
            sources.append(source_rowid)
        if fresh:
            block = np.stack(fresh).astype(np.float32)
            self.matrix = np.vstack([self.matrix, block])
            self.refs += refs
            self.rowids = np.concatenate([self.rowids, np.asarray(sources, dtype=np.int64)])
            if self.codes is not None:
                new = quantised.encode(block)
                self.codes = quantised.Codes(
                    np.vstack([self.codes.codes, new.codes]),
                    np.concatenate([self.codes.scales, new.scales]),
                    np.concatenate([self.codes.residuals, new.residuals]))
        if replaced and self.codes is not None:
            rows_at = np.asarray(replaced)
            new = quantised.encode(self.matrix[rows_at])
            self.codes.codes[rows_at], self.codes.scales[rows_at] = new.codes, new.scales
            self.codes.residuals[rows_at] = new.residuals


class VectorIndex:
    """Per-bank vector matrices of one database and model, refreshed from the table's tail."""

    def __init__(self, model: str, dim: int) -> None:
        self.model = model
        self.dim = dim
        self.banks: dict[str, _BankVectors] = {}
        self.seen = 0

    def refresh(self, conn: Connection) -> None:
        top = int(conn.execute(sql.MAX_VECTOR_ROWID).fetchone()[0] or 0)
        if top > self.seen and self.banks:
            grouped: dict[str, list[tuple[str, int, bytes]]] = {}
            params = {"model": self.model, "after": self.seen, "dim": self.dim}
            for row in conn.execute(sql.VECTORS_AFTER, params):
                if row["namespace"] in self.banks:
                    grouped.setdefault(row["namespace"], []).append(
                        (row["ref"], int(row["source_rowid"]), row["vector"]))
            for namespace, rows in grouped.items():
                self.banks[namespace].add(rows, self.dim)
        self.seen = max(self.seen, top)

    def bank(self, conn: Connection, namespace: str) -> _BankVectors:
        bank = self.banks.get(namespace)
        if bank is None:
            bank = _BankVectors(self.dim)
            params = {"model": self.model, "namespace": namespace, "dim": self.dim}
            bank.add([(r["ref"], int(r["source_rowid"]), r["vector"])
                      for r in conn.execute(sql.BANK_VECTORS, params)], self.dim)
            self.banks[namespace] = bank
        return bank

    def snapshot(
        self, conn: Connection, terms: TermIndex, namespaces: Sequence[str]
    ) -> list[BankView]:
        """What a search of ``namespaces`` reads, as of now (on the connection's thread; the
        ranking itself needs no connection: :func:`rank`)."""
        self.refresh(conn)
        terms.refresh(conn)
        views = []
        for namespace in dict.fromkeys(namespaces):
            bank = self.bank(conn, namespace)
            if bank.refs:
                notes = terms.bank(conn, namespace)
                views.append(BankView(namespace, bank.matrix, bank.codes, bank.refs,
                                      bank.rowids, notes.rowids, notes.mask(LIVE)))
        return views

    def search(
        self,
        conn: Connection,
        terms: TermIndex,
        namespaces: Sequence[str],
        query: np.ndarray,
        limit: int,
        min_similarity: float,
    ) -> list[Similar]:
        """:meth:`snapshot` then :func:`rank`, on this thread."""
        return rank(self.snapshot(conn, terms, namespaces), query, limit, min_similarity)


@dataclass(frozen=True)
class BankView:
    """One bank's vectors and live notes as of a snapshot. Arrays that grow are replaced,
    never extended in place, so a view stays consistent while the index moves on; a
    re-embedded fact's row is rewritten in place (a ranking that races it sees either
    vector)."""

    namespace: str
    matrix: np.ndarray
    codes: quantised.Codes | None
    refs: list[str]
    rowids: np.ndarray
    note_rowids: np.ndarray
    live: np.ndarray

    def accept(self, position: int) -> bool:
        """A fact, or a note live under the read contract."""
        if not self.refs[position].startswith("note:"):
            return True
        rowid = int(self.rowids[position])
        doc = int(np.searchsorted(self.note_rowids, rowid))
        return (doc < self.note_rowids.shape[0] and int(self.note_rowids[doc]) == rowid
                and bool(self.live[doc]))


def rank(
    views: Sequence[BankView], query: np.ndarray, limit: int, min_similarity: float
) -> list[Similar]:
    """The ``limit`` most similar live notes and facts of each bank (cosine of unit vectors),
    at least ``min_similarity``, best first; notes not live under the read contract are
    skipped (facts are checked by the caller, which reads them). Needs no connection: run it
    off the database thread."""
    query = np.asarray(query, dtype=np.float32).reshape(-1)
    found: list[Similar] = []
    for view in views:
        matrix = view.matrix
        upper = (quantised.upper_bounds(view.codes, query) if view.codes is not None
                 else matrix @ query)

        def exact(positions: np.ndarray, matrix: np.ndarray = matrix) -> np.ndarray:
            return matrix[positions] @ query

        top = quantised.exact_top(upper, exact, view.accept, limit, min_similarity)
        found += [Similar(view.refs[at], view.namespace, int(view.rowids[at]), score)
                  for at, score in top]
    found.sort(key=lambda s: -s.similarity)
    return found


_INDEXES: weakref.WeakKeyDictionary[Database, dict[str, VectorIndex]] = (
    weakref.WeakKeyDictionary()
)


def vector_index_for(db: Database, model: str, dim: int) -> VectorIndex:
    """The vector index of this open database for one model (one per process)."""
    per_model = _INDEXES.setdefault(db, {})
    index = per_model.get(model)
    if index is None:
        index = per_model[model] = VectorIndex(model, dim)
    return index
