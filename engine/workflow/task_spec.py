"""One declared task (or fan-out template, or loop body task), as the scheduler reads it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from engine.workflow.policies import Backoff, CachePolicy

if TYPE_CHECKING:
    from engine.workflow.context import TaskContext

DEFAULT_TIMEOUT_S = 3600.0
"""An attempt's time limit when the task sets no ``timeout_s``: one hour, so an agent that
hangs (a stuck CLI, a server that never finishes its answer) ends and its node fails or
retries instead of holding the run forever."""

DEFAULT_MAX_ITEMS = 1000
"""The most nodes one fan-out makes unless it sets ``max_items``: its items often come from an
agent's output or the run's input, and each one is an agent invocation that costs money."""

PromptFn = Callable[["TaskContext"], str]
ItemsFn = Callable[["TaskContext"], Iterable[Any]]
UntilFn = Callable[["TaskContext"], bool]


@dataclass
class TaskSpec:
    """One declared task (or fan-out template, or loop body task)."""

    id: str
    prompt: PromptFn
    depends_on: tuple[str, ...] = ()
    output: type[BaseModel] | None = None
    agent: str | None = None
    retries: int = 0
    backoff: Backoff = field(default_factory=Backoff)
    timeout_s: float | None = None
    cache: CachePolicy | None = None
    memory: Any = None
    isolation: str | None = None
    items: ItemsFn | None = None
    item_key: Callable[[Any], str] | None = None
    max_items: int = DEFAULT_MAX_ITEMS
    """A fan-out with more items fails before any of them runs."""
    loop: str | None = None
    description: str = ""
    carry: bool = True
    """A handoff's successor takes this node over when an earlier generation finished it with
    the same inputs (``engine.run.carry``); False runs it in every generation."""
    execution: Any = None
    """Where its attempts run (an :class:`engine.executors.settings.Execution` or a table)."""

    @property
    def effective_timeout_s(self) -> float:
        """The attempt's time limit: ``timeout_s``, else :data:`DEFAULT_TIMEOUT_S`."""
        return self.timeout_s if self.timeout_s is not None else DEFAULT_TIMEOUT_S

    @property
    def is_fan_out(self) -> bool:
        return self.items is not None

    def __call__(self, ctx: TaskContext) -> str:
        return self.prompt(ctx)


def too_many_items(task_id: str, max_items: int, count: int | None = None) -> str:
    """The sentence for a fan-out with more than ``max_items`` items (``count`` when known:
    items made while the run runs are read one past the bound, no further)."""
    has = f"{count:,} items, more than" if count is not None else "more items than"
    return (
        f"Fan-out {task_id!r} has {has} its max_items ({max_items:,}): none of them ran "
        "(set max_items on the fan-out to allow more)."
    )
