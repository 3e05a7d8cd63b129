"""The Ray cluster as this process uses it: connected once (a bounded probe first, so a
cluster that cannot be reached is one sentence, never a hang), the remote attempt function,
the actor tool calls are answered through, the cluster's nodes, and the reaper.

Ray is imported here only, and only when a task is placed on Ray (the ``ray`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any

from engine.executors.ray_faults import ExecutorUnavailable
from engine.executors.settings import probe_target
from store.errors import InvalidInputError
from store.model.executor_records import NodeSighting

PROBE_S = 5.0
"""How long the cluster's address gets to accept a connection."""
REAP_S = 30.0
"""How long the reaper gets on every node before the run goes on without its answer."""
RAY_MISSING = (
    "Tasks placed on Ray need Ray on this host: pip install '.[ray]' "
    "(or set [execution] backend = \"in-process\")."
)


def import_ray() -> Any:
    """The ``ray`` module, or InvalidInputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InvalidInputError(RAY_MISSING) from None
    return ray


def unreachable(address: str, why: str) -> ExecutorUnavailable:
    """The one sentence for a cluster that cannot be reached."""
    reason = f"the Ray cluster at {address} cannot be reached ({why})"
    return ExecutorUnavailable(f"Cannot start: {reason}.", reason)


class ToolReplies:
    """An async actor holding the orchestrator's answers to remote tool calls until the
    remote attempt takes them (one per orchestrating process, on its node)."""

    def __init__(self) -> None:
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def _slot(self, call_id: str) -> asyncio.Future[dict[str, Any]]:
        slot = self.answers.get(call_id)
        if slot is None:
            slot = asyncio.get_running_loop().create_future()
            self.answers[call_id] = slot
        return slot

    async def put(self, call_id: str, answer: dict[str, Any]) -> None:
        slot = self._slot(call_id)
        if not slot.done():
            slot.set_result(answer)

    async def take(self, call_id: str) -> dict[str, Any]:
        try:
            return await self._slot(call_id)
        finally:
            self.answers.pop(call_id, None)


class RayCluster:
    """One process's connection to a Ray cluster (see the module docstring)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.ray: Any = None
        self._remote: Any = None
        self._reaper: Any = None
        self._replies: Any = None
        self._lock = asyncio.Lock()
        self.lost: set[str] = set()
        """Nodes an attempt was lost on: shown lost even while Ray's health check still
        counts them alive (a Ray node id never comes back once its raylet died)."""

    def node_lost(self, node_id: str) -> None:
        """An attempt running on ``node_id`` was lost with its node."""
        if node_id:
            self.lost.add(node_id)

    @property
    def connected(self) -> bool:
        return self.ray is not None

    async def connect(self) -> None:
        """Connect (once per process); :class:`ExecutorUnavailable` when it cannot be."""
        async with self._lock:
            if self.ray is None:
                await asyncio.to_thread(self._connect_now)

    def _connect_now(self) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            target = probe_target(self.address)
            if target is not None:
                try:
                    socket.create_connection(target, timeout=PROBE_S).close()
                except OSError as error:
                    raise unreachable(self.address, error.strerror or str(error)) from None
            _quiet_driver()
            try:
                ray.init(
                    address=self.address,
                    log_to_driver=False,
                    logging_level="ERROR",
                    namespace="tether",
                )
            except Exception as error:  # ConnectionError, a version mismatch, ...
                first = str(error).strip().splitlines()
                raise unreachable(self.address, first[0] if first else type(error).__name__) \
                    from None
        self._remote, self._reaper = _remote_functions(ray)
        self.ray = ray

    def submit(self, job: Any, options: dict[str, Any]) -> Any:
        """Start one attempt's Ray task; returns its streaming generator."""
        return self._remote.options(**options).remote(job)

    def cancel(self, task: Any) -> None:
        """Ask Ray to stop an attempt's task (its agent is cancelled on the node). A task that
        already ended, or whose node is gone, has nothing left to stop."""
        with contextlib.suppress(Exception):
            self.ray.cancel(task)

    def replies(self) -> Any:
        """The tool-answer actor of this process (created on first use, on this node)."""
        if self._replies is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = self.ray.get_runtime_context().get_node_id()
            actor = self.ray.remote(ToolReplies).options(
                num_cpus=0,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True),
            )
            self._replies = actor.remote()
        return self._replies

    async def nodes(self) -> list[NodeSighting]:
        """The cluster's nodes now, with what each offers and has free."""
        return await asyncio.to_thread(self._nodes_now)

    def _nodes_now(self) -> list[NodeSighting]:
        try:
            from ray._private.state import available_resources_per_node

            free: dict[str, dict[str, float]] | None = available_resources_per_node()
        except Exception:  # a private API: when it moves, availability is unknown
            free = None
        sightings = []
        for node in self.ray.nodes():
            node_id = str(node.get("NodeID", ""))
            totals = _visible(node.get("Resources") or {})
            available = None if free is None else _visible(free.get(node_id, {}))
            alive = bool(node.get("Alive")) and node_id not in self.lost
            sightings.append(
                NodeSighting(
                    node_id=node_id,
                    host=str(node.get("NodeManagerHostname") or "?"),
                    address=str(node.get("NodeManagerAddress") or ""),
                    alive=alive,
                    resources=totals,
                    available=available if alive else None,
                )
            )
        return sightings

    async def reap(self, run_id: str) -> dict[str, list[int]]:
        """Stop every process of ``run_id`` left on any alive node (see
        :mod:`engine.executors.reaper`); returns the pids stopped per node id."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n.node_id for n in await self.nodes() if n.alive]
        refs = {
            node_id: self._reaper.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(run_id)
            for node_id in alive
        }
        stopped: dict[str, list[int]] = {}
        for node_id, ref in refs.items():
            try:
                pids = await asyncio.wait_for(asyncio.wrap_future(ref.future()), REAP_S)
            except Exception:
                continue  # a node that does not answer keeps its leftovers: said in the event
            if pids:
                stopped[node_id] = list(pids)
        return stopped


def _quiet_driver() -> None:
    """Ray's driver prints the cluster's error messages (a raylet that died, a worker that
    crashed, with pages of the raylet's log) straight to this process's stdout, through the
    dashboard's screen and into `tether run`'s JSON output. Tether reports those faults itself
    (the attempt's error, the cluster line), so they go to the ``ray`` logger instead. Ray
    looks the printer up by name on every message, so replacing it before ``ray.init`` is
    enough; a Ray without it (a private name) prints as before."""
    try:
        from ray._private import worker
    except ImportError:
        return
    if not hasattr(worker, "print_to_stdstream"):
        return
    log = logging.getLogger("ray")

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for line in data.get("lines") or ():
            log.info("%s: %s", data.get("pid", "ray"), line)

    worker.print_to_stdstream = to_log


_REMOTE: dict[str, Any] = {}
"""The remote functions, made once per process: every engine of the process (a dashboard
starts one per run) then shares them, so Ray exports them to the workers once."""


def _remote_functions(ray: Any) -> tuple[Any, Any]:
    """The remote attempt and the reaper as Ray remote functions."""
    if not _REMOTE:
        from engine.executors.ray_runner import run_remote_attempt
        from engine.executors.reaper import reap_run

        _REMOTE["attempt"] = ray.remote(run_remote_attempt)
        _REMOTE["reaper"] = ray.remote(reap_run)
    return _REMOTE["attempt"], _REMOTE["reaper"]


def _visible(resources: dict[str, Any]) -> dict[str, float]:
    """A node's resources without Ray's bookkeeping entries (``node:<ip>``, the head marker)
    and with object store memory left out (it is not something a task asks for here)."""
    return {
        str(name): float(amount)
        for name, amount in resources.items()
        if not str(name).startswith("node:") and name != "object_store_memory"
        and isinstance(amount, int | float)
    }
