"""What every agent implements, and what it is handed for one attempt.

An agent takes a prompt (plus an optional output JSON Schema and tools) and returns text. It
reports every model call it makes through ``request.on_call`` as soon as the call ends, so the
engine records one ``calls`` row per call while the attempt is still running; the attempt's
authoritative total is the sum of those calls, written once when the attempt ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.agents.tools import AgentTool
from engine.artifacts import append_private_text, ensure_private_folder
from store.clock import SYSTEM_CLOCK, Clock
from store.run_records import TokenUsage


class AgentError(Exception):
    """An attempt failed inside the agent. ``retryable`` False stops further retries."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class ModelCall:
    """One model call's token usage as the provider reported it (already split into lanes)."""

    usage: TokenUsage
    model: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None


OnCall = Callable[[ModelCall], Awaitable[None]]


async def _ignore_call(call: ModelCall) -> None:
    return None


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
    repair: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def stream(self, text: str) -> None:
        """Append text to the attempt's stream log (if any), flushed so tails see it at once.

        The attempt folder and log are created by the first write (an agent that prints nothing
        costs no file-system work); failing to create them raises, loudly.
        """
        if self.stream_path is None or not text:
            return
        self.ensure_folder()
        append_private_text(self.stream_path, text)

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


class Agent(Protocol):
    """The agent interface (simulated, command, openai-compatible, anthropic, or your own)."""

    @property
    def name(self) -> str: ...

    @property
    def native_structured_output(self) -> bool: ...

    @property
    def simulated(self) -> bool: ...

    async def run(self, request: AgentRequest) -> AgentResult: ...


def tool_by_name(tools: Sequence[AgentTool], name: str) -> AgentTool | None:
    """The offered tool called ``name``, or None."""
    return next((t for t in tools if t.name == name), None)
