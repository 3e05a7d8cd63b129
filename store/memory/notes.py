"""Notes: append-only knowledge with a status a person decides, and supersession edges.

Rules (BRIEF section 2, reference notes section 1.4, with the reference's pitfalls fixed):

* A note row never changes after insert except its status (plus when and why it changed).
  Saving is ``INSERT ... ON CONFLICT DO NOTHING``; supersession edges are written only when
  that insert won, in the same transaction, so a losing id collision cannot hide anything.
  Re-saving an existing id with the same content is a no-op returning the stored note; with
  different content it is a :class:`ConflictError`.
* A note may supersede notes of its own namespace only, never itself; targets must exist.
* The default read contract: status ``accepted`` and not superseded by an *accepted* note.
  A pending or rejected superseder hides nothing; accepting it retires all its targets with
  that single status write; rejecting it afterwards revives them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from store.db.paging import MORE_COUNT_CAP
from store.db.seam import Connection, RowLike
from store.errors import InvalidInputError, NotFoundError
from store.memory import memory_sql as sql
from store.memory.namespaces import (
    Namespace,
    canonical_namespace,
    ensure_clean_text,
)
from store.memory.note_rules import (
    check_same_note,
    check_targets,
    filter_params,
    namespace_kind_range,
    note_params,
    refuse_cycle,
    status_list,
    supersession_cycle,
    validate_body,
    validate_label,
    validate_reason,
    validate_status,
    validate_supersedes,
    validate_tags,
)
from store.memory.note_values import (
    DEFAULT_SEARCH_LIMIT,
    MAX_SEARCH_LIMIT,
    Note,
    NoteInput,
    NoteSearch,
    SearchHit,
    StatusFilter,
    SupersessionEdge,
    note_from_row,
    note_tags,
)
from store.model.ids import random_hex
from store.model.states import NOTE_STATUSES
from store.search import term_sql

if TYPE_CHECKING:
    from store.db.seam import Database

# -- operations ------------------------------------------------------------------------------


class NoteOps:
    """Note operations of :class:`store.memory.memory_store.MemoryStore` (needs ``self.db``)."""

    db: Database

    async def save_note(
        self,
        namespace: str | Namespace,
        body: str,
        *,
        note_id: str | None = None,
        kind: str | None = None,
        tags: Iterable[str] = (),
        author: str | None = None,
        status: str = "accepted",
        supersedes: Iterable[str] = (),
        run_id: str | None = None,
        node_id: str | None = None,
        iteration: int | None = None,
    ) -> Note:
        """Append a note (and its supersession edges) in one transaction; returns the stored note.

        Raises:
            InvalidInputError: bad body/labels/status, self or cross-namespace supersession.
            NotFoundError: a superseded id does not exist.
            ConflictError: ``note_id`` exists with different content.
        """
        note_id = validate_label(note_id, "the note id") if note_id else random_hex(16)
        tags_tuple = validate_tags(tags)
        params: dict[str, Any] = {
            "id": note_id,
            "namespace": canonical_namespace(namespace),
            "body": validate_body(body),
            "kind": None if kind is None else validate_label(kind, "the note kind"),
            "tags_json": json.dumps(list(tags_tuple), ensure_ascii=False) if tags_tuple else None,
            "author": None if author is None else validate_label(author, "the note author"),
            "status": validate_status(status),
            "run_id": run_id,
            "node_id": node_id,
            "iteration": iteration,
        }
        targets = validate_supersedes(note_id, supersedes)
        clock = self.db.clock

        def write(conn: Connection) -> Note:
            now = clock.now_ms()
            won = conn.execute(sql.INSERT_NOTE, {**params, "now": now}).rowcount == 1
            # Edges only when this insert won: a losing collision must not hide anything.
            if won and targets:
                found = dict(conn.execute(sql.NOTE_NAMESPACES, {"ids": json.dumps(targets)}))
                check_targets(params["namespace"], targets, found)
                conn.executemany(
                    sql.INSERT_SUPERSESSION,
                    [{"note_id": note_id, "supersedes_id": target, "now": now}
                     for target in targets],
                )
            stored = note_from_row(conn.execute(sql.GET_NOTE, {"id": note_id}).fetchone())
            if not won:
                stored_targets = tuple(
                    row[0] for row in conn.execute(sql.SUPERSEDED_IDS, {"id": note_id})
                )
                check_same_note(stored, stored_targets, params, tags_tuple, targets)
            return stored

        return await self.db.run_in_transaction(write)

    async def save_notes(self, notes: Sequence[NoteInput]) -> list[str]:
        """Append many notes (and their supersession edges) in one transaction; returns their
        ids in order. All or nothing: any invalid entry, a missing or cross-namespace target,
        or an existing id with different content writes nothing.

        Targets may be notes earlier in the same batch. An id that already exists with the same
        content is kept as it is (re-importing a file is harmless).

        Raises:
            InvalidInputError: an invalid entry (the message names its position, from 1).
            NotFoundError: a superseded id does not exist.
            ConflictError: an id exists with different content.
        """
        prepared = []
        for position, note in enumerate(notes, start=1):
            try:
                prepared.append(note_params(note))
            except InvalidInputError as error:
                raise InvalidInputError(f"Note {position}: {error}") from None
        ids = [params["id"] for params, _ in prepared]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("The batch holds the same note id twice.")
        refuse_cycle(supersession_cycle(
            (params["id"], target) for params, targets in prepared for target in targets))
        clock = self.db.clock

        def write(conn: Connection) -> list[str]:
            now = clock.now_ms()
            existing = {
                row[0] for row in conn.execute(sql.EXISTING_NOTE_IDS, {"ids": json.dumps(ids)})
            }
            rows = [{**params, "created_at_ms": params["created_at_ms"] or now}
                    for params, _ in prepared if params["id"] not in existing]
            conn.executemany(sql.INSERT_NOTE_AT, rows)
            edges = [
                {"note_id": params["id"], "supersedes_id": target, "now": now}
                for params, targets in prepared if params["id"] not in existing
                for target in targets
            ]
            if edges:
                wanted = sorted({edge["supersedes_id"] for edge in edges})
                found = dict(conn.execute(sql.NOTE_NAMESPACES, {"ids": json.dumps(wanted)}))
                for params, targets in prepared:
                    check_targets(params["namespace"], targets, found)
                conn.executemany(sql.INSERT_SUPERSESSION, edges)
            for params, targets in prepared:
                if params["id"] in existing:
                    stored = note_from_row(
                        conn.execute(sql.GET_NOTE, {"id": params["id"]}).fetchone())
                    stored_targets = tuple(
                        row[0] for row in conn.execute(sql.SUPERSEDED_IDS, {"id": params["id"]})
                    )
                    check_same_note(stored, stored_targets, params, note_tags(
                        params["tags_json"]), targets)
            return ids

        return await self.db.run_in_transaction(write)

    async def get_note(self, note_id: str) -> Note | None:
        """The note with this id (any status), or None."""
        row = await self.db.fetch_one(sql.GET_NOTE, {"id": note_id})
        return None if row is None else note_from_row(row)


    async def list_notes(
        self,
        namespace: str | Namespace | None = None,
        *,
        status: StatusFilter = "accepted",
        include_superseded: bool = False,
        kind: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Note]:
        """Notes oldest first (or newest first). By default the read contract: accepted and not
        superseded by an accepted note. ``status`` widens it (a status, a list of statuses, or
        ``"any"``), ``include_superseded`` keeps superseded notes, ``kind`` keeps one label.
        """
        where, params = filter_params(namespace, None, status, include_superseded, kind)
        params["limit"] = sql.limit_param(limit)
        rows = await self.db.fetch_all(
            sql.list_notes_sql(where, newest_first=newest_first), params
        )
        return [note_from_row(row) for row in rows]

    async def count_notes(
        self,
        namespace: str | Namespace | None = None,
        *,
        status: StatusFilter = "accepted",
        include_superseded: bool = False,
        kind: str | None = None,
        upto: int = MORE_COUNT_CAP,
    ) -> int:
        """How many notes :meth:`list_notes` would list with the same filter and
        ``limit=upto`` (a capped count: a listing says how many it left out)."""
        where, params = filter_params(namespace, None, status, include_superseded, kind)
        params["limit"] = sql.limit_param(upto)
        return int(await self.db.fetch_value(sql.count_notes_sql(where), params) or 0)

    async def set_note_status(
        self, note_id: str, status: str, *, reason: str | None = None
    ) -> Note:
        """Record a person's decision on a note: the one write that changes a stored note.

        Accepting a note that supersedes others retires them in this same single write;
        rejecting it later revives them.

        Raises:
            NotFoundError: no note has this id.
        """
        params = {
            "id": note_id,
            "status": validate_status(status),
            "reason": None if reason is None else validate_reason(reason),
        }
        clock = self.db.clock

        def write(conn: Connection) -> Note:
            if conn.execute(sql.SET_NOTE_STATUS, {**params, "now": clock.now_ms()}).rowcount == 0:
                raise NotFoundError(f"There is no note with id {note_id!r}.")
            return note_from_row(conn.execute(sql.GET_NOTE, {"id": note_id}).fetchone())

        return await self.db.run_in_transaction(write)

    async def accept_note(self, note_id: str, *, reason: str | None = None) -> Note:
        """Set a note's status to accepted (see :meth:`set_note_status`)."""
        return await self.set_note_status(note_id, "accepted", reason=reason)

    async def reject_note(self, note_id: str, *, reason: str | None = None) -> Note:
        """Set a note's status to rejected (see :meth:`set_note_status`)."""
        return await self.set_note_status(note_id, "rejected", reason=reason)

    async def superseded_by(self, note_id: str) -> list[Note]:
        """Notes (any status) that supersede ``note_id``: what retires it, or would."""
        rows = await self.db.fetch_all(sql.NOTES_SUPERSEDING, {"id": note_id})
        return [note_from_row(row) for row in rows]

    async def supersedes(self, note_id: str) -> list[Note]:
        """Notes that ``note_id`` supersedes: what accepting it retires."""
        rows = await self.db.fetch_all(sql.NOTES_SUPERSEDED_BY, {"id": note_id})
        return [note_from_row(row) for row in rows]

    async def supersession_edges(self, note_ids: Sequence[str]) -> list[SupersessionEdge]:
        """Every edge from or to any of ``note_ids``, with the status of both ends.

        One query for a whole list of notes: enough to tell which accepted notes are retired
        (an edge from an accepted note points at them) and what each proposal supersedes.
        """
        if not note_ids:
            return []
        rows = await self.db.fetch_all(
            sql.SUPERSESSION_EDGES, {"ids": json.dumps(list(note_ids))}
        )
        return [SupersessionEdge(*tuple(row)) for row in rows]

    async def search_notes(
        self,
        query: str,
        *,
        namespace: str | Namespace | None = None,
        namespace_kind: str | None = None,
        limit: int = DEFAULT_SEARCH_LIMIT,
        status: StatusFilter = "accepted",
        include_superseded: bool = False,
        kind: str | None = None,
    ) -> list[SearchHit]:
        """The hits of :meth:`search_notes_with_mode` (most relevant first)."""
        found = await self.search_notes_with_mode(
            query,
            namespace=namespace,
            namespace_kind=namespace_kind,
            limit=limit,
            status=status,
            include_superseded=include_superseded,
            kind=kind,
        )
        return found.hits

    async def search_notes_with_mode(
        self,
        query: str,
        *,
        namespace: str | Namespace | None = None,
        namespace_kind: str | None = None,
        limit: int = DEFAULT_SEARCH_LIMIT,
        status: StatusFilter = "accepted",
        include_superseded: bool = False,
        kind: str | None = None,
    ) -> NoteSearch:
        """Exact BM25 search over note bodies, most relevant first, under the read contract.

        First every word of ``query`` must occur (words are matched as stemmed terms, never as
        syntax; see :mod:`store.search.search_policy`). When that finds fewer than ``limit`` notes,
        the rest are filled by the recall policy: stop words dropped, any remaining word, weak
        matches refused, questions that merely repeat the query demoted. Each hit says which
        mode found it. ``namespace`` or ``namespace_kind`` (workflow, agent, user, global)
        narrows the scope; ``status``/``include_superseded``/``kind`` widen or narrow the
        contract as in :meth:`list_notes`. BM25's statistics are those of the notes in scope.
        """
        # numpy and the search policy are imported on the first search only: `tether notes
        # add` and `memory get` are called in loops from hooks and scripts, and must start fast.
        from store.search.bank_arrays import STATUS_CODES, Scope
        from store.search.search_policy import (
            MODE_ALL_WORDS,
            MODE_ANY_WORD,
            needs_fallback,
            prompt_terms,
            query_terms,
        )
        from store.search.term_index import index_for
        from store.search.term_ranking import demote_echoes

        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidInputError(f"The search limit must be from 1 to {MAX_SEARCH_LIMIT}.")
        ensure_clean_text(query, "the search query", allow="\t\n\r")
        terms = query_terms(query)
        sentence = prompt_terms(query)
        exact_ns = None if namespace is None else canonical_namespace(namespace)
        kind_range = None if namespace_kind is None else namespace_kind_range(namespace_kind)
        statuses = status_list(status)
        scope = Scope(
            tuple(STATUS_CODES[s] for s in (statuses or NOTE_STATUSES)),
            include_superseded,
            kind,
        )
        index = index_for(self.db)

        def read(conn: Connection) -> NoteSearch:
            namespaces = None if exact_ns is None else [exact_ns]
            ranked = [
                (item, MODE_ALL_WORDS)
                for item in index.search(
                    conn, namespaces, terms, limit=limit, require_all=True, scope=scope,
                    namespace_range=kind_range,
                )
            ]
            mode = MODE_ALL_WORDS
            # The query's only word, already required, would find nothing new.
            adds = not (len(terms) == 1 and sentence == terms)
            if needs_fallback(len(ranked), limit) and sentence and adds:
                seen = {item.rowid for item, _ in ranked}
                more = index.search(
                    conn, namespaces, sentence, limit=limit + len(seen), require_all=False,
                    scope=scope, guard=True, echo_text=query, namespace_range=kind_range,
                )
                texts = {rowid: str(row["body"]) for rowid, row in
                         notes_by_rowid(conn, [item.rowid for item in more]).items()}
                more = demote_echoes(more, sentence, texts)
                extra = [(item, MODE_ANY_WORD) for item in more if item.rowid not in seen]
                if extra:
                    mode = MODE_ANY_WORD if not ranked else f"{MODE_ALL_WORDS} + {MODE_ANY_WORD}"
                ranked += extra[: limit - len(ranked)]
            notes = {rowid: note_from_row(row) for rowid, row in
                     notes_by_rowid(conn, [item.rowid for item, _ in ranked]).items()}
            hits = [
                SearchHit(notes[item.rowid], item.score, item.matched, hit_mode)
                for item, hit_mode in ranked
                if item.rowid in notes
            ]
            return NoteSearch(hits, mode, terms)

        return await self.db.run_read(read)


def notes_by_rowid(conn: Connection, rowids: Sequence[int]) -> dict[int, RowLike]:
    """Full note rows (``NOTE_COLUMNS`` then ``rowid``) by rowid: what ranked postings point
    at."""
    if not rowids:
        return {}
    rows = conn.execute(term_sql.NOTES_BY_ROWID, {"rowids": json.dumps(list(rowids))})
    return {int(row["rowid"]): row for row in rows}

