"""The state of one run being executed in this process, and the steps every part of a run
execution shares: progress reports, cancel/clear requests, the dispatch check, prompt
preparation and which upstream outputs a node may read.

:class:`RunExecution` is what :mod:`engine.run.node_attempts`, :mod:`engine.run.attempt`,
:mod:`engine.run.cached_output`, :mod:`engine.run.monitor`, :mod:`engine.run.run_end` and
:mod:`engine.run.upstream` work on; the scheduling loop that drives it is
:class:`engine.run.scheduled_run.ScheduledRun`. This module imports none of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable
from typing import Any

from engine.agents.agent import Agent
from engine.agents.registry import AgentRegistry
from engine.artifact_files import AttemptFolders, RunArtifacts
from engine.executors.executors import Executors
from engine.executors.remote_events import Placed
from engine.hooks import (
    DispatchContext,
    DispatchDecision,
    EngineHooks,
    NodeKey,
    Progress,
)
from engine.prompting import assemble_prompt
from engine.run.budget_meter import BudgetMeter
from engine.run.carry import Finished
from engine.run.engine_config import EngineConfig
from engine.run.steering import SteerWatch
from engine.run.units import Key, StopDispatch, Unit
from engine.workflow.definition import Workflow
from engine.workflow.task_spec import TaskSpec
from store.clock import Clock
from store.db.seam import Database
from store.errors import StorageError
from store.model.run_records import NodeRecord, RunRecord, RunRequests
from store.runs.run_store import RunStore
from store.runs.task_cache import TaskCache
from store.workspace.layout import Workspace


def _cancel_if_running(task: asyncio.Future[Any]) -> None:
    if not task.done():
        task.cancel()


@dataclasses.dataclass(frozen=True)
class EngineServices:
    """What a run execution uses of the engine that runs it."""

    store: RunStore
    cache: TaskCache
    config: EngineConfig
    hooks: EngineHooks
    owner_id: str
    clock: Clock
    workspace: Workspace
    registry: AgentRegistry
    db: Database
    interruption_wait_s: float
    """How long a run waits for the workspace to take writes again (engine.run.interruption)."""
    executors: Executors
    """Where attempts run: in this process, or a Ray cluster (engine.executors)."""


class RunExecution:
    """One run being executed: its definition, what is known of its nodes, and how it is
    going (failure, cancel, handoff, lost)."""

    def __init__(
        self, services: EngineServices, workflow: Workflow, run: RunRecord, parsed: Any
    ) -> None:
        self.services = services
        self.store = services.store
        self.cache = services.cache
        self.config = services.config
        self.owner_id = services.owner_id
        self.clock = services.clock
        self.hooks = services.hooks
        self.registry = services.registry
        self.workflow = workflow
        self.run = run
        self.run_id = run.run_id
        self.input = parsed
        self.artifacts_root = services.workspace.artifacts_dir
        self.artifacts = RunArtifacts(self.artifacts_root, self.run_id, self._stored_artifacts())
        self.attempt_folders = AttemptFolders(self.artifacts_root, self.run_id)
        self.prices = services.config.price_table  # built once per run, read by every call
        self.prior: dict[Key, NodeRecord] = {}
        self.outputs: dict[Key, Any] = {}
        self.top_outputs: dict[str, Any] = {}
        self.running: dict[asyncio.Task[Any], Unit] = {}
        self.pending_ends: set[asyncio.Future[RunRequests | None]] = set()
        self.done_count = 0
        self.failure: str | None = None
        self.storage_problem: StorageError | None = None
        """Set when the workspace stopped taking writes: the run stops and is interrupted."""
        self.cancelled = False
        self.lost = False
        self.cluster_changed = asyncio.Event()
        """Set when a Ray node running an attempt was lost: the cluster's nodes are re-read."""
        self.progress_failed = False
        self.stop: DispatchDecision | None = None
        self.continuation: Any = None
        self.fork = run.fork
        self.forked_from = run.forked_from
        """The node a fork starts from and its edit (engine.fork); None for other runs."""
        self.carried: dict[Key, Finished] = {}
        """What earlier generations of a handoff chain finished (engine.run.carry)."""
        self.finished_here = 0
        """Nodes this generation finished by running them (carried ones not counted)."""
        self.uncarried_tokens = 0
        """Tokens spent by finished nodes that run in every generation (``carry=False``)."""
        self.largest_attempt = 0
        """The most tokens one attempt of this run used (said when a run cannot fit)."""
        self.in_agent: dict[Key, asyncio.Future[Any]] = {}
        """The agent call of each attempt talking to an agent right now (engine.run.attempt)."""
        self.budget_stops: dict[Key, tuple[str, str]] = {}
        """Attempts a budget stopped: the reason and the state their node goes to."""
        self.meter = BudgetMeter(self)
        self.steers = SteerWatch(self.store, self.run_id)
        """The run's queued steers, polled by its monitor (engine.run.steering)."""
        self.top_ids = workflow.top_level_ids()
        self.top_deps = {n: workflow.top_level_deps(n) for n in self.top_ids}
        self.recorded_deps = {t: workflow.recorded_dependencies(t) for t in workflow.tasks}
        """What each task's node rows record as its dependencies, worked out once per run."""
        self.dependents: dict[str, list[str]] = {n: [] for n in self.top_ids}
        for node, deps in self.top_deps.items():
            for dep in deps:
                self.dependents[dep].append(node)
        # Ancestry as bitsets over top-level ids, kept only while someone may still need them:
        # a node's set is built from its dependencies' when it becomes ready, and dropped once
        # it is complete and every dependent has built its own. Memory stays flat per node
        # (no set of all ancestors per node for the whole run) and a lookup is one bit test.
        self._bit = {top: index for index, top in enumerate(self.top_ids)}
        self._ancestry: dict[str, int] = {}
        self._ancestry_users = {n: len(self.dependents[n]) + 1 for n in self.top_ids}

    def _stored_artifacts(self) -> Any:
        """On a PostgreSQL workspace, how a task reads an artifact another host wrote."""
        if self.services.db.backend != "postgresql":
            return None
        from store.runs.artifact_chunks import ArtifactChunks

        db: Any = self.services.db
        return ArtifactChunks(db).read_whole_now

    # -- which outputs a node may read ------------------------------------------------------

    def ancestry(self, top: str) -> int:
        """Every top-level node ``top`` depends on, directly or not, as a bitset over
        :attr:`top_ids` (see :meth:`may_read`)."""
        found = self._ancestry.get(top)
        if found is None:
            found = self._compute_ancestry(top)
        return found

    def may_read(self, ancestry: int, top: str) -> bool:
        """True when ``top`` is in the ``ancestry`` bitset."""
        bit = self._bit.get(top)
        return bit is not None and (ancestry >> bit) & 1 == 1

    def tops_in(self, ancestry: int) -> list[str]:
        """The top-level ids of an ``ancestry`` bitset, in declaration order."""
        return [top for top, bit in self._bit.items() if (ancestry >> bit) & 1]

    def _compute_ancestry(self, top: str) -> int:
        # Used when a set was already released (a context kept past its node's end): walk
        # the dependencies without memoising anything.
        found = 0
        stack = list(self.top_deps.get(top, ()))
        while stack:
            dep = stack.pop()
            bit = 1 << self._bit[dep]
            if not found & bit:
                found |= bit
                stack.extend(self.top_deps[dep])
        return found

    def node_ready(self, top: str) -> None:
        """``top``'s dependencies are all complete: build its ancestry from theirs."""
        if top in self._ancestry:
            return
        found = 0
        for dep in self.top_deps[top]:
            found |= self.ancestry(dep) | (1 << self._bit[dep])
        self._ancestry[top] = found
        for dep in self.top_deps[top]:
            self._release_ancestry(dep)

    def node_complete(self, top: str) -> None:
        """``top`` is complete: its own contexts are no longer built."""
        self._release_ancestry(top)

    def _release_ancestry(self, top: str) -> None:
        self._ancestry_users[top] -= 1
        if self._ancestry_users[top] <= 0:
            self._ancestry.pop(top, None)

    # -- reporting --------------------------------------------------------------------------

    def progress(
        self, kind: str, unit: Unit | None, state: str, detail: str = "", **kw: Any
    ) -> None:
        """Tell the ``on_progress`` hook (the CLI's progress lines) what just happened.

        The hook only watches: one that raises (a closed pipe, a bug) is logged once and not
        called again for this run, which goes on as if nobody watched."""
        callback = self.hooks.on_progress
        if callback is None or self.progress_failed:
            return
        try:
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
        except Exception as error:
            self.progress_failed = True
            logging.getLogger("tether.engine").warning(
                "Progress reports of run %s stopped: the hook raised %s: %s",
                self.run_id, type(error).__name__, error,
            )

    def halting(self) -> bool:
        """True once the run stops dispatching (failed, cancelled, handing off, lost, or the
        workspace stopped taking writes)."""
        return (
            self.failure is not None
            or self.cancelled
            or self.stop is not None
            or self.lost
            or self.storage_problem is not None
        )

    def load_output(self, spec: TaskSpec, value: Any) -> Any:
        """A stored output as the task's output type (kept as stored if it no longer fits)."""
        if spec.output is None or value is None:
            return value
        try:
            return spec.output.model_validate(value)
        except Exception:
            # A stored output from an older schema: keep the data rather than re-run the node.
            return value

    # -- requests: cancel and clear (polled by engine.run.monitor, read at each attempt end) -----

    def absorb_requests(self, requests: RunRequests | None) -> None:
        """Take in the cancel/clear requests read when an attempt ended."""
        if requests is None or (
            requests.cancel_requested_at_ms == self.run.cancel_requested_at_ms
            and requests.clear_requested_at_ms == self.run.clear_requested_at_ms
        ):
            return
        self.take_requests(
            self.run._replace(
                cancel_requested_at_ms=requests.cancel_requested_at_ms,
                clear_requested_at_ms=requests.clear_requested_at_ms,
                clear_reason=requests.clear_reason,
            )
        )

    def take_requests(self, run: RunRecord) -> None:
        """Act on the cancel/clear requests of ``run`` as just read (by the monitor's poll or
        at an attempt's end, whichever sees them first): a cancel stops every task and ends
        the run cancelled; a clear stops dispatching and hands off."""
        self.run = run
        if run.cancel_requested_at_ms is not None and not self.cancelled:
            self.cancelled = True
            self.progress("run", None, "cancelling")
            self.cancel_all()
        if run.clear_requested_at_ms is not None and self.stop is None:
            self.stop = DispatchDecision(
                "handoff", run.clear_reason or "cleared by a person", trigger="person"
            )
            self.progress("run", None, "handing-off", self.stop.reason)

    def acknowledge(
        self,
        unit: Unit,
        end: Awaitable[RunRequests | None],
        writes: list[Awaitable[None]],
        *,
        tokens: int,
        attempt: int,
    ) -> None:
        """A node's end is queued for the next group commit: once committed it counts as
        finished (the cancel/clear requests read in its transaction are taken in, progress
        says so); a write that failed fails the run. :meth:`settle_ends` waits for them."""
        future = asyncio.ensure_future(end)
        self.pending_ends.add(future)

        def committed(done: asyncio.Future[RunRequests | None]) -> None:
            self.pending_ends.discard(done)
            error = None if done.cancelled() else done.exception()
            for write in writes:  # committed before the end (submission order)
                if error is None and isinstance(write, asyncio.Future) and write.done():
                    error = None if write.cancelled() else write.exception()
            if done.cancelled() and error is None:
                return  # the loop is shutting down; the run stays resumable
            if error is not None:
                self.failure = self.failure or (
                    f"Recording the end of node {unit.node_id} failed: {error}"
                )
                return
            self.absorb_requests(done.result())
            self.progress("node", unit, "finished", tokens=tokens, attempt=attempt)

        future.add_done_callback(committed)

    async def settle_ends(self) -> None:
        """Wait until every queued node end is committed (before the run's own end)."""
        while self.pending_ends:
            await asyncio.gather(*self.pending_ends, return_exceptions=True)

    def stop_attempts(self, keys: list[Key], reason: str, node_state: str) -> None:
        """Stop the attempts of ``keys`` that are talking to an agent, for a budget: each is
        recorded cancelled with ``reason`` and its node goes to ``node_state``
        (engine.run.attempt)."""
        for key in keys:
            task = self.in_agent.get(key)
            if task is None or key in self.budget_stops or task.done():
                continue
            self.budget_stops[key] = (reason, node_state)
            # On the next loop turn: an agent that answers without waiting again (the call that
            # crossed the budget was its last) keeps its answer; any other stops there.
            asyncio.get_running_loop().call_soon(_cancel_if_running, task)

    def cancel_all(self) -> None:
        """Cancel every running task of this run (their attempts are recorded as cancelled)."""
        for task in self.running:
            task.cancel()

    # -- one attempt's steps ----------------------------------------------------------------

    def placed_agent(self, spec: TaskSpec, agent_name: str) -> Agent:
        """The agent an attempt of ``spec`` calls: the registry's, or a stand-in that runs it
        on the Ray cluster (engine.executors) and records where it ran."""
        agent = self.registry.get(agent_name)
        return self.services.executors.place(
            agent, self.workflow, spec, self._placed, self.cluster_changed.set
        )

    async def _placed(self, request: Any, placed: Placed) -> None:
        """A remote attempt started on a Ray node: record where, and say so."""
        await self.store.place_attempt(
            self.run_id,
            request.node_id,
            request.iteration,
            request.attempt,
            executor="ray",
            host=placed.host,
            executor_node=placed.node_id,
            address=placed.address,
        )
        callback = self.hooks.on_progress
        if callback is not None:
            callback(
                Progress(
                    kind="attempt",
                    node_id=request.node_id,
                    iteration=request.iteration,
                    attempt=request.attempt,
                    state="placed",
                    detail=f"on {placed.host} ({placed.address}, ray node {placed.node_id[:8]})",
                )
            )

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
        budget = await self.meter.dispatch_decision()
        if budget is not None:
            return budget
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

    def fork_edit(self, unit: Unit, name: str) -> str | None:
        """What a fork's edit gives ``unit`` instead (``prompt``, ``memory_block`` or
        ``agent``); None when this run is no fork, or not of this node, or that is unchanged.
        A fork from one fan-out copy (``review[api.py]``) edits that copy; its siblings run
        anew with their own prompts (a fork from the fan-out's id edits every copy)."""
        if self.fork is None or self.fork.get("node") != unit.spec.id:
            return None
        asked = self.fork.get("asked")
        if isinstance(asked, str) and asked != unit.spec.id and asked != unit.node_id:
            return None
        value = self.fork.get(name)
        return value if isinstance(value, str) else None

    async def save_edited_block(self, unit: Unit, attempt: int, block: str) -> None:
        """Record a fork's edited memory block as this attempt's block (the Memory tab and
        ``tether node`` show what the node really got; recall did not run for it)."""
        size = len(block.encode("utf-8", "surrogatepass"))
        await self.store.save_memory_block(
            self.run_id, unit.node_id, unit.iteration, attempt=attempt, text=block,
            budget_bytes=size, bytes_used=size,
            warning=f"edited in the fork of {self.forked_from}: recall did not run, this "
                    "block was given as is",
        )

    async def prepare_prompt(
        self, unit: Unit, agent: Agent, task_prompt: str, attempt: int, memory: Any
    ) -> tuple[str, list[Any]]:
        """Build the prompt actually sent, and the tools offered, for one attempt.

        MEMORY HOOK: when the task has a memory config and a memory runtime is installed, its
        recall block is placed first and its tools are offered; otherwise no block. Assembly
        itself is the pure :func:`engine.prompting.assemble_prompt`.
        """
        block: str | None = self.fork_edit(unit, "memory_block")
        tools: list[Any] = []
        runtime = self.hooks.memory
        if runtime is not None and memory is not None:
            if block is None:  # a fork's edited block replaces what recall would inject
                prepared = await runtime.block_for(
                    self.run_id, unit.node_id, unit.iteration, attempt, memory, task_prompt
                )
                block = prepared.text
            tools = list(runtime.tools_for(self.run_id, unit.node_id, unit.iteration, memory))
        if block is not None and self.fork_edit(unit, "memory_block") is not None:
            await self.save_edited_block(unit, attempt, block)
        schema = unit.spec.output.model_json_schema() if unit.spec.output else None
        prompt = assemble_prompt(
            task_prompt,
            memory_block=block,
            isolation_path=unit.spec.isolation,
            output_schema=schema,
            native_structured_output=agent.native_structured_output,
        )
        return prompt, tools
