"""The monitor of a run execution: it refreshes the heartbeat and polls the run row for cancel
and clear requests written by other processes (CLI, dashboard), and the run's queued steers
(engine.run.steering)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from store.errors import LeaseLost, StorageError

if TYPE_CHECKING:
    from engine.run.execution import RunExecution


async def monitor_run(execution: RunExecution) -> None:
    """Run until cancelled: heartbeat, then take in cancel/clear requests or notice the run
    was lost to another process."""
    try:
        await _monitor(execution)
    except StorageError as problem:
        # The workspace stopped taking writes: stop the run; it records the interruption.
        execution.storage_problem = execution.storage_problem or problem
        execution.cancel_all()


async def _monitor(execution: RunExecution) -> None:
    config = execution.config
    last_beat = asyncio.get_running_loop().time()
    while True:
        await asyncio.sleep(config.poll_interval_s)
        now = asyncio.get_running_loop().time()
        if now - last_beat >= config.heartbeat_interval_s:
            last_beat = now
            if not await execution.store.heartbeat(execution.run_id, execution.owner_id):
                execution.lost = True
                execution.cancel_all()
                return
        run = await execution.store.find_run(execution.run_id)
        if run is None:
            execution.lost = True
            execution.cancel_all()
            return
        execution.take_requests(run)
        try:
            await execution.steers.poll()
        except LeaseLost:
            execution.lost = True  # a refusal's write found the run claimed by another worker
            execution.cancel_all()
            return
