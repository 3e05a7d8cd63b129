"""The engine: one per process (it owns an ``owner_id``), executing workflows against one
workspace database.

:meth:`Engine.start` creates a run and executes it, :meth:`Engine.resume` continues one,
:meth:`Engine.run_claimed` executes a run claimed from the queue, :meth:`Engine.fork` records a
fork of a run from one of its nodes (``engine.fork``) and :meth:`Engine.run_chain`
follows handoffs. Before anything is written, :meth:`Engine.prepare` checks the definition,
every task's memory config and agent, and the ceiling. The loop of one run is
:class:`~engine.run.scheduled_run.ScheduledRun`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from engine.agents.agent import refusal as agent_refusal
from engine.agents.agent import supports_tools
from engine.agents.registry import AgentRegistry
from engine.ceiling import CeilingGuard, ceiling_of
from engine.executors.executors import Executors, check_placement
from engine.fork import ForkEdit, create_fork
from engine.hooks import EngineHooks
from engine.run.engine_config import EngineConfig
from engine.run.execution import EngineServices
from engine.run.interruption import INTERRUPTION_WAIT_S
from engine.run.run_end import RunOutcome
from engine.run.scheduled_run import ScheduledRun
from engine.run.task_settings import memory_is_active, task_agent_name, task_memory
from engine.structured import to_jsonable
from engine.workflow.definition import Workflow
from engine.workflow.root_prompts import check_root_prompts
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.run_records import RunRecord
from store.runs.owners import new_owner_id, running_elsewhere
from store.runs.run_store import RunStore
from store.runs.task_cache import TaskCache


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
        """How long a run waits for the workspace to take writes again (engine.run.interruption)."""
        self.executors = Executors(self.config.execution)
        """Where attempts run: in this process, or the Ray cluster (connected once)."""

    def prepare(self, workflow: Workflow) -> None:
        """Validate the definition, every task's memory config and its agent, before running."""
        workflow.validate()
        # A bad ceiling is a definition error, not a dispatch crash; an unenforced one is refused.
        if ceiling_of(workflow.ceiling) is not None and not any(
            isinstance(guard, CeilingGuard) for guard in self.hooks.guards
        ):
            raise InvalidInputError(
                f"Workflow {workflow.name!r} has a token ceiling but this engine enforces none; "
                "open it with engine.open_engine (or add engine.CeilingGuard)."
            )
        registry = self.registry_for(workflow)
        configs: list[Any] = []
        agents = {s.id: registry.get(task_agent_name(s, workflow)) for s in workflow.tasks.values()}
        check_placement(self.config.execution, workflow, agents, self.db.backend)
        for spec in workflow.tasks.values():
            memory = task_memory(spec, workflow)
            if memory_is_active(memory) and self.hooks.memory is None:
                # Memory that nothing reads or writes would be a silent no-op: refuse it.
                raise InvalidInputError(
                    f"Task {spec.id!r} has a memory config but this engine has no memory "
                    "runtime; open it with engine.open_engine (or pass "
                    "EngineHooks(memory=MemoryRuntime(db)))."
                )
            if memory is not None:
                configs.append(memory)
            agent_name = task_agent_name(spec, workflow)
            agent = registry.get(agent_name)
            if getattr(memory, "tools", False) and not supports_tools(agent):
                # The prompt would say "use the remember tool" and nothing would be saved.
                raise InvalidInputError(
                    f"Task {spec.id!r} offers memory tools but agent {agent_name!r} cannot take "
                    "tools (a command agent takes them only with the claude-code or codex "
                    "preset); set tools=False or use another agent."
                )
            schema = spec.output.model_json_schema() if spec.output is not None else None
            problem = agent_refusal(agent, schema)
            if problem is not None:
                raise InvalidInputError(
                    f"Task {spec.id!r} cannot run on agent {agent_name!r}: {problem}."
                )
        warm_up = getattr(self.hooks.memory, "warm_up", None)
        if warm_up is not None and configs:
            # The encoder loads while the run starts, so the first recall is hybrid.
            with contextlib.suppress(RuntimeError):  # no running loop: the first recall loads
                warm_up(configs)

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
            executors=self.executors,
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

    async def fork(
        self,
        workflow: Workflow,
        origin_id: str,
        node_id: str,
        edit: ForkEdit,
        *,
        workflow_path: str | None = None,
    ) -> RunRecord:
        """Record a fork of ``origin_id`` from ``node_id`` with ``edit`` as a pending run
        (:func:`engine.fork.create_fork`; the workflow is checked first); :meth:`resume`
        executes it. A refusal raises InvalidInputError and writes nothing."""
        self.prepare(workflow)
        return await create_fork(
            self.store, workflow, origin_id, node_id, edit,
            agents=self.registry_for(workflow).names(), workflow_path=workflow_path,
        )

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
        # Ownership, not heartbeat age: a live owner keeps its run (store/runs/owners.py).
        refusal = running_elsewhere(run, self.db.clock.now_ms(), self.owner_id)
        if refusal is not None:
            raise InvalidInputError(refusal)
        self.prepare(workflow)
        parsed = workflow.parse_input(run.input)
        claimed = await self.store.claim_run(run_id, self.owner_id, expected_owner=run.owner_id)
        return await self._execution(workflow, claimed, parsed).execute()

    async def run_claimed(self, workflow: Workflow, run: RunRecord) -> RunOutcome:
        """Execute a run this process has just claimed from the queue (``store.runs.run_queue``):
        its lease token is registered, so every write is fenced; finished nodes are reused."""
        self.prepare(workflow)
        parsed = workflow.parse_input(run.input)
        return await self._execution(workflow, run, parsed).execute()

    async def run_chain(self, workflow: Workflow, outcome: RunOutcome) -> RunOutcome:
        """Follow handoffs: keep executing successor runs until one ends without handing off."""
        while outcome.status == "handed-off" and outcome.next_run_id:
            outcome = await self.resume(workflow, outcome.next_run_id)
        return outcome
