"""One attempt of a node: the prompt sent, the agent call(s) under a timeout, validation with one
repair, and the attempt's end written together with the node's state."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agents.agent import (
    Agent,
    AgentError,
    AgentRequest,
    AgentResult,
    ModelCall,
    calls_model,
)
from engine.agents.reported_usage import check_usage
from engine.artifact_files import RAW_OUTPUT, write_private_bytes
from engine.budget import Spend
from engine.ceiling import counted_tokens
from engine.pricing import PriceTable
from engine.prompting import continue_prompt, repair_prompt
from engine.run.carry import input_key
from engine.run.steering import Steering, steered_prompt
from engine.run.units import NodeSkipped, StopDispatch, Unit, UnitFailed
from engine.structured import OutputInvalid, to_jsonable, validate_output
from engine.workflow.user_code import USER_CODE_ERRORS, raised
from store.db.storage_errors import os_storage_error
from store.errors import StorageError
from store.model.json_text import without_lone_surrogates
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.steer_log import SteerRecord

if TYPE_CHECKING:
    from engine.run.execution import RunExecution


@dataclass(frozen=True)
class Resume:
    """A retry that continues the failed attempt's agent session."""

    session_id: str
    continues_attempt: int
    error: str


async def run_attempt(
    execution: RunExecution,
    unit: Unit,
    attempt: int,
    agent: Agent,
    agent_name: str,
    task_prompt: str,
    memory: Any,
    resume: Resume | None = None,
) -> Any:
    """One attempt: prompt, agent call(s) with a timeout, validation with one repair, and
    the attempt's end written together with the node's state. ``resume`` continues the
    session of an earlier attempt (recorded in the attempt's details)."""
    spec = unit.spec
    prompt, tools = await execution.prepare_prompt(unit, agent, task_prompt, attempt, memory)
    steers = await execution.steers.next_attempt_steers(unit)  # no read unless one waits
    prompt = steered_prompt(prompt, steers)  # what was sent for this attempt goes first
    # The attempt's start is committed before the agent runs (an agent never runs without a
    # recorded attempt, so a resumed run never reuses an attempt number) but not flushed to
    # disk on its own. Its calls join the next group commit without being waited for one by
    # one; the attempt's end (flushed) is committed after them, so by the time the node counts
    # as finished all of them are durable (writes commit in submission order).
    writes: list[Awaitable[None]] = []
    try:
        left = await execution.store.start_attempt(
            execution.run_id,
            unit.node_id,
            unit.iteration,
            attempt,
            agent=agent_name,
            model=getattr(agent, "model", None),
            prompt=prompt,
            owner_id=execution.owner_id,
            steers=steers,  # delivered by this attempt's start
        )
    except asyncio.CancelledError:
        # The queued start still commits: end it as cancelled behind it.
        await _not_run(execution, unit, attempt, steers, node_state="cancelled")
        raise
    execution.steers.waits(unit, left)  # queued since the watch's poll: the next attempt's
    if execution.halting():
        # Something this attempt was dispatched after went wrong while its start was being
        # committed (an upstream node's end failed to commit, a cancel or clear arrived):
        # the agent does not run.
        await _not_run(execution, unit, attempt, steers, node_state="pending")
        raise StopDispatch("the run stopped dispatching")
    execution.progress("node", unit, "running", f"attempt {attempt}", attempt=attempt)
    calls: list[ModelCall] = []
    totals = [TokenUsage()]  # the sum of ``calls``' usage, kept as each call is recorded
    spent_usd = [0.0]
    simulated = bool(getattr(agent, "simulated", False))
    prices = execution.prices

    async def on_call(call: ModelCall) -> None:
        # Agent output is outside input: a bogus count fails the attempt, never the engine.
        check_usage(call.usage, f"Agent {agent_name}")
        calls.append(call)
        totals[0] = totals[0] + call.usage  # a running total: never summed again per call
        cost = call_cost(call, simulated, prices)
        spent_usd[0] += cost or 0.0
        usage = CallUsage(
            execution.run_id,
            unit.node_id,
            unit.iteration,
            attempt,
            agent_name,
            call.usage,
            model=call.model,
            simulated=simulated,
            started_at_ms=call.started_at_ms,
            finished_at_ms=call.finished_at_ms,
            cost_usd=cost,
            kind=call.kind,
            detail=call.detail,
            seq=len(calls),
        )
        writes.append(execution.store.queue_calls([usage]))
        execution.progress("call", unit, "call", tokens=call.usage.context_tokens, attempt=attempt)
        # Budgets are enforced here, as each call is recorded (engine.run.budget_meter).
        execution.meter.add(
            unit, call.usage, cost, Spend(counted_tokens(total()), spent_usd[0]), call.model
        )

    def total() -> TokenUsage:
        return totals[0]

    configured_model = getattr(agent, "model", None)

    def model() -> str | None:
        # The config names none: the attempt's model is the one its calls used.
        return None if configured_model else calls_model(calls)

    stream_path = execution.attempt_folders.stream_log(unit.node_id, unit.iteration, attempt)
    request = AgentRequest(
        prompt=prompt,
        run_id=execution.run_id,
        node_id=unit.node_id,
        iteration=unit.iteration,
        attempt=attempt,
        output_schema=spec.output.model_json_schema() if spec.output else None,
        tools=tools,
        stream_path=stream_path,
        on_call=on_call,
        clock=execution.clock,
        prices=prices,
        max_budget_usd=execution.meter.remaining_usd(),
    )
    if resume is not None:
        request.resume_session = resume.session_id
        request.resume_prompt = steered_prompt(continue_prompt(resume.error), steers)
        request.details["resumed_session"] = resume.session_id
        request.details["continues_attempt"] = resume.continues_attempt
    text = ""
    try:
        async with asyncio.timeout(spec.effective_timeout_s):
            result = await _agent_call(execution, unit, agent, agent_name, request)
            # What an agent says is kept, never refused: a lone surrogate in its JSON becomes
            # U+FFFD here, so the output, its row and every later prompt can hold it.
            text = without_lone_surrogates(result.text)
            output: Any = text
            if spec.output is not None:
                try:
                    output = validate_output(
                        spec.output,
                        text if result.output is None else without_lone_surrogates(result.output),
                    )
                except OutputInvalid as problem:
                    schema = request.output_schema or {}
                    # A repair continues the same session when the agent has one (Claude
                    # Code: --resume), so the model keeps the work it already did.
                    repaired = await _agent_call(
                        execution,
                        unit,
                        agent,
                        agent_name,
                        dataclasses.replace(
                            request,
                            prompt=repair_prompt(text, str(problem), schema),
                            repair=True,
                            resume_session=result.session_id,
                            resume_prompt=None,
                        )
                    )
                    try:
                        output = validate_output(
                            spec.output,
                            without_lone_surrogates(
                                repaired.output if repaired.output is not None else repaired.text
                            ),
                        )
                        text = without_lone_surrogates(repaired.text)
                    except OutputInvalid as second:
                        request.ensure_folder()
                        raw = write_private_bytes(
                            stream_path.with_name(RAW_OUTPUT),
                            f"--- first answer ---\n{text}\n--- repair answer ---\n"
                            f"{repaired.text}\n".encode(),
                        )
                        text = repaired.text
                        raise AgentError(
                            f"the answer did not match {spec.output.__name__} after one "
                            f"repair: {second} (raw answer kept in {raw})"
                        ) from second
    except TimeoutError as error:
        default = "" if spec.timeout_s is not None else " (the default; set timeout_s)"
        raise _AttemptError(
            AgentError(f"timed out after {spec.effective_timeout_s:g} s{default}"), total(),
            text, request.details, writes, model(),
        ) from error
    except AgentError as error:
        raise _AttemptError(error, total(), text, request.details, writes, model()) from error
    except StorageError:
        raise  # the workspace stopped taking writes: the run stops (engine.run.interruption)
    except OSError as error:
        storage = os_storage_error(error, Path(error.filename or execution.artifacts_root))
        if storage is not None:
            raise storage from None  # an artifact could not be written: disk full, read-only
        raise _AttemptError(
            AgentError(f"the agent raised {type(error).__name__}: {error}"), total(), text,
            request.details, writes, model(),
        ) from error
    except USER_CODE_ERRORS as error:
        # A bug or unexpected error inside an agent fails the attempt (retries apply); it
        # never leaves the attempt marked running (sys.exit() in a custom agent included).
        raise _AttemptError(AgentError(f"the agent {raised(error)}"), total(), text,
                            request.details, writes, model()) from error
    except asyncio.CancelledError:
        stop = execution.budget_stops.pop(unit.key, None)
        if stop is not None:
            # A budget stopped the agent: not a cancellation of the run (engine.run.budget_meter).
            raise await _end_budget_stopped(
                execution, unit, attempt, stop, total(), text, request.details, writes, model()
            ) from None
        await _end_cancelled(
            execution,
            unit,
            attempt,
            "Cancelled by request."
            if execution.cancelled
            else "Interrupted; the run stays resumable.",
            node_state="cancelled",
            usage=total(),
            text=text or None,
            details=request.details or None,
            model=model(),
        )
        _settled(writes)
        execution.progress("node", unit, "cancelled")
        raise
    execution.done_count += 1
    execution.finished_here += 1
    usage = total()
    used = counted_tokens(usage)
    execution.largest_attempt = max(execution.largest_attempt, used)
    if not spec.carry:
        execution.uncarried_tokens += used
    # The node's end is queued, not waited for: the scheduler may dispatch its dependents at
    # once; their starts queue behind this end, so none of their agents runs before it is
    # committed (and, at durability "full", flushed). The node counts as finished (progress,
    # requests) when the commit returns (RunExecution.acknowledge).
    end = execution.store.finish_attempt(
        execution.run_id,
        unit.node_id,
        unit.iteration,
        attempt,
        "finished",
        usage=usage,
        response_text=text,
        node_state="finished",
        node_output=to_jsonable(output),
        set_node_output=True,
        nodes_done=execution.done_count,
        details=request.details or None,
        input_key=input_key(agent_name, task_prompt, request.output_schema),
        model=model(),
        refuse_next_attempt=execution.steers.refuses_at_end(unit),
    )
    execution.acknowledge(unit, end, writes, tokens=usage.total, attempt=attempt)
    return output


async def _not_run(execution: RunExecution, unit: Unit, attempt: int,
                   steers: list[SteerRecord], node_state: str) -> None:
    """End an attempt whose agent never ran: the steers its start took wait again."""
    await _end_cancelled(execution, unit, attempt,
                         "Not run: the run stopped dispatching before the agent started.",
                         node_state=node_state, returned=steers)
    execution.steers.waits(unit, len(steers))


async def _agent_call(
    execution: RunExecution, unit: Unit, agent: Agent, agent_name: str, request: AgentRequest
) -> AgentResult:
    """``agent.run(request)`` as a task of its own, which a budget can stop
    (:meth:`RunExecution.stop_attempts`) without cancelling the node: stopping it once it has
    answered changes nothing."""
    steering = Steering(execution.steers, request, agent, agent_name,
                        execution.config.poll_interval_s).start()
    task = asyncio.ensure_future(agent.run(request))
    execution.in_agent[unit.key] = task
    try:
        return await task
    finally:
        stopping = steering.stop()
        if stopping is not None:
            await asyncio.shield(stopping)
        execution.in_agent.pop(unit.key, None)
        if not task.cancelled():
            execution.budget_stops.pop(unit.key, None)  # it answered before the stop landed


async def _end_cancelled(
    execution: RunExecution,
    unit: Unit,
    attempt: int,
    error: str,
    *,
    node_state: str,
    usage: TokenUsage = TokenUsage(),
    text: str | None = None,
    details: dict[str, Any] | None = None,
    nodes_done: int | None = None,
    model: str | None = None,
    returned: list[SteerRecord] | None = None,
) -> None:
    """Record an attempt as cancelled (shielded: the task itself may be being cancelled)."""
    with contextlib.suppress(Exception):
        await asyncio.shield(
            execution.store.finish_attempt(
                execution.run_id,
                unit.node_id,
                unit.iteration,
                attempt,
                "cancelled",
                usage=usage,
                response_text=text,
                error=error,
                node_state=node_state,
                details=details,
                nodes_done=nodes_done,
                model=model,
                refuse_next_attempt=execution.steers.refuses_at_end(unit),
                returned=returned or (),
            )
        )


async def _end_budget_stopped(
    execution: RunExecution,
    unit: Unit,
    attempt: int,
    stop: tuple[str, str],
    usage: TokenUsage,
    text: str,
    details: dict[str, Any],
    writes: list[Awaitable[None]],
    model: str | None = None,
) -> Exception:
    """Record an attempt a budget stopped (its tokens and cost kept) and say how its node
    ends: failed, skipped, or pending again for a handoff's successor."""
    reason, node_state = stop
    if node_state == "skipped":
        execution.done_count += 1
    await _end_cancelled(
        execution,
        unit,
        attempt,
        reason,
        node_state=node_state,
        usage=usage,
        text=text or None,
        details={**details, "stopped_by": "budget"},
        nodes_done=execution.done_count if node_state == "skipped" else None,
        model=model,
    )
    await _committed(writes)
    execution.progress("node", unit, node_state, reason, attempt=attempt)
    if node_state == "failed":
        return UnitFailed(reason)
    if node_state == "skipped":
        return NodeSkipped(reason)
    return StopDispatch(reason)


async def _committed(writes: list[Awaitable[None]]) -> None:
    """Wait for an attempt's queued writes (already committed when a later write returned):
    an error writing one of them is raised here."""
    for write in writes:
        await write


def _settled(writes: list[Awaitable[None]]) -> None:
    """Mark queued writes' errors as seen when the attempt ends without waiting for them."""
    for write in writes:
        if not isinstance(write, asyncio.Future):
            continue
        if write.done() and not write.cancelled():
            write.exception()
        else:
            write.add_done_callback(_consume)


def _consume(write: asyncio.Future[None]) -> None:
    if not write.cancelled():
        write.exception()


async def record_failed_attempt(
    execution: RunExecution,
    unit: Unit,
    attempt: int,
    error: AgentError,
    retry: bool,
    node_state: str | None = None,
) -> None:
    """Write a failed attempt's end: the node goes to ``retrying`` or ``failed`` (or
    ``node_state``: ``pending`` when the run stops to hand off and the retry is left to its
    successor)."""
    usage = error.usage if isinstance(error, _AttemptError) else TokenUsage()
    execution.largest_attempt = max(execution.largest_attempt, counted_tokens(usage))
    text = error.text if isinstance(error, _AttemptError) else None
    details = error.details if isinstance(error, _AttemptError) else None
    writes = error.writes if isinstance(error, _AttemptError) else []
    model = error.model if isinstance(error, _AttemptError) else None
    requests = await execution.store.finish_attempt(
        execution.run_id,
        unit.node_id,
        unit.iteration,
        attempt,
        "failed",
        usage=usage,
        response_text=text or None,
        error=str(error),
        node_state=node_state or ("retrying" if retry else "failed"),
        details=details or None,
        model=model,
    )
    await _committed(writes)
    execution.absorb_requests(requests)
    execution.steers.retrying(unit, requests)  # what waits for the next attempt
    shown = node_state or ("retrying" if retry else "failed")
    execution.progress("node", unit, shown, str(error), attempt=attempt)


def call_cost(call: ModelCall, simulated: bool, prices: PriceTable) -> float | None:
    """A call's cost: a retried request costs nothing, a simulated call is free, a call whose
    usage the server did not report is unknown, a cost the provider reported stands, anything
    else comes from the price table (None: unknown)."""
    if call.kind == "retry" or simulated:
        return 0.0
    if not call.usage_known:
        return None
    if call.cost_usd is not None:
        return call.cost_usd
    # A reconciliation row sums several requests: no long-context tier can be told for it.
    return prices.cost(
        call.model,
        call.usage,
        cache_write_1h=call.cache_write_1h,
        at_ms=call.finished_at_ms,
        request=call.kind == "model",
    )


class _AttemptError(AgentError):
    """An AgentError carrying the usage, text, agent details and queued writes of the failed
    attempt."""

    def __init__(
        self,
        cause: AgentError,
        usage: TokenUsage,
        text: str,
        details: dict[str, Any],
        writes: list[Awaitable[None]],
        model: str | None = None,
    ) -> None:
        super().__init__(
            str(cause), retryable=cause.retryable, retry_after_s=cause.retry_after_s,
            limit=cause.limit, resets_at_ms=cause.resets_at_ms, session_id=cause.session_id,
        )
        self.usage = usage
        self.text = text
        self.details = details
        self.writes = writes
        self.model = model
