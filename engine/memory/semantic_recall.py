"""Semantic and hybrid recall (the optional ``semantic`` extra), and the embedder that
keeps notes and facts embedded.

* :class:`Embedder` embeds whatever lacks a vector (notes above a rowid mark, facts written
  since the last pass) in batches: in the background after the runtime writes (retain,
  ``remember``), from ``tether memory reindex`` (with a progress bar), and from a detached
  ``tether memory reindex --quiet`` that ``notes add``/``notes import``/``memory set`` start.
* :class:`SemanticRecallBackend` ranks the live notes and facts of each bank by cosine
  similarity to the query (int8 codes with an exact float32 re-rank, off the database thread;
  :mod:`store.search.vector_store`).
* :class:`HybridRecallBackend` (the default when the extra is installed) fuses the keyword
  ranking (exact BM25, :mod:`engine.memory.keyword_recall`) and the semantic one by
  reciprocal rank with a small constant (:data:`store.search.search_policy.HYBRID_RRF_K`,
  equal weights), chosen on the tuning splits over normalised score fusion and the textbook
  k = 60 (``bench/bench_recall_quality.py --sweep``). A semantic-only candidate must
  reach :data:`MIN_SIMILARITY` (the weak-match guard's counterpart: an empty block beats noise),
  and a note that repeats the question is demoted like in keyword recall.

Every item says how it was found: the words it matched and its similarity.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from engine.memory.encoders import (
    AUTO,
    EncoderKind,
    TextEncoder,
    choose_kind,
    load_encoder,
    unavailable_reason,
)
from engine.memory.keyword_recall import KeywordRecallBackend, fact_text
from engine.memory.recall_items import RecallItem, RecallRequest, RecallResult
from store.db.seam import Database
from store.memory.note_values import note_tags
from store.memory.notes import notes_by_rowid
from store.search import vectors_sql as vector_sql
from store.search.search_policy import (
    ECHO_PENALTY,
    HYBRID_FUSION,
    HYBRID_RRF_K,
    KEYWORD_WEIGHT,
    SEMANTIC_WEIGHT,
    WEAK_KEYWORD_FRACTION,
    WEAK_KEYWORD_SHARE,
    WEAK_KEYWORD_TERMS,
    index_terms,
    is_question_echo,
    keyword_share,
    normalised_fusion,
    prompt_terms,
    reciprocal_rank_fusion,
)
from store.search.term_index import index_for
from store.search.vector_store import BankView, Similar, VectorStore, rank, vector_index_for

LOADING = "keyword (semantic model loading)"
UNAVAILABLE = "keyword (semantic model unavailable)"
EncoderSource = Callable[[], Awaitable[TextEncoder | None]]

# Cosine similarity a semantic-only candidate needs (all-MiniLM-L6-v2). On the tuning splits
# 0.0 to 0.2 score the same, 0.25 two chat questions fewer, 0.3 1.5 points fewer; the sets
# hold no unanswerable question, so they cannot show what a floor is for: an unrelated query
# matched 0.21 ("Groceries are ordered online" for "quarterly revenue forecast"). 0.25 keeps
# such noise out of the block at the cost of those two questions.
MIN_SIMILARITY = 0.25
# Each ranking contributes this many candidates to the fusion.
FUSION_DEPTH = 50
# Banks with at most this many vectors in all are ranked on the event loop (well under a
# millisecond): a thread hop costs more than that on a busy machine.
INLINE_RANK_VECTORS = 20_000
Encoding = Callable[[], np.ndarray]
EMBED_BATCH = 64


class Embedder:
    """Embeds every note and fact that lacks a vector for the encoder's model."""

    def __init__(self, db: Database, encoder: TextEncoder) -> None:
        self.db = db
        self.encoder = encoder
        self.store = VectorStore(db, encoder.model_id, encoder.dim)

    async def catch_up(
        self, progress: Callable[[int, int], None] | None = None, limit: int | None = None
    ) -> int:
        """Embed what lacks a vector; returns how many were embedded. ``progress(done,
        total)`` is called after each batch."""
        total = await self.store.pending_count()
        started_ms = self.db.clock.now_ms()
        done = 0
        seen: set[str] = set()
        while limit is None or done < limit:
            batch = await self.store.pending(EMBED_BATCH)
            if not batch or all(r.ref in seen for r in batch):
                break  # done (or a fact stamped in the future: it is embedded once per pass)
            seen.update(r.ref for r in batch)
            vectors = await asyncio.to_thread(self.encoder.embed, [r.text for r in batch])
            await self.store.save(batch, vectors)
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
        if limit is None or done < limit:
            await self.store.finish_facts(started_ms)
        return done


class SemanticRecallBackend:
    """Recall by cosine similarity over each bank's vectors. The encoder is loaded once per
    process, off the event loop, when :meth:`start_loading` is first called (at engine or server
    start when a task or tool will recall, else at the first recall)."""

    name = "semantic"

    def __init__(
        self,
        db: Database,
        encoder: TextEncoder | None = None,
        *,
        kind: EncoderKind | None = None,
        source: EncoderSource | None = None,
        requested: str = AUTO,
    ) -> None:
        self.db = db
        self._encoder = encoder
        self.requested = requested
        chosen = kind or choose_kind(requested)[0]
        model_id = encoder.model_id if encoder is not None else (
            chosen.model_id if chosen else "none")
        dim = encoder.dim if encoder is not None else (chosen.dim if chosen else 384)
        self.vectors = vector_index_for(db, model_id, dim)
        self.terms = index_for(db)
        self.embedder: Embedder | None = None
        self._source = source
        self._loading: asyncio.Task[TextEncoder | None] | None = None
        self._catch_up: asyncio.Task[int] | None = None
        # How long a recall waits for the encoder still loading before keyword answers alone
        # (the runtime sets it inside its recall timeout).
        self.load_wait_s = 1.5

    @property
    def ready(self) -> bool:
        """True once the encoder is loaded."""
        return self._encoder is not None

    async def _load(self) -> TextEncoder | None:
        if self._source is not None:
            return await self._source()
        return await asyncio.to_thread(load_encoder, self.requested)

    def start_loading(self) -> asyncio.Task[TextEncoder | None]:
        """Load the encoder in the background (once); then embed what was written before this
        process started."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load_once())
            self._loading.add_done_callback(self._loaded)
        return self._loading

    async def _load_once(self) -> TextEncoder | None:
        if self._encoder is None:
            self._encoder = await self._load()
        return self._encoder

    def _loaded(self, _task: asyncio.Future[TextEncoder | None]) -> None:
        if self._encoder is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing: nothing to embed
                self.written()

    async def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the encoder (starting its load); True when ready."""
        if self._encoder is not None:
            return True
        loading = self.start_loading()
        await asyncio.wait({loading}, timeout=timeout_s)
        return self._encoder is not None

    async def encoder(self) -> TextEncoder:
        """The loaded encoder (raises when the extra or the weights are missing)."""
        if self._encoder is None:
            await self.start_loading()
            if self._encoder is None:
                raise RuntimeError(
                    f"semantic recall is unavailable: {unavailable_reason(self.requested)}")
        return self._encoder

    async def query_encoding(self, query: str) -> np.ndarray | Encoding:
        """The query's cached vector (a repeated query: no thread hop, no model), else the
        call that computes it, to run off the event loop."""
        encoder = await self.encoder()
        cached = getattr(encoder, "cached_query", None)
        found = cached(query) if cached is not None else None
        if found is not None:
            return found
        return functools.partial(encoder.embed_query, query)

    async def query_vector(self, query: str) -> np.ndarray:
        """The query's embedding (computed off the event loop). Records written since the
        last pass are embedded in the background after each write; until then keyword recall
        finds them."""
        found = await self.query_encoding(query)
        return found if isinstance(found, np.ndarray) else await asyncio.to_thread(found)

    def written(self) -> asyncio.Task[int]:
        """Something was written: embed what lacks a vector, in the background."""
        if self._catch_up is None or self._catch_up.done():
            self._catch_up = asyncio.create_task(self._embed_pending())
        return self._catch_up

    async def _embed_pending(self) -> int:
        if self._encoder is None:
            await self.start_loading()
        if self._encoder is None:
            return 0
        encoder = self._encoder
        if self.embedder is None:
            self.embedder = Embedder(self.db, encoder)
        return await self.embedder.catch_up()

    async def drain(self) -> None:
        """Wait for the background embedding (shutdown, tests)."""
        while self._catch_up is not None and not self._catch_up.done():
            await asyncio.gather(self._catch_up, return_exceptions=True)

    async def similar(
        self, request: RecallRequest, vector: np.ndarray | Encoding, depth: int
    ) -> list[tuple[Similar, RecallItem]]:
        """The most similar live, tag-scoped notes and facts, as items (score = similarity).

        The banks are read on the database thread, ranked off it (so keyword recall, sharing
        that thread, proceeds meanwhile; small banks on the loop), and the chosen items read
        back on it. ``vector`` may be the call that computes it (:meth:`query_encoding`): it
        runs on a worker thread while the snapshot is read, and ranks there too when the
        snapshot is in by then (one hop fewer)."""

        def snapshot(conn: sqlite3.Connection) -> list[BankView]:
            return self.vectors.snapshot(conn, self.terms, request.namespaces)

        found: list[Similar] | None = None
        if isinstance(vector, np.ndarray):
            views = await self.db.run_read(snapshot)
        else:
            views, vector, found = await _encode_beside(
                vector, self.db.run_read(snapshot), depth)
        if found is None:
            found = (rank(views, vector, depth, MIN_SIMILARITY)
                     if sum(len(v.refs) for v in views) <= INLINE_RANK_VECTORS
                     else await asyncio.to_thread(rank, views, vector, depth, MIN_SIMILARITY))

        def read(conn: sqlite3.Connection) -> list[tuple[Similar, RecallItem]]:
            return _materialise(conn, found, request, self.db.clock.now_ms())

        return await self.db.run_read(read)

    async def recall(self, request: RecallRequest) -> RecallResult:
        """The best ``request.limit`` items by similarity alone (by keyword, and saying so,
        while the model is still loading)."""
        if not request.query.strip() or not request.namespaces:
            return RecallResult(details={"mode": self.name})
        if not await self.wait_ready(self.load_wait_s):
            return await loading_answer(KeywordRecallBackend(self.db), request, self)
        vector = await self.query_vector(request.query)
        pairs = await self.similar(request, vector, request.limit)
        terms = prompt_terms(request.query)
        items = [_with_terms(item, terms) for _, item in pairs][: request.limit]
        return RecallResult(items=tuple(items), terms=terms, details={"mode": self.name})


class HybridRecallBackend:
    """Keyword and semantic rankings fused (see the module docstring)."""

    name = "hybrid"

    def __init__(
        self,
        db: Database,
        encoder: TextEncoder | None = None,
        keyword: KeywordRecallBackend | None = None,
        fusion: str = HYBRID_FUSION,
        weights: tuple[float, float] = (KEYWORD_WEIGHT, SEMANTIC_WEIGHT),
        rrf_k: int = HYBRID_RRF_K,
        semantic: SemanticRecallBackend | None = None,
        weak_keyword: tuple[int, float, float] = (
            WEAK_KEYWORD_TERMS, WEAK_KEYWORD_SHARE, WEAK_KEYWORD_FRACTION),
    ) -> None:
        self.keyword = keyword or KeywordRecallBackend(db)
        self.semantic = semantic or SemanticRecallBackend(db, encoder)
        self.fusion = fusion
        self.weights = weights
        self.rrf_k = rrf_k
        self.weak_keyword = weak_keyword

    def written(self) -> asyncio.Task[int]:
        """Something was written: embed it in the background."""
        return self.semantic.written()

    async def drain(self) -> None:
        """Wait for the background embedding."""
        await self.semantic.drain()

    async def recall(self, request: RecallRequest) -> RecallResult:
        """Fuse the keyword and semantic candidates and keep the best ``request.limit``.

        A model still loading (the first seconds of a process) is waited for up to the
        backend's ``load_wait_s``; after that recall answers by keyword alone and says so."""
        if not request.namespaces:
            return RecallResult(details={"mode": self.name})
        if not await self.semantic.wait_ready(self.semantic.load_wait_s):
            return await loading_answer(self.keyword, request, self.semantic)
        deep = RecallRequest(request.namespaces, request.query, request.tags, FUSION_DEPTH,
                             request.tag_groups)
        # the banks' snapshot is queued on the database thread first; the encoder and then
        # the vector ranking run off it while keyword recall reads
        semantic_task = asyncio.ensure_future(self.semantic.similar(
            request, await self.semantic.query_encoding(request.query), FUSION_DEPTH))
        try:
            keyword = await self.keyword.recall(deep)
        except BaseException:
            semantic_task.cancel()
            raise
        semantic = await semantic_task
        terms = keyword.terms or prompt_terms(request.query)
        by_id: dict[str, RecallItem] = {item.id: item for item in keyword.items}
        similarity = {item.id: sim.similarity for sim, item in semantic}
        for _, item in semantic:
            by_id.setdefault(item.id, _with_terms(item, terms))
        keyword_ids = [item.id for item in keyword.items]
        semantic_ids = [item.id for _, item in semantic]
        fused, factor = self.fuse(keyword.items, semantic, terms)
        items = []
        for item_id, score in fused.items():
            item = by_id[item_id]
            found_by = tuple(
                name for name, ids in (("keyword", keyword_ids), ("semantic", semantic_ids))
                if item_id in ids
            )
            if is_question_echo(terms, item.matched_terms, item.text):
                score *= ECHO_PENALTY
            items.append(_replace(item, score=score, similarity=similarity.get(item_id),
                                  found_by=found_by))
        items.sort(key=lambda i: (-i.score, -(i.at_ms or 0), i.id))
        return RecallResult(
            items=tuple(items[: request.limit]),
            terms=terms,
            details={"mode": self.name, "fusion": self.fusion, "keyword_share": factor},
        )


    def fuse(
        self, keyword: Sequence[RecallItem], semantic: Sequence[tuple[Similar, RecallItem]],
        terms: Sequence[str],
    ) -> tuple[dict[str, float], float]:
        """The fused score of every candidate (before the question-echo demotion) and the
        query's keyword-weight factor (:func:`keyword_share`). A method so the benchmark's
        fusion study can try others on the same candidates."""
        factor = keyword_share([len(set(i.matched_terms)) for i in keyword], len(terms),
                               *self.weak_keyword)
        weights = [self.weights[0] * factor, self.weights[1]]
        if self.fusion == "rrf":
            return reciprocal_rank_fusion([[i.id for i in keyword], [i.id for _, i in semantic]],
                                          weights, self.rrf_k), factor
        return normalised_fusion([{i.id: i.score for i in keyword},
                                  {i.id: sim.similarity for sim, i in semantic}], weights), factor


async def _encode_beside(
    encode: Encoding, snapshot: Awaitable[list[BankView]], depth: int
) -> tuple[list[BankView], np.ndarray, list[Similar] | None]:
    """``encode()`` on a worker thread while ``snapshot`` is read; the worker ranks too when
    the snapshot is in by the time the vector is (it never waits for it: no pool thread is
    held by a worker waiting on another)."""
    views_in: concurrent.futures.Future[list[BankView]] = concurrent.futures.Future()

    def work() -> tuple[np.ndarray, list[Similar] | None]:
        query = encode()
        if views_in.done() and views_in.exception() is None:
            return query, rank(views_in.result(), query, depth, MIN_SIMILARITY)
        return query, None

    encoding = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        views = await snapshot
    except BaseException as error:
        views_in.set_exception(error)
        encoding.add_done_callback(lambda done: done.cancelled() or done.exception())
        raise
    views_in.set_result(views)
    vector, found = await encoding
    return views, vector, found


async def loading_answer(keyword: KeywordRecallBackend, request: RecallRequest,
                         semantic: SemanticRecallBackend) -> RecallResult:
    """Keyword recall's answer, marked as given while the semantic model was loading (or
    after it failed to load)."""
    result = await keyword.recall(request)
    failed = semantic._loading is not None and semantic._loading.done()
    return RecallResult(result.items, result.terms, result.degraded, result.reason,
                        {**result.details, "mode": UNAVAILABLE if failed else LOADING})


def _replace(item: RecallItem, **changes: Any) -> RecallItem:
    values = {**item.__dict__, **changes}
    return RecallItem(**values)


def _with_terms(item: RecallItem, terms: Sequence[str]) -> RecallItem:
    """A semantic item with the query terms its text holds (its "why" names both)."""
    words = set(index_terms(f"{item.key or ''} {item.text}"))
    return _replace(item, matched_terms=tuple(t for t in terms if t in words))


def _materialise(
    conn: sqlite3.Connection, found: Sequence[Similar], request: RecallRequest, now_ms: int
) -> list[tuple[Similar, RecallItem]]:
    """Read the notes and live facts behind semantic candidates, tag-scoped, in order."""
    note_rows = notes_by_rowid(conn, [s.source_rowid for s in found if s.ref.startswith("note:")])
    fact_keys = [[s.namespace, s.ref[len(f"fact:{s.namespace}/"):]]
                 for s in found if s.ref.startswith("fact:")]
    fact_rows = {}
    if fact_keys:
        params = {"keys": json.dumps(fact_keys), "now": now_ms}
        for row in conn.execute(vector_sql.LIVE_FACTS, params):
            fact_rows[f"fact:{row['namespace']}/{row['key']}"] = row
    out = []
    for sim in found:
        item: RecallItem | None = None
        if sim.ref.startswith("note:"):
            row = note_rows.get(sim.source_rowid)
            if row is not None and request.admits(sim.namespace, note_tags(row["tags_json"])):
                item = RecallItem(sim.ref, "note", row["namespace"], None, str(row["body"]),
                                  sim.similarity, (), note_tags(row["tags_json"]),
                                  int(row["created_at_ms"]), sim.similarity, ("semantic",))
        else:
            row = fact_rows.get(sim.ref)
            if row is not None:
                value = json.loads(row["value_json"])
                fact_tags = value.get("tags") if isinstance(value, dict) else None
                have = tuple(t for t in fact_tags if isinstance(t, str)) if isinstance(
                    fact_tags, list) else ()
                if request.admits(sim.namespace, have):
                    item = RecallItem(sim.ref, "fact", row["namespace"], row["key"],
                                      fact_text(value), sim.similarity, (), have,
                                      int(row["updated_at_ms"]), sim.similarity, ("semantic",))
        if item is not None:
            out.append((sim, item))
    return out


