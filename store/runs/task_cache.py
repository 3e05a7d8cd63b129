"""Task-output cache rows: look up, store and drop cached task outputs by key.

The key and the freshness rule are policy and live in ``engine.cache``; this module only reads
and writes rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from store.db.seam import Database
from store.runs import task_cache_sql as sql


@dataclass(frozen=True)
class CacheEntry:
    """One cached output."""

    cache_key: str
    scope: str
    workflow: str | None
    node_id: str
    run_id: str | None
    payload: Any
    created_at_ms: int
    ttl_ms: int | None


class TaskCache:
    """Access to the ``task_cache`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, cache_key: str) -> CacheEntry | None:
        """The entry stored under ``cache_key`` (fresh or not), or None."""
        row = await self.db.fetch_one(sql.SELECT_ENTRY, (cache_key,))
        if row is None:
            return None
        return CacheEntry(
            cache_key=row["cache_key"],
            scope=row["scope"],
            workflow=row["workflow"],
            node_id=row["node_id"],
            run_id=row["run_id"],
            payload=json.loads(row["payload_json"]),
            created_at_ms=int(row["created_at_ms"]),
            ttl_ms=row["ttl_ms"],
        )

    async def put(
        self,
        cache_key: str,
        *,
        scope: str,
        workflow: str | None,
        node_id: str,
        run_id: str | None,
        payload: Any,
        ttl_ms: int | None,
    ) -> None:
        """Store (or replace) an output under ``cache_key``."""
        await self.db.execute(
            sql.UPSERT_ENTRY,
            {
                "cache_key": cache_key,
                "scope": scope,
                "workflow": workflow,
                "node_id": node_id,
                "run_id": run_id,
                "payload_json": json.dumps(payload, ensure_ascii=False),
                "now": self.db.clock.now_ms(),
                "ttl_ms": ttl_ms,
            },
        )

    async def delete(self, cache_key: str) -> None:
        """Drop an entry (used when a stored payload no longer validates)."""
        await self.db.execute(sql.DELETE_ENTRY, (cache_key,))
