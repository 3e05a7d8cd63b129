"""How a run execution ends: finished, failed, cancelled, lost or handed off, recorded on the
run with its :class:`RunOutcome`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.ceiling import ceiling_of, handoff_refusal
from engine.hooks import DispatchDecision, HandoffRequest
from engine.structured import to_jsonable
from store.model.run_records import RunRecord

if TYPE_CHECKING:
    from engine.run.execution import RunExecution


@dataclass
class RunOutcome:
    """How a run ended in this process."""

    run_id: str
    status: str
    error: str | None = None
    next_run_id: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)


async def finish_run(execution: RunExecution) -> RunOutcome:
    """Record how the run ended (status, error or outputs) and return its outcome."""
    outputs = _sink_outputs(execution)
    if execution.lost:
        # Another process holds the run now (its lease, or it resumed it): write nothing.
        return RunOutcome(execution.run_id, "lost", "Another process took over this run.")
    if execution.cancelled:
        await execution.store.set_run_status(
            execution.run_id, "cancelled", error="Cancelled by request."
        )
        execution.progress("run", None, "cancelled")
        return RunOutcome(execution.run_id, "cancelled", "Cancelled by request.")
    if execution.failure is not None:
        await execution.store.set_run_status(execution.run_id, "failed", error=execution.failure)
        execution.progress("run", None, "failed", execution.failure)
        return RunOutcome(execution.run_id, "failed", execution.failure)
    unfinished = [n for n in execution.top_ids if n not in execution.top_outputs]
    if execution.stop is not None and not unfinished:
        # The request came during the last attempt: nothing is left to hand off, and a new
        # generation would only carry every node over and end at once.
        reason = (f"{execution.stop.reason}: nothing was left to hand off once the last "
                  "node ended, so the run finished")
        await execution.store.append_event("warning", run_id=execution.run_id,
                                           payload={"reason": reason})
        execution.progress("warning", None, "warn", reason)
    elif execution.stop is not None:
        refusal = _handoff_refusal(execution, execution.stop)
        if refusal is not None:
            await execution.store.set_run_status(execution.run_id, "failed", error=refusal)
            execution.progress("run", None, "failed", refusal)
            return RunOutcome(execution.run_id, "failed", refusal)
        return await _hand_off(execution, execution.stop, outputs)
    if unfinished:
        # Never report a run finished while part of its graph did not run.
        error = f"Nodes never became ready: {', '.join(unfinished[:10])}."
        await execution.store.set_run_status(execution.run_id, "failed", error=error)
        return RunOutcome(execution.run_id, "failed", error)
    await execution.store.set_run_status(
        execution.run_id, "finished", output=outputs, set_output=True
    )
    execution.progress("run", None, "finished")
    return RunOutcome(execution.run_id, "finished", outputs=outputs)


def _handoff_refusal(execution: RunExecution, decision: DispatchDecision) -> str | None:
    """Why the ceiling's handoff would repeat this generation (engine.ceiling), or None."""
    if decision.trigger != "ceiling":
        return None  # a person asked for the clear: theirs to decide
    ceiling = ceiling_of(execution.workflow.ceiling)
    if ceiling is None:
        return None
    used = decision.details.get("used_tokens")
    return handoff_refusal(
        ceiling,
        generation=execution.run.generation,
        used_tokens=int(used) if isinstance(used, int) else 0,
        finished_here=execution.finished_here,
        uncarried_tokens=execution.uncarried_tokens,
        largest_attempt=execution.largest_attempt,
    )


def _sink_outputs(execution: RunExecution) -> dict[str, Any]:
    ids = execution.top_ids
    depended = {d for n in ids for d in execution.top_deps[n]}
    return {
        n: to_jsonable(execution.top_outputs[n])
        for n in ids
        if n not in depended and n in execution.top_outputs
    }


async def _hand_off(
    execution: RunExecution, decision: DispatchDecision, outputs: dict[str, Any]
) -> RunOutcome:
    run = await execution.store.get_run(execution.run_id)
    reason = decision.reason or "handoff requested"
    visible = {n: to_jsonable(v) for n, v in execution.top_outputs.items()}
    if execution.hooks.handoff is not None:
        # HANDOFF HOOK: the ceiling/handoff feature distils state and creates the successor.
        next_id = await execution.hooks.handoff.hand_off(
            HandoffRequest(
                run=run,
                trigger=decision.trigger,
                reason=reason,
                outputs=visible,
                workflow=execution.workflow,
            )
        )
    else:
        carried = default_distillation(run, reason, visible)
        new_run, _ = await execution.store.continue_as_new(
            execution.run_id,
            trigger=decision.trigger,
            reason=reason,
            carried_state=carried,
            input=run.input,
            tokens_at_handoff=run.tokens.total,
        )
        next_id = new_run.run_id
    execution.progress("run", None, "handed-off", next_id or "")
    return RunOutcome(execution.run_id, "handed-off", reason, next_run_id=next_id, outputs=outputs)


def default_distillation(run: RunRecord, reason: str, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The carried state used when no handoff handler is installed: goal (the input), the next
    generation, the reason, and a bounded summary of what finished."""
    summary = ", ".join(sorted(outputs))[:2000]
    return {
        "goal": run.input,
        "generation": run.generation + 1,
        "reason": reason,
        "last_summary": f"Finished before the handoff: {summary}" if summary else "",
        "learnings": [],
    }
