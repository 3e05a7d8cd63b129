"""The scheduling loop of one run: runs a workflow's tasks on asyncio and records everything in
the run records.

A :class:`ScheduledRun` drives a :class:`~engine.run.execution.RunExecution` (started by
:class:`~engine.run.engine.Engine`):

* ready nodes are launched up to the concurrency limit (a node waiting to retry gives its place
  back); fan-outs expand when their dependencies are done; loops run their body once per
  iteration until ``until`` holds. Each completion costs O(1): finished tasks are handed to
  the loop by their done callbacks, and a fan-out counts its outstanding items;
* every node runs its attempts in :mod:`engine.run.node_attempts`: each goes through
  :meth:`RunExecution.dispatch_check` (cancel/clear requests and the
  :class:`~engine.hooks.DispatchGuard` hooks — the ceiling feature plugs in there), then
  :meth:`RunExecution.prepare_prompt` (the memory hook and pure prompt assembly), then the agent;
* a monitor task refreshes the heartbeat every few seconds and polls the run row for cancel
  and clear requests written by other processes (CLI, dashboard);
* a finished node is written in the same transaction as its attempt's end, and a resumed run
  reuses finished nodes' stored outputs: a finished node never runs again. Attempts left
  running by a dead process are marked abandoned (by :meth:`RunStore.claim_run`) and retried.

Parts of a run execution live beside this module: :mod:`engine.run.units` (a node to execute),
:mod:`engine.run.node_attempts` (a node's attempts and retries), :mod:`engine.run.attempt`
(one attempt), :mod:`engine.run.cached_output` (task cache steps), :mod:`engine.run.monitor`
(heartbeat and request polling), :mod:`engine.run.run_end` (how a run ends) and
:mod:`engine.run.upstream` (``ctx`` and ``ctx.outputs``); the state they share is
:mod:`engine.run.execution`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from typing import Any

from engine.executors.reaper import reap_run
from engine.executors.run_on_cluster import prepare_cluster, record_nodes, watch_cluster
from engine.run.carry import carry_candidates, fork_candidates
from engine.run.execution import EngineServices, RunExecution
from engine.run.interruption import record_interruption
from engine.run.monitor import monitor_run
from engine.run.node_attempts import run_node
from engine.run.run_end import RunOutcome, finish_run
from engine.run.task_settings import task_memory
from engine.run.units import Key, NodeSkipped, StopDispatch, Unit, UnitFailed
from engine.run.upstream import task_context
from engine.workflow.definition import Workflow
from engine.workflow.task_spec import TaskSpec, too_many_items
from engine.workflow.user_code import USER_CODE_ERRORS, raised
from store.errors import ConflictError, InvalidInputError, LeaseLost, StorageError
from store.model.ids import validate_node_id
from store.model.run_records import RunRecord
from store.model.wording import plural
from store.runs.artifact_paths import run_dir


class ScheduledRun(RunExecution):
    """The scheduling loop of one run (see the module docstring)."""

    def __init__(
        self, services: EngineServices, workflow: Workflow, run: RunRecord, parsed: Any
    ) -> None:
        super().__init__(services, workflow, run, parsed)
        self.limit = services.config.concurrency or workflow.concurrency
        self.semaphore = asyncio.Semaphore(self.limit)
        self.started_top: set[str] = set()
        self.fanouts: dict[str, list[Unit]] = {}
        self.fanout_left: dict[str, int] = {}
        self.loop_iteration: dict[str, int] = {}
        self.loop_started: dict[str, set[str]] = {}
        self.known: set[Key] = set()
        self.missing = {n: len(deps) for n, deps in self.top_deps.items()}
        self.ready: deque[str] = deque(n for n in self.top_ids if not self.missing[n])
        # Units waiting for a place under the concurrency limit, in the order they became
        # ready; tasks holding a place (a task waiting out a retry's backoff gives it back).
        self.waiting: deque[Unit] = deque()
        self.active = 0
        self.parked: set[asyncio.Task[Any]] = set()
        self.finished_tasks: deque[asyncio.Task[Any]] = deque()
        self.wake = asyncio.Event()
        self.warnings: list[tuple[Unit, str]] = []
        """Said by the scheduler (a loop stopped by its bound), written at the next advance."""

    def _set_top(self, top_id: str, value: Any) -> None:
        """A top-level node (task, fan-out or loop) is complete: release its dependents."""
        if top_id in self.top_outputs:
            return
        self.top_outputs[top_id] = value
        self.node_complete(top_id)
        for node in self.dependents.get(top_id, ()):
            self.missing[node] -= 1
            if self.missing[node] == 0:
                self.ready.append(node)

    # -- the main loop ----------------------------------------------------------------------

    async def execute(self, *, fresh: bool = False) -> RunOutcome:
        """Run to the end (finished, failed, cancelled, handed off, or interrupted because the
        workspace stopped taking writes) and record the outcome.

        ``fresh``: the run was just created here, so it has no nodes and no handoff to read.
        """
        try:
            outcome = await self._execute(fresh)
        except StorageError as problem:
            self.storage_problem = self.storage_problem or problem
        except (InvalidInputError, ConflictError) as refused:
            # The store refused something of the run's own making (an id, a value): the run
            # fails with that sentence rather than being left running by a process gone.
            self.failure = self.failure or str(refused)
            return await finish_run(self)
        else:
            if self.storage_problem is None:
                return outcome
        return await record_interruption(self, self.storage_problem)

    async def _execute(self, fresh: bool) -> RunOutcome:
        if not fresh:
            for node in await self.store.list_nodes(self.run_id):
                self.prior[(node.node_id, node.iteration)] = node
                self.known.add((node.node_id, node.iteration))
            handoffs = await self.store.list_handoffs(to_run_id=self.run_id)
            if handoffs:
                self.continuation = handoffs[-1].carried_state
            if self.run.generation > 0:
                self.carried = await carry_candidates(self.store, self.run)
            elif self.run.forked_from is not None:
                self.carried = await fork_candidates(self.store, self.run)
        static = [
            (i, 0, "pending", self.recorded_deps[i])
            for i in self.top_ids
            if i in self.workflow.tasks
            and not self.workflow.tasks[i].is_fan_out
            and (i, 0) not in self.known
        ]
        self.known.update((n, 0) for n, *_ in static)
        await self.store.upsert_nodes(self.run_id, static, nodes_total=len(self.known))
        await self.meter.start()
        # One read of the run's queued steers before anything is dispatched: a resumed run
        # learns what was sent for its nodes' next attempts while it was stopped.
        await self.steers.poll()
        # Tasks placed on a Ray cluster: connected (or the run is interrupted) before anything
        # is dispatched; a resumed run's leftovers on the nodes are stopped first.
        cluster = await prepare_cluster(self, fresh=fresh)
        if not fresh:
            await self._reap_leftovers()
        self.progress("run", None, "running", self.run_id)
        monitor = asyncio.create_task(monitor_run(self))
        watch = asyncio.create_task(watch_cluster(self, cluster)) if cluster else None
        mirror = self._artifact_mirror()
        mirroring = asyncio.create_task(mirror.run()) if mirror is not None else None
        try:
            await self._advance()
            while self.running:
                if not self.finished_tasks:
                    self.wake.clear()
                    await self.wake.wait()
                while self.finished_tasks:
                    task = self.finished_tasks.popleft()
                    self._collect(self.running.pop(task), task)
                if not self.halting():
                    await self._advance()
        except BaseException:
            for task in self.running:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*self.running, return_exceptions=True)
            raise
        finally:
            for helper in (monitor, watch):
                if helper is not None:
                    helper.cancel()
                    with contextlib.suppress(BaseException):
                        await helper
            if cluster is not None:
                with contextlib.suppress(Exception):
                    await record_nodes(self, cluster)  # as the run leaves the cluster
            if mirroring is not None and mirror is not None:
                mirroring.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await mirroring
                with contextlib.suppress(Exception):
                    await mirror.sync()  # the last lines of every log
        await self.settle_ends()
        if not self.lost:
            await self._say_warnings()  # a loop that stopped at its bound as the run ended
            # A steer queued after the monitor's last poll for a node that has ended since
            # (another worker claiming the run meanwhile writes it instead).
            with contextlib.suppress(LeaseLost):
                await self.steers.poll()
        await self.meter.settle()
        if self.storage_problem is not None:
            raise self.storage_problem
        drain = getattr(self.hooks.memory, "drain", None)
        if drain is not None:
            # Background retention writes land before the run reports its end.
            await drain()
        forget = getattr(self.hooks.memory, "forget_run", None)
        if forget is not None:
            forget(self.run_id)  # its blocks are persisted; a long-lived engine keeps none
        return await finish_run(self)

    def _artifact_mirror(self) -> Any:
        """On a PostgreSQL workspace, what copies this run's artifact files into the
        database (``engine/run/artifact_mirror.py``); None on SQLite, where the files are it."""
        if self.services.db.backend != "postgresql":
            return None
        from engine.run.artifact_mirror import ArtifactMirror
        from store.runs.artifact_chunks import ArtifactChunks

        db: Any = self.services.db
        folder = run_dir(self.artifacts_root, self.run_id)
        return ArtifactMirror(ArtifactChunks(db), self.artifacts_root, folder)

    def _collect(self, unit: Unit, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            self._complete(unit, task.result())
        elif isinstance(error, NodeSkipped):
            self._complete(unit, None)
        elif isinstance(error, StopDispatch):
            pass
        elif isinstance(error, StorageError):
            self.storage_problem = self.storage_problem or error
        elif isinstance(error, LeaseLost):
            # Another worker holds the run now: stop at once and write nothing more.
            self.lost = True
            self.cancel_all()
        elif isinstance(error, UnitFailed):
            self.failure = self.failure or str(error)
        else:
            self.failure = self.failure or (
                f"Node {unit.node_id} hit an internal error: {type(error).__name__}: {error}"
            )

    # -- launching within the concurrency limit ---------------------------------------------

    def _fill(self) -> None:
        """Start waiting units while there is room under the concurrency limit."""
        while self.waiting and self.active < self.limit and not self.halting():
            unit = self.waiting.popleft()
            task = asyncio.create_task(run_node(self, unit, self), name=f"tether:{unit.node_id}")
            self.running[task] = unit
            self.active += 1
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        if task in self.parked:
            self.parked.discard(task)
        else:
            self.active -= 1
        self.finished_tasks.append(task)
        self.wake.set()

    def park(self) -> None:
        """The current task waits out a retry's backoff: its place goes to a waiting unit."""
        task = asyncio.current_task()
        if task is not None and task in self.running and task not in self.parked:
            self.parked.add(task)
            self.active -= 1
            self._fill()

    def unpark(self) -> None:
        """The backoff is over: the current task holds a place again."""
        task = asyncio.current_task()
        if task is not None and task in self.parked:
            # Counted again (possibly above the limit for a moment: the agent call itself
            # still waits for the semaphore, which is what caps concurrent calls).
            self.parked.discard(task)
            self.active += 1

    # -- expanding the graph ----------------------------------------------------------------

    async def _advance(self) -> None:
        """Start everything that became ready, repeating while nodes complete from storage."""
        if self.warnings:  # rare: no coroutine made per advance of the dispatch loop
            await self._say_warnings()
        while not self.halting():
            new_nodes: list[tuple[str, int, str, list[str]]] = []
            changed = False
            while self.ready:
                top_id = self.ready.popleft()
                if top_id in self.started_top:
                    continue
                self.started_top.add(top_id)
                self.node_ready(top_id)
                changed = True
                if top_id in self.workflow.loops:
                    self.loop_iteration[top_id] = 0
                    self.loop_started[top_id] = set()
                    continue
                spec = self.workflow.tasks[top_id]
                if spec.is_fan_out:
                    units = self._expand(spec)
                    if units is None:
                        return
                    self.fanouts[top_id] = units
                    self.fanout_left[top_id] = len(units)
                    if not units:
                        self._set_top(top_id, [])
                    for unit in units:
                        self._launch(unit, new_nodes)
                else:
                    self._launch(Unit(spec, spec.id), new_nodes)
            for loop_id in list(self.loop_started):
                if loop_id not in self.top_outputs and self._start_loop_body(loop_id, new_nodes):
                    changed = True
            if new_nodes:
                await self.store.upsert_nodes(self.run_id, new_nodes, nodes_total=len(self.known))
            self._fill()
            if not changed:
                return

    async def _reap_leftovers(self) -> None:
        """Stop what an earlier owner's attempts left running on this host. An agent CLI runs
        in its own session, so a killed engine (kill -9, a crash) leaves it working and
        spending, and the resumed attempt would run beside it. Every process an attempt
        starts names the run in its environment, and this process holds the run now."""
        stopped = await asyncio.to_thread(reap_run, self.run_id)
        if not stopped:
            return
        await self.store.append_event("executor.reaped", run_id=self.run_id, payload={
            "executor": "local", "processes": len(stopped), "pids": stopped})
        self.progress("warning", None, "warn",
                      f"stopped {plural(len(stopped), 'process', 'processes')} an earlier "
                      "attempt of this run left running on this host")

    async def _say_warnings(self) -> None:
        """Record the scheduler's warnings as events and progress lines."""
        while self.warnings:
            unit, reason = self.warnings.pop(0)
            await self.store.append_event("warning", run_id=self.run_id, node_id=unit.node_id,
                                          iteration=unit.iteration, payload={"reason": reason})
            self.progress("warning", unit, "warn", reason)

    def _expand(self, spec: TaskSpec) -> list[Unit] | None:
        ctx = task_context(self, Unit(spec, spec.id))
        try:
            assert spec.items is not None
            # One past the bound is enough to refuse: an endless iterable is read no further.
            items = list(itertools.islice(spec.items(ctx), spec.max_items + 1))
        except USER_CODE_ERRORS as error:
            self.failure = f"The items of fan-out {spec.id!r} {raised(error)}"
            return None
        if len(items) > spec.max_items:
            self.failure = too_many_items(spec.id, spec.max_items)
            return None
        units: list[Unit] = []
        seen: set[str] = set()
        for index, item in enumerate(items):
            try:
                key = spec.item_key(item) if spec.item_key else str(index)
            except USER_CODE_ERRORS as error:
                self.failure = f"The item key of fan-out {spec.id!r} {raised(error)}"
                return None
            node_id = f"{spec.id}[{key}]"
            try:
                validate_node_id(node_id)
            except InvalidInputError as error:
                self.failure = f"An item key of fan-out {spec.id!r} is unusable: {error}"
                return None
            if node_id in seen:
                self.failure = f"Fan-out {spec.id!r} produced the node id {node_id!r} twice."
                return None
            seen.add(node_id)
            units.append(Unit(spec, node_id, 0, item, index))
        return units

    def _start_loop_body(
        self, loop_id: str, new_nodes: list[tuple[str, int, str, list[str]]]
    ) -> bool:
        loop = self.workflow.loops[loop_id]
        iteration = self.loop_iteration[loop_id]
        started = self.loop_started[loop_id]
        launched = False
        for body_id in loop.body:
            if body_id in started:
                continue
            spec = self.workflow.tasks[body_id]
            inner = [d for d in spec.depends_on if d in loop.body]
            if all((d, iteration) in self.outputs for d in inner):
                started.add(body_id)
                self._launch(Unit(spec, body_id, iteration), new_nodes)
                launched = True
        return launched

    def _launch(self, unit: Unit, new_nodes: list[tuple[str, int, str, list[str]]]) -> None:
        prior = self.prior.get(unit.key)
        if prior is not None and prior.state in ("finished", "skipped"):
            # Finished in an earlier process: reuse the stored output, never run it again.
            self.done_count += 1
            output = self.load_output(unit.spec, prior.output)
            if prior.state == "finished" and prior.carried_from is None:
                self._retain_again(unit, output)
            self._complete(unit, output)
            return
        if unit.key not in self.known:
            self.known.add(unit.key)
            new_nodes.append((unit.node_id, unit.iteration, "pending",
                              self.recorded_deps[unit.spec.id]))
        self.waiting.append(unit)

    def _retain_again(self, unit: Unit, output: Any) -> None:
        """Retention runs after a node's end is committed, so a process killed in between
        lost the note for good: a resumed run retains its finished nodes' outputs again
        (each note has one id per node and bank, so one already written stays the only
        one)."""
        memory = task_memory(unit.spec, self.workflow)
        if self.hooks.memory is None or memory is None:
            return
        self.hooks.memory.retain_in_background(
            self.run_id, unit.node_id, unit.iteration, memory, "", output)

    def _complete(self, unit: Unit, output: Any) -> None:
        """Record a node's output and propagate it to its fan-out or loop (O(1) per node)."""
        if unit.key in self.outputs:
            return
        self.outputs[unit.key] = output
        spec = unit.spec
        if spec.loop is not None:
            self._loop_progress(spec.loop)
        elif spec.is_fan_out:
            self.fanout_left[spec.id] -= 1
            if self.fanout_left[spec.id] == 0:
                units = self.fanouts[spec.id]
                self._set_top(spec.id, [self.outputs[u.key] for u in units])
        else:
            self._set_top(spec.id, output)

    def _loop_progress(self, loop_id: str) -> None:
        loop = self.workflow.loops[loop_id]
        iteration = self.loop_iteration[loop_id]
        if not all((b, iteration) in self.outputs for b in loop.body):
            return
        last = {b: self.outputs[(b, iteration)] for b in loop.body}
        probe_spec = self.workflow.tasks[loop.body[-1]]
        ctx = task_context(self, Unit(probe_spec, probe_spec.id, iteration))
        try:
            stop = bool(loop.until(ctx))
        except USER_CODE_ERRORS as error:
            self.failure = f"The until condition of loop {loop_id!r} {raised(error)}"
            return
        if stop or iteration + 1 >= loop.max_iterations:
            if not stop and loop.fail_on_max:
                self.failure = (
                    f"Loop {loop_id!r} reached {loop.max_iterations} iterations without its "
                    "until condition holding."
                )
                return
            if not stop:
                # Its output is the last round's, though until never held: say so, so nobody
                # takes a draft the loop gave up on for one it accepted.
                self.warnings.append((Unit(probe_spec, probe_spec.id, iteration), (
                    f"Loop {loop_id!r} stopped at its max_iterations ({loop.max_iterations}) "
                    "without its until condition holding; what follows it gets the last "
                    "round's outputs.")))
            self._set_top(loop_id, last)
            return
        self.loop_iteration[loop_id] = iteration + 1
        self.loop_started[loop_id] = set()
