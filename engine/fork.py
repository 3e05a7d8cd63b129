"""Fork a run from one of its nodes, with an edit (LangGraph's time travel, Temporal's reset).

A fork is a new run of the same workflow, linked to its origin by ``runs.forked_from``. Every
node upstream of the chosen one (its top-level ancestors, every iteration and fan-out copy of
them) is **carried over** finished with the output the origin recorded: never executed again,
no attempt, no agent call (:mod:`engine.run.carry`, ``carried_from`` names the run whose attempt
made it). The chosen task runs with the edit; everything else runs anew. The edit may replace
the chosen task's prompt (as rendered), its memory block, its agent, and the run input the
not-carried nodes read; it holds in every generation of the fork's handoff chain.

:func:`plan_fork` is the pure policy (which node, what is carried, which sentence refuses);
:func:`create_fork` writes the fork as a ``pending`` run, which ``Engine.resume`` executes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.prompting import json_instructions
from engine.structured import OutputInvalid, to_jsonable, validate_output
from engine.workflow.definition import Workflow
from store.errors import InvalidInputError
from store.model.run_records import TERMINAL_RUN_STATUSES, NodeRecord, RunRecord
from store.runs.run_store import RunStore

MAX_EDIT_BYTES = 1_048_576
"""The largest prompt or memory block a fork's edit may hold."""

_COPY = re.compile(r"\[[^\]]*\]$")


@dataclass(frozen=True)
class ForkEdit:
    """What the chosen node runs with instead of what it ran with: its prompt, memory block
    and agent (None: unchanged), and the run input (``input_given``: replace it by ``input``)."""

    prompt: str | None = None
    memory_block: str | None = None
    agent: str | None = None
    input: Any = None
    input_given: bool = False


@dataclass(frozen=True)
class ForkPlan:
    """The task a fork starts from and the origin's node iterations it carries over."""

    task: str
    carried: tuple[NodeRecord, ...]


def task_of(node_id: str) -> str:
    """The task a node row belongs to (a fan-out copy ``task[key]`` is of ``task``)."""
    return _COPY.sub("", node_id)


def upstream_of(workflow: Workflow, task: str) -> set[str]:
    """Every top-level node ``task`` depends on, directly or not (its own loop excluded)."""
    top = workflow.owner_of(task)
    seen: set[str] = set()
    todo = list(workflow.top_level_deps(top))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += workflow.top_level_deps(node)
    seen.discard(top)
    return seen


def plan_fork(
    workflow: Workflow, origin: RunRecord, nodes: Sequence[NodeRecord], node_id: str
) -> ForkPlan:
    """Which task a fork of ``origin`` from ``node_id`` starts from and what it carries over.

    Raises InvalidInputError (one sentence) for a task the workflow does not declare, a node
    that never ran in ``origin``, or an upstream node that has not finished there (a run still
    executing would race the fork: what is carried must be final).
    """
    task = task_of(node_id)
    if task not in workflow.tasks:
        known = ", ".join(sorted(workflow.tasks)) or "none"
        raise InvalidInputError(
            f"Workflow {workflow.name!r} has no task {node_id!r}; its tasks are: {known}."
        )
    ran = [n for n in nodes if task_of(n.node_id) == task and n.state != "pending"]
    if not ran and origin.status not in TERMINAL_RUN_STATUSES:
        raise InvalidInputError(  # another process may still run it: forking would race it
            f"Node {task!r} has not run yet in run {origin.run_id}, which is still "
            f"{origin.status}; fork from it once it has run, or from a node that ran."
        )
    if not ran:
        raise InvalidInputError(
            f"Node {task!r} never ran in run {origin.run_id}; fork from a node that ran."
        )
    upstream = upstream_of(workflow, task)
    carried: list[NodeRecord] = []
    for top in sorted(upstream):
        rows = [n for n in nodes if workflow.owner_of(task_of(n.node_id)) == top]
        unfinished = next((n for n in rows if n.state != "finished"), None)
        if not rows or unfinished is not None:
            state = unfinished.state if unfinished is not None else "not started"
            raise InvalidInputError(
                f"Node {top!r}, upstream of {task!r}, is {state} in run {origin.run_id}, so "
                "it cannot be carried over; fork once it has finished, or fork from it."
            )
        carried += rows
    return ForkPlan(task, tuple(carried))


def check_carried(workflow: Workflow, plan: ForkPlan) -> None:
    """Refuse a fork whose carried outputs no longer fit their task's output schema (the
    workflow changed since the origin ran: ``--workflow``, an edited file), InvalidInputError
    in one sentence: the nodes that read them would fail on them."""
    for node in plan.carried:
        spec = workflow.tasks.get(task_of(node.node_id))
        if spec is None or spec.output is None:
            continue
        try:
            validate_output(spec.output, node.output)
        except OutputInvalid as error:
            raise InvalidInputError(
                f"Node {node.node_id!r} would be carried over with an output that no longer "
                f"fits task {spec.id!r}'s output schema ({str(error).removesuffix('.')}); fork "
                "with the workflow the run ran with, or from that node."
            ) from None


def check_edit(edit: ForkEdit, agents: Iterable[str]) -> None:
    """Refuse an edit that cannot run (InvalidInputError, one sentence): an empty or oversized
    prompt or memory block, an agent the workflow's registry does not know."""
    for name, text in (("prompt", edit.prompt), ("memory block", edit.memory_block)):
        if text is None:
            continue
        if name == "prompt" and not text.strip():
            raise InvalidInputError("The fork's prompt is empty; give the text the node runs.")
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_EDIT_BYTES:
            raise InvalidInputError(
                f"The fork's {name} is {size:,} bytes; at most {MAX_EDIT_BYTES:,} are accepted."
            )
    names = sorted(agents)
    if edit.agent is not None and edit.agent not in names:
        raise InvalidInputError(
            f"There is no agent {edit.agent!r}; the agents known here are: "
            f"{', '.join(names) or 'none'}."
        )


def fork_document(plan: ForkPlan, node_id: str, edit: ForkEdit) -> dict[str, Any]:
    """What ``runs.fork_json`` records: the task, the edit, the carried node iterations."""
    document: dict[str, Any] = {
        "node": plan.task,
        "asked": node_id,
        "carried": [[n.node_id, n.iteration] for n in plan.carried],
        "input_edited": edit.input_given,
    }
    for name in ("prompt", "memory_block", "agent"):
        value = getattr(edit, name)
        if value is not None:
            document[name] = value
    return document


def edited_task_prompt(text: str, schema: dict[str, Any] | None) -> str:
    """A fork's prompt as the task's own: when it was edited from the prompt as sent, the
    output instructions the engine appends are taken off its end (they are appended again)."""
    if schema is None:
        return text
    suffix = "\n\n" + json_instructions(schema)
    return text[: -len(suffix)] if text.endswith(suffix) and len(text) > len(suffix) else text


def edit_words(fork: dict[str, Any]) -> str:
    """The edit of a fork in a few words ("prompt, agent"; "no edit")."""
    words = [w for w, key in (("prompt", "prompt"), ("memory block", "memory_block"),
                              ("agent " + str(fork.get("agent")), "agent")) if key in fork]
    if fork.get("input_edited"):
        words.append("input")
    return ", ".join(words) or "no edit"


async def create_fork(
    store: RunStore,
    workflow: Workflow,
    origin_id: str,
    node_id: str,
    edit: ForkEdit,
    *,
    agents: Iterable[str],
    workflow_path: str | None = None,
) -> RunRecord:
    """Check the fork (:func:`plan_fork`, :func:`check_carried`, :func:`check_edit`, the input
    against the workflow's schema) and record it as a ``pending`` run; nothing is written
    when it is refused.

    Raises:
        NotFoundError: no run ``origin_id``.
        InvalidInputError: the sentence that refuses it.
    """
    origin = await store.get_run(origin_id)
    if origin.workflow != workflow.name:
        raise InvalidInputError(
            f"Run {origin_id} belongs to workflow {origin.workflow!r}, not {workflow.name!r}."
        )
    plan = plan_fork(workflow, origin, await store.list_nodes(origin_id), node_id)
    check_carried(workflow, plan)
    check_edit(edit, agents)
    value = edit.input if edit.input_given else origin.input
    parsed = workflow.parse_input(value)
    return await store.create_run(
        workflow.name,
        input=to_jsonable(parsed),
        workflow_path=workflow_path or origin.workflow_path,
        status="pending",
        forked_from=origin_id,
        fork=fork_document(plan, node_id, edit),
    )
