"""Ceilings: a run's budget in tokens (and dollars), checked at dispatch and while calls stream.

A :class:`Ceiling` on a workflow (``Workflow(..., ceiling=Ceiling(150_000, "handoff"))``) caps
the tokens one run may spend; ``max_usd`` caps its dollars too (or alone:
``Ceiling(max_usd=2.0)``). What counts is every token a call carried or produced: fresh input +
cache read + cache write + output + reasoning (the reference counted only input and output, so
a loop re-reading a huge cached context, or a model that mostly reasons, looked free). The
parsers keep reasoning in its own lane, out of output, so nothing counts twice.

The token check happens before an attempt starts (:func:`check_ceiling`, pure), against the
run's totals re-read from the database, so usage recorded by the attempt that just ended is
included; both limits are also checked while an attempt's calls stream, with the other budgets
(:mod:`engine.budget`, :mod:`engine.run.budget_meter`). When the run is at or over its budget:

* ``fail``: the node and the run fail with a clear sentence (running attempts are stopped);
* ``warn``: the task runs; a warning event is recorded;
* ``skip-remaining``: this and every later task is recorded as skipped (running attempts are
  stopped and skipped);
* ``handoff``: the run stops dispatching and hands off to a fresh run (durable ``/clear``);
  attempts already running finish (their work carries over) unless one alone passes the
  ceiling, which is stopped.

A successor generation carries every node its predecessors finished with the same inputs
(:mod:`engine.run.carry`), so a chain makes progress or stops: a generation that finished no
node fails with "no progress in generation N" instead of handing off, and generation 0 says
the run cannot fit its ceiling (:func:`handoff_refusal`). ``max_generations`` (default 10)
bounds the chain: at that generation a breach fails instead. ``distill`` lets a workflow supply
its own distiller (see :mod:`engine.handoff`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine.hooks import RUN, DispatchContext, DispatchDecision
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.token_lanes import TokenUsage
from store.runs.dispatch_guard import dispatch_state

OnExceeded = Literal["fail", "warn", "skip-remaining", "handoff"]
ON_EXCEEDED: tuple[OnExceeded, ...] = ("fail", "warn", "skip-remaining", "handoff")
DEFAULT_MAX_GENERATIONS = 10


@dataclass(frozen=True)
class Ceiling:
    """A run's budget in tokens and/or dollars and what happens when it is reached (see the
    module docstring)."""

    max_tokens: int | None = None
    on_exceeded: OnExceeded = "fail"
    max_generations: int = DEFAULT_MAX_GENERATIONS
    distill: Callable[..., Any] | None = None
    max_usd: float | None = None
    """Dollars one run may spend (the recorded cost of its calls); None: no dollar limit."""

    def __post_init__(self) -> None:
        if self.max_tokens is None and self.max_usd is None:
            raise InvalidInputError("Ceiling: give max_tokens, max_usd or both.")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens <= 0
        ):
            raise InvalidInputError(
                f"Ceiling: max_tokens must be a positive whole number, not {self.max_tokens!r}."
            )
        if self.max_usd is not None and (
            isinstance(self.max_usd, bool)
            or not isinstance(self.max_usd, int | float)
            or not self.max_usd > 0
        ):
            raise InvalidInputError(
                f"Ceiling: max_usd must be a number of dollars > 0, not {self.max_usd!r}."
            )
        if self.on_exceeded not in ON_EXCEEDED:
            raise InvalidInputError(
                f"Ceiling: on_exceeded must be one of {', '.join(ON_EXCEEDED)}, "
                f"not {self.on_exceeded!r}."
            )
        if not isinstance(self.max_generations, int) or self.max_generations < 1:
            raise InvalidInputError("Ceiling: max_generations must be a positive whole number.")
        if self.distill is not None and not callable(self.distill):
            raise InvalidInputError("Ceiling: distill must be a function.")


def counted_tokens(usage: TokenUsage) -> int:
    """Tokens that count against a ceiling or a token budget: every lane, reasoning included.

    The output lane holds what the model wrote minus its reasoning (the parsers split them so
    nothing counts twice), and reasoning is billed as output: leaving it out would let a
    reasoning model spend past a token budget unseen (the reference system's pitfall)."""
    return usage.total


def check_ceiling(ceiling: Ceiling | None, usage: TokenUsage, generation: int) -> DispatchDecision:
    """Decide what to do with the next dispatch of a run that has used ``usage`` so far (the
    token limit; dollars are checked by :mod:`engine.run.budget_meter`)."""
    if ceiling is None or ceiling.max_tokens is None:
        return RUN
    used = counted_tokens(usage)
    if used < ceiling.max_tokens:
        return RUN
    details = {
        "kind": "token-ceiling",
        "used_tokens": used,
        "max_tokens": ceiling.max_tokens,
        "on_exceeded": ceiling.on_exceeded,
        "generation": generation,
    }
    summary = f"the run used {used:,} of its {ceiling.max_tokens:,}-token ceiling"
    action = ceiling.on_exceeded
    if action == "handoff" and generation + 1 >= ceiling.max_generations:
        return DispatchDecision(
            "fail",
            f"Token ceiling reached: {summary}, and generation {generation} is the last of "
            f"{ceiling.max_generations} allowed, so it fails instead of handing off.",
            details=details,
        )
    if action == "warn":
        return DispatchDecision(
            "warn", f"Token ceiling exceeded, continuing: {summary}.", details=details
        )
    if action == "skip-remaining":
        return DispatchDecision(
            "skip", f"Skipped by the token ceiling: {summary}.", details=details
        )
    if action == "handoff":
        return DispatchDecision(
            "handoff", f"Token ceiling reached: {summary}.", trigger="ceiling", details=details
        )
    return DispatchDecision("fail", f"Token ceiling exceeded: {summary}.", details=details)


def handoff_refusal(
    ceiling: Ceiling,
    *,
    generation: int,
    used_tokens: int,
    finished_here: int,
    uncarried_tokens: int,
    largest_attempt: int,
) -> str | None:
    """Why a ceiling's handoff must not happen (the sentence the run fails with), or None.

    A successor carries what this generation finished (``engine.run.carry``), so a handoff
    helps only when this generation finished something: one that finished no node would be
    repeated by its successor with the same ceiling. In generation 0 that means the run
    cannot fit its ceiling at all; later, that the chain stopped making progress. The same
    holds when the tasks that run in every generation (``carry=False``) alone reach the
    ceiling."""
    limit = (f"{ceiling.max_tokens:,}-token" if ceiling.max_tokens is not None
             else f"${ceiling.max_usd:,.2f}")
    if finished_here == 0 and generation == 0:
        return (
            f"This run cannot fit its {limit} ceiling: generation 0 used "
            f"{used_tokens:,} tokens without finishing a node (its largest attempt used "
            f"{largest_attempt:,}), and a fresh generation would start over; raise the ceiling "
            "or split the task."
        )
    if finished_here == 0:
        return (
            f"No progress in generation {generation}: it used {used_tokens:,} tokens of its "
            f"{limit} ceiling without finishing a node, so another handoff would "
            "repeat it; the chain ends here (raise the ceiling or split the task)."
        )
    if ceiling.max_tokens is not None and uncarried_tokens >= ceiling.max_tokens:
        return (
            f"This run cannot fit its {limit} ceiling: the tasks that run again in "
            f"every generation (carry=False) used {uncarried_tokens:,} tokens on their own, "
            "so no generation could get further; raise the ceiling or let them carry."
        )
    return None


def ceiling_of(value: Any) -> Ceiling | None:
    """A workflow's ``ceiling`` setting as a :class:`Ceiling` (an int means ``fail`` at it)."""
    if value is None:
        return None
    if isinstance(value, Ceiling):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Ceiling(value)
    if isinstance(value, dict):
        return Ceiling(**value)
    raise InvalidInputError(
        f"ceiling must be a Ceiling, a token count or a dict, not {type(value).__name__}."
    )


class CeilingGuard:
    """The dispatch guard installed by ``engine.run.wiring``: reads the run's clear request and
    token totals at every dispatch (one narrow query), so a person's clear and the usage of the
    attempt that just ended both take effect at the very next dispatch, not at the scheduler's
    next poll; then applies the ceiling."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def check(self, context: DispatchContext) -> DispatchDecision:
        """Clear request first (a person asked), then :func:`check_ceiling`.

        Without a ceiling there is nothing to read: the scheduler already acts on clear
        requests (read at every attempt's end and by its monitor). With one, the run's token
        totals are read once every write queued before this dispatch is committed, so the
        usage of the node just finished counts (its end may still be in the group commit).
        """
        ceiling = ceiling_of(context.task_ceiling) or ceiling_of(context.workflow_ceiling)
        if ceiling is None:
            return RUN
        await self.db.flush()
        state = await dispatch_state(self.db, context.run.run_id)
        if state is None:
            return RUN
        if state.clear_requested:
            return DispatchDecision(
                "handoff", state.clear_reason or "cleared by a person", trigger="person"
            )
        return check_ceiling(ceiling, state.tokens, state.generation)
