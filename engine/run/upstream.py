"""What a prompt function of a node sees: ``ctx`` (:func:`task_context`) and ``ctx.outputs``,
the lazy, read-only view of its upstream outputs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from engine.run.units import Unit
from engine.workflow.context import TaskContext

if TYPE_CHECKING:
    from engine.run.execution import RunExecution


def task_context(execution: RunExecution, unit: Unit, attempt: int = 1) -> TaskContext:
    """The context of ``unit``'s prompt (and of its fan-out ``items``, a loop's ``until``):
    the run input, upstream outputs, and, in a loop, this and the previous iteration's."""
    spec = unit.spec
    workflow = execution.workflow
    top = workflow.owner_of(spec.id)
    current: dict[str, Any] = {}
    previous: dict[str, Any] = {}
    if spec.loop is not None:
        for body_id in workflow.loops[spec.loop].body:
            if (body_id, unit.iteration) in execution.outputs:
                current[body_id] = execution.outputs[(body_id, unit.iteration)]
            if unit.iteration > 0 and (body_id, unit.iteration - 1) in execution.outputs:
                previous[body_id] = execution.outputs[(body_id, unit.iteration - 1)]
    return TaskContext(
        workflow=workflow.name,
        run_id=execution.run_id,
        input=execution.input,
        task_id=spec.id,
        node_id=unit.node_id,
        iteration=unit.iteration,
        attempt=attempt,
        item=unit.item,
        index=unit.index,
        outputs=UpstreamOutputs(execution, top, current),
        previous_outputs=previous,
        artifacts=execution.artifacts,
        continuation=execution.continuation,
    )


class UpstreamOutputs(Mapping[str, Any]):
    """``ctx.outputs``: the outputs of a node's upstream tasks, looked up lazily so building a
    context costs the same however large the graph is. A fan-out id gives the list of its
    outputs, a loop id a dict of its body outputs, a loop body id its last iteration's output;
    ``current`` holds the outputs of the running loop iteration."""

    def __init__(self, execution: RunExecution, top: str, current: Mapping[str, Any]) -> None:
        self._execution = execution
        self._top = top
        self._current = current
        self._ancestry: int | None = None

    @property
    def _allowed(self) -> int:
        # Looked up on first use (most prompts read one or two outputs, some none at all) and
        # kept: a bitset over the run's top-level ids (RunExecution.ancestry).
        if self._ancestry is None:
            self._ancestry = self._execution.ancestry(self._top)
        return self._ancestry

    def __getitem__(self, key: str) -> Any:
        if key in self._current:
            return self._current[key]
        workflow = self._execution.workflow
        top = workflow.owner_of(key)
        if (
            not self._execution.may_read(self._allowed, top)
            or top not in self._execution.top_outputs
        ):
            raise KeyError(key)
        value = self._execution.top_outputs[top]
        if top == key:
            return value
        if isinstance(value, dict) and key in value:
            return value[key]
        raise KeyError(key)

    def _keys(self) -> list[str]:
        keys = list(self._current)
        loops = self._execution.workflow.loops
        for top in self._execution.tops_in(self._allowed):
            if top in self._execution.top_outputs:
                keys.append(top)
                if top in loops:
                    keys.extend(loops[top].body)
        return keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True
