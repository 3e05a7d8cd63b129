"""Whether a failed attempt is tried again, after how long, and in which session (pure).

* A **transient** failure is retried while the task has retries left, after its backoff (or
  the provider's longer ``retry_after_s``); an agent CLI that reported its session id is
  resumed in that session, so the retry costs the new turns, not the work already done.
* A **limit** (subscription, session, weekly, usage credits) is never retried at once. When it
  said when it resets and that is at most ``limit_wait_s`` away (``[engine] limit_wait_s``,
  default 300 s), the node waits for it and tries again, resuming the session; at most
  :data:`MAX_LIMIT_WAITS` times per node, and without using up the task's retries (the wait is
  not the task's fault). Otherwise the node fails, and its reason says when the limit resets.
* A **permanent** failure is not retried.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.agents.agent import AgentError
from engine.agents.reset_times import describe_reset

MAX_LIMIT_WAITS = 3
"""How many times one node waits for a usage limit to reset before it fails."""
DEFAULT_LIMIT_WAIT_S = 300.0
"""The longest wait for a limit's reset (``[engine] limit_wait_s``)."""
RESET_MARGIN_S = 1.0
"""Waited beyond the announced reset (clocks and the provider's own rounding differ)."""


@dataclass(frozen=True)
class RetryPlan:
    """What happens after a failed attempt."""

    retry: bool
    wait_s: float = 0.0
    resume_session: str | None = None
    waits_for_limit: bool = False
    """The retry waits for a limit's reset (it does not use up one of the task's retries)."""
    why_not: str = ""
    """For a limit that is not waited for: the sentence added to the node's reason."""


def plan_retry(
    error: AgentError,
    *,
    failures: int,
    retries: int,
    limit_waits: int,
    backoff_s: float,
    now_ms: int,
    limit_wait_s: float = DEFAULT_LIMIT_WAIT_S,
    can_resume: bool = False,
) -> RetryPlan:
    """Decide what follows ``error`` (see the module docstring). ``failures`` counts the
    node's failed attempts that used up a retry, this one included; ``limit_waits`` the limit
    waits it already made."""
    session = error.session_id if can_resume else None
    if error.limit:
        if error.resets_at_ms is None:
            return RetryPlan(False, why_not="not retried: the limit did not say when it resets")
        wait = max(0.0, (error.resets_at_ms - now_ms) / 1000) + RESET_MARGIN_S
        when = describe_reset(error.resets_at_ms, now_ms)
        if limit_waits >= MAX_LIMIT_WAITS:
            return RetryPlan(
                False,
                why_not=f"not retried: resets at {when}, and the node already waited "
                f"{MAX_LIMIT_WAITS} times for a limit",
            )
        if wait > limit_wait_s + RESET_MARGIN_S:
            return RetryPlan(
                False,
                why_not=f"not retried: resets at {when}, beyond the {limit_wait_s:g} s this "
                "run waits for a limit ([engine] limit_wait_s)",
            )
        return RetryPlan(True, wait, session, waits_for_limit=True)
    if not error.retryable or failures > retries:
        return RetryPlan(False)
    return RetryPlan(True, max(backoff_s, error.retry_after_s or 0.0), session)
