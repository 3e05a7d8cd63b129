"""Exact BM25 over a bank's notes: an in-memory inverted index per bank, kept current from the
database's tail, and saved to a snapshot file that a fresh process maps instead of rebuilding.

Why not SQLite's ``bm25()``: FTS5 ranks with statistics over the whole table (every bank and
every status), and ranking a word that occurs in most of a million notes walks its whole
posting list before the first row comes back (tens of milliseconds). Here each bank has its
own postings (numpy arrays of note numbers and term frequencies, grouped by term), so a query
costs only the postings of its own terms, and the statistics (live note count, average length,
document frequencies) are those of the notes the search may return: by default a bank's live
notes (accepted, not superseded by an accepted note). Results equal exact BM25 over those notes
(``bench/bench_note_search.py`` checks against FTS5's ``bm25()`` and ``bm25s`` in the same run).

Each term's postings are kept twice: in note order (to look a note up by binary search, and
to count document frequencies), and in *impact order*: grouped by term frequency (highest
first), each group shortest note first, then newest first. Within one group BM25 only falls
along that order, whatever the statistics, which is what lets a search stop early (see
:mod:`store.search.term_ranking`).

Keeping current: every note of a bank (any status) has a number in its bank's index, with its
status and whether an accepted note supersedes it, so a decision only flips two small arrays.
Before each search the index reads the database's tail in the same hop: notes with a larger
rowid than any seen (notes are append-only) and the ``note_changes`` log written by triggers
(status decisions, new supersession edges). New notes land in a small delta segment, folded
into the arrays (a linear merge: the delta's notes are all newer) once it holds
``MERGE_AT_NOTES`` notes or ``1/MERGE_SHARE`` of the bank. A snapshot saves the delta as it
is (its own CSR arrays, "frozen" once read back), so saving never rewrites the base.

Cold start: a bank read from scratch costs about 3 s per 100k notes (SQLite reads and
tokenising). On a SQLite workspace the index is saved under ``<workspace>/index/`` after a
build and whenever enough notes or decisions arrived since (:mod:`store.search.term_snapshot`); a
fresh process maps that file, checks it against the database, and applies only the tail since.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from store.db.seam import Connection, RowLike
from store.search import snapshot_sql as snapshot_sql
from store.search import term_snapshot as snapshots
from store.search import term_sql as sql
from store.search.term_ranking import Query, Ranked, Stats, order, score_bank
from store.search.term_snapshot import SnapshotRejected

if TYPE_CHECKING:
    from store.db.seam import Database
from store.search.bank_arrays import LIVE, WORKSPACE, Scope
from store.search.bank_index import BankIndex


class TermIndex:
    """Per-bank indexes of one database, refreshed from its tail before every search;
    ``folder`` (a SQLite workspace's folder) holds their snapshots."""

    def __init__(self, folder: Path | None = None) -> None:
        self.banks: dict[str, BankIndex] = {}
        self.seen_rowid = 0
        self.seen_change = 0
        self.folder = folder
        # What happened to each bank when first needed, and every snapshot written or refused
        # (newest last; for tests and diagnostics).
        self.history: list[tuple[str, str, str]] = []

    def _note(self, event: str, namespace: str, detail: str = "") -> None:
        self.history.append((event, namespace, detail))
        del self.history[:-100]

    def refresh(self, conn: Connection) -> None:
        """Apply new notes and liveness changes committed since the last call."""
        max_rowid, max_change = conn.execute(sql.TAIL_MARKS).fetchone()
        max_rowid, max_change = int(max_rowid or 0), int(max_change or 0)
        if max_rowid > self.seen_rowid:
            if self.banks:
                grouped: dict[str, list[RowLike]] = {}
                for row in conn.execute(sql.NOTES_AFTER, {"after": self.seen_rowid}):
                    for name in (row["namespace"], WORKSPACE):
                        if name in self.banks:
                            grouped.setdefault(name, []).append(row)
                    max_rowid = max(max_rowid, int(row["rowid"]))
                for name, rows in grouped.items():
                    self.banks[name].append(rows)
            self.seen_rowid = max_rowid
        if max_change > self.seen_change:
            if self.banks:
                self._apply_changes(conn, self.seen_change, self.banks.values())
            self.seen_change = max_change
        for bank in self.banks.values():
            bank.rowid_mark = max(bank.rowid_mark, self.seen_rowid)
            bank.change_mark = max(bank.change_mark, self.seen_change)
            if self.folder is not None and snapshots.snapshot_due(bank.size, bank.tail):
                self._save(conn, bank)

    def _apply_changes(
        self, conn: Connection, after: int, banks: Iterable[BankIndex]
    ) -> None:
        targets = list(banks)
        by_name = {bank.namespace: bank for bank in targets}
        for row in conn.execute(sql.CHANGED_NOTES, {"after": after}):
            rowid = int(row["note_rowid"])
            if row["namespace"] is None:  # deleted: find it in whichever bank has it
                for bank in targets:
                    bank.set_state(rowid, None, False)
                continue
            for name in (row["namespace"], WORKSPACE):
                found = by_name.get(name)
                if found is not None:
                    found.set_state(rowid, row["status"], bool(row["superseded"]))

    def bank(self, conn: Connection, namespace: str) -> BankIndex:
        """The index of one bank, read from its snapshot or built on first use (after
        :meth:`refresh`)."""
        bank = self.banks.get(namespace)
        if bank is None:
            loaded = self._load(conn, namespace) if self.folder is not None else None
            if loaded is not None and snapshots.snapshot_due(loaded.size, loaded.tail):
                self._save(conn, loaded)
            if loaded is not None:
                bank = loaded
            else:
                bank = BankIndex(namespace)
                if namespace == WORKSPACE:
                    rows = conn.execute(sql.ALL_NOTES)
                else:
                    rows = conn.execute(sql.BANK_NOTES, {"namespace": namespace})
                # Notes committed between the refresh and this read are in the build.
                bank.build(rows)
                bank.rowid_mark = max(bank.rowid_mark, self.seen_rowid)
                bank.change_mark = self.seen_change
                self._note("built", namespace, str(bank.size))
                if self.folder is not None and bank.size >= snapshots.SNAPSHOT_MIN_NOTES:
                    self._save(conn, bank)
            self.banks[namespace] = bank
        return bank

    # -- snapshots -------------------------------------------------------------------------

    def _load(self, conn: Connection, namespace: str) -> BankIndex | None:
        """The bank from its snapshot, checked against the database and caught up with the
        tail since; None when there is no usable snapshot."""
        assert self.folder is not None
        path = snapshots.snapshot_path(self.folder, namespace)
        try:
            snapshot = snapshots.read_snapshot(path, namespace)
            bank = BankIndex.from_snapshot(snapshot)
        except FileNotFoundError:
            return None
        except (SnapshotRejected, OSError, ValueError) as error:
            self._note("rejected", namespace, str(error))
            return None
        reason = self._mismatch(conn, snapshot.meta)
        if reason is not None:
            self._note("rejected", namespace, reason)
            return None
        if namespace == WORKSPACE:
            rows = conn.execute(sql.NOTES_AFTER, {"after": bank.rowid_mark})
        else:
            rows = conn.execute(snapshot_sql.BANK_NOTES_AFTER,
                                {"after": bank.rowid_mark, "namespace": namespace})
        bank.append(rows)
        self._apply_changes(conn, bank.change_mark, [bank])
        bank.rowid_mark = max(bank.rowid_mark, self.seen_rowid)
        bank.change_mark = max(bank.change_mark, self.seen_change)
        self._note("loaded", namespace, str(bank.tail))
        return bank

    def _mismatch(self, conn: Connection, meta: Mapping[str, Any]) -> str | None:
        # Fresh reads (no transaction): the database now, which may be ahead of this
        # process's last refresh if another process wrote the snapshot meanwhile.
        max_rowid, max_change = conn.execute(sql.TAIL_MARKS).fetchone()
        rowids = [rowid for rowid, _ in meta["fingerprint"]]
        ids = {int(r[0]): str(r[1]) for r in
               conn.execute(snapshot_sql.NOTE_IDS_AT, {"rowids": json.dumps(rowids)})}
        change = conn.execute(snapshot_sql.CHANGE_AT, {"seq": meta["change_mark"]}).fetchone()
        first_after = conn.execute(snapshot_sql.FIRST_CHANGE_AFTER,
                                   {"after": meta["change_mark"]}).fetchone()[0]
        return snapshots.mismatch(
            meta, max_rowid=int(max_rowid or 0), max_change=int(max_change or 0), ids=ids,
            change_row=None if change is None else int(change[0]),
            first_change_after=None if first_after is None else int(first_after),
        )

    def _save(self, conn: Connection, bank: BankIndex) -> None:
        """Write the bank's snapshot (a read-only workspace: nothing, and never again in this
        process)."""
        assert self.folder is not None
        meta, arrays = bank.snapshot_parts()
        docs = snapshots.fingerprint_docs(bank.size)
        rowids = [int(bank.rowids[d]) for d in docs]
        if bank.rowid_mark:
            rowids.append(bank.rowid_mark)
        ids = {int(r[0]): str(r[1]) for r in
               conn.execute(snapshot_sql.NOTE_IDS_AT, {"rowids": json.dumps(rowids)})}
        if any(rowid not in ids for rowid in rowids):
            return  # a note is gone (deleted): no fingerprint to check against, no snapshot
        change = conn.execute(snapshot_sql.CHANGE_AT, {"seq": bank.change_mark}).fetchone()
        meta["fingerprint"] = [[rowid, ids[rowid]] for rowid in dict.fromkeys(rowids)]
        meta["change_fingerprint"] = None if change is None else int(change[0])
        path = snapshots.snapshot_path(self.folder, bank.namespace)
        try:
            size = snapshots.write_snapshot(path, meta, arrays)
        except OSError as error:
            self._note("unwritable", bank.namespace, str(error))
            self.folder = None
            return
        bank.tail = 0
        self._note("saved", bank.namespace, str(size))

    # -- searching -------------------------------------------------------------------------

    def search(
        self,
        conn: Connection,
        namespaces: Sequence[str] | None,
        terms: Sequence[str],
        *,
        limit: int,
        require_all: bool,
        scope: Scope = LIVE,
        tags: Mapping[str, Sequence[Sequence[str]]] | None = None,
        per_bank_stats: bool = False,
        guard: bool = False,
        echo_text: str | None = None,
        namespace_range: tuple[str, str] | None = None,
    ) -> list[Ranked]:
        """The best ``limit`` notes of ``namespaces`` (None: every namespace, or those in
        ``namespace_range`` ``[low, high)``) for ``terms`` by exact BM25.

        ``require_all``: a note must hold every term (note search), else any term (recall).
        Statistics are those of the notes ``scope`` admits: pooled over all ``namespaces``, or
        each bank's own with ``per_bank_stats`` (recall over several banks). ``tags`` maps a
        namespace to its tag scope (groups, each met by any one tag). ``guard`` refuses
        notes matched only by weak terms; ``echo_text`` (the question) demotes echoes.
        """
        self.refresh(conn)
        query = Query(tuple(dict.fromkeys(terms)), require_all, limit, guard, echo_text)
        wanted = None if namespaces is None else list(dict.fromkeys(namespaces))
        if wanted is None or (len(wanted) > 1 and not per_bank_stats):
            # Pooled statistics over several banks: one pass over the workspace index.
            workspace = self.bank(conn, WORKSPACE)
            if wanted is None and namespace_range is not None:
                low, high = namespace_range
                wanted = [n for n in workspace.space_names.names if low <= n < high]
            banks = [workspace]
            masks = [workspace.mask(scope, (), wanted)]
        else:
            banks = [self.bank(conn, ns) for ns in wanted]
            masks = [bank.mask(scope, (tags or {}).get(bank.namespace, ())) for bank in banks]
        per_bank = [bank.stats(query.terms, mask) for bank, mask in zip(banks, masks,
                                                                         strict=True)]
        pooled = Stats()
        if not per_bank_stats:
            for stats in per_bank:
                pooled.add(stats)
        ranked: list[Ranked] = []
        for bank, mask, stats in zip(banks, masks, per_bank, strict=True):
            ranked += score_bank(bank, mask, stats if per_bank_stats else pooled, query)
        ranked = order(ranked)
        if echo_text is not None:
            return ranked  # the caller demotes echoes once it has the texts, then cuts
        return ranked[:limit]


_INDEXES: weakref.WeakKeyDictionary[Database, TermIndex] = weakref.WeakKeyDictionary()


def index_for(db: Database) -> TermIndex:
    """The term index of this open database (one per :class:`Database` in a process). On a
    SQLite workspace it keeps snapshots in the workspace folder."""
    index = _INDEXES.get(db)
    if index is None:
        folder = db.workspace.root if db.backend == "sqlite" else None
        index = _INDEXES[db] = TermIndex(folder)
    return index
