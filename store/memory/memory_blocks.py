"""Memory blocks of runs: the memory text injected into each node iteration, kept so a reader
can see what a node was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.db.seam import Connection
from store.memory import memory_blocks_sql as sql
from store.model.history_records import MemoryBlockRecord
from store.model.json_columns import dump_json
from store.model.run_records import NewEvent
from store.runs.event_log import EventLog, insert_events


class MemoryBlockLog(EventLog):
    """Saves and reads the memory block of each node iteration."""

    async def save_memory_block(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        *,
        attempt: int = 1,
        text: str | None,
        budget_bytes: int,
        bytes_used: int = 0,
        items: Sequence[Any] = (),
        query: str | None = None,
        banks: Sequence[str] = (),
        truncated: bool = False,
        warning: str | None = None,
        degraded: bool = False,
        duration_ms: int | None = None,
    ) -> int:
        """Persist the memory block injected for a node iteration (one per node iteration; a later
        save replaces it). Emits ``memory.block``. Returns the block id."""

        def work(conn: Connection) -> Any:
            now = self.now_ms
            row = conn.execute(
                sql.UPSERT_MEMORY_BLOCK,
                {
                    "run_id": run_id,
                    "node_id": node_id,
                    "iteration": iteration,
                    "attempt": attempt,
                    "query": query,
                    "banks_json": dump_json(list(banks)),
                    "text": text,
                    "items_json": dump_json(list(items)),
                    "bytes_used": bytes_used,
                    "budget_bytes": budget_bytes,
                    "truncated": int(truncated),
                    "warning": warning,
                    "degraded": int(degraded),
                    "duration_ms": duration_ms,
                    "now": now,
                },
            ).fetchone()
            block_id = int(row[0]) if row else 0
            insert_events(
                conn,
                now,
                [
                    NewEvent(
                        "memory.block",
                        run_id,
                        node_id,
                        iteration,
                        attempt,
                        {
                            "block_id": block_id,
                            "bytes_used": bytes_used,
                            "budget_bytes": budget_bytes,
                            "items": len(items),
                            "truncated": truncated,
                            "warning": warning,
                            "degraded": degraded,
                        },
                    )
                ],
            )
            return block_id

        return int(await self._write((run_id,), work))

    async def get_memory_block(
        self, run_id: str, node_id: str, iteration: int
    ) -> MemoryBlockRecord | None:
        """The stored memory block for a node iteration, or None."""
        row = await self.db.fetch_one(sql.SELECT_MEMORY_BLOCK, (run_id, node_id, iteration))
        return None if row is None else MemoryBlockRecord.from_row(row)

    async def list_memory_blocks(self, run_id: str) -> list[MemoryBlockRecord]:
        """Every memory block of a run."""
        rows = await self.db.fetch_all(sql.SELECT_MEMORY_BLOCKS_RUN, (run_id,))
        return [MemoryBlockRecord.from_row(r) for r in rows]
