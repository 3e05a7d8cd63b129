"""``tether worker``: claim queued runs and execute them with the embedded engine.

Any number of workers, on any host that reaches the workspace database, share one queue (the
runs table; see :mod:`store.runs.run_queue`). A worker:

- claims up to ``concurrency`` runs at a time, each under a lease its run's heartbeat renews
  (every third of the lease) and a fencing token that guards every write of that run;
- wakes when something is committed (``LISTEN`` on a PostgreSQL workspace), when one of its runs
  ends, and on a slow timer (a dead worker's lease expires without any commit);
- reports itself (host, pid, runs held, heartbeat) so dashboards can show it;
- follows a handoff by putting the successor run on the queue, so any worker continues it;
- on stop (SIGINT/SIGTERM, or ``exit_when_idle`` with nothing left), cancels what it runs and
  gives those runs back at once rather than leaving them to expire.

Workflow files: a run records the path of its workflow file; a worker loads that path, or a
bundled example of the same file name. Run workers where the workflow files are at the same
path (a shared checkout), or a run fails with a sentence saying which file is missing.

A worker runs only files it was told to trust: those under the folders given with
``--workflows DIR`` (:func:`trusted_workflow_file`), and the bundled examples. Anyone who can
write the workspace's ``runs`` table chooses the path a run records, so any other file is
refused, never imported: the run fails with a sentence saying why, recorded on the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from engine.examples import EXAMPLES_DIR
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.run_end import RunOutcome
from engine.run.wiring import open_engine
from engine.workflow.definition import Workflow
from engine.workflow.loader import load_workflow
from store.db.seam import Database
from store.errors import InvalidInputError, LeaseLost, StorageError, TetherError
from store.model.run_records import RunRecord
from store.runs.fences import holding
from store.runs.owners import new_owner_id
from store.runs.run_log import DEFAULT_LEASE_MS
from store.runs.run_queue import Claim, RunQueue

DEFAULT_POLL_S = 5.0
WORKER_REPORT_S = 5.0


@dataclasses.dataclass
class WorkerSummary:
    """What one worker did before it stopped."""

    worker_id: str
    outcomes: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def runs(self) -> int:
        """How many runs it executed (to any end)."""
        return len(self.outcomes)


def trusted_workflow_file(
    run: RunRecord, trusted: Sequence[Path], examples_dir: Path = EXAMPLES_DIR
) -> Path:
    """The run's workflow file (:func:`workflow_file_for`), resolved, when it lies under one of
    the ``trusted`` folders or the bundled examples.

    Raises:
        InvalidInputError: no such file here, or it lies elsewhere (the sentence names the
            folders this worker trusts).
    """
    path = workflow_file_for(run, examples_dir).resolve()
    folders = [folder.resolve() for folder in (*trusted, examples_dir)]
    if any(path.is_relative_to(folder) for folder in folders):
        return path
    named = ", ".join(str(folder) for folder in folders[:-1]) or "none"
    raise InvalidInputError(
        f"This worker runs only workflow files under the folders it trusts ({named}; "
        f"tether worker --workflows DIR) and the bundled examples; {path} is not under them, "
        f"so run {run.run_id} was not run."
    )


def workflow_file_for(run: RunRecord, examples_dir: Path = EXAMPLES_DIR) -> Path:
    """Where this worker finds the run's workflow file: its recorded path, else a bundled
    example of the same file name.

    Raises:
        InvalidInputError: neither exists on this host.
    """
    if run.workflow_path:
        recorded = Path(run.workflow_path)
        if recorded.is_file():
            return recorded
        bundled = examples_dir / recorded.name
        if bundled.is_file():
            return bundled
        raise InvalidInputError(
            f"This worker has no workflow file at {recorded}; run workers where the workflow "
            "files are at the same path."
        )
    raise InvalidInputError(f"Run {run.run_id} records no workflow file; it cannot be queued.")


class Worker:
    """One worker process's loop (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        *,
        concurrency: int = 1,
        lease_ms: int = DEFAULT_LEASE_MS,
        poll_s: float = DEFAULT_POLL_S,
        exit_when_idle: bool = False,
        config: EngineConfig | None = None,
        on_outcome: Callable[[str, RunOutcome], None] | None = None,
        on_problem: Callable[[str], None] | None = None,
        worker_id: str | None = None,
        trusted: Sequence[Path] = (),
    ) -> None:
        if concurrency < 1:
            raise InvalidInputError("A worker runs at least one run at a time.")
        self.db = db
        self.trusted = tuple(trusted)
        self.worker_id = worker_id or new_owner_id()
        self.queue = RunQueue(db, lease_ms=lease_ms)
        self.concurrency = concurrency
        self.poll_s = poll_s
        self.exit_when_idle = exit_when_idle
        self.on_outcome = on_outcome
        self.on_problem = on_problem
        engine = open_engine(db, config=config, owner_id=self.worker_id)
        # The run's heartbeat renews its lease: beat well within it.
        engine.config.heartbeat_interval_s = min(
            engine.config.heartbeat_interval_s, lease_ms / 3000
        )
        engine.store.lease_ms = lease_ms
        if hasattr(db, "retry_window_s"):
            # A dropped connection is ridden out for as long as the lease lasts: a drop
            # shorter than that never fails a run (store/db/postgres/pg_retry.py).
            db.retry_window_s = lease_ms / 1000
        self.engine: Engine = engine
        self.active: dict[asyncio.Task[RunOutcome | None], str] = {}
        self.summary = WorkerSummary(self.worker_id)
        self._wake = asyncio.Event()
        self._workflows: dict[Path, Workflow] = {}

    async def run(self, stop: asyncio.Event) -> WorkerSummary:
        """Claim and execute runs until ``stop`` is set (or, with ``exit_when_idle``, until the
        queue is empty and nothing runs). Returns what it did."""
        listener = asyncio.create_task(self._listen(stop))
        reporter = asyncio.create_task(self._report(stop))
        try:
            with contextlib.suppress(StorageError):  # reported again every few seconds
                await self.queue.report_worker(self.worker_id, 0)
            while not stop.is_set():
                try:
                    claimed = await self._fill()
                except StorageError as error:
                    # The server restarted or the link dropped: say so, wait, try again (runs
                    # this worker held keep their leases until they expire or it renews them).
                    if self.on_problem is not None:
                        self.on_problem(str(error))
                    await self._pause(stop)
                    continue
                if self.exit_when_idle and not self.active and not claimed:
                    break
                await self._wait(stop)
        finally:
            listener.cancel()
            reporter.cancel()
            await self._stop_runs()
            with contextlib.suppress(Exception):
                await self.queue.stop_worker(self.worker_id)
            for task in (listener, reporter):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return self.summary

    async def _pause(self, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=self.poll_s)

    async def _fill(self) -> bool:
        """Claim runs while there is room; True when at least one was claimed."""
        claimed = False
        while len(self.active) < self.concurrency:
            claim = await self.queue.claim_next(self.worker_id)
            if claim is None:
                break
            claimed = True
            task = asyncio.create_task(self._execute(claim), name=f"tether-run:{claim.run.run_id}")
            task.add_done_callback(lambda _task: self._wake.set())
            self.active[task] = claim.run.run_id
        return claimed

    async def _wait(self, stop: asyncio.Event) -> None:
        waiters = [asyncio.create_task(self._wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waiters, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        self._wake.clear()
        for task in [t for t in self.active if t.done()]:
            self.active.pop(task)

    async def _execute(self, claim: Claim) -> RunOutcome | None:
        run = claim.run
        outcome: RunOutcome | None = None
        try:
            try:
                workflow = self._workflow(run)
            except InvalidInputError as error:
                await self.queue.set_run_status(run.run_id, "failed", error=str(error))
                outcome = RunOutcome(run.run_id, "failed", str(error))
            else:
                # This execution's writes carry its own claim's token, so should this worker
                # claim the run again after an outage, the stale execution writes nothing.
                with holding(run.run_id, claim.token):
                    outcome = await self.engine.run_claimed(workflow, run)
                if outcome.status == "handed-off" and outcome.next_run_id:
                    await self.queue.enqueue_existing(outcome.next_run_id)
        except LeaseLost as error:
            outcome = RunOutcome(run.run_id, "lost", str(error))
        except TetherError as error:
            outcome = RunOutcome(run.run_id, "failed", str(error))
        finally:
            self.queue.forget(run.run_id)
        if outcome is not None:
            self.summary.outcomes[run.run_id] = outcome.status
            if self.on_outcome is not None:
                self.on_outcome(run.run_id, outcome)
        return outcome

    def _workflow(self, run: RunRecord) -> Workflow:
        path = trusted_workflow_file(run, self.trusted)
        workflow = self._workflows.get(path)
        if workflow is None:
            workflow = self._workflows[path] = load_workflow(path)
        if workflow.name != run.workflow:
            raise InvalidInputError(
                f"{path} defines workflow {workflow.name!r}, but run {run.run_id} is of "
                f"{run.workflow!r}."
            )
        return workflow

    async def _stop_runs(self) -> None:
        """Cancel what still runs and give those runs back for another worker."""
        for task in self.active:
            task.cancel()
        for task, run_id in list(self.active.items()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            with contextlib.suppress(Exception):
                await self.queue.release(run_id, self.worker_id)
        self.active.clear()

    async def _report(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(WORKER_REPORT_S)
            with contextlib.suppress(TetherError):
                await self.queue.report_worker(self.worker_id, len(self.active))

    async def _listen(self, stop: asyncio.Event) -> None:
        async for _ in commits(self.db, stop):
            if len(self.active) < self.concurrency:
                self._wake.set()


async def commits(db: Database, stop: asyncio.Event) -> AsyncIterator[None]:
    """Yield whenever something is committed to a PostgreSQL workspace (nothing for SQLite,
    whose workers poll)."""
    url = db.workspace.database_url
    channel = getattr(db, "channel", None)
    if not url or channel is None:
        await stop.wait()
        return
    from store.db.postgres.pg_listen import ChangeListener

    async for _payload in ChangeListener(url, channel).payloads(stop):
        yield None
