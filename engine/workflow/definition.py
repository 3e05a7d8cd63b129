"""The Workflow API: tasks with dependencies, typed outputs, fan-out/fan-in, loops, retries,
timeouts, cache and memory settings, declared in plain Python.

A workflow module exposes one :class:`Workflow`::

    from pydantic import BaseModel
    from engine import CachePolicy, Workflow

    class Input(BaseModel):
        files: list[str]

    class Review(BaseModel):
        summary: str
        score: int

    workflow = Workflow("review", input_model=Input)

    @workflow.task(id="plan", output=Review)
    def plan(ctx):
        return f"Plan a review of {len(ctx.input.files)} files."

    @workflow.fan_out(id="review", items=lambda ctx: ctx.input.files, depends_on=["plan"],
                      output=Review)
    def review(ctx):
        return f"Review {ctx.item}. Plan: {ctx.output('plan').summary}"

    @workflow.task(id="report", depends_on=["review"], output=Review)
    def report(ctx):          # fan-in: ctx.output("review") is the list of reviews
        return "Summarise: " + "; ".join(r.summary for r in ctx.output("review"))

    refine = workflow.loop(id="refine", until=lambda ctx: ctx.output("draft").score >= 8,
                           max_iterations=5, depends_on=["report"])

    @refine.task(id="draft", output=Review)
    def draft(ctx):
        previous = ctx.previous("draft")
        return f"Improve the draft (round {ctx.iteration}): {previous.summary if previous else ''}"

A prompt function receives a :class:`~engine.workflow.context.TaskContext` and returns the
prompt text. Definition errors (cycle, unknown dependency, duplicate id, an empty prompt) raise
:class:`WorkflowDefinitionError` with one sentence, before anything runs (see
:meth:`Workflow.validate`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from engine.budget import Budget, workflow_budget
from engine.executors.settings import execution_from
from engine.workflow.definition_error import WorkflowDefinitionError
from engine.workflow.input_shape import input_shape
from engine.workflow.policies import Backoff, CachePolicy
from engine.workflow.task_spec import (
    DEFAULT_MAX_ITEMS,
    ItemsFn,
    PromptFn,
    TaskSpec,
    UntilFn,
    too_many_items,
)
from store.errors import InvalidInputError

if TYPE_CHECKING:
    from engine.workflow.context import TaskContext

_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")


@dataclass
class LoopSpec:
    """A loop: its body tasks run once per iteration until ``until`` holds or the cap is hit."""

    id: str
    until: UntilFn
    max_iterations: int
    depends_on: tuple[str, ...] = ()
    body: list[str] = field(default_factory=list)
    fail_on_max: bool = False
    workflow: Workflow | None = None

    def task(self, id: str | None = None, **options: Any) -> Callable[[PromptFn], TaskSpec]:
        """Declare a task that runs in every iteration of this loop (same options as
        :meth:`Workflow.task`; ``depends_on`` may name other body tasks or outside tasks)."""
        assert self.workflow is not None
        return self.workflow._task_decorator(id, loop=self.id, **options)


DependsOn = Sequence[str | TaskSpec | LoopSpec] | str | TaskSpec | LoopSpec | None


def _dep_ids(depends_on: DependsOn) -> tuple[str, ...]:
    if depends_on is None:
        return ()
    if isinstance(depends_on, str | TaskSpec | LoopSpec):
        depends_on = [depends_on]
    ids: list[str] = []
    for dep in depends_on:
        if isinstance(dep, TaskSpec | LoopSpec):
            ids.append(dep.id)
        elif isinstance(dep, str):
            ids.append(dep)
        else:
            raise WorkflowDefinitionError(
                f"depends_on must name tasks (ids or declared tasks), not {dep!r}."
            )
    return tuple(ids)


def _execution(value: Any, where: str) -> Any:
    """A workflow's or task's ``execution=`` checked now (a definition error otherwise)."""
    try:
        return execution_from(value, where)
    except InvalidInputError as error:
        raise WorkflowDefinitionError(str(error)) from None


def _check_id(kind: str, value: object) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise WorkflowDefinitionError(
            f"{kind} id {value!r} must be 1-100 letters, digits, '_', '.' or '-' "
            "(and not start with '.' or '-')."
        )
    return value


class Workflow:
    """A named set of tasks. See the module docstring for the API.

    ``input_model`` validates the run input (a dict or JSON when omitted). ``agents`` maps agent
    names to agent objects or config dicts (overriding ``.tether/config.toml``);
    ``default_agent`` is used by tasks that name none. ``memory`` and ``ceiling`` are stored for
    the memory runtime and ceiling guard. ``budget`` (a :class:`engine.budget.Budget` or a
    mapping with ``[budget]``'s keys) holds each run, and the workspace per UTC day while this
    workflow runs, to dollars and tokens beside the ceiling. ``concurrency`` caps tasks running
    at once. ``execution`` says where tasks' attempts run (in-process, or a Ray cluster; see
    :mod:`engine.executors.settings`); a task's own ``execution=`` wins field by field.
    """

    def __init__(
        self,
        name: str,
        *,
        input_model: type[BaseModel] | None = None,
        memory: Any = None,
        ceiling: Any = None,
        budget: Budget | Mapping[str, Any] | None = None,
        agents: Mapping[str, Any] | None = None,
        default_agent: str = "simulated",
        concurrency: int = 8,
        cache: CachePolicy | None = None,
        description: str = "",
        execution: Any = None,
    ) -> None:
        self.name = _check_id("Workflow", name)
        self.execution = _execution(execution, f"Workflow {name!r}")
        self.input_model = input_model
        self.memory = memory
        self.ceiling = ceiling
        self.budget = workflow_budget(budget, self.name)
        self.agents: dict[str, Any] = dict(agents or {})
        self.default_agent = default_agent
        if not isinstance(concurrency, int) or concurrency < 1:
            raise WorkflowDefinitionError(
                f"Workflow concurrency must be a whole number of at least 1, not {concurrency!r}."
            )
        self.concurrency = concurrency
        self.cache = cache
        self.description = description
        self.tasks: dict[str, TaskSpec] = {}
        self.loops: dict[str, LoopSpec] = {}
        self._order: list[str] = []

    # -- declaring --------------------------------------------------------------------------

    def _register(self, spec: TaskSpec) -> TaskSpec:
        _check_id("Task", spec.id)
        if spec.id in self.tasks or spec.id in self.loops:
            raise WorkflowDefinitionError(f"Task id {spec.id!r} is declared twice.")
        if not callable(spec.prompt):
            raise WorkflowDefinitionError(f"Task {spec.id!r} needs a prompt function or text.")
        if spec.output is not None and not (
            isinstance(spec.output, type) and issubclass(spec.output, BaseModel)
        ):
            raise WorkflowDefinitionError(
                f"Task {spec.id!r}: output must be a pydantic model class, not {spec.output!r}."
            )
        if not isinstance(spec.retries, int) or spec.retries < 0:
            raise WorkflowDefinitionError(
                f"Task {spec.id!r}: retries must be a whole number >= 0, not {spec.retries!r}."
            )
        if spec.timeout_s is not None and not spec.timeout_s > 0:
            raise WorkflowDefinitionError(
                f"Task {spec.id!r}: timeout_s must be positive, not {spec.timeout_s!r}."
            )
        self.tasks[spec.id] = spec
        self._order.append(spec.id)
        if spec.loop is not None:
            self.loops[spec.loop].body.append(spec.id)
        return spec

    def _task_decorator(
        self,
        id: str | None = None,
        *,
        depends_on: DependsOn = None,
        output: type[BaseModel] | None = None,
        agent: str | None = None,
        retries: int = 0,
        backoff: Backoff | float | None = None,
        timeout_s: float | None = None,
        cache: CachePolicy | None = None,
        memory: Any = None,
        isolation: str | None = None,
        items: ItemsFn | Iterable[Any] | None = None,
        item_key: Callable[[Any], str] | None = None,
        max_items: int = DEFAULT_MAX_ITEMS,
        loop: str | None = None,
        description: str = "",
        carry: bool = True,
        execution: Any = None,
    ) -> Callable[[PromptFn | str], TaskSpec]:
        if not isinstance(carry, bool):
            raise WorkflowDefinitionError(f"Task {id!r}: carry must be true or false.")
        if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
            raise WorkflowDefinitionError(
                f"Task {id!r}: max_items must be a whole number >= 1, not {max_items!r}.")

        def decorate(fn: PromptFn | str) -> TaskSpec:
            task_id = id or getattr(fn, "__name__", None)
            prompt: PromptFn
            if isinstance(fn, str):
                text = fn
                if not text.strip():
                    raise WorkflowDefinitionError(f"Task {task_id!r} has an empty prompt.")

                def fixed_prompt(ctx: TaskContext) -> str:
                    return text

                prompt = fixed_prompt
            else:
                prompt = fn
            items_fn: ItemsFn | None
            if items is None or callable(items):
                items_fn = items
            else:
                fixed = list(items)
                if len(fixed) > max_items:
                    raise WorkflowDefinitionError(too_many_items(str(task_id), max_items,
                                                                 len(fixed)))

                def items_fn(ctx: TaskContext) -> Iterable[Any]:
                    return fixed

            if isinstance(backoff, int | float):
                backoff_value = Backoff(initial_s=float(backoff))
            else:
                backoff_value = backoff or Backoff()
            return self._register(
                TaskSpec(
                    id=str(task_id),
                    prompt=prompt,
                    depends_on=_dep_ids(depends_on),
                    output=output,
                    agent=agent,
                    retries=retries,
                    backoff=backoff_value,
                    timeout_s=timeout_s,
                    cache=cache,
                    memory=memory,
                    isolation=isolation,
                    items=items_fn,
                    item_key=item_key,
                    max_items=max_items,
                    loop=loop,
                    description=description or (getattr(fn, "__doc__", None) or "").strip(),
                    carry=carry,
                    execution=_execution(execution, f"Task {task_id!r}"),
                )
            )

        return decorate

    def task(self, id: str | None = None, **options: Any) -> Callable[[PromptFn | str], TaskSpec]:
        """Decorator declaring a task whose function renders its prompt from ``ctx``.

        Options: ``depends_on`` (ids or declared tasks), ``output`` (pydantic model),
        ``agent`` (name), ``retries`` (extra attempts after a failure), ``backoff`` (seconds
        or :class:`Backoff`), ``timeout_s`` (per attempt), ``cache`` (:class:`CachePolicy`),
        ``memory`` (memory config, handed to the memory runtime), ``isolation`` (a worktree
        path: adds the isolation notice to the prompt), ``carry`` (False: run again in every
        generation of a handoff chain instead of taking over an earlier generation's output),
        ``execution`` (where its attempts run: an :class:`~engine.executors.settings.Execution`
        or a table, e.g. ``{"backend": "ray", "resources": {"claude": 1}}``).
        """
        if "items" in options:
            raise WorkflowDefinitionError("Use workflow.fan_out(...) for tasks made from a list.")
        return self._task_decorator(id, **options)

    def fan_out(
        self, id: str | None = None, *, items: ItemsFn | Iterable[Any], **options: Any
    ) -> Callable[[PromptFn | str], TaskSpec]:
        """Decorator declaring one task per item of ``items`` (a list, or a function of ``ctx``
        evaluated once the dependencies are done). Each copy sees its item as ``ctx.item`` and
        its position as ``ctx.index``; node ids are ``<id>[<key>]`` (key: the index, or
        ``item_key(item)``). A task depending on ``id`` sees the list of outputs (fan-in).
        More than ``max_items`` items (default :data:`DEFAULT_MAX_ITEMS`) fail the run before
        any of them runs: each is an agent invocation, and items often come from an agent."""
        if items is None:
            raise WorkflowDefinitionError("fan_out needs items (a list or a function of ctx).")
        return self._task_decorator(id, items=items, **options)

    def add_task(self, id: str, prompt: PromptFn | str, **options: Any) -> TaskSpec:
        """Builder form of :meth:`task` (and of :meth:`fan_out` when ``items`` is given)."""
        return self._task_decorator(id, **options)(prompt)

    def loop(
        self,
        id: str,
        *,
        until: UntilFn,
        max_iterations: int,
        depends_on: DependsOn = None,
        fail_on_max: bool = False,
    ) -> LoopSpec:
        """Declare a loop; add body tasks with ``@loop.task(...)``. After every iteration
        ``until(ctx)`` decides whether to stop (``ctx.output`` gives that iteration's outputs);
        at ``max_iterations`` the loop stops (and fails when ``fail_on_max``). Tasks depending
        on the loop see the outputs of its last iteration."""
        _check_id("Loop", id)
        if id in self.tasks or id in self.loops:
            raise WorkflowDefinitionError(f"Task id {id!r} is declared twice.")
        if not callable(until):
            raise WorkflowDefinitionError(f"Loop {id!r}: until must be a function of ctx.")
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise WorkflowDefinitionError(
                f"Loop {id!r}: max_iterations must be a whole number >= 1, not {max_iterations!r}."
            )
        spec = LoopSpec(
            id=id,
            until=until,
            max_iterations=max_iterations,
            depends_on=_dep_ids(depends_on),
            fail_on_max=fail_on_max,
            workflow=self,
        )
        self.loops[id] = spec
        self._order.append(id)
        return spec

    # -- checking ---------------------------------------------------------------------------

    def top_level_ids(self) -> list[str]:
        """Ids of the top-level graph: tasks outside loops, and loops, in declaration order."""
        return [i for i in self._order if i in self.loops or self.tasks[i].loop is None]

    def top_level_deps(self, node: str) -> set[str]:
        """Top-level dependencies of a task or loop (a loop depends on what its body needs
        from outside it)."""
        if node in self.loops:
            loop = self.loops[node]
            deps = set(loop.depends_on)
            for body_id in loop.body:
                deps |= {d for d in self.tasks[body_id].depends_on if d not in loop.body}
            deps.discard(node)
            return {self.owner_of(d) for d in deps}
        return {self.owner_of(d) for d in self.tasks[node].depends_on}

    def recorded_dependencies(self, task_id: str) -> list[str]:
        """The node ids a task's rows record as what it waits for (the run graph's edges and
        the timeline's waits read them): its own dependencies, a loop named among them as the
        loop's body tasks, and for a task a loop starts (one with no dependency inside its
        loop) the loop's own dependencies too, which it waits for though it does not name them.
        """
        spec = self.tasks[task_id]
        names = list(spec.depends_on)
        loop = self.loops.get(spec.loop) if spec.loop is not None else None
        if loop is not None and not any(d in loop.body for d in spec.depends_on):
            names.extend(loop.depends_on)
        recorded: list[str] = []
        for name in names:
            for node_id in self.loops[name].body if name in self.loops else [name]:
                if node_id not in recorded:
                    recorded.append(node_id)
        return recorded

    def owner_of(self, task_id: str) -> str:
        """The top-level node containing ``task_id`` (its loop, or itself)."""
        spec = self.tasks.get(task_id)
        if spec is not None and spec.loop is not None:
            return spec.loop
        return task_id

    def validate(self) -> None:
        """Check the whole definition; raise :class:`WorkflowDefinitionError` on the first
        problem (unknown dependency, cycle, empty loop, fan-out inside a loop)."""
        if not self.tasks:
            raise WorkflowDefinitionError(f"Workflow {self.name!r} declares no tasks.")
        known = set(self.tasks) | set(self.loops)
        for spec in self.tasks.values():
            for dep in spec.depends_on:
                if dep not in known:
                    raise WorkflowDefinitionError(
                        f"Task {spec.id!r} depends on {dep!r}, which is not declared."
                    )
                if dep == spec.id:
                    raise WorkflowDefinitionError(f"Task {spec.id!r} depends on itself.")
                if dep == spec.loop:
                    raise WorkflowDefinitionError(
                        f"Task {spec.id!r} is inside loop {dep!r} and cannot depend on it."
                    )
                dep_spec = self.tasks.get(dep)
                if (
                    dep_spec is not None
                    and dep_spec.loop is not None
                    and dep_spec.loop != spec.loop
                ):
                    raise WorkflowDefinitionError(
                        f"Task {spec.id!r} depends on {dep!r} inside loop {dep_spec.loop!r}; "
                        f"depend on the loop {dep_spec.loop!r} instead."
                    )
            if spec.loop is not None and spec.is_fan_out:
                raise WorkflowDefinitionError(
                    f"Task {spec.id!r}: fan-out inside loop {spec.loop!r} is not supported."
                )
        for loop in self.loops.values():
            for dep in loop.depends_on:
                if dep not in known:
                    raise WorkflowDefinitionError(
                        f"Loop {loop.id!r} depends on {dep!r}, which is not declared."
                    )
            if not loop.body:
                raise WorkflowDefinitionError(f"Loop {loop.id!r} has no tasks.")
            _check_acyclic(
                {b: {d for d in self.tasks[b].depends_on if d in loop.body} for b in loop.body},
                f"loop {loop.id!r}",
            )
        _check_acyclic(
            {n: self.top_level_deps(n) for n in self.top_level_ids()}, f"workflow {self.name!r}"
        )

    def parse_input(self, raw: Any) -> Any:
        """Validate run input against ``input_model`` (InvalidInputError with one sentence)."""
        if self.input_model is None:
            return raw if raw is not None else {}
        try:
            return self.input_model.model_validate(raw if raw is not None else {})
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "input"
            raise InvalidInputError(
                f"Input for workflow {self.name!r} is invalid at {where}: {first.get('msg')}; "
                f"it takes {input_shape(self.input_model)}."
            ) from error


def _check_acyclic(graph: Mapping[str, set[str]], where: str) -> None:
    """Raise WorkflowDefinitionError naming a cycle in ``graph`` (node -> dependencies)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise WorkflowDefinitionError(
                    f"Dependency cycle in {where}: {' -> '.join(reversed(cycle))}."
                )
            if state.get(dep) is None and dep in graph:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
