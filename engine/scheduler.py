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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine.agents.base import Agent, AgentError, AgentRequest, ModelCall
from engine.agents.registry import AgentRegistry
from engine.artifacts import RAW_OUTPUT, STREAM_LOG, RunArtifacts, attempt_dir
from engine.cache import cache_key, is_fresh
from engine.config import EngineConfig
from engine.context import TaskContext
from engine.hooks import (
    DispatchContext,
    DispatchDecision,
    EngineHooks,
    HandoffRequest,
    NodeKey,
    Progress,
)
from engine.prompting import assemble_prompt, repair_prompt
from engine.structured import OutputInvalid, validate_output
from engine.workflow import CachePolicy, TaskSpec, Workflow, WorkflowDefinitionError
from store.database import Database
from store.errors import InvalidInputError
from store.owners import new_owner_id, owner_is_dead
from store.run_records import CallUsage, NewEvent, NodeRecord, RunRecord, RunRequests, TokenUsage
from store.runs import RunStore
from store.task_cache import TaskCache

Key = tuple[str, int]


class UnitFailed(Exception):
    """A node failed for good (retries exhausted or a non-retryable error)."""


class StopDispatch(Exception):
    """The run stopped dispatching (handoff requested); the node stays pending."""


class NodeSkipped(Exception):
    """A guard skipped the node."""


@dataclass
class RunOutcome:
    """How a run ended in this process."""

    run_id: str
    status: str
    error: str | None = None
    next_run_id: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Unit:
    """One node to execute: a task at an iteration (and, for a fan-out copy, its item)."""

    spec: TaskSpec
    node_id: str
    iteration: int = 0
    item: Any = None
    index: int | None = None

    @property
    def key(self) -> Key:
        return (self.node_id, self.iteration)


def to_jsonable(value: Any) -> Any:
    """A typed output as plain JSON data (models dumped, lists and dicts walked)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


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
            if memory_is_active(task_memory(spec, workflow)) and self.hooks.memory is None:
                # Memory that nothing reads or writes would be a silent no-op: refuse it.
                raise InvalidInputError(
                    f"Task {spec.id!r} has a memory config but this engine has no memory "
                    "runtime; open it with engine.setup.open_engine (or pass "
                    "EngineHooks(memory=MemoryRuntime(db)))."
                )
            registry.get(spec.agent or workflow.default_agent)

    def registry_for(self, workflow: Workflow) -> AgentRegistry:
        return AgentRegistry(workflow.agents, self.config.agents)

    async def start(
        self, workflow: Workflow, raw_input: Any = None, *, workflow_path: str | None = None
    ) -> RunOutcome:
        """Create a run of ``workflow`` with ``raw_input`` and execute it to the end.

        Definition and input errors raise InvalidInputError before anything is written.
        Root prompts are rendered once up front so an empty one fails before the run starts.
        """
        self.prepare(workflow)
        parsed = workflow.parse_input(raw_input)
        _check_root_prompts(workflow, parsed)
        run = await self.store.create_run(
            workflow.name,
            input=to_jsonable(parsed),
            workflow_path=workflow_path,
            owner_id=self.owner_id,
        )
        return await RunExecution(self, workflow, run, parsed).execute()

    async def resume(self, workflow: Workflow, run_id: str) -> RunOutcome:
        """Continue ``run_id``: finished nodes keep their outputs, the rest run.

        Refuses a finished or handed-off run, a run of another workflow, and a run whose owner
        is still alive (heartbeat younger than 30 s).
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
        now = self.db.clock.now_ms()
        if (
            run.status == "running"
            and not run.is_stale(now)
            and run.owner_id != self.owner_id
            and not owner_is_dead(run.owner_id)
        ):
            raise InvalidInputError(
                f"Run {run_id} is still running in another process (heartbeat "
                f"{(now - (run.heartbeat_at_ms or now)) // 1000} s ago); cancel it or wait."
            )
        self.prepare(workflow)
        parsed = workflow.parse_input(run.input)
        claimed = await self.store.claim_run(run_id, self.owner_id)
        return await RunExecution(self, workflow, claimed, parsed).execute()

    async def run_chain(self, workflow: Workflow, outcome: RunOutcome) -> RunOutcome:
        """Follow handoffs: keep executing successor runs until one ends without handing off."""
        while outcome.status == "handed-off" and outcome.next_run_id:
            outcome = await self.resume(workflow, outcome.next_run_id)
        return outcome


def _check_root_prompts(workflow: Workflow, parsed: Any) -> None:
    """Render every prompt that depends on nothing but the input, so an empty or failing one is
    a definition error before anything runs."""
    scratch = tempfile.TemporaryDirectory(prefix="tether-dry-render-")
    with scratch:
        for spec in workflow.tasks.values():
            if spec.depends_on or spec.is_fan_out or spec.loop is not None:
                continue
            # Artifact writes during this dry render land in a scratch folder and are discarded.
            ctx = TaskContext(
                workflow=workflow.name,
                run_id="",
                input=parsed,
                task_id=spec.id,
                node_id=spec.id,
                artifacts=RunArtifacts(Path(scratch.name), "dry-render"),
            )
            _dry_render(spec, ctx)


def _dry_render(spec: TaskSpec, ctx: TaskContext) -> None:
    try:
        text = spec.prompt(ctx)
    except Exception as error:
        raise WorkflowDefinitionError(
            f"The prompt of task {spec.id!r} raised {type(error).__name__}: {error}"
        ) from error
    if not isinstance(text, str) or not text.strip():
        raise WorkflowDefinitionError(
            f"Task {spec.id!r} rendered an empty prompt; check what it interpolates."
        )


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
        self.artifacts = RunArtifacts(self.artifacts_root, self.run_id)
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

    def _progress(
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
        """Run to the end (finished, failed, cancelled or handed off) and record the outcome."""
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
        self._progress("run", None, "running", self.run_id)
        monitor = asyncio.create_task(self._monitor())
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
        drain = getattr(self.hooks.memory, "drain", None)
        if drain is not None:
            # Background retention writes land before the run reports its end.
            await drain()
        return await self._finish()

    def _halting(self) -> bool:
        return self.failure is not None or self.cancelled or self.stop is not None or self.lost

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
        elif isinstance(error, UnitFailed):
            self.failure = self.failure or str(error)
        else:
            self.failure = self.failure or (
                f"Node {unit.node_id} hit an internal error: {type(error).__name__}: {error}"
            )

    async def _finish(self) -> RunOutcome:
        outputs = self._sink_outputs()
        if self.lost:
            return RunOutcome(self.run_id, "lost", "Another process took over this run.")
        if self.cancelled:
            await self.store.set_run_status(self.run_id, "cancelled", error="Cancelled by request.")
            self._progress("run", None, "cancelled")
            return RunOutcome(self.run_id, "cancelled", "Cancelled by request.")
        if self.failure is not None:
            await self.store.set_run_status(self.run_id, "failed", error=self.failure)
            self._progress("run", None, "failed", self.failure)
            return RunOutcome(self.run_id, "failed", self.failure)
        if self.stop is not None:
            return await self._hand_off(self.stop, outputs)
        unfinished = [n for n in self.top_ids if n not in self.top_outputs]
        if unfinished:
            # Never report a run finished while part of its graph did not run.
            error = f"Nodes never became ready: {', '.join(unfinished[:10])}."
            await self.store.set_run_status(self.run_id, "failed", error=error)
            return RunOutcome(self.run_id, "failed", error)
        await self.store.set_run_status(self.run_id, "finished", output=outputs, set_output=True)
        self._progress("run", None, "finished")
        return RunOutcome(self.run_id, "finished", outputs=outputs)

    def _sink_outputs(self) -> dict[str, Any]:
        ids = self.top_ids
        depended = {d for n in ids for d in self.top_deps[n]}
        return {
            n: to_jsonable(self.top_outputs[n])
            for n in ids
            if n not in depended and n in self.top_outputs
        }

    async def _hand_off(self, decision: DispatchDecision, outputs: dict[str, Any]) -> RunOutcome:
        run = await self.store.get_run(self.run_id)
        reason = decision.reason or "handoff requested"
        visible = {n: to_jsonable(v) for n, v in self.top_outputs.items()}
        if self.hooks.handoff is not None:
            # HANDOFF HOOK: the ceiling/handoff feature distils state and creates the successor.
            next_id = await self.hooks.handoff.hand_off(
                HandoffRequest(
                    run=run,
                    trigger=decision.trigger,
                    reason=reason,
                    outputs=visible,
                    workflow=self.workflow,
                )
            )
        else:
            carried = default_distillation(run, reason, visible)
            new_run, _ = await self.store.continue_as_new(
                self.run_id,
                trigger=decision.trigger,
                reason=reason,
                carried_state=carried,
                input=run.input,
                tokens_at_handoff=run.tokens.total,
            )
            next_id = new_run.run_id
        self._progress("run", None, "handed-off", next_id or "")
        return RunOutcome(self.run_id, "handed-off", reason, next_run_id=next_id, outputs=outputs)

    # -- the monitor: heartbeat, cancel and clear requests ----------------------------------

    async def _monitor(self) -> None:
        config = self.engine.config
        last_beat = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(config.poll_interval_s)
            now = asyncio.get_running_loop().time()
            if now - last_beat >= config.heartbeat_interval_s:
                last_beat = now
                if not await self.store.heartbeat(self.run_id, self.engine.owner_id):
                    self.lost = True
                    self._cancel_all()
                    return
            run = await self.store.find_run(self.run_id)
            if run is None:
                self.lost = True
                self._cancel_all()
                return
            self.run = run
            if run.cancel_requested_at_ms is not None and not self.cancelled:
                self.cancelled = True
                self._progress("run", None, "cancelling")
                self._cancel_all()
            if run.clear_requested_at_ms is not None and self.stop is None:
                self.stop = DispatchDecision(
                    "handoff", run.clear_reason or "cleared by a person", trigger="person"
                )
                self._progress("run", None, "handing-off", self.stop.reason)

    def _absorb(self, requests: RunRequests | None) -> None:
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
            self._progress("run", None, "handing-off", self.stop.reason)

    def _cancel_all(self) -> None:
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
                self._progress("warning", unit, "warn", result.reason)
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
                self._progress("node", unit, "skipped", decision.reason)
                raise NodeSkipped(decision.reason)
            if decision.action == "fail":
                await self.store.upsert_node(
                    self.run_id, unit.node_id, unit.iteration, "failed", error=decision.reason
                )
                self._progress("node", unit, "failed", decision.reason)
                raise UnitFailed(decision.reason)
            ctx = self._ctx(unit, attempt)
            task_prompt = await self._render(unit, ctx)
            cache_id: str | None = None
            if policy is not None and not memory_is_active(memory):
                cache_id, hit = await self._cache_lookup(unit, ctx, policy, task_prompt, agent_name)
                if hit is not None:
                    await self._record_cache_hit(unit, attempt, agent_name, task_prompt, hit)
                    return hit
            async with self.semaphore:
                if self._halting():
                    raise StopDispatch("the run is stopping")
                try:
                    output = await self._attempt(
                        unit, attempt, agent, agent_name, task_prompt, memory
                    )
                    break
                except AgentError as error:
                    failures += 1
                    retry = error.retryable and failures <= spec.retries and not self._halting()
                    await self._attempt_failed(unit, attempt, error, retry)
                    if not retry:
                        raise UnitFailed(
                            f"Node {unit.node_id} failed after {attempt} attempt(s): {error}"
                        ) from error
            delay = spec.backoff.delay_for(failures)
            self._progress("node", unit, "retrying", f"in {delay:.1f}s")
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

    async def _cache_lookup(
        self, unit: Unit, ctx: TaskContext, policy: CachePolicy, prompt: str, agent_name: str
    ) -> tuple[str | None, Any]:
        try:
            key_value = policy.key(ctx) if policy.key else None
        except Exception as error:
            await self.store.append_event(
                "warning",
                run_id=self.run_id,
                node_id=unit.node_id,
                iteration=unit.iteration,
                payload={"reason": f"cache key function failed, not caching: {error}"},
            )
            return None, None
        spec = unit.spec
        key = cache_key(
            scope=policy.scope,
            workflow=self.workflow.name,
            run_id=self.run_id,
            node_id=unit.node_id,
            iteration=unit.iteration,
            agent=agent_name,
            output_schema=spec.output.model_json_schema() if spec.output else None,
            version=policy.version,
            key_value=key_value,
            prompt=prompt if policy.include_prompt else None,
            input=to_jsonable(self.input) if policy.include_input else None,
        )
        entry = await self.engine.cache.get(key)
        if entry is None or not is_fresh(entry.created_at_ms, entry.ttl_ms, self.clock.now_ms()):
            return key, None
        if spec.output is None:
            return key, entry.payload
        try:
            return key, spec.output.model_validate(entry.payload)
        except Exception:
            # The cached payload no longer matches the output model: a miss, never a failure.
            await self.engine.cache.delete(key)
            await self.store.append_event(
                "cache.invalid",
                run_id=self.run_id,
                node_id=unit.node_id,
                iteration=unit.iteration,
                payload={"cache_key": key},
            )
            return key, None

    async def _record_cache_hit(
        self, unit: Unit, attempt: int, agent_name: str, prompt: str, output: Any
    ) -> None:
        await self.store.start_attempt(
            self.run_id,
            unit.node_id,
            unit.iteration,
            attempt,
            agent=agent_name,
            prompt=prompt,
            owner_id=self.engine.owner_id,
            cached=True,
        )
        self.done_count += 1
        self._absorb(
            await self.store.finish_attempt(
                self.run_id,
                unit.node_id,
                unit.iteration,
                attempt,
                "finished",
                cached=True,
                node_state="finished",
                node_output=to_jsonable(output),
                set_node_output=True,
                nodes_done=self.done_count,
                extra_events=[
                    NewEvent("cache.hit", self.run_id, unit.node_id, unit.iteration, attempt)
                ],
            )
        )
        self._progress("node", unit, "finished", "cached")

    async def _attempt(
        self,
        unit: Unit,
        attempt: int,
        agent: Agent,
        agent_name: str,
        task_prompt: str,
        memory: Any,
    ) -> Any:
        """One attempt: prompt, agent call(s) with a timeout, validation with one repair, and
        the attempt's end written together with the node's state."""
        spec = unit.spec
        prompt, tools = await self.prepare_prompt(unit, agent, task_prompt, attempt, memory)
        await self.store.start_attempt(
            self.run_id,
            unit.node_id,
            unit.iteration,
            attempt,
            agent=agent_name,
            model=getattr(agent, "model", None),
            prompt=prompt,
            owner_id=self.engine.owner_id,
        )
        self._progress("node", unit, "running", f"attempt {attempt}", attempt=attempt)
        calls: list[ModelCall] = []

        async def on_call(call: ModelCall) -> None:
            calls.append(call)
            await self.store.record_call(
                CallUsage(
                    self.run_id,
                    unit.node_id,
                    unit.iteration,
                    attempt,
                    agent_name,
                    call.usage,
                    model=call.model,
                    simulated=bool(getattr(agent, "simulated", False)),
                    started_at_ms=call.started_at_ms,
                    finished_at_ms=call.finished_at_ms,
                )
            )
            self._progress("call", unit, "call", tokens=call.usage.context_tokens, attempt=attempt)

        def total() -> TokenUsage:
            usage = TokenUsage()
            for call in calls:
                usage = usage + call.usage
            return usage

        folder = attempt_dir(
            self.artifacts_root, self.run_id, unit.node_id, unit.iteration, attempt
        )
        request = AgentRequest(
            prompt=prompt,
            run_id=self.run_id,
            node_id=unit.node_id,
            iteration=unit.iteration,
            attempt=attempt,
            output_schema=spec.output.model_json_schema() if spec.output else None,
            tools=tools,
            stream_path=folder / STREAM_LOG,
            on_call=on_call,
            clock=self.clock,
        )
        text = ""
        try:
            async with asyncio.timeout(spec.timeout_s):
                result = await agent.run(request)
                text = result.text
                output: Any = result.text
                if spec.output is not None:
                    try:
                        output = validate_output(
                            spec.output, result.output if result.output is not None else text
                        )
                    except OutputInvalid as problem:
                        schema = request.output_schema or {}
                        repaired = await agent.run(
                            dataclasses.replace(
                                request,
                                prompt=repair_prompt(text, str(problem), schema),
                                repair=True,
                            )
                        )
                        try:
                            output = validate_output(
                                spec.output,
                                repaired.output if repaired.output is not None else repaired.text,
                            )
                            text = repaired.text
                        except OutputInvalid as second:
                            request.ensure_folder()
                            raw = folder / RAW_OUTPUT
                            raw.write_text(
                                f"--- first answer ---\n{text}\n--- repair answer ---\n"
                                f"{repaired.text}\n",
                                encoding="utf-8",
                            )
                            text = repaired.text
                            raise AgentError(
                                f"the answer did not match {spec.output.__name__} after one "
                                f"repair: {second} (raw answer kept in {raw})"
                            ) from second
        except TimeoutError as error:
            raise _AttemptError(
                AgentError(f"timed out after {spec.timeout_s:g} s"), total(), text
            ) from error
        except AgentError as error:
            raise _AttemptError(error, total(), text) from error
        except Exception as error:
            # A bug or unexpected error inside an agent fails the attempt (retries apply); it
            # never leaves the attempt marked running.
            raise _AttemptError(
                AgentError(f"the agent raised {type(error).__name__}: {error}"), total(), text
            ) from error
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    self.store.finish_attempt(
                        self.run_id,
                        unit.node_id,
                        unit.iteration,
                        attempt,
                        "cancelled",
                        usage=total(),
                        response_text=text or None,
                        error="Cancelled by request."
                        if self.cancelled
                        else "Interrupted; the run stays resumable.",
                        node_state="cancelled",
                    )
                )
            self._progress("node", unit, "cancelled")
            raise
        self.done_count += 1
        self._absorb(
            await self.store.finish_attempt(
                self.run_id,
                unit.node_id,
                unit.iteration,
                attempt,
                "finished",
                usage=total(),
                response_text=text,
                node_state="finished",
                node_output=to_jsonable(output),
                set_node_output=True,
                nodes_done=self.done_count,
            )
        )
        self._progress("node", unit, "finished", tokens=total().total, attempt=attempt)
        return output

    async def _attempt_failed(
        self, unit: Unit, attempt: int, error: AgentError, retry: bool
    ) -> None:
        usage = error.usage if isinstance(error, _AttemptError) else TokenUsage()
        text = error.text if isinstance(error, _AttemptError) else None
        self._absorb(
            await self.store.finish_attempt(
                self.run_id,
                unit.node_id,
                unit.iteration,
                attempt,
                "failed",
                usage=usage,
                response_text=text or None,
                error=str(error),
                node_state="retrying" if retry else "failed",
            )
        )
        self._progress("node", unit, "retrying" if retry else "failed", str(error), attempt=attempt)


class _AttemptError(AgentError):
    """An AgentError carrying the usage and text of the failed attempt."""

    def __init__(self, cause: AgentError, usage: TokenUsage, text: str) -> None:
        super().__init__(str(cause), retryable=cause.retryable)
        self.usage = usage
        self.text = text


def default_distillation(run: RunRecord, reason: str, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The carried state used when no handoff handler is installed: goal (the input), the next
    generation, the reason, and a bounded summary of what finished."""
    summary = ", ".join(sorted(outputs))[:2000]
    return {
        "goal": run.input,
        "generation": run.generation + 1,
        "reason": reason,
        "last_summary": f"Finished before the handoff: {summary}" if summary else "",
        "learnings": [],
    }


class UpstreamOutputs(Mapping[str, Any]):
    """``ctx.outputs``: the outputs of a node's upstream tasks, looked up lazily so building a
    context costs the same however large the graph is. A fan-out id gives the list of its
    outputs, a loop id a dict of its body outputs, a loop body id its last iteration's output;
    ``current`` holds the outputs of the running loop iteration."""

    def __init__(self, execution: RunExecution, top: str, current: Mapping[str, Any]) -> None:
        self._execution = execution
        self._top = top
        self._current = current

    @property
    def _allowed(self) -> frozenset[str]:
        # Computed on first use: most prompts read one or two outputs, some none at all.
        return self._execution.ancestors(self._top)

    def __getitem__(self, key: str) -> Any:
        if key in self._current:
            return self._current[key]
        workflow = self._execution.workflow
        top = workflow.owner_of(key)
        if top not in self._allowed or top not in self._execution.top_outputs:
            raise KeyError(key)
        value = self._execution.top_outputs[top]
        if top == key:
            return value
        if isinstance(value, dict) and key in value:
            return value[key]
        raise KeyError(key)

    def _keys(self) -> list[str]:
        keys = list(self._current)
        loops = self._execution.workflow.loops
        for top in self._allowed:
            if top in self._execution.top_outputs:
                keys.append(top)
                if top in loops:
                    keys.extend(loops[top].body)
        return keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True
