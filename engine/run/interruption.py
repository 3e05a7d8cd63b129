"""When the workspace stops taking writes mid-run (disk full, an I/O error): stop dispatching,
wait a bounded time for writing to work again, then mark the run interrupted.

A run of a worker (held under a lease) whose database stayed unreachable is the exception: it
is left as it is, and its lapsed lease puts it back on the queue for the next claim.

Otherwise a run is never left ``running`` by a process that gave up on it: the engine keeps
trying to record the interruption (status ``failed`` with an error that starts with
"Interrupted") for :data:`INTERRUPTION_WAIT_S`; the run is then resumable like any failed
run. If the workspace never takes the write, the storage error is raised (the CLI prints it
as one sentence, exit 3), and the run, whose owner process is then gone, is resumable at once.
A damaged database is not waited for: nothing more is written to it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from engine.run.run_end import RunOutcome
from store.errors import DamagedDatabaseError, DatabaseUnavailable, StorageError
from store.runs.fences import held_tokens

if TYPE_CHECKING:
    from engine.run.execution import RunExecution

INTERRUPTION_WAIT_S = 120.0
"""How long a run waits for the workspace to take writes again before giving up."""
_FIRST_RETRY_S = 0.2
_MAX_RETRY_S = 2.0


def interruption_error(run_id: str, problem: StorageError) -> str:
    """The error stored on an interrupted run."""
    return (
        f"Interrupted because {problem.reason}; resume it with "
        f"tether run WORKFLOW --resume {run_id}."
    )


async def record_interruption(execution: RunExecution, problem: StorageError) -> RunOutcome:
    """Mark the run interrupted as soon as a write works again (bounded); the outcome says
    ``interrupted``. Raises ``problem`` when the workspace never takes the write."""
    execution.progress("run", None, "interrupted", str(problem))
    if isinstance(problem, DamagedDatabaseError):
        raise problem
    if isinstance(problem, DatabaseUnavailable) and execution.run_id in held_tokens(
        execution.services.db
    ):
        # A leased run (a worker's): left as it is, its lease lapses and the next claim of
        # any worker resumes it; failing it would only take it off the queue.
        error = f"Interrupted because {problem.reason}; it goes back to the queue."
        return RunOutcome(execution.run_id, "interrupted", error)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + execution.services.interruption_wait_s
    delay = _FIRST_RETRY_S
    error = interruption_error(execution.run_id, problem)
    while True:
        try:
            await execution.store.set_run_status(execution.run_id, "failed", error=error)
        except StorageError:
            if loop.time() >= deadline:
                raise problem from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_S)
            continue
        execution.progress("run", None, "failed", error)
        return RunOutcome(execution.run_id, "interrupted", error)
