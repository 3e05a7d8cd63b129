"""The scheduler: runs a workflow's tasks on asyncio and records everything in the run records.

One :class:`Engine` per process (it owns an ``owner_id``); :meth:`Engine.start` creates a run
and executes it, :meth:`Engine.resume` continues one. Inside a run (:class:`RunExecution`):

* ready tasks run concurrently up to the concurrency limit; fan-outs expand when their
  dependencies are done; loops run their body once per iteration until ``until`` holds;
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
run starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import deque
from typing import Any

from engine.agents.base import Agent, AgentError, supports_tools
from engine.agents.registry import AgentRegistry
from engine.artifacts import RunArtifacts
from engine.attempt import record_failed_attempt, run_attempt
from engine.cached_output import lookup_cached_output, record_cache_hit
from engine.config import EngineConfig
from engine.context import TaskContext
from engine.hooks import (
    DispatchContext,
    DispatchDecision,
    EngineHooks,
    NodeKey,
    Progress,
)
from engine.interruption import INTERRUPTION_WAIT_S, record_interruption
from engine.monitor import monitor_run
from engine.prompting import assemble_prompt
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
from store.run_records import NodeRecord, RunRecord, RunRequests
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
        return await RunExecution(self, workflow, run, parsed).execute()

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
        return await RunExecution(self, workflow, claimed, parsed).execute()

    async def run_claimed(self, workflow: Workflow, run: RunRecord) -> RunOutcome:
        """Execute a run this process has just claimed from the queue (``store.queue``): its
        lease token is registered, so every write is fenced; finished nodes are reused."""
        self.prepare(workflow)
        parsed = workflow.parse_input(run.input)
        return await RunExecution(self, workflow, run, parsed).execute()

    async def run_chain(self, workflow: Workflow, outcome: RunOutcome) -> RunOutcome:
        """Follow handoffs: keep executing successor runs until one ends without handing off."""
        while outcome.status == "handed-off" and outcome.next_run_id:
            outcome = await self.resume(workflow, outcome.next_run_id)
        return outcome


class RunExecution:
    """Executes one run in this process (see the module docstring)."""

    def __init__(self, engine: Engine, workflow: Workflow, run: RunRecord, parsed: Any) -> None:
        self.engine = engine
        self.store = engine.store
        self.clock = engine.db.clock
        self.workflow = workflow
        self.run = run
        self.run_id = run.run_id
        self.input = parsed
        self.hooks = engine.hooks
        self.registry = engine.registry_for(workflow)
        self.artifacts_root = engine.db.workspace.artifacts_dir
        self.artifacts = RunArtifacts(self.artifacts_root, self.run_id, self._stored_artifacts())
        limit = engine.config.concurrency or workflow.concurrency
        self.semaphore = asyncio.Semaphore(limit)
        self.prior: dict[Key, NodeRecord] = {}
        self.outputs: dict[Key, Any] = {}
        self.top_outputs: dict[str, Any] = {}
        self.started_top: set[str] = set()
        self.fanouts: dict[str, list[Unit]] = {}
        self.loop_iteration: dict[str, int] = {}
        self.loop_started: dict[str, set[str]] = {}
        self.running: dict[asyncio.Task[Any], Unit] = {}
        self.known: set[Key] = set()
        self.done_count = 0
        self.failure: str | None = None
        self.storage_problem: StorageError | None = None
        """Set when the workspace stopped taking writes: the run stops and is interrupted."""
        self.cancelled = False
        self.lost = False
        self.stop: DispatchDecision | None = None
        self.continuation: Any = None
        self.top_ids = workflow.top_level_ids()
        self.top_deps = {n: workflow.top_level_deps(n) for n in self.top_ids}
        self.dependents: dict[str, list[str]] = {n: [] for n in self.top_ids}
        for node, deps in self.top_deps.items():
            for dep in deps:
                self.dependents[dep].append(node)
        self.missing = {n: len(deps) for n, deps in self.top_deps.items()}
        self.ready: deque[str] = deque(n for n in self.top_ids if not self.missing[n])
        self._ancestors: dict[str, frozenset[str]] = {}

    # -- bookkeeping ------------------------------------------------------------------------

    def ancestors(self, top: str) -> frozenset[str]:
        """Every top-level node ``top`` depends on, directly or not (memoised)."""
        found = self._ancestors.get(top)
        if found is None:
            collected: set[str] = set()
            for dep in self.top_deps.get(top, ()):
                collected.add(dep)
                collected |= self.ancestors(dep)
            found = self._ancestors[top] = frozenset(collected)
        return found

    def _set_top(self, top_id: str, value: Any) -> None:
        """A top-level node (task, fan-out or loop) is complete: release its dependents."""
        if top_id in self.top_outputs:
            return
        self.top_outputs[top_id] = value
        for node in self.dependents.get(top_id, ()):
            self.missing[node] -= 1
            if self.missing[node] == 0:
                self.ready.append(node)

    def progress(
        self, kind: str, unit: Unit | None, state: str, detail: str = "", **kw: Any
    ) -> None:
        callback = self.hooks.on_progress
        if callback is None:
            return
        callback(
            Progress(
                kind=kind,
                node_id=unit.node_id if unit else None,
                iteration=unit.iteration if unit else 0,
                state=state,
                detail=detail,
                **kw,
            )
        )

    def _load_output(self, spec: TaskSpec, value: Any) -> Any:
        if spec.output is None or value is None:
            return value
        try:
            return spec.output.model_validate(value)
        except Exception:
            # A stored output from an older schema: keep the data rather than re-run the node.
            return value

    def _ctx(self, unit: Unit, attempt: int = 1) -> TaskContext:
        spec = self.workflow.tasks[unit.spec.id]
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

    async def execute(self) -> RunOutcome:
        """Run to the end (finished, failed, cancelled, handed off, or interrupted because the
        workspace stopped taking writes) and record the outcome."""
        try:
            outcome = await self._execute()
        except StorageError as problem:
            self.storage_problem = self.storage_problem or problem
        else:
            if self.storage_problem is None:
                return outcome
        return await record_interruption(self, self.storage_problem)

    async def _execute(self) -> RunOutcome:
        for node in await self.store.list_nodes(self.run_id):
            self.prior[(node.node_id, node.iteration)] = node
            self.known.add((node.node_id, node.iteration))
        handoffs = await self.store.list_handoffs(to_run_id=self.run_id)
        if handoffs:
            self.continuation = handoffs[-1].carried_state
        static = [
            (i, 0, "pending", list(self.workflow.tasks[i].depends_on))
            for i in self.workflow.top_level_ids()
            if i in self.workflow.tasks
            and not self.workflow.tasks[i].is_fan_out
            and (i, 0) not in self.known
        ]
        if static:
            await self.store.upsert_nodes(self.run_id, static)
            self.known.update((n, 0) for n, *_ in static)
        await self.store.set_progress(self.run_id, nodes_total=len(self.known))
        self.progress("run", None, "running", self.run_id)
        monitor = asyncio.create_task(monitor_run(self))
        mirror = self._artifact_mirror()
        mirroring = asyncio.create_task(mirror.run()) if mirror is not None else None
        try:
            await self._advance()
            while self.running:
                done, _ = await asyncio.wait(
                    list(self.running), return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    unit = self.running.pop(task)
                    self._collect(unit, task)
                if not self._halting():
                    await self._advance()
        except BaseException:
            for task in self.running:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*self.running, return_exceptions=True)
            raise
        finally:
            monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await monitor
            if mirroring is not None and mirror is not None:
                mirroring.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await mirroring
                with contextlib.suppress(Exception):
                    await mirror.sync()  # the last lines of every log
        if self.storage_problem is not None:
            raise self.storage_problem
        drain = getattr(self.hooks.memory, "drain", None)
        if drain is not None:
            # Background retention writes land before the run reports its end.
            await drain()
        return await finish_run(self)

    def _stored_artifacts(self) -> Any:
        """On a PostgreSQL workspace, how a task reads an artifact another host wrote."""
        if self.engine.db.backend != "postgresql":
            return None
        from store.artifact_chunks import ArtifactChunks

        db: Any = self.engine.db
        return ArtifactChunks(db).read_whole_now

    def _artifact_mirror(self) -> Any:
        """On a PostgreSQL workspace, what copies this run's artifact files into the
        database (``engine/artifact_mirror.py``); None on SQLite, where the files are it."""
        if self.engine.db.backend != "postgresql":
            return None
        from engine.artifact_mirror import ArtifactMirror
        from store.artifact_chunks import ArtifactChunks

        db: Any = self.engine.db
        folder = run_dir(self.artifacts_root, self.run_id)
        return ArtifactMirror(ArtifactChunks(db), self.artifacts_root, folder)

    def _halting(self) -> bool:
        return (
            self.failure is not None
            or self.cancelled
            or self.stop is not None
            or self.lost
            or self.storage_problem is not None
        )

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

    # -- requests: cancel and clear (polled by engine.monitor, read at each attempt end) -----

    def absorb_requests(self, requests: RunRequests | None) -> None:
        """Take in the cancel/clear requests read when an attempt ended."""
        if requests is None or (
            requests.cancel_requested_at_ms == self.run.cancel_requested_at_ms
            and requests.clear_requested_at_ms == self.run.clear_requested_at_ms
        ):
            return
        self.run = dataclasses.replace(
            self.run,
            cancel_requested_at_ms=requests.cancel_requested_at_ms,
            clear_requested_at_ms=requests.clear_requested_at_ms,
            clear_reason=requests.clear_reason,
        )
        if requests.clear_requested_at_ms is not None and self.stop is None:
            self.stop = DispatchDecision(
                "handoff", requests.clear_reason or "cleared by a person", trigger="person"
            )
            self.progress("run", None, "handing-off", self.stop.reason)

    def cancel_all(self) -> None:
        for task in self.running:
            task.cancel()

    # -- expanding the graph ----------------------------------------------------------------

    async def _advance(self) -> None:
        """Start everything that became ready, repeating while nodes complete from storage."""
        while not self._halting():
            new_nodes: list[tuple[str, int, str, list[str]]] = []
            changed = False
            while self.ready:
                top_id = self.ready.popleft()
                if top_id in self.started_top:
                    continue
                self.started_top.add(top_id)
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
                await self.store.upsert_nodes(self.run_id, new_nodes)
                await self.store.set_progress(self.run_id, nodes_total=len(self.known))
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
            self._complete(unit, self._load_output(unit.spec, prior.output))
            return
        if unit.key not in self.known:
            self.known.add(unit.key)
            new_nodes.append((unit.node_id, unit.iteration, "pending", list(unit.spec.depends_on)))
        task = asyncio.create_task(self._run_unit(unit), name=f"tether:{unit.node_id}")
        self.running[task] = unit

    def _complete(self, unit: Unit, output: Any) -> None:
        """Record a node's output and propagate it to its fan-out or loop."""
        self.outputs[unit.key] = output
        spec = unit.spec
        if spec.loop is not None:
            self._loop_progress(spec.loop)
        elif spec.is_fan_out:
            units = self.fanouts.get(spec.id, [])
            if all(u.key in self.outputs for u in units):
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

    async def dispatch_check(self, unit: Unit, attempt: int) -> DispatchDecision:
        """Decide whether the attempt may start: stop requests first, then every guard.

        DISPATCH HOOK: token ceilings and handoff triggers are :class:`DispatchGuard` objects in
        ``EngineHooks.guards``; the first decision other than ``run``/``warn`` wins. Requests on
        the run row reach ``self.run`` from the monitor's poll and from every attempt's end
        (read in the same transaction), so a request made during an attempt stops the very
        next dispatch.
        """
        if self.stop is not None:
            return self.stop
        if self.run.cancel_requested_at_ms is not None or self.cancelled:
            raise StopDispatch("the run was cancelled")
        if self.run.clear_requested_at_ms is not None:
            return DispatchDecision(
                "handoff", self.run.clear_reason or "cleared by a person", trigger="person"
            )
        decision = DispatchDecision()
        for guard in self.hooks.guards:
            context = DispatchContext(
                run=self.run,
                node=NodeKey(unit.node_id, unit.iteration),
                attempt=attempt,
                workflow_ceiling=self.workflow.ceiling,
                task_ceiling=getattr(unit.spec, "ceiling", None),
            )
            result = await guard.check(context)
            if result.action == "warn":
                await self.store.append_event(
                    "warning",
                    run_id=self.run_id,
                    node_id=unit.node_id,
                    iteration=unit.iteration,
                    payload={"reason": result.reason, **dict(result.details)},
                )
                self.progress("warning", unit, "warn", result.reason)
            elif result.action != "run":
                return result
        return decision

    async def prepare_prompt(
        self, unit: Unit, agent: Agent, task_prompt: str, attempt: int, memory: Any
    ) -> tuple[str, list[Any]]:
        """Build the prompt actually sent, and the tools offered, for one attempt.

        MEMORY HOOK: when the task has a memory config and a memory runtime is installed, its
        recall block is placed first and its tools are offered; otherwise no block. Assembly
        itself is the pure :func:`engine.prompting.assemble_prompt`.
        """
        block: str | None = None
        tools: list[Any] = []
        runtime = self.hooks.memory
        if runtime is not None and memory is not None:
            prepared = await runtime.block_for(
                self.run_id, unit.node_id, unit.iteration, attempt, memory, task_prompt
            )
            block = prepared.text
            tools = list(runtime.tools_for(self.run_id, unit.node_id, unit.iteration, memory))
        schema = unit.spec.output.model_json_schema() if unit.spec.output else None
        prompt = assemble_prompt(
            task_prompt,
            memory_block=block,
            isolation_path=unit.spec.isolation,
            output_schema=schema,
            native_structured_output=agent.native_structured_output,
        )
        return prompt, tools

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
                if self._halting():
                    raise StopDispatch("the run is stopping")
                try:
                    output = await run_attempt(
                        self, unit, attempt, agent, agent_name, task_prompt, memory
                    )
                    break
                except AgentError as error:
                    failures += 1
                    retry = error.retryable and failures <= spec.retries and not self._halting()
                    await record_failed_attempt(self, unit, attempt, error, retry)
                    if not retry:
                        raise UnitFailed(
                            f"Node {unit.node_id} failed after {attempt} attempt(s): {error}"
                        ) from error
                    # The provider's own "retry after" wins over a shorter backoff.
                    wait_at_least = error.retry_after_s or 0.0
            delay = max(spec.backoff.delay_for(failures), wait_at_least)
            self.progress("node", unit, "retrying", f"in {delay:.1f}s")
            await asyncio.sleep(delay)
            attempt += 1
        if cache_id is not None and policy is not None:
            await self.engine.cache.put(
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
