"""The budgets of one run execution, enforced while calls stream and at every dispatch.

Every call an agent reports goes through :meth:`BudgetMeter.add` as the engine records it
(both agent kinds report calls as they happen; an HTTP agent's call ends with its response).
The meter keeps the run's spend (its totals when the execution started, plus every call since)
and the workspace's spend today (re-read at every dispatch, plus this execution's calls), and
for each budget (:mod:`engine.budget`):

* records the 50/80/100 % alerts once (``budget.alert`` events, the dashboards ring);
* at 100 % applies its ``on_exceeded``: ``fail`` stops every attempt of the run that is
  talking to an agent (a command agent's process group gets SIGTERM, then SIGKILL after its
  grace period; an HTTP request is cancelled) and fails the run; ``skip-remaining`` stops them
  as skipped and skips the rest; ``handoff`` lets the attempts already running end (their work
  carries over), hands off at the next dispatch, and stops at once only an attempt that alone
  passed the budget; ``warn`` only alerts. A stopped attempt is recorded ``cancelled`` with
  the budget's sentence, its tokens and cost kept (``details.stopped_by = "budget"``).

Before each dispatch :meth:`dispatch_decision` refuses an attempt a budget no longer allows
(the ceiling's token limit stays with :class:`engine.ceiling.CeilingGuard`, which reads the
committed totals).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from engine.budget import (
    Limit,
    Spend,
    alert_text,
    crossed,
    day_limits,
    exceeded_reason,
    run_limits,
    unpriced_text,
)
from engine.ceiling import ceiling_of, counted_tokens
from engine.hooks import DispatchDecision
from engine.run.engine_config import EngineConfig
from engine.workflow.definition import Workflow
from store.clock import Clock
from store.model.run_records import RunRecord
from store.model.token_lanes import TokenUsage
from store.runs.budget_log import utc_day
from store.runs.run_store import RunStore

if TYPE_CHECKING:
    from engine.run.units import Unit


class MeteredRun(Protocol):
    """What the meter uses of the run execution it belongs to (engine.run.execution)."""

    run: RunRecord
    run_id: str
    store: RunStore
    clock: Clock
    config: EngineConfig
    workflow: Workflow
    stop: DispatchDecision | None
    failure: str | None
    in_agent: dict[tuple[str, int], Any]

    def progress(self, kind: str, unit: Unit | None, state: str, detail: str = "",
                 **kw: Any) -> None: ...

    def stop_attempts(self, keys: list[tuple[str, int]], reason: str, node_state: str) -> None:
        ...


class BudgetMeter:
    """One run execution's budgets (see the module docstring)."""

    def __init__(self, execution: MeteredRun) -> None:
        self.x = execution
        self.ceiling = ceiling_of(execution.workflow.ceiling)
        own = execution.workflow.budget
        self.run_limits = run_limits(self.ceiling, execution.config.budget, own)
        self.day_limits = day_limits(execution.config.budget, own)
        self.run = Spend()
        self.day_base = Spend()
        self.day_local = Spend()
        self.day = utc_day(execution.clock.now_ms())
        self.alerted: dict[str, set[int]] = {}
        self.enforced: set[str] = set()
        self.writes: list[Awaitable[Any]] = []
        self.unpriced_said = False

    @property
    def limits(self) -> list[Limit]:
        return [*self.run_limits, *self.day_limits]

    # -- reading spend -----------------------------------------------------------------------

    async def start(self) -> None:
        """Take the run's spend so far and today's; record the run's budgets; catch up on
        alerts a resumed run already crossed."""
        run = self.x.run
        self.run = Spend(counted_tokens(run.tokens), run.cost.usd or 0.0)
        if not self.limits:
            return
        await self.refresh_day()
        # What `tether budget` shows for the run: its own budgets and the workflow's daily
        # ones (the config's are read from config.toml), with the day they counted.
        held = [limit.as_dict() for limit in self.run_limits] + [
            {**limit.as_dict(), "day": self.day}
            for limit in self.day_limits if limit.source == "workflow"
        ]
        if held:
            await self.x.store.set_run_budget(self.x.run_id, held)
        for limit in self.limits:
            key = self._key(limit)
            self.alerted[key] = set(await self.x.store.alerts_of(key))
        self._alerts()

    async def refresh_day(self) -> None:
        """Re-read the workspace's spend today (other processes' calls included)."""
        if not self.day_limits:
            return
        day = utc_day(self.x.clock.now_ms())
        spend = await self.x.store.day_spend(day)
        self.day = day
        self.day_base = Spend(counted_tokens(spend.tokens), spend.cost.usd or 0.0)
        self.day_local = Spend()

    def spent(self, limit: Limit) -> float:
        """What ``limit``'s scope has spent in its unit."""
        if limit.scope == "run":
            return self.run.of(limit.unit)
        return self.day_base.of(limit.unit) + self.day_local.of(limit.unit)

    def remaining_usd(self) -> float | None:
        """The dollars the next attempt may spend before a budget stops it (None: no dollar
        budget): an agent that caps its own spending gets it as a second line of defence."""
        left = [
            limit.maximum if limit.on_exceeded == "handoff" else limit.maximum - self.spent(limit)
            for limit in self.limits
            if limit.unit == "usd" and limit.on_exceeded != "warn"
        ]
        return max(0.0, min(left)) if left else None

    def _key(self, limit: Limit) -> str:
        return limit.key(self.x.run_id, self.day)

    # -- while calls stream ------------------------------------------------------------------

    def add(self, unit: Unit, usage: TokenUsage, cost: float | None, attempt: Spend,
            model: str | None = None) -> None:
        """Count one recorded call of ``unit`` (``attempt``: its attempt's spend so far, this
        call included; ``cost`` None: no known price); alert and enforce."""
        counted, usd = counted_tokens(usage), cost or 0.0
        self.run = Spend(self.run.tokens + counted, self.run.usd + usd)
        self.day_local = Spend(self.day_local.tokens + counted, self.day_local.usd + usd)
        if not self.limits:
            return
        if cost is None:
            self._unpriced(unit, model)
        self._alerts()
        for limit in self.limits:
            spent = self.spent(limit)
            if spent >= limit.maximum and limit.on_exceeded != "warn":
                self._enforce(limit, spent, unit, attempt)

    def _unpriced(self, unit: Unit, model: str | None) -> None:
        """Say once per execution that the dollar budgets cannot count a call: without it a
        $5 budget over an unpriced model showed 0 % while the run spent on and on."""
        dollars = [limit for limit in self.limits if limit.unit == "usd"]
        if self.unpriced_said or not dollars:
            return
        self.unpriced_said = True
        text = unpriced_text(dollars, model)
        self.writes.append(self.x.store.append_event(
            "warning", run_id=self.x.run_id, node_id=unit.node_id, iteration=unit.iteration,
            payload={"reason": text, "kind": "budget", "model": model}))
        self.x.progress("warning", unit, "warn", text)

    def _alerts(self) -> None:
        for limit in self.limits:
            key, spent = self._key(limit), self.spent(limit)
            seen = self.alerted.setdefault(key, set())
            for threshold in crossed(limit, spent, sorted(seen)):
                seen.add(threshold)
                text = alert_text(limit, threshold, spent, self.x.run_id, self.day)
                payload = {
                    "budget": key, "threshold": threshold, "spent": round(spent, 6),
                    "text": text, **limit.as_dict(),
                }
                self.writes.append(
                    self.x.store.record_alert(key, threshold, self.x.run_id, payload)
                )
                self.x.progress("budget", None, f"budget {threshold}%", text)

    def _enforce(self, limit: Limit, spent: float, unit: Unit, attempt: Spend) -> None:
        reason = exceeded_reason(limit, spent, self.x.run_id, self.day)
        key = self._key(limit)
        if limit.on_exceeded == "handoff":
            # The next dispatch hands off (CeilingGuard, dispatch_decision); a run that needs
            # none finishes. Only an attempt that alone passed the budget is stopped: no
            # generation could fit it.
            if attempt.of(limit.unit) < limit.maximum:
                return
            decision = self._handoff(reason)
            if decision.action == "fail":  # the chain's last generation: no handoff left
                self._stop_all(key, decision.reason, "failed")
                return
            self.x.stop = self.x.stop or decision
            self.x.stop_attempts([unit.key], f"{reason} This attempt alone passed it.", "pending")
            return
        # skip-remaining: the dispatch check then skips what was not started
        self._stop_all(key, reason, "failed" if limit.on_exceeded == "fail" else "skipped")

    def _stop_all(self, key: str, reason: str, node_state: str) -> None:
        """Stop every attempt of the run talking to an agent (once per budget)."""
        if key in self.enforced:
            return
        self.enforced.add(key)
        if node_state == "failed":
            self.x.failure = self.x.failure or reason
        self.x.stop_attempts(list(self.x.in_agent), reason, node_state)

    def _handoff(self, reason: str) -> DispatchDecision:
        details = {"kind": "budget", "used_tokens": self.run.tokens,
                   "spent_usd": round(self.run.usd, 6)}
        ceiling = self.ceiling
        generation = self.x.run.generation
        if ceiling is not None and generation + 1 >= ceiling.max_generations:
            return DispatchDecision(
                "fail",
                f"{reason} Generation {generation} is the last of {ceiling.max_generations} "
                "allowed, so it fails instead of handing off.",
                details=details,
            )
        return DispatchDecision("handoff", reason, trigger="ceiling", details=details)

    # -- at dispatch -------------------------------------------------------------------------

    async def dispatch_decision(self) -> DispatchDecision | None:
        """What a budget says about starting another attempt (None: nothing against it)."""
        if not self.limits:
            return None
        await self.refresh_day()
        for limit in self.limits:
            if limit.source == "ceiling" and limit.unit == "tokens":
                continue  # CeilingGuard checks the committed totals
            spent = self.spent(limit)
            if spent < limit.maximum or limit.on_exceeded == "warn":
                continue
            reason = exceeded_reason(limit, spent, self.x.run_id, self.day)
            if limit.on_exceeded == "handoff":
                return self._handoff(reason)
            return DispatchDecision("skip" if limit.on_exceeded == "skip-remaining" else "fail",
                                    reason)
        return None

    async def settle(self) -> None:
        """Wait for the alerts queued so far (before the run's end is written)."""
        for write in self.writes:
            with contextlib.suppress(Exception):
                await write
        self.writes.clear()
