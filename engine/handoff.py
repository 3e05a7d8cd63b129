"""Handoff, the durable ``/clear``: a run stops, its state is distilled, a fresh run continues.

When a ceiling with ``on_exceeded="handoff"`` is reached, or a person asks for a clear
(``tether clear RUN``, the dashboard's ``x``), the scheduler stops dispatching, lets running
attempts end, and calls :class:`HandoffManager`. It distils the run, then in one transaction
(:meth:`store.runs.run_store.RunStore.continue_as_new`) creates the successor run of the same
workflow
(same input, ``parent_run_id`` and ``generation + 1``), records the handoff with its reason,
generation and carried bytes, and marks the old run ``handed-off``. The successor's task prompts
read the distilled state as ``ctx.continuation``. Finished work is not lost: the successor
*carries* every node an earlier generation finished with the same inputs (recorded finished
with that output, never run again: :mod:`engine.run.carry`), while prompts that read the
distilled state run again with it; the distilled state is what a fresh context starts from, not
the old context copied along.

The default distiller keeps the goal, the new generation, the last summary and at most ten
learnings, bounded to :data:`MAX_CARRIED_BYTES`. A workflow supplies its own with
``Ceiling(..., distill=fn)`` or a ``distill`` attribute on the Workflow; ``fn`` receives a
:class:`DistillInput` and returns a JSON object. A distiller that fails or returns something
unusable falls back to the default one, with a warning event: a handoff never loses the run.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.ceiling import ceiling_of, counted_tokens
from engine.hooks import HandoffRequest
from engine.memory.block import longest_prefix_within, utf8_len
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.run_records import RunRecord
from store.runs.owners import running_elsewhere
from store.runs.run_params import check_clear_reason
from store.runs.run_store import RunStore

MAX_LEARNINGS = 10
MAX_CARRIED_BYTES = 16_384
MAX_CUSTOM_CARRIED_BYTES = 1_048_576
MAX_GOAL_BYTES = 4_000
MAX_SUMMARY_BYTES = 4_000
MAX_LEARNING_BYTES = 600


@dataclass(frozen=True)
class FinishedNode:
    """A node of the stopped run that finished, with its output (oldest first)."""

    node_id: str
    iteration: int
    output: Any


@dataclass(frozen=True)
class DistillInput:
    """What a distiller sees: the stopped run, why it stopped, the state it was started with
    (``previous``, None for the first generation) and what finished."""

    run: RunRecord
    reason: str
    trigger: str
    previous: Mapping[str, Any] | None
    finished: Sequence[FinishedNode] = ()
    outputs: Mapping[str, Any] = field(default_factory=dict)


Distiller = Callable[[DistillInput], Any]


def clip(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes at a code-point boundary (with …)."""
    if utf8_len(text) <= max_bytes:
        return text
    return text[: longest_prefix_within(text, max_bytes - utf8_len("…"))] + "…"


def goal_of(value: Any) -> str:
    """The goal text of a run input: its ``goal`` field when it has one, else the input."""
    if isinstance(value, Mapping) and isinstance(value.get("goal"), str):
        return str(value["goal"])
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _walk(value: Any) -> list[Mapping[str, Any]]:
    """Every mapping inside an output (outputs of loops and fan-outs nest)."""
    found: list[Mapping[str, Any]] = []
    if isinstance(value, Mapping):
        found.append(value)
        for child in value.values():
            found += _walk(child)
    elif isinstance(value, list | tuple):
        for child in value:
            found += _walk(child)
    return found


def bound_state(state: dict[str, Any], max_bytes: int = MAX_CARRIED_BYTES) -> dict[str, Any]:
    """Keep the distilled state within ``max_bytes`` of JSON: drop the oldest learnings first,
    then shorten the summary and the goal."""
    state = dict(state)

    def size() -> int:
        return utf8_len(json.dumps(state, ensure_ascii=False))

    while size() > max_bytes and state.get("learnings"):
        state["learnings"] = list(state["learnings"])[1:]
    for name in ("last_summary", "goal"):
        if size() > max_bytes and isinstance(state.get(name), str):
            excess = size() - max_bytes
            state[name] = clip(state[name], max(0, utf8_len(state[name]) - excess - 8))
    return state


def default_distill(data: DistillInput) -> dict[str, Any]:
    """Goal, generation, last summary and the last ten learnings (see the module docstring)."""
    previous = data.previous or {}
    goal = previous.get("goal") if isinstance(previous.get("goal"), str) else None
    summary = str(previous.get("last_summary") or "")
    learnings = [str(x) for x in previous.get("learnings") or [] if isinstance(x, str)]
    for node in data.finished:
        for mapping in _walk(node.output):
            if isinstance(mapping.get("summary"), str) and mapping["summary"].strip():
                summary = mapping["summary"]
            items = mapping.get("learnings")
            if isinstance(items, list):
                learnings += [str(x) for x in items if isinstance(x, str) and x.strip()]
    unique = list(dict.fromkeys(clip(x.strip(), MAX_LEARNING_BYTES) for x in learnings))
    state = {
        "goal": clip(goal if goal is not None else goal_of(data.run.input), MAX_GOAL_BYTES),
        "generation": data.run.generation + 1,
        "last_summary": clip(summary, MAX_SUMMARY_BYTES),
        "learnings": unique[-MAX_LEARNINGS:],
        "reason": clip(data.reason, 500),
    }
    return bound_state(state)


def distiller_of(workflow: Any) -> Distiller | None:
    """The workflow's own distiller: ``ceiling.distill`` or a ``distill`` attribute."""
    if workflow is None:
        return None
    ceiling = ceiling_of(getattr(workflow, "ceiling", None))
    if ceiling is not None and ceiling.distill is not None:
        return ceiling.distill
    own = getattr(workflow, "distill", None)
    return own if callable(own) else None


async def _call_distiller(distill: Distiller, data: DistillInput) -> dict[str, Any]:
    result = distill(data)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, Mapping):
        raise InvalidInputError(f"the distiller returned {type(result).__name__}, not a dict")
    state = dict(result)
    size = utf8_len(json.dumps(state, ensure_ascii=False))
    if size > MAX_CUSTOM_CARRIED_BYTES:
        raise InvalidInputError(
            f"the distilled state is {size} bytes; at most {MAX_CUSTOM_CARRIED_BYTES} are carried"
        )
    state.setdefault("generation", data.run.generation + 1)
    return state


class HandoffManager:
    """Distils a stopped run and starts its successor (the scheduler's handoff hook)."""

    def __init__(self, db: Database) -> None:
        self.runs = RunStore(db)

    async def distill_input(
        self, run: RunRecord, reason: str, trigger: str, outputs: Mapping[str, Any] | None = None
    ) -> DistillInput:
        """Collect what a distiller needs from the database."""
        handoffs = await self.runs.list_handoffs(to_run_id=run.run_id)
        previous = handoffs[-1].carried_state if handoffs else None
        nodes = [n for n in await self.runs.list_nodes(run.run_id) if n.state == "finished"]
        nodes.sort(key=lambda n: (n.finished_at_ms or 0, n.iteration, n.node_id))
        finished = [FinishedNode(n.node_id, n.iteration, n.output) for n in nodes]
        return DistillInput(
            run=run,
            reason=reason,
            trigger=trigger,
            previous=previous if isinstance(previous, Mapping) else None,
            finished=finished,
            outputs=dict(outputs or {}),
        )

    async def distill(self, data: DistillInput, distill: Distiller | None) -> dict[str, Any]:
        """Run the workflow's distiller (falling back to the default one on any problem)."""
        if distill is None:
            return default_distill(data)
        try:
            return await _call_distiller(distill, data)
        except Exception as error:
            await self.runs.append_event(
                "warning",
                run_id=data.run.run_id,
                payload={
                    "reason": f"the workflow's distiller failed ({type(error).__name__}: "
                    f"{error}); the default distiller was used",
                },
            )
            return default_distill(data)

    async def hand_off(self, request: HandoffRequest) -> str | None:
        """Distil ``request.run`` and create its successor; returns the new run id."""
        workflow = getattr(request, "workflow", None)
        return await self.hand_off_run(
            request.run,
            reason=request.reason,
            trigger=request.trigger,
            outputs=request.outputs,
            distill=distiller_of(workflow),
        )

    async def hand_off_run(
        self,
        run: RunRecord,
        *,
        reason: str,
        trigger: str,
        outputs: Mapping[str, Any] | None = None,
        distill: Distiller | None = None,
    ) -> str:
        """The handoff itself (also used by ``tether clear`` for a run no engine is running)."""
        data = await self.distill_input(run, reason, trigger, outputs)
        state = await self.distill(data, distill)
        new_run, _ = await self.runs.continue_as_new(
            run.run_id,
            trigger=trigger,
            reason=reason,
            carried_state=state,
            input=run.input,
            tokens_at_handoff=counted_tokens(run.tokens),
        )
        return new_run.run_id


DEFAULT_CLEAR_REASON = "cleared by a person"


@dataclass(frozen=True)
class ClearResult:
    """What a person's clear did: asked the running engine (``requested``) or handed off now."""

    run_id: str
    requested: bool
    new_run_id: str | None


async def clear_run(db: Database, run_id: str, reason: str) -> ClearResult:
    """The durable ``/clear`` a person asks for (``tether clear``, the dashboard's ``x``).

    A run an engine is executing (its owner is alive) gets a clear *request*; that engine
    hands off at its next dispatch. Any other run that has work left (stale, pending, failed,
    cancelled) is handed off here and now; the new run's id is returned, and ``tether run
    WORKFLOW --resume NEW_ID`` (or the dashboard's ``R``) continues it. A finished run has no
    work left: clearing it would only run it again, so it is refused.

    Raises:
        NotFoundError: there is no such run.
        InvalidInputError: an empty reason, a finished run, or one already handed off.
    """
    check_clear_reason(reason)
    runs = RunStore(db)
    run = await runs.get_run(run_id)
    if run.status == "handed-off":
        raise InvalidInputError(f"Run {run_id} was already handed off; clear its successor.")
    if run.status == "finished":
        raise InvalidInputError(
            f"Run {run_id} is finished, so there is nothing to clear (a clear would only run it "
            "again); start a new run of its workflow instead."
        )
    if running_elsewhere(run, db.clock.now_ms()) is not None:
        await runs.request_clear(run_id, reason)
        return ClearResult(run_id, True, None)
    new_id = await HandoffManager(db).hand_off_run(
        run, reason=reason, trigger="person", distill=workflow_distiller(run.workflow_path)
    )
    return ClearResult(run_id, False, new_id)


def workflow_distiller(path: str | None) -> Distiller | None:
    """The run's workflow's own distiller when its file still loads, else None (the default)."""
    if not path:
        return None
    from engine.workflow.loader import load_workflow

    try:
        return distiller_of(load_workflow(path))
    except InvalidInputError:
        return None
