"""The policies a task declares beside its prompt: the backoff between retries and the
task-output cache (keys and freshness are the pure :mod:`engine.run.cache_key`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.workflow.definition_error import WorkflowDefinitionError

if TYPE_CHECKING:
    from engine.workflow.context import TaskContext

KeyFn = Callable[["TaskContext"], Any]


@dataclass(frozen=True)
class Backoff:
    """Delay before retry ``n`` (1-based): ``initial_s * factor**(n-1)``, capped at ``max_s``."""

    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 60.0

    def delay_for(self, retry: int) -> float:
        """Seconds to wait before the ``retry``-th retry."""
        return float(min(self.max_s, self.initial_s * self.factor ** max(0, retry - 1)))


@dataclass(frozen=True)
class CachePolicy:
    """Task-output cache policy.

    ``scope``: ``run`` (only this run), ``workflow`` (any run of this workflow, the default) or
    ``global``. ``ttl_ms``: entries older than this are ignored (None: no expiry). ``version``:
    bump to invalidate (encode model/provider changes here). ``key``: an optional function of
    the task context whose JSON-serialisable result joins the key. The rendered prompt and the
    run input are part of the key unless ``include_prompt``/``include_input`` are turned off.
    """

    scope: str = "workflow"
    ttl_ms: int | None = None
    version: str | int | None = None
    key: KeyFn | None = None
    include_prompt: bool = True
    include_input: bool = True

    def __post_init__(self) -> None:
        if self.scope not in ("run", "workflow", "global"):
            raise WorkflowDefinitionError(
                f"Cache scope must be run, workflow or global, not {self.scope!r}."
            )
        if self.ttl_ms is not None and (not isinstance(self.ttl_ms, int) or self.ttl_ms < 0):
            raise WorkflowDefinitionError(
                f"Cache ttl_ms must be a non-negative integer, not {self.ttl_ms!r}."
            )
