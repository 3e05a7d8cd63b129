"""The attempts of one node: the dispatch check before each, the task cache, the agent call,
retries with the task's backoff, then caching and retaining the output."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from engine.agents.agent import AgentError
from engine.fork import edited_task_prompt
from engine.run.attempt import Resume, record_failed_attempt, run_attempt
from engine.run.cached_output import lookup_cached_output, record_cache_hit
from engine.run.carry import input_key
from engine.run.execution import RunExecution
from engine.run.retry_plan import plan_retry
from engine.run.task_settings import memory_is_active, task_agent_name, task_memory
from engine.run.units import NodeSkipped, StopDispatch, Unit, UnitFailed
from engine.run.upstream import task_context
from engine.structured import to_jsonable
from engine.workflow.context import TaskContext
from engine.workflow.user_code import USER_CODE_ERRORS, raised
from store.model.wording import plural


class Slots(Protocol):
    """The concurrency limit as a node's attempts use it (the scheduling loop holds it): the
    semaphore every agent call waits for, and the place a waiting retry gives back."""

    @property
    def semaphore(self) -> asyncio.Semaphore: ...

    def park(self) -> None:
        """The current task waits out a backoff: its place goes to a waiting unit."""

    def unpark(self) -> None:
        """The backoff is over: the current task holds a place again."""


async def run_node(execution: RunExecution, unit: Unit, slots: Slots) -> Any:
    """Run ``unit`` to its end: each attempt after the dispatch check (a guard may skip it,
    fail it or stop dispatching), from the task cache when it may, on the agent otherwise;
    retries wait out the task's backoff with their place under the concurrency limit given
    back (a limit's reset is waited for when near, :mod:`engine.run.retry_plan`), and a retry
    of an agent CLI resumes the failed attempt's session. Returns the output (then cached and
    retained); raises to end the unit otherwise."""
    spec = unit.spec
    prior = execution.prior.get(unit.key)
    attempt = (prior.attempts if prior else 0) + 1
    failures = 0
    limit_waits = 0
    resume: Resume | None = None
    agent_name = execution.fork_edit(unit, "agent") or task_agent_name(spec, execution.workflow)
    agent = execution.placed_agent(spec, agent_name)
    memory = task_memory(spec, execution.workflow)
    policy = spec.cache or execution.workflow.cache
    carried = await _carry_over(execution, unit, agent_name, attempt)
    if carried is not _NOT_CARRIED:
        return carried
    while True:
        decision = await execution.dispatch_check(unit, attempt)
        if decision.action == "handoff":
            execution.stop = execution.stop or decision
            raise StopDispatch(decision.reason)
        if decision.action == "skip":
            execution.done_count += 1
            await execution.store.upsert_node(
                execution.run_id,
                unit.node_id,
                unit.iteration,
                "skipped",
                error=decision.reason,
                nodes_done=execution.done_count,
            )
            execution.progress("node", unit, "skipped", decision.reason)
            raise NodeSkipped(decision.reason)
        if decision.action == "fail":
            await execution.store.upsert_node(
                execution.run_id, unit.node_id, unit.iteration, "failed", error=decision.reason
            )
            execution.progress("node", unit, "failed", decision.reason)
            raise UnitFailed(decision.reason)
        ctx = task_context(execution, unit, attempt)
        task_prompt = await _render(execution, unit, ctx)
        cache_id: str | None = None
        if policy is not None and not memory_is_active(memory):
            cache_id, hit = await lookup_cached_output(
                execution, unit, ctx, policy, task_prompt, agent_name
            )
            if hit is not None:
                await record_cache_hit(execution, unit, attempt, agent_name, task_prompt, hit)
                return hit
        async with slots.semaphore:
            if execution.halting():
                raise StopDispatch("the run is stopping")
            try:
                output = await run_attempt(
                    execution, unit, attempt, agent, agent_name, task_prompt, memory, resume
                )
                break
            except AgentError as error:
                counted = failures + (0 if error.limit else 1)
                plan = plan_retry(
                    error,
                    failures=counted,
                    retries=spec.retries,
                    limit_waits=limit_waits,
                    backoff_s=spec.backoff.delay_for(counted),
                    now_ms=execution.clock.now_ms(),
                    limit_wait_s=execution.config.limit_wait_s,
                    can_resume=bool(getattr(agent, "resumes_sessions", False)),
                )
                failures, limit_waits = counted, limit_waits + int(plan.waits_for_limit)
                if plan.why_not:
                    error.args = (f"{error} — {plan.why_not}",)
                if plan.retry and execution.stop is not None and not (
                    execution.failure or execution.cancelled or execution.lost
                ):
                    # The run is handing off: the successor runs this node again.
                    await record_failed_attempt(
                        execution, unit, attempt, error, False, node_state="pending"
                    )
                    raise StopDispatch(execution.stop.reason) from error
                retry = plan.retry and not execution.halting()
                await record_failed_attempt(execution, unit, attempt, error, retry)
                if not retry:
                    raise UnitFailed(
                        f"Node {unit.node_id} failed after {plural(attempt, 'attempt')}: {error}"
                    ) from error
                resume = (
                    Resume(plan.resume_session, attempt, str(error))
                    if plan.resume_session
                    else None
                )
        delay = plan.wait_s
        execution.progress(
            "node",
            unit,
            "retrying",
            f"waiting {delay:.0f}s for the limit to reset" if plan.waits_for_limit
            else f"in {delay:.1f}s",
        )
        slots.park()
        try:
            await asyncio.sleep(delay)
        finally:
            slots.unpark()
        attempt += 1
    if cache_id is not None and policy is not None:
        await execution.cache.put(
            cache_id,
            scope=policy.scope,
            workflow=execution.workflow.name,
            node_id=unit.node_id,
            run_id=execution.run_id,
            payload=to_jsonable(output),
            ttl_ms=policy.ttl_ms,
        )
    if execution.hooks.memory is not None and memory is not None:
        # MEMORY HOOK: retention runs in the background; it never delays the next task.
        execution.hooks.memory.retain_in_background(
            execution.run_id, unit.node_id, unit.iteration, memory, task_prompt, output
        )
    return output


_NOT_CARRIED = object()


async def _carry_over(
    execution: RunExecution, unit: Unit, agent_name: str, attempt: int
) -> Any:
    """Take the node over from an earlier generation of the chain when it finished there with
    the same inputs (``engine.run.carry``); :data:`_NOT_CARRIED` when it must run."""
    found = execution.carried.get(unit.key)
    if found is None or execution.cancelled or execution.lost:
        return _NOT_CARRIED
    key = found.input_key
    if not found.as_recorded:
        if not unit.spec.carry:
            return _NOT_CARRIED
        task_prompt = await _render(execution, unit, task_context(execution, unit, attempt))
        schema = unit.spec.output.model_json_schema() if unit.spec.output else None
        key = input_key(agent_name, task_prompt, schema)
        if key != found.input_key:
            return _NOT_CARRIED  # its inputs changed since: it runs again
    execution.done_count += 1
    await execution.store.upsert_node(
        execution.run_id,
        unit.node_id,
        unit.iteration,
        "finished",
        output=found.output,
        set_output=True,
        nodes_done=execution.done_count,
        input_key=key or None,
        carried_from=found.made_in,
    )
    execution.progress("node", unit, "finished", f"carried from {found.made_in}")
    return execution.load_output(unit.spec, found.output)


async def _render(execution: RunExecution, unit: Unit, ctx: TaskContext) -> str:
    """The task prompt of ``unit``; a prompt that raises or renders empty fails the node."""
    edited = execution.fork_edit(unit, "prompt")
    if edited is not None:
        schema = unit.spec.output.model_json_schema() if unit.spec.output else None
        edited = edited_task_prompt(edited, schema)
    try:
        text = edited if edited is not None else unit.spec.prompt(ctx)
    except USER_CODE_ERRORS as error:
        message = f"The prompt of {unit.node_id} {raised(error)}"
        await execution.store.upsert_node(
            execution.run_id, unit.node_id, unit.iteration, "failed", error=message
        )
        raise UnitFailed(message) from error
    if not isinstance(text, str) or not text.strip():
        message = (
            f"Task {unit.node_id} rendered an empty prompt; usually an upstream value it "
            "interpolates was empty."
        )
        await execution.store.upsert_node(
            execution.run_id, unit.node_id, unit.iteration, "failed", error=message
        )
        raise UnitFailed(message)
    limit = execution.config.max_prompt_bytes
    size = len(text) if len(text) * 4 <= limit else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        message = (
            f"The prompt of {unit.node_id} is {size:,} bytes; prompts are limited to "
            f"{limit:,} bytes ([engine] max_prompt_bytes): put large inputs in artifacts and "
            "let the agent read them."
        )
        await execution.store.upsert_node(
            execution.run_id, unit.node_id, unit.iteration, "failed", error=message
        )
        raise UnitFailed(message)
    return text
