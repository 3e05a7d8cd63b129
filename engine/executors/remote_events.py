"""What a remote attempt streams back to the orchestrating process while it runs (pure data,
pickled by Ray): where it runs, each model call as it ends, new bytes of its artifact files,
tool calls the orchestrator answers, and how it ended. The orchestrator records each exactly
as it would for a local attempt (:mod:`engine.executors.ray_agent`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.agents.agent import AgentResult, ModelCall


@dataclass(frozen=True)
class Placed:
    """The attempt started on this Ray node (its id, host name and address) in process
    ``pid``."""

    node_id: str
    host: str
    address: str
    pid: int


@dataclass(frozen=True)
class CallEnded:
    """A model call ended (the agent's ``on_call``)."""

    call: ModelCall


@dataclass(frozen=True)
class FileBytes:
    """New bytes of the attempt's artifact files, by name relative to the attempt folder
    (``stream.log``, ``stderr.log``, ...), in the order they were written."""

    chunks: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ToolCalled:
    """The agent called an offered tool; the orchestrator runs it and answers ``call_id``."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Ended:
    """The agent returned (``result``) or raised (``error``); ``details`` is what it put in
    the request's details (command line, session id, cost per model)."""

    result: AgentResult | None = None
    error: BaseException | None = None
    details: dict[str, Any] = field(default_factory=dict)


RemoteEvent = Placed | CallEnded | FileBytes | ToolCalled | Ended


def portable_error(error: BaseException) -> BaseException:
    """``error`` if it survives pickling, else an AgentError saying what was raised (an
    exception holding a socket or a lock cannot cross to the orchestrator)."""
    import pickle

    from engine.agents.agent import AgentError

    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return AgentError(f"the agent raised {type(error).__name__}: {error}")
    return error
