"""The dashboard's write side: one writable database connection and the embedded engine.

The dashboard reads through its read-only tailing connection (``store/read/dashboard_reader.py``);
every change a person makes goes through :class:`EngineHost`, which owns a separate writable
:class:`store.db.sqlite.sqlite_database.Database` used only for short ``BEGIN IMMEDIATE``
transactions. Memory edits call :class:`store.memory.memory_store.MemoryStore` and run control calls
:class:`store.runs.run_store.RunStore`,
:func:`engine.handoff.clear_run` and the engine: the same code the command line runs
(``tether memory``, ``tether notes``, ``tether cancel``, ``tether clear``, ``tether run
--resume``), so a rule holds everywhere.

Runs launched or resumed here execute as asyncio tasks of the dashboard's event loop. Quitting
abandons them without marking them: they keep status ``running``, their heartbeat stops, and
after 30 s they show as *stale*, ready for ``R`` (or ``tether run --resume``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.examples import EXAMPLES_DIR
from store.clock import SYSTEM_CLOCK, Clock
from store.db.backends import open_database
from store.db.seam import Database
from store.errors import InvalidInputError, StorageError, TetherError
from store.memory.memory_store import MemoryStore
from store.model.run_records import RunRecord
from store.runs.run_params import new_run_id
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.demo_plan import DEMO_PLAN

if TYPE_CHECKING:
    # The engine is imported when it is first used (a launch, a clear, the launch dialog):
    # the dashboard's first paint does not wait for it.
    from engine.fork import ForkEdit
    from engine.handoff import ClearResult
    from engine.run.engine import Engine
    from engine.run.run_end import RunOutcome
    from engine.workflow.declaration import WorkflowDeclaration
    from engine.workflow.definition import Workflow

RECENT_RUNS_SCANNED = 500
"""How many recent runs are looked at for workflow files run in this workspace."""


@dataclass(frozen=True)
class KnownWorkflow:
    """A workflow file the dashboard can launch, as read without running it
    (:mod:`engine.workflow.declaration`), with an input to start editing from."""

    path: Path
    declaration: WorkflowDeclaration
    example_input: Any
    bundled: bool = False
    """One of the examples shipped with Tether (any other file is named by its full path)."""

    @property
    def name(self) -> str:
        """The workflow's name (what ``tether runs`` shows)."""
        return self.declaration.name

    def problem(self, value: Any) -> str | None:
        """Why ``value`` does not fit the workflow's declared input, or None (the workflow's
        own validation runs once the file is loaded, at launch)."""
        from engine.workflow.declaration import input_problem

        return input_problem(self.declaration, value)

    def load(self) -> Workflow:
        """Import the file (the one a person chose, its path shown) and check it is the
        workflow that was listed.

        Raises:
            InvalidInputError: it does not load, or now defines another workflow.
        """
        from engine.workflow.loader import load_workflow

        workflow = load_workflow(self.path)
        if workflow.name != self.name:
            raise InvalidInputError(
                f"{self.path} now defines workflow {workflow.name!r}, not {self.name!r}; "
                "open the launch dialog again."
            )
        return workflow


def workflow_files(examples_dir: Path, recorded: Iterable[str | None]) -> list[Path]:
    """Workflow files the workspace knows: the examples, then files its runs came from.

    Missing files are skipped and each file appears once (compared by resolved path).
    """
    candidates: list[Path] = []
    if examples_dir.is_dir():
        candidates += sorted(p for p in examples_dir.glob("*.py") if not p.name.startswith("_"))
    candidates += [Path(path) for path in recorded if path]
    seen: set[Path] = set()
    files: list[Path] = []
    for path in candidates:
        resolved = path.expanduser().resolve()
        if resolved in seen or not resolved.is_file():
            continue
        seen.add(resolved)
        files.append(resolved)
    return files


def _digest(path: Path) -> bytes:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return str(path).encode()


def suggested_inputs() -> dict[str, Any]:
    """Example inputs by example file name (the demo's plan), so a launch starts filled in."""
    inputs: dict[str, Any] = {}
    for step in DEMO_PLAN:
        inputs.setdefault(step.example, step.input)
    return inputs


class EngineHost:
    """Owns the dashboard's writable connection (opened on first use) and its embedded runs."""

    def __init__(self, workspace: Workspace, clock: Clock = SYSTEM_CLOCK) -> None:
        self.workspace = workspace
        self.clock = clock
        self._db: Database | None = None
        self._engine: Engine | None = None
        self._owners: set[str] = set()
        self._tasks: set[asyncio.Task[RunOutcome | None]] = set()
        self.examples_dir = EXAMPLES_DIR
        self._closed = False
        self._opening = asyncio.Lock()
        self.on_problem: Callable[[str], None] | None = None
        """Told (one sentence) when a background run fails to start or crashes."""

    async def database(self, *, create: bool = False) -> Database:
        """The writable connection; ``create`` makes the workspace on a first write.

        Raises:
            NotFoundError: there is no workspace yet and ``create`` is false.
        """
        if self._db is None:
            # One opener at a time: two workers opening at once would each open a connection
            # and one of them would never be closed.
            async with self._opening:
                self._refuse_when_closed()
                if self._db is None:
                    self._db = await open_database(
                        self.workspace, create=create, clock=self.clock
                    )
        self._refuse_when_closed()
        assert self._db is not None
        return self._db

    def _refuse_when_closed(self) -> None:
        if self._closed:
            # A worker still finishing while the app shuts down must not open a connection
            # nobody would close.
            raise StorageError("The dashboard is closing; nothing more is written.")

    async def memory(self, *, create: bool = False) -> MemoryStore:
        """The memory store over the writable connection (same methods as ``tether memory``)."""
        return MemoryStore(await self.database(create=create))

    async def runs(self) -> RunStore:
        """The run records over the writable connection (same methods as ``tether runs``)."""
        return RunStore(await self.database())

    # -- the embedded engine ----------------------------------------------------------------

    def adopt(self, engine: Engine | None) -> None:
        """Count runs of an engine started elsewhere in this process (``tether demo``) as
        embedded, so quitting asks about them too."""
        if engine is not None:
            self._owners.add(engine.owner_id)
            if self._engine is None and engine.db is self._db:
                self._engine = engine

    async def engine(self) -> Engine:
        """The embedded engine (created on first use, on the writable connection)."""
        if self._engine is None:
            # The dashboard's engine asks the workspace's encoder service: the model never
            # loads into the dashboard process.
            from engine.run.wiring import open_engine

            self._engine = open_engine(await self.database(create=True), shared_encoder=True)
        self._owners.add(self._engine.owner_id)
        return self._engine

    async def known_workflows(self) -> tuple[list[KnownWorkflow], list[str]]:
        """Workflows that can be launched, read without running any of them, and one sentence
        per file that could not be read."""
        from engine.workflow.declaration import DeclarationError, read_declaration

        recorded: list[str | None] = []
        if self.workspace.exists():
            runs = await RunStore(await self.database()).list_runs(limit=RECENT_RUNS_SCANNED)
            recorded = [run.workflow_path for run in runs]
        inputs = suggested_inputs()
        known: list[KnownWorkflow] = []
        problems: list[str] = []
        offered: set[tuple[str, bytes]] = set()
        for path in workflow_files(self.examples_dir, recorded):
            try:
                declaration = read_declaration(path)
            except DeclarationError as error:
                problems.append(str(error))
                continue
            # One entry per workflow: a copy of an offered file (the demo's, a checkout's) with
            # the same name is not offered twice.
            same = (declaration.name, _digest(path))
            if same in offered:
                continue
            offered.add(same)
            bundled = path.parent == self.examples_dir.resolve()
            example = inputs.get(path.name) if bundled else None
            if example is None:
                example = declaration.example_input()
            known.append(KnownWorkflow(path, declaration, example, bundled))
        return known, problems

    def _spawn(self, work: Any) -> asyncio.Task[RunOutcome | None]:
        task: asyncio.Task[RunOutcome | None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[RunOutcome | None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        message = str(error) if isinstance(error, TetherError) else (
            f"An embedded run stopped with an internal error: {type(error).__name__}: {error}"
        )
        if self.on_problem is not None:
            self.on_problem(message)

    async def launch(self, known: KnownWorkflow, value: Any) -> str:
        """Load the chosen workflow file and start a run of it with ``value`` in the embedded
        engine (it follows handoffs); returns the new run's id, so the dashboard can put the
        cursor on it.

        The input is validated first (InvalidInputError, nothing written).
        """
        workflow = known.load()
        workflow.parse_input(value)
        engine = await self.engine()
        run_id = new_run_id()

        async def run() -> RunOutcome:
            outcome = await engine.start(workflow, value, workflow_path=str(known.path),
                                         run_id=run_id)
            return await engine.run_chain(workflow, outcome)

        self._spawn(run())
        return run_id

    @property
    def queues_runs(self) -> bool:
        """True on a PostgreSQL workspace: launching queues the run for ``tether worker``."""
        return self.workspace.is_shared

    async def enqueue(self, known: KnownWorkflow, value: Any) -> RunRecord:
        """Queue a run of ``known`` with ``value`` for any worker (validated first: an
        InvalidInputError writes nothing)."""
        from engine.structured import to_jsonable
        from store.runs.run_queue import RunQueue

        parsed = known.load().parse_input(value)
        return await RunQueue(await self.database(create=True)).enqueue(
            known.name, input=to_jsonable(parsed), workflow_path=str(known.path)
        )

    async def resume(self, run_id: str) -> asyncio.Task[RunOutcome | None]:
        """Continue ``run_id`` (stale, failed, cancelled or pending) in the embedded engine.

        The engine refuses a finished or handed-off run and one still running elsewhere; that
        refusal (like any failure of a background run) reaches :attr:`on_problem`.

        Raises:
            NotFoundError: no such run.
            InvalidInputError: no workflow file recorded, or it does not load.
        """
        run = await (await self.runs()).get_run(run_id)
        workflow = self._workflow_of(run)
        return self._spawn(_resumed(await self.engine(), workflow, run_id))

    async def fork(self, run_id: str, node_id: str, edit: ForkEdit) -> str:
        """Fork ``run_id`` from ``node_id`` with ``edit`` (the same :meth:`Engine.fork` as
        ``tether fork``) and run the fork in the embedded engine; returns the fork's id.

        Raises:
            NotFoundError: no such run.
            InvalidInputError: the sentence refusing the fork (nothing written).
        """
        run = await (await self.runs()).get_run(run_id)
        workflow = self._workflow_of(run)
        engine = await self.engine()
        fork = await engine.fork(workflow, run_id, node_id, edit)
        self._spawn(_resumed(engine, workflow, fork.run_id))
        return fork.run_id

    def _workflow_of(self, run: RunRecord) -> Workflow:
        if not run.workflow_path:
            raise InvalidInputError(
                f"Run {run.run_id} has no workflow file recorded; resume it with "
                f"tether run WORKFLOW --resume {run.run_id}."
            )
        from engine.workflow.loader import load_workflow

        return load_workflow(run.workflow_path)

    async def cancel(self, run_id: str) -> RunRecord:
        """Cancel a run (the same request ``tether cancel`` writes)."""
        return await (await self.runs()).request_cancel(run_id)

    async def clear(self, run_id: str, reason: str) -> ClearResult:
        """Durable /clear (the same decision as ``tether clear``). When the handoff happened
        here (no engine was running the run), the new generation starts in the embedded
        engine if the workflow file still loads."""
        from engine.handoff import clear_run

        result = await clear_run(await self.database(), run_id, reason)
        if result.new_run_id is not None:
            try:
                await self.resume(result.new_run_id)
            except InvalidInputError as error:
                if self.on_problem is not None:
                    self.on_problem(f"{error} The new run {result.new_run_id} waits.")
        return result

    async def delete(self, run_id: str) -> str:
        """Delete a run that is not running, its rows and its artifact folder; returns its id."""
        runs = await self.runs()
        run = await runs.get_run(run_id)
        if run.status in ("running", "pending") and not run.is_stale(self.clock.now_ms()):
            raise InvalidInputError(f"Run {run_id} is {run.status}; cancel it before deleting it.")
        await runs.delete_run(run_id)  # rows and the artifact folder (checked inside artifacts/)
        return run_id

    async def active_runs(self) -> list[RunRecord]:
        """Runs this process's engines are executing right now (what quitting would leave)."""
        if not self._owners or self._db is None:
            return []
        running = await RunStore(self._db).list_runs(status="running", limit=RECENT_RUNS_SCANNED)
        return [run for run in running if run.owner_id in self._owners]

    async def abandon(self) -> None:
        """Stop executing embedded runs without marking them: they stay ``running`` and become
        stale (resumable) once their heartbeat is older than 30 s. This process gives up their
        ownership, so it never keeps them from being resumed while it lives on."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._db is not None and self._owners:
            store = RunStore(self._db)
            for owner in self._owners:
                with contextlib.suppress(TetherError):  # a full disk must not block quitting
                    await store.release_runs(owner)

    async def close(self) -> None:
        """Abandon embedded runs and close the writable connection (safe to call twice)."""
        try:
            await self.abandon()
        finally:
            self._closed = True
            self._engine = None
            await self._close_database()

    async def _close_database(self) -> None:
        async with self._opening:  # waits for an open in progress, then closes what it made
            if self._db is not None:
                db, self._db = self._db, None
                await db.close()


async def _resumed(engine: Engine, workflow: Workflow, run_id: str) -> RunOutcome:
    """Resume ``run_id`` and follow its handoffs to the end."""
    return await engine.run_chain(workflow, await engine.resume(workflow, run_id))


def host_for(app: Any) -> EngineHost:
    """The app's :class:`EngineHost`, created on first use from ``app.workspace``/``app.clock``.

    An engine the app already runs (``app.engine``, set by ``tether demo``) is adopted.
    """
    host = getattr(app, "engine_host", None)
    if not isinstance(host, EngineHost):
        host = EngineHost(app.workspace, getattr(app, "clock", SYSTEM_CLOCK))
        host.on_problem = lambda message: app.notify(message, severity="error", markup=False)
        app.engine_host = host
    host.adopt(getattr(app, "engine", None))
    return host
