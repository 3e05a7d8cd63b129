"""Task cache steps of a node: looking up a cached output before an attempt and recording a hit
as a cached attempt (keys and freshness are the pure :mod:`engine.run.cache_key`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.run.cache_key import cache_key, is_fresh
from engine.run.carry import input_key
from engine.run.units import Unit
from engine.structured import to_jsonable
from engine.workflow.context import TaskContext
from engine.workflow.policies import CachePolicy
from engine.workflow.user_code import USER_CODE_ERRORS
from store.model.run_records import NewEvent

if TYPE_CHECKING:
    from engine.run.execution import RunExecution


async def lookup_cached_output(
    execution: RunExecution,
    unit: Unit,
    ctx: TaskContext,
    policy: CachePolicy,
    prompt: str,
    agent_name: str,
) -> tuple[str | None, Any]:
    """``(cache key, cached output)`` for a unit about to run: the output is None on a miss,
    the key None when the task's key function failed (then nothing is cached)."""
    try:
        key_value = policy.key(ctx) if policy.key else None
    except USER_CODE_ERRORS as error:
        await execution.store.append_event(
            "warning",
            run_id=execution.run_id,
            node_id=unit.node_id,
            iteration=unit.iteration,
            payload={"reason": f"cache key function failed, not caching: {error}"},
        )
        return None, None
    spec = unit.spec
    key = cache_key(
        scope=policy.scope,
        workflow=execution.workflow.name,
        run_id=execution.run_id,
        node_id=unit.node_id,
        iteration=unit.iteration,
        agent=agent_name,
        output_schema=spec.output.model_json_schema() if spec.output else None,
        version=policy.version,
        key_value=key_value,
        prompt=prompt if policy.include_prompt else None,
        input=to_jsonable(execution.input) if policy.include_input else None,
    )
    entry = await execution.cache.get(key)
    if entry is None or not is_fresh(entry.created_at_ms, entry.ttl_ms, execution.clock.now_ms()):
        return key, None
    if spec.output is None:
        return key, entry.payload
    try:
        return key, spec.output.model_validate(entry.payload)
    except Exception:
        # The cached payload no longer matches the output model: a miss, never a failure.
        await execution.cache.delete(key)
        await execution.store.append_event(
            "cache.invalid",
            run_id=execution.run_id,
            node_id=unit.node_id,
            iteration=unit.iteration,
            payload={"cache_key": key},
        )
        return key, None


async def record_cache_hit(
    execution: RunExecution,
    unit: Unit,
    attempt: int,
    agent_name: str,
    task_prompt: str,
    output: Any,
) -> None:
    """Record a cache hit as a finished, cached attempt of the node (with a ``cache.hit``
    event)."""
    left = await execution.store.start_attempt(
        execution.run_id,
        unit.node_id,
        unit.iteration,
        attempt,
        agent=agent_name,
        prompt=task_prompt,
        owner_id=execution.owner_id,
        cached=True,
    )
    execution.done_count += 1
    execution.finished_here += 1
    execution.absorb_requests(
        await execution.store.finish_attempt(
            execution.run_id,
            unit.node_id,
            unit.iteration,
            attempt,
            "finished",
            cached=True,
            node_state="finished",
            node_output=to_jsonable(output),
            set_node_output=True,
            nodes_done=execution.done_count,
            extra_events=[
                NewEvent("cache.hit", execution.run_id, unit.node_id, unit.iteration, attempt)
            ],
            input_key=input_key(
                agent_name,
                task_prompt,
                unit.spec.output.model_json_schema() if unit.spec.output else None,
            ),
            # A steer for the node's next attempt waits in vain: it is refused here.
            refuse_next_attempt=left > 0 or execution.steers.refuses_at_end(unit),
        )
    )
    execution.progress("node", unit, "finished", "cached")
