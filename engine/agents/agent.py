"""What every agent implements, and what it is handed for one attempt.

An agent takes a prompt (plus an optional output JSON Schema and tools) and returns text. It
reports every model call it makes through ``request.on_call`` as soon as the call ends, so the
engine records one ``calls`` row per call while the attempt is still running; the attempt's
authoritative total is the sum of those calls, written once when the attempt ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.agents.agent_tool import AgentTool
from engine.artifact_files import append_private_text, ensure_private_folder
from engine.pricing import PriceTable
from store.clock import SYSTEM_CLOCK, Clock
from store.model.secret_mask import process_mask
from store.model.token_lanes import TokenUsage


class AgentError(Exception):
    """An attempt failed inside the agent.

    ``retryable`` False marks a permanent failure (bad model, quota, auth, max turns): the node
    fails at once. A transient one is retried by the engine with the task's backoff, waiting
    at least ``retry_after_s`` when the provider said how long to wait. ``limit`` marks a
    subscription or usage limit (never retried at once): the engine waits for
    ``resets_at_ms`` when it is near, and otherwise fails saying when the limit resets.
    ``session_id`` is the agent CLI session the failed invocation ran in (a retry resumes it).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        retry_after_s: float | None = None,
        limit: bool = False,
        resets_at_ms: int | None = None,
        session_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable and not limit
        self.retry_after_s = retry_after_s
        self.limit = limit
        self.resets_at_ms = resets_at_ms
        self.session_id = session_id


def failure_error(
    message: str,
    kind: str,
    *,
    resets_at_ms: int | None = None,
    retry_after_s: float | None = None,
    session_id: str | None = None,
) -> AgentError:
    """The AgentError for a failure of ``kind`` (permanent, transient or limit; see
    :mod:`engine.agents.failures`)."""
    return AgentError(
        message,
        retryable=kind == "transient",
        retry_after_s=retry_after_s,
        limit=kind == "limit",
        resets_at_ms=resets_at_ms,
        session_id=session_id,
    )


@dataclass(frozen=True)
class ModelCall:
    """One model call's token usage as the provider reported it (already split into lanes).

    ``cost_usd`` is what the provider reported the call cost, or None to let the engine price
    it from its price table. ``kind`` is ``model``, ``retry`` (a request the agent retried:
    no tokens) or ``reconciliation`` (session totals beyond the per-message calls, or a whole
    turn that cannot be split into calls); ``detail`` explains a retry or a reconciliation.
    ``usage_known`` False marks a call whose server reported no usage: its lanes are zero and
    its cost is unknown, never $0. ``cache_write_1h`` says how many of the cache-write tokens
    had the 1-hour TTL (priced at their own rate).
    """

    usage: TokenUsage
    model: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    cost_usd: float | None = None
    kind: str = "model"
    detail: dict[str, Any] | None = None
    cache_write_1h: int = 0
    usage_known: bool = True


OnCall = Callable[[ModelCall], Awaitable[None]]
MAX_WARNINGS = 20
"""The most warnings one attempt keeps (more are counted in ``warnings_dropped``)."""


async def _ignore_call(call: ModelCall) -> None:
    return None


class Steer(Protocol):
    """A person's message for the running attempt (``tether steer``, ``m``)."""

    @property
    def message(self) -> str: ...


class SteerInbox(Protocol):
    """What an agent that takes messages mid-run (``takes_steers``) reads them from: each
    steer arrives on ``queue``; the agent calls ``deliver`` right before it hands the message
    over, and hands it over only when that returns True (so none is delivered twice)."""

    queue: asyncio.Queue[Any]

    async def deliver(self, steer: Any) -> bool: ...

    async def waiting(self) -> list[Any]:
        """Every steer waiting now (the queue and the database read again)."""
        ...


async def steers_for_next_turn(request: AgentRequest) -> list[str]:
    """The messages waiting for an agent's next turn (an HTTP agent's tool loop), each marked
    delivered first: none is sent twice, and one already decided is left out."""
    inbox = request.steers
    if inbox is None:
        return []
    taken = []
    for steer in await inbox.waiting():
        if await inbox.deliver(steer):
            taken.append(steer.message)
            request.details.setdefault("steers_delivered", []).append(steer.steer_id)
    return taken


@dataclass
class AgentRequest:
    """One attempt's input to an agent."""

    prompt: str
    run_id: str = ""
    node_id: str = ""
    iteration: int = 0
    attempt: int = 1
    output_schema: dict[str, Any] | None = None
    tools: Sequence[AgentTool] = ()
    stream_path: Path | None = None
    on_call: OnCall = _ignore_call
    clock: Clock = SYSTEM_CLOCK
    prices: PriceTable = field(default_factory=PriceTable)
    """The price table the engine records calls with (agents that price a call themselves,
    before its reported cost is known, use the same one)."""
    repair: bool = False
    resume_session: str | None = None
    """The agent session to continue (a repair turn, or a retry after a transient failure);
    agents that cannot resume one ignore it."""
    resume_prompt: str | None = None
    """What to send instead of ``prompt`` when ``resume_session`` is continued (the session
    already holds the task; None: send ``prompt``)."""
    max_budget_usd: float | None = None
    """Dollars this attempt may still spend before a budget stops it (agents that can cap
    their own spending take it as a second line of defence; None: no dollar budget)."""
    steers: SteerInbox | None = None
    """Messages a person sends while the attempt runs (engine.run.steering); None: none can
    be taken (the agent does not take input mid-run)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    """What the agent passed and learned during the attempt (command line, session id, cost
    per model); stored with the attempt and shown by ``tether node``. Shared by a repair."""

    def stream(self, text: str) -> None:
        """Append text to the attempt's stream log (if any), flushed so tails see it at once,
        with secrets masked (:mod:`store.model.secret_mask`).

        The attempt folder and log are created by the first write (an agent that prints nothing
        costs no file-system work); failing to create them raises, loudly.
        """
        if self.stream_path is None or not text:
            return
        self.ensure_folder()
        append_private_text(self.stream_path, process_mask().mask(text))

    def warn(self, message: str) -> None:
        """Record a warning about this attempt (shown on the node by the dashboard and
        ``tether node``; at most :data:`MAX_WARNINGS`, each once) and note it in the log."""
        warnings = self.details.setdefault("warnings", [])
        if message in warnings:
            return
        if len(warnings) < MAX_WARNINGS:
            warnings.append(message)
        else:
            self.details["warnings_dropped"] = int(self.details.get("warnings_dropped", 0)) + 1
        self.stream(f"\n[warning] {message}\n")

    def ensure_folder(self) -> Path | None:
        """Create the attempt's artifact folder (owner-only) and return it."""
        if self.stream_path is None:
            return None
        return ensure_private_folder(self.stream_path.parent)


@dataclass
class AgentResult:
    """What an agent returns: its final text, and the parsed object when the provider returned
    structured output natively."""

    text: str
    output: Any = None
    model: str | None = None
    session_id: str | None = None


class Agent(Protocol):
    """The agent interface (simulated, command, openai-compatible, anthropic, or your own)."""

    @property
    def name(self) -> str: ...

    @property
    def native_structured_output(self) -> bool: ...

    @property
    def simulated(self) -> bool: ...

    async def run(self, request: AgentRequest) -> AgentResult: ...


def supports_tools(agent: Any) -> bool:
    """Whether ``agent`` can offer the memory tools to its model (agents say so with a
    ``supports_tools`` attribute; those without one are assumed to)."""
    return bool(getattr(agent, "supports_tools", True))


def calls_model(calls: Sequence[ModelCall]) -> str | None:
    """The model an attempt's calls mostly used (by tokens; the first seen on a tie), for an
    attempt whose agent config names none; None when no call names one."""
    weight: dict[str, int] = {}
    for call in calls:
        if call.model and call.kind != "retry":
            weight[call.model] = weight.get(call.model, 0) + call.usage.total
    return max(weight, key=lambda name: weight[name]) if weight else None


def refusal(agent: Any, output_schema: dict[str, Any] | None) -> str | None:
    """Why ``agent`` cannot take a task with ``output_schema`` (agents say so with a
    ``refusal`` method; those without one take any), or None."""
    check = getattr(agent, "refusal", None)
    return check(output_schema) if callable(check) else None


def tool_by_name(tools: Sequence[AgentTool], name: str) -> AgentTool | None:
    """The offered tool called ``name``, or None."""
    return next((t for t in tools if t.name == name), None)
