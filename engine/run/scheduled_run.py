"""The scheduler: runs a workflow's tasks on asyncio and records everything in the run records.

One :class:`Engine` per process (it owns an ``owner_id``); :meth:`Engine.start` creates a run
and executes it, :meth:`Engine.resume` continues one. Inside a run (:class:`ScheduledRun`, the
loop driving a :class:`~engine.execution.RunExecution`):

* ready nodes are launched up to the concurrency limit (a node waiting to retry gives its place
  back); fan-outs expand when their dependencies are done; loops run their body once per
  iteration until ``until`` holds. Each completion costs O(1): finished tasks are handed to
  the loop by their done callbacks, and a fan-out counts its outstanding items;
* every attempt goes through :meth:`RunExecution.dispatch_check` (cancel/clear requests and the
  :class:`~engine.hooks.DispatchGuard` hooks — the ceiling feature plugs in there), then
  :meth:`RunExecution.prepare_prompt` (the memory hook and pure prompt assembly), then the agent;
* a monitor task refreshes the heartbeat every few seconds and polls the run row for cancel
  and clear requests written by other processes (CLI, dashboard);
* a finished node is written in the same transaction as its attempt's end, and a resumed run
  reuses finished nodes' stored outputs: a finished node never runs again. Attempts left
  running by a dead process are marked abandoned (by :meth:`RunStore.claim_run`) and retried.

Parts of a run execution live beside this module: :mod:`engine.units` (a node to execute),
:mod:`engine.attempt` (one attempt), :mod:`engine.cached_output` (task cache steps),
:mod:`engine.monitor` (heartbeat and request polling), :mod:`engine.run_end` (how a run ends),
:mod:`engine.upstream` (``ctx.outputs``) and :mod:`engine.root_prompts` (the dry render before a
run starts); the state they share is :mod:`engine.execution`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from engine.agents.base import AgentError, supports_tools
from engine.agents.registry import AgentRegistry
from engine.attempt import record_failed_attempt, run_attempt
from engine.cached_output import lookup_cached_output, record_cache_hit
from engine.config import EngineConfig
from engine.context import TaskContext
from engine.execution import EngineServices, RunExecution
from engine.hooks import EngineHooks
from engine.interruption import INTERRUPTION_WAIT_S, record_interruption
from engine.monitor import monitor_run
from engine.root_prompts import check_root_prompts
from engine.run_end import RunOutcome, finish_run
from engine.structured import to_jsonable
from engine.units import Key, NodeSkipped, StopDispatch, Unit, UnitFailed
from engine.upstream import UpstreamOutputs
from engine.workflow import TaskSpec, Workflow
from store.artifact_paths import run_dir
from store.database import Database
from store.errors import InvalidInputError, LeaseLost, StorageError
from store.owners import new_owner_id, running_elsewhere
from store.run_records import RunRecord
from store.runs import RunStore
from store.task_cache import TaskCache


def task_memory(spec: TaskSpec, workflow: Workflow) -> Any:
    """The memory config a task runs with (its own replaces the workflow's), or None."""
    if spec.memory is None and workflow.memory is None:
        return None
    from engine.memory.config import resolve_memory

    return resolve_memory(spec.memory, workflow.memory)


def memory_is_active(config: Any) -> bool:
    """True when a task reads or writes memory, so its output must bypass the cache."""
    return config is not None and config is not False and bool(getattr(config, "is_active", True))


class Engine:
    """Executes workflows against one workspace database."""

    def __init__(
        self,
        db: Database,
        *,
        config: EngineConfig | None = None,
        hooks: EngineHooks | None = None,
        owner_id: str | None = None,
    ) -> None:
        self.db = db
        self.store = RunStore(db)
        self.cache = TaskCache(db)
        self.config = config or EngineConfig()
        self.hooks = hooks or EngineHooks()
        self.owner_id = owner_id or new_owner_id()
        self.interruption_wait_s = INTERRUPTION_WAIT_S
        """How long a run waits for the workspace to take writes again (engine.interruption)."""

    def prepare(self, workflow: Workflow) -> None:
        """Validate the definition, every task's memory config and its agent, before running."""
        workflow.validate()
        from engine.ceiling import CeilingGuard, ceiling_of

        # A bad ceiling is a definition error, not a dispatch crash; an unenforced one is refused.
        if ceiling_of(workflow.ceiling) is not None and not any(
            isinstance(guard, CeilingGuard) for guard in self.hooks.guards
        ):
            raise InvalidInputError(
                f"Workflow {workflow.name!r} has a token ceiling but this engine enforces none; "
                "open it with engine.setup.open_engine (or add engine.ceiling.CeilingGuard)."
            )
        registry = self.registry_for(workflow)
        for spec in workflow.tasks.values():
            memory = task_memory(spec, workflow)
            if memory_is_active(memory) and self.hooks.memory is None:
                # Memory that nothing reads or writes would be a silent no-op: refuse it.
                raise InvalidInputError(
                    f"Task {spec.id!r} has a memory config but this engine has no memory "
                    "runtime; open it with engine.setup.open_engine (or pass "
                    "EngineHooks(memory=MemoryRuntime(db)))."
                )
            agent_name = spec.agent or workflow.default_agent
            agent = registry.get(agent_name)
            if getattr(memory, "tools", False) and not supports_tools(agent):
                # The prompt would say "use the remember tool" and nothing would be saved.
                raise InvalidInputError(
                    f"Task {spec.id!r} offers memory tools but agent {agent_name!r} cannot take "
                    "tools (a command agent takes them only with the claude-code or codex "
                    "preset); set tools=False or use another agent."
                )

    def registry_for(self, workflow: Workflow) -> AgentRegistry:
        return AgentRegistry(workflow.agents, self.config.agents)

    def _execution(self, workflow: Workflow, run: RunRecord, parsed: Any) -> ScheduledRun:
        services = EngineServices(
            store=self.store,
            cache=self.cache,
            config=self.config,
            hooks=self.hooks,
            owner_id=self.owner_id,
            clock=self.db.clock,
            workspace=self.db.workspace,
            registry=self.registry_for(workflow),
            db=self.db,
            interruption_wait_s=self.interruption_wait_s,
        )
        return ScheduledRun(services, workflow, run, parsed)

    async def start(
        self,
        workflow: Workflow,
        raw_input: Any = None,
        *,
        workflow_path: str | None = None,
        run_id: str | None = None,
    ) -> RunOutcome:
        """Create a run of ``workflow`` with ``raw_input`` and execute it to the end.

        Definition and input errors raise InvalidInputError before anything is written.
        Root prompts are rendered once up front so an empty one fails before the run starts.
        ``run_id`` names the new run (a caller that shows it before it ends, the dashboard).
        """
        self.prepare(workflow)
        parsed = workflow.parse_input(raw_input)
        check_root_prompts(workflow, parsed)
        run = await self.store.create_run(
            workflow.name,
            input=to_jsonable(parsed),
            workflow_path=workflow_path,
            owner_id=self.owner_id,
            run_id=run_id,
        )
        return await self._execution(workflow, run, parsed).execute(fresh=True)

    async def resume(self, workflow: Workflow, run_id: str) -> RunOutcome:
        """Continue ``run_id``: finished nodes keep their outputs, the rest run.

        Refuses a finished or handed-off run, a run of another workflow, and a run another
        process is executing (its owner is alive; for an owner on another host, its heartbeat
        is younger than 30 s).
        """
        run = await self.store.get_run(run_id)
        if run.workflow != workflow.name:
            raise InvalidInputError(
                f"Run {run_id} belongs to workflow {run.workflow!r}, not {workflow.name!r}."
            )
        if run.status == "finished":
            raise InvalidInputError(f"Run {run_id} already finished; there is nothing to resume.")
        if run.status == "handed-off":
            raise InvalidInputError(f"Run {run_id} was handed off to a newer run; resume that.")
        # Ownership, not heartbeat age: a live owner keeps its run (store/owners.py).
        refusal = running_elsewhere(run, self.db.clock.now_ms(), self.owner_id)
        if refusal is not None:
            raise InvalidInputError(refusal)
        self.prepare(workflow)
        parsed = workflow.parse_input(run.input)
        claimed = await self.store.claim_run(run_id, self.owner_id, expected_owner=run.owner_id)
        return await self._execution(workflow, claimed, parsed).execute()

    async def run_claimed(self, workflow: Workflow, run: RunRecord) -> RunOutcome:
        """Execute a run this process has just claimed from the queue (``store.queue``): its
        lease token is registered, so every write is fenced; finished nodes are reused."""
        self.prepare(workflow)
        parsed = workflow.parse_input(run.input)
        return await self._execution(workflow, run, parsed).execute()

    async def run_chain(self, workflow: Workflow, outcome: RunOutcome) -> RunOutcome:
        """Follow handoffs: keep executing successor runs until one ends without handing off."""
        while outcome.status == "handed-off" and outcome.next_run_id:
            outcome = await self.resume(workflow, outcome.next_run_id)
        return outcome


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

    def _ctx(self, unit: Unit, attempt: int = 1) -> TaskContext:
        spec = unit.spec
        top = self.workflow.owner_of(spec.id)
        current: dict[str, Any] = {}
        previous: dict[str, Any] = {}
        if spec.loop is not None:
            for body_id in self.workflow.loops[spec.loop].body:
                if (body_id, unit.iteration) in self.outputs:
                    current[body_id] = self.outputs[(body_id, unit.iteration)]
                if unit.iteration > 0 and (body_id, unit.iteration - 1) in self.outputs:
                    previous[body_id] = self.outputs[(body_id, unit.iteration - 1)]
        return TaskContext(
            workflow=self.workflow.name,
            run_id=self.run_id,
            input=self.input,
            task_id=spec.id,
            node_id=unit.node_id,
            iteration=unit.iteration,
            attempt=attempt,
            item=unit.item,
            index=unit.index,
            outputs=UpstreamOutputs(self, top, current),
            previous_outputs=previous,
            artifacts=self.artifacts,
            continuation=self.continuation,
        )

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
        static = [
            (i, 0, "pending", list(self.workflow.tasks[i].depends_on))
            for i in self.top_ids
            if i in self.workflow.tasks
            and not self.workflow.tasks[i].is_fan_out
            and (i, 0) not in self.known
        ]
        self.known.update((n, 0) for n, *_ in static)
        await self.store.upsert_nodes(self.run_id, static, nodes_total=len(self.known))
        self.progress("run", None, "running", self.run_id)
        monitor = asyncio.create_task(monitor_run(self))
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
            monitor.cancel()
            with contextlib.suppress(BaseException):
                await monitor
            if mirroring is not None and mirror is not None:
                mirroring.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await mirroring
                with contextlib.suppress(Exception):
                    await mirror.sync()  # the last lines of every log
        await self.settle_ends()
        if self.storage_problem is not None:
            raise self.storage_problem
        drain = getattr(self.hooks.memory, "drain", None)
        if drain is not None:
            # Background retention writes land before the run reports its end.
            await drain()
        return await finish_run(self)

    def _artifact_mirror(self) -> Any:
        """On a PostgreSQL workspace, what copies this run's artifact files into the
        database (``engine/artifact_mirror.py``); None on SQLite, where the files are it."""
        if self.services.db.backend != "postgresql":
            return None
        from engine.artifact_mirror import ArtifactMirror
        from store.artifact_chunks import ArtifactChunks

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
            task = asyncio.create_task(self._run_unit(unit), name=f"tether:{unit.node_id}")
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

    def _park(self) -> None:
        """The current task waits out a retry's backoff: its place goes to a waiting unit."""
        task = asyncio.current_task()
        if task is not None and task in self.running and task not in self.parked:
            self.parked.add(task)
            self.active -= 1
            self._fill()

    def _unpark(self) -> None:
        task = asyncio.current_task()
        if task is not None and task in self.parked:
            # Counted again (possibly above the limit for a moment: the agent call itself
            # still waits for the semaphore, which is what caps concurrent calls).
            self.parked.discard(task)
            self.active += 1

    # -- expanding the graph ----------------------------------------------------------------

    async def _advance(self) -> None:
        """Start everything that became ready, repeating while nodes complete from storage."""
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

    def _expand(self, spec: TaskSpec) -> list[Unit] | None:
        ctx = self._ctx(Unit(spec, spec.id))
        try:
            assert spec.items is not None
            items = list(spec.items(ctx))
        except Exception as error:
            self.failure = (
                f"The items of fan-out {spec.id!r} raised {type(error).__name__}: {error}"
            )
            return None
        units: list[Unit] = []
        seen: set[str] = set()
        for index, item in enumerate(items):
            key = spec.item_key(item) if spec.item_key else str(index)
            node_id = f"{spec.id}[{key}]"
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
            self._complete(unit, self.load_output(unit.spec, prior.output))
            return
        if unit.key not in self.known:
            self.known.add(unit.key)
            new_nodes.append((unit.node_id, unit.iteration, "pending", list(unit.spec.depends_on)))
        self.waiting.append(unit)

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
        ctx = self._ctx(Unit(probe_spec, probe_spec.id, iteration))
        try:
            stop = bool(loop.until(ctx))
        except Exception as error:
            self.failure = (
                f"The until condition of loop {loop_id!r} raised {type(error).__name__}: {error}"
            )
            return
        if stop or iteration + 1 >= loop.max_iterations:
            if not stop and loop.fail_on_max:
                self.failure = (
                    f"Loop {loop_id!r} reached {loop.max_iterations} iterations without its "
                    "until condition holding."
                )
                return
            self._set_top(loop_id, last)
            return
        self.loop_iteration[loop_id] = iteration + 1
        self.loop_started[loop_id] = set()

    # -- one node ---------------------------------------------------------------------------

    async def _run_unit(self, unit: Unit) -> Any:
        spec = unit.spec
        prior = self.prior.get(unit.key)
        attempt = (prior.attempts if prior else 0) + 1
        failures = 0
        wait_at_least = 0.0
        agent_name = spec.agent or self.workflow.default_agent
        agent = self.registry.get(agent_name)
        memory = task_memory(spec, self.workflow)
        policy = spec.cache or self.workflow.cache
        while True:
            decision = await self.dispatch_check(unit, attempt)
            if decision.action == "handoff":
                self.stop = self.stop or decision
                raise StopDispatch(decision.reason)
            if decision.action == "skip":
                self.done_count += 1
                await self.store.upsert_node(
                    self.run_id,
                    unit.node_id,
                    unit.iteration,
                    "skipped",
                    error=decision.reason,
                    nodes_done=self.done_count,
                )
                self.progress("node", unit, "skipped", decision.reason)
                raise NodeSkipped(decision.reason)
            if decision.action == "fail":
                await self.store.upsert_node(
                    self.run_id, unit.node_id, unit.iteration, "failed", error=decision.reason
                )
                self.progress("node", unit, "failed", decision.reason)
                raise UnitFailed(decision.reason)
            ctx = self._ctx(unit, attempt)
            task_prompt = await self._render(unit, ctx)
            cache_id: str | None = None
            if policy is not None and not memory_is_active(memory):
                cache_id, hit = await lookup_cached_output(
                    self, unit, ctx, policy, task_prompt, agent_name
                )
                if hit is not None:
                    await record_cache_hit(self, unit, attempt, agent_name, task_prompt, hit)
                    return hit
            async with self.semaphore:
                if self.halting():
                    raise StopDispatch("the run is stopping")
                try:
                    output = await run_attempt(
                        self, unit, attempt, agent, agent_name, task_prompt, memory
                    )
                    break
                except AgentError as error:
                    failures += 1
                    retry = error.retryable and failures <= spec.retries and not self.halting()
                    await record_failed_attempt(self, unit, attempt, error, retry)
                    if not retry:
                        raise UnitFailed(
                            f"Node {unit.node_id} failed after {attempt} attempt(s): {error}"
                        ) from error
                    # The provider's own "retry after" wins over a shorter backoff.
                    wait_at_least = error.retry_after_s or 0.0
            delay = max(spec.backoff.delay_for(failures), wait_at_least)
            self.progress("node", unit, "retrying", f"in {delay:.1f}s")
            self._park()
            try:
                await asyncio.sleep(delay)
            finally:
                self._unpark()
            attempt += 1
        if cache_id is not None and policy is not None:
            await self.cache.put(
                cache_id,
                scope=policy.scope,
                workflow=self.workflow.name,
                node_id=unit.node_id,
                run_id=self.run_id,
                payload=to_jsonable(output),
                ttl_ms=policy.ttl_ms,
            )
        if self.hooks.memory is not None and memory is not None:
            # MEMORY HOOK: retention runs in the background; it never delays the next task.
            self.hooks.memory.retain_in_background(
                self.run_id, unit.node_id, unit.iteration, memory, task_prompt, output
            )
        return output

    async def _render(self, unit: Unit, ctx: TaskContext) -> str:
        try:
            text = unit.spec.prompt(ctx)
        except Exception as error:
            message = f"The prompt of {unit.node_id} raised {type(error).__name__}: {error}"
            await self.store.upsert_node(
                self.run_id, unit.node_id, unit.iteration, "failed", error=message
            )
            raise UnitFailed(message) from error
        if not isinstance(text, str) or not text.strip():
            message = (
                f"Task {unit.node_id} rendered an empty prompt; usually an upstream value it "
                "interpolates was empty."
            )
            await self.store.upsert_node(
                self.run_id, unit.node_id, unit.iteration, "failed", error=message
            )
            raise UnitFailed(message)
        return text
