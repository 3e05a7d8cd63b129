"""Extension points the scheduler calls, so memory, ceilings and handoffs plug in without
changing scheduling code.

* :class:`MemoryHook` — called in the per-attempt *prepare prompt* step (recall block and
  memory tools) and after a task succeeds (retention). Implemented by ``engine.memory``.
* :class:`DispatchGuard` — asked before every attempt is dispatched (token ceilings, a person's
  ``/clear`` request). Returns a :class:`DispatchDecision`.
* :class:`HandoffHandler` — called once the scheduler has stopped dispatching because a guard
  (or a clear request) asked for a handoff; distils the run and starts its successor.
* ``on_progress`` — a plain callback receiving :class:`Progress` updates (the CLI prints them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from engine.agents.agent_tool import AgentTool
from store.model.run_records import RunRecord

DispatchAction = Literal["run", "warn", "skip", "fail", "handoff"]


@dataclass(frozen=True)
class NodeKey:
    """A node at one loop iteration."""

    node_id: str
    iteration: int = 0


@dataclass(frozen=True)
class DispatchDecision:
    """What to do with the attempt about to start.

    ``run``: go ahead. ``warn``: go ahead and record ``reason`` as a warning event. ``skip``:
    mark the node skipped. ``fail``: fail the node and the run with ``reason``. ``handoff``: stop
    dispatching, let running attempts finish, then hand the run off (``trigger`` says whether a
    ceiling or a person asked).
    """

    action: DispatchAction = "run"
    reason: str = ""
    trigger: Literal["ceiling", "person"] = "ceiling"
    details: Mapping[str, Any] = field(default_factory=dict)


RUN = DispatchDecision()


@dataclass(frozen=True)
class DispatchContext:
    """What a guard sees: the run as last read (token totals, clear request), the node and
    attempt about to start, the task's ceiling settings and the workflow's."""

    run: RunRecord
    node: NodeKey
    attempt: int
    workflow_ceiling: Any = None
    task_ceiling: Any = None


class DispatchGuard(Protocol):
    """Checked at task dispatch (before an attempt starts)."""

    async def check(self, context: DispatchContext) -> DispatchDecision: ...


class PreparedBlockLike(Protocol):
    """The part of the memory runtime's prepared block the scheduler needs."""

    @property
    def text(self) -> str | None: ...


class MemoryHook(Protocol):
    """The memory runtime as the scheduler uses it (see ``engine.memory``)."""

    async def block_for(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        attempt: int,
        config: Any,
        task_prompt: str,
    ) -> PreparedBlockLike: ...

    def tools_for(
        self, run_id: str, node_id: str, iteration: int, config: Any
    ) -> list[AgentTool]: ...

    def retain_in_background(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        config: Any,
        task_prompt: str,
        output: Any,
    ) -> None: ...


@dataclass(frozen=True)
class HandoffRequest:
    """Why and where the scheduler stopped, for the handoff handler."""

    run: RunRecord
    trigger: Literal["ceiling", "person"]
    reason: str
    outputs: Mapping[str, Any]
    workflow: Any = None


class HandoffHandler(Protocol):
    """Distils a stopped run and creates its successor; returns the new run id (or None when
    it decided not to continue)."""

    async def hand_off(self, request: HandoffRequest) -> str | None: ...


@dataclass(frozen=True)
class Progress:
    """A live progress update for the foreground display."""

    kind: str  # node | attempt | call | run | warning | cache
    node_id: str | None = None
    iteration: int = 0
    attempt: int | None = None
    state: str = ""
    detail: str = ""
    tokens: int = 0


ProgressCallback = Callable[[Progress], None]


@dataclass
class EngineHooks:
    """Everything optional the scheduler can call. All default to off."""

    memory: MemoryHook | None = None
    guards: list[DispatchGuard] = field(default_factory=list)
    handoff: HandoffHandler | None = None
    on_progress: ProgressCallback | None = None
