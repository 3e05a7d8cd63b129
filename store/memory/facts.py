"""Facts: namespaced JSON values, last write wins, optional TTL counted from the last write.

Policy (validation, expiry arithmetic) is in pure functions; :class:`FactOps` runs the SQL in
``store/memory/memory_sql.py`` and is mixed into :class:`store.memory.memory_store.MemoryStore`.

Expiry: a fact written at ``updated_at_ms`` with ``ttl_ms`` is live while
``now < updated_at_ms + ttl_ms`` and expired from that instant on. Expired facts are hidden from
every read (get, list, delete reports "not found") and removed by the TTL collector. Writing a
fact again renews its TTL; writing it without a TTL makes it permanent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from store.db.paging import MORE_COUNT_CAP
from store.db.seam import Connection, RowLike
from store.errors import InvalidInputError
from store.memory import memory_sql as sql
from store.memory.namespaces import Namespace, canonical_namespace, ensure_clean_text, ensure_length
from store.model.json_text import JsonTextError, describe, parse_json_text

if TYPE_CHECKING:
    from store.db.seam import Database

MAX_KEY_CHARS = 512
MAX_VALUE_BYTES = 1024 * 1024
MAX_TTL_MS = 100 * 365 * 24 * 3600 * 1000
_GC_CHUNK = 256


class Fact(NamedTuple):
    """One fact as stored. ``value_json`` is the exact JSON text written."""

    namespace: str
    key: str
    value_json: str
    created_at_ms: int
    updated_at_ms: int
    ttl_ms: int | None
    run_id: str | None
    node_id: str | None
    iteration: int | None

    @property
    def value(self) -> Any:
        """The value decoded from JSON."""
        return json.loads(self.value_json)

    @property
    def expires_at_ms(self) -> int | None:
        """When the fact expires, or None when it is permanent."""
        return None if self.ttl_ms is None else self.updated_at_ms + self.ttl_ms

    def ttl_remaining_ms(self, now_ms: int) -> int | None:
        """Milliseconds until expiry (0 once expired), or None when permanent."""
        expires = self.expires_at_ms
        return None if expires is None else max(0, expires - now_ms)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the value decoded) for ``--format json`` and the dashboard."""
        return {
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
            "ttl_ms": self.ttl_ms,
            "expires_at_ms": self.expires_at_ms,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "iteration": self.iteration,
        }


def is_expired(updated_at_ms: int, ttl_ms: int | None, now_ms: int) -> bool:
    """True when a fact written at ``updated_at_ms`` with ``ttl_ms`` is expired at ``now_ms``."""
    return ttl_ms is not None and now_ms >= updated_at_ms + ttl_ms


def validate_key(key: str) -> str:
    """Return ``key`` if it is a usable fact key, else raise InvalidInputError."""
    ensure_clean_text(key, "the fact key")
    if not key:
        raise InvalidInputError("The fact key is empty.")
    ensure_length(key, "the fact key", MAX_KEY_CHARS)
    return key


def validate_ttl(ttl_ms: int | None) -> int | None:
    """Return ``ttl_ms`` if it is None or a whole number of ms in range, else raise."""
    if ttl_ms is None:
        return None
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 <= ttl_ms <= MAX_TTL_MS:
        raise InvalidInputError(
            f"The TTL must be a whole number of milliseconds from 0 to {MAX_TTL_MS}."
        )
    return ttl_ms


def parse_value_json(text: str) -> str:
    """Check that ``text`` is one JSON document within the size limit; return it unchanged.

    The text is stored verbatim, so ``memory get`` prints exactly what ``memory set`` was given.

    Raises:
        InvalidInputError: not UTF-8, too large, or not JSON (the message gives the position).
    """
    ensure_clean_text(text, "the value", allow="\t\n\r")
    size = len(text.encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise InvalidInputError(
            f"The value is {_mib(size)}; a fact holds at most {_mib(MAX_VALUE_BYTES)}."
        )
    try:
        parse_json_text(text)
    except JsonTextError as error:
        hint = " (write strings in double quotes, e.g. '\"text\"')" if error.line else ""
        raise InvalidInputError(describe("the value", error)[:-1] + hint + ".") from None
    return text


def encode_value(value: Any) -> str:
    """Encode a Python value as compact JSON text, refusing what JSON cannot hold."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"The value cannot be stored as JSON: {error}.") from None
    except RecursionError:
        raise InvalidInputError("The value cannot be stored as JSON: it is nested too deeply.") \
            from None
    return parse_value_json(text)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def fact_from_row(row: RowLike) -> Fact:
    """Build a :class:`Fact` from a row selected with ``FACT_COLUMNS``."""
    return Fact(*tuple(row))


class FactOps:
    """Fact operations of :class:`store.memory.memory_store.MemoryStore` (needs ``self.db``)."""

    db: Database

    async def get_fact(self, namespace: str | Namespace, key: str) -> Fact | None:
        """The live fact at (namespace, key), or None when absent or expired."""
        row = await self.db.fetch_one(
            sql.GET_FACT,
            {"namespace": canonical_namespace(namespace), "key": validate_key(key),
             "now": self.db.clock.now_ms()},
        )
        return None if row is None else fact_from_row(row)

    async def list_facts(
        self, namespace: str | Namespace | None = None, *, limit: int | None = None
    ) -> list[Fact]:
        """Live facts of one namespace (by key), or of every namespace (by namespace, key)."""
        query, params = self._facts_query(namespace, limit)
        return [fact_from_row(row) for row in await self.db.fetch_all(query, params)]

    async def count_facts(
        self, namespace: str | Namespace | None = None, *, upto: int = MORE_COUNT_CAP
    ) -> int:
        """How many live facts :meth:`list_facts` would list with ``limit=upto`` (a capped
        count: a listing says how many it left out)."""
        query, params = self._facts_query(namespace, upto, count=True)
        return int(await self.db.fetch_value(query, params) or 0)

    def _facts_query(
        self, namespace: str | Namespace | None, limit: int | None, *, count: bool = False
    ) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"now": self.db.clock.now_ms(), "limit": sql.limit_param(limit)}
        if namespace is None:
            return (sql.COUNT_ALL_FACTS if count else sql.LIST_ALL_FACTS), params
        params["namespace"] = canonical_namespace(namespace)
        return (sql.COUNT_FACTS_IN_NAMESPACE if count else sql.LIST_FACTS_IN_NAMESPACE), params

    async def count_facts_by_namespace(self) -> dict[str, int]:
        """How many live facts each namespace holds (for the dashboard's namespace list)."""
        rows = await self.db.fetch_all(
            sql.COUNT_FACTS_BY_NAMESPACE, {"now": self.db.clock.now_ms()}
        )
        return {row["namespace"]: row["facts"] for row in rows}

    async def set_fact(
        self,
        namespace: str | Namespace,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        iteration: int | None = None,
    ) -> Fact:
        """Store a Python value (encoded as JSON); last write wins. See :meth:`set_fact_json`."""
        return await self.set_fact_json(
            namespace, key, encode_value(value),
            ttl_ms=ttl_ms, run_id=run_id, node_id=node_id, iteration=iteration,
        )

    async def set_fact_json(
        self,
        namespace: str | Namespace,
        key: str,
        value_json: str,
        *,
        ttl_ms: int | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        iteration: int | None = None,
    ) -> Fact:
        """Store JSON text verbatim at (namespace, key); last write wins.

        ``ttl_ms`` counts from this write (None: permanent). ``run_id``/``node_id``/
        ``iteration`` record the writer; they replace the previous writer's provenance.

        Raises:
            InvalidInputError: bad key, TTL or JSON; nothing is written.
        """
        params = {
            "namespace": canonical_namespace(namespace),
            "key": validate_key(key),
            "value_json": parse_value_json(value_json),
            "ttl_ms": validate_ttl(ttl_ms),
            "run_id": run_id,
            "node_id": node_id,
            "iteration": iteration,
        }
        clock = self.db.clock

        def write(conn: Connection) -> RowLike:
            row: RowLike = conn.execute(
                sql.UPSERT_FACT, {**params, "now": clock.now_ms()}
            ).fetchone()
            return row

        return fact_from_row(await self.db.run_in_transaction(write))

    async def set_facts(
        self,
        namespace: str | Namespace,
        values: Mapping[str, Any],
        *,
        ttl_ms: int | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        iteration: int | None = None,
    ) -> int:
        """Store many key -> value pairs of one namespace in ONE transaction (all or none).

        Same rules as :meth:`set_fact`; every fact gets the same TTL and provenance. Returns
        how many facts were written.
        """
        base = {
            "namespace": canonical_namespace(namespace),
            "ttl_ms": validate_ttl(ttl_ms),
            "run_id": run_id,
            "node_id": node_id,
            "iteration": iteration,
        }
        rows = [
            {**base, "key": validate_key(key), "value_json": encode_value(value)}
            for key, value in values.items()
        ]
        clock = self.db.clock

        def write(conn: Connection) -> None:
            now = clock.now_ms()
            conn.executemany(sql.UPSERT_FACT_QUIET, [{**row, "now": now} for row in rows])

        if rows:
            await self.db.run_in_transaction(write)
        return len(rows)

    async def delete_fact(self, namespace: str | Namespace, key: str) -> bool:
        """Delete a fact; True when a live fact was deleted (an expired one counts as absent)."""
        params = {"namespace": canonical_namespace(namespace), "key": validate_key(key)}
        clock = self.db.clock

        def write(conn: Connection) -> bool:
            now = clock.now_ms()
            row = conn.execute(sql.DELETE_FACT, params).fetchone()
            return row is not None and not is_expired(row[0], row[1], now)

        return await self.db.run_in_transaction(write)

    async def delete_expired_facts(self) -> int:
        """Remove every expired fact, in short chunked transactions; returns how many."""
        clock = self.db.clock

        def write(conn: Connection) -> int:
            params = {"now": clock.now_ms(), "chunk": _GC_CHUNK}
            return conn.execute(sql.DELETE_EXPIRED_FACTS_CHUNK, params).rowcount

        removed = 0
        while True:
            count = await self.db.run_in_transaction(write)
            removed += count
            if count < _GC_CHUNK:
                return removed

