"""What a run whose tasks go to a Ray cluster does around its scheduling loop: connect before
the first dispatch (a cluster that cannot be reached interrupts the run, resumable, in one
sentence), stop what a previous orchestrator's attempts left running before a resumed or
claimed run dispatches anything, and keep the cluster's nodes in the workspace while it runs
(the dashboard shows them; attempts record the node that ran them)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from engine.executors.ray_cluster import RayCluster
from store.errors import StorageError
from store.model.wording import plural

if TYPE_CHECKING:
    from engine.run.execution import RunExecution

EXECUTOR = "ray"


async def prepare_cluster(execution: RunExecution, *, fresh: bool) -> RayCluster | None:
    """Connect to the cluster when a task of the run is placed there (None otherwise); a
    resumed run first stops its leftovers on every node. ExecutorUnavailable (a StorageError:
    the run is recorded interrupted) when the cluster cannot be reached."""
    executors = execution.services.executors
    if not executors.uses_ray(execution.workflow):
        return None
    cluster = executors.cluster
    await cluster.connect()
    await record_nodes(execution, cluster)
    if not fresh:
        stopped = await cluster.reap(execution.run_id)
        if stopped:
            count = sum(len(pids) for pids in stopped.values())
            await execution.store.append_event(
                "executor.reaped",
                run_id=execution.run_id,
                payload={"executor": EXECUTOR, "processes": count, "nodes": stopped},
            )
            execution.progress(
                "warning", None, "warn",
                f"stopped {plural(count, 'process', 'processes')} an earlier attempt left on the "
                "Ray cluster",
            )
    return cluster


async def record_nodes(execution: RunExecution, cluster: RayCluster) -> None:
    """Write the cluster's nodes as they are now (storage errors stop the run as usual;
    a cluster that does not answer this once is skipped)."""
    try:
        nodes = await cluster.nodes()
    except StorageError:
        raise
    except Exception:
        return
    await execution.store.record_executor_nodes(EXECUTOR, nodes)


async def watch_cluster(execution: RunExecution, cluster: RayCluster) -> None:
    """Until cancelled: the cluster's nodes, every heartbeat interval and at once when an
    attempt's node was lost."""
    changed = execution.cluster_changed
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), execution.config.heartbeat_interval_s)
        changed.clear()
        with contextlib.suppress(Exception):
            await record_nodes(execution, cluster)
