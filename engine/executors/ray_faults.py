"""Ray's failures as attempt failures (pure: matched by class name along the exception's MRO,
so the mapping is tested without Ray installed).

A node that died, a raylet or worker that crashed, a lost object: the attempt fails with
"the Ray node running it was lost" and Tether's retry policy decides (Ray's own retries are
off). A runtime_env that cannot be set up, or a task no node can ever run, fails for good. A
cluster that stops answering interrupts the run (:class:`ExecutorUnavailable`): it stays
resumable.
"""

from __future__ import annotations

from engine.agents.agent import AgentError
from store.errors import StorageError

NODE_LOST = "the Ray node running it was lost"

_LOST = frozenset(
    {
        "NodeDiedError",
        "LocalRayletDiedError",
        "WorkerCrashedError",
        "ObjectLostError",
        "OwnerDiedError",
        "ObjectFetchTimedOutError",
        "ObjectReconstructionFailedError",
        "ObjectReconstructionFailedMaxAttemptsExceededError",
        "ObjectReconstructionFailedLineageEvictedError",
        "ReferenceCountingAssertionError",
        "ActorDiedError",
    }
)
_PERMANENT = {
    "RuntimeEnvSetupError": "the Ray node could not set up the task's runtime_env",
    "TaskUnschedulableError": "no Ray node can run it with the resources it asks for",
    "ActorUnschedulableError": "no Ray node can run it with the resources it asks for",
}
_UNREACHABLE = frozenset({"RaySystemError", "GetTimeoutError", "ConnectionError"})


class ExecutorUnavailable(StorageError):
    """The Ray cluster cannot be reached. Like a workspace that stopped taking writes, it
    stops the run, which is recorded as interrupted and stays resumable (exit code 3)."""


def _names(error: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(error).__mro__]


def _first_line(error: BaseException, limit: int = 300) -> str:
    text = str(error).strip().splitlines()
    line = text[0].strip() if text else type(error).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"


def is_node_lost(error: BaseException) -> bool:
    """True for the failures that mean the node (or the worker on it) is gone."""
    return any(name in _LOST for name in _names(error))


def attempt_failure(error: BaseException, where: str = "") -> AgentError | ExecutorUnavailable:
    """What a Ray failure of an attempt's task means for the attempt. ``where`` names the
    node it ran on, when known ("host vm, node 5094f00f")."""
    names = _names(error)
    suffix = f" ({where})" if where else ""
    if is_node_lost(error):
        return AgentError(f"{NODE_LOST}{suffix}", retryable=True)
    if "OutOfMemoryError" in names:
        return AgentError(f"the Ray node ran out of memory and stopped it{suffix}")
    for name in names:
        if name in _PERMANENT:
            return AgentError(f"{_PERMANENT[name]}: {_first_line(error)}", retryable=False)
    if "TaskCancelledError" in names:
        return AgentError(f"its Ray task was cancelled outside Tether{suffix}")
    if any(name in _UNREACHABLE for name in names):
        reason = f"the Ray cluster stopped answering ({_first_line(error)})"
        return ExecutorUnavailable(f"The run stopped because {reason}.", reason)
    return AgentError(f"its Ray task failed: {type(error).__name__}: {_first_line(error)}")
