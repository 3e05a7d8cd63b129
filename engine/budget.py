"""Budgets: limits in tokens or US dollars, per run and per workspace per UTC day (pure).

Where they come from:

* a workflow's ceiling: ``Ceiling(120_000, on_exceeded="handoff", max_usd=2.0)`` holds each
  run to 120k tokens and $2 (:mod:`engine.ceiling`);
* a workflow's ``budget``: ``Workflow("nightly", budget=Budget(run_usd=3, day_usd=20))`` takes
  the same keys as ``[budget]`` (below) and holds the runs of that workflow to them, beside
  the config's (a day budget counts the whole workspace's spend that day, as the config's);
* ``[budget]`` in ``.tether/config.toml``: ``run_usd`` / ``run_tokens`` for every run (a
  second limit beside any ceiling) and ``day_usd`` / ``day_tokens`` for the whole workspace
  per UTC day; ``on_exceeded`` (fail, skip-remaining or warn; default fail) says what the run
  budgets do, and a day budget always fails the runs that reach it.

```toml
[budget]
run_usd = 5.0            # every run: at most $5
day_usd = 40.0           # the workspace: at most $40 per UTC day
day_tokens = 20_000_000
on_exceeded = "fail"     # what run_usd / run_tokens do: fail | skip-remaining | warn
```

Tokens count as a ceiling counts them (input + cache read + cache write + output +
reasoning). Dollars are the recorded cost of the calls (a call with no known price adds nothing
and is said to be unpriced). Every budget is checked before each dispatch and while calls
stream: at 50, 80 and 100 % an alert is recorded once (a ``budget.alert`` event: the dashboards
ring and show it); at 100 % the budget's ``on_exceeded`` applies
(:mod:`engine.run.budget_meter` does it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from store.errors import InvalidInputError

THRESHOLDS = (50, 80, 100)
"""Percentages of a budget at which an alert is recorded."""
RUN_BUDGET_ACTIONS = ("fail", "skip-remaining", "warn")
Unit = Literal["tokens", "usd"]
Scope = Literal["run", "day"]


@dataclass(frozen=True)
class BudgetConfig:
    """``[budget]`` of config.toml (see the module docstring)."""

    run_usd: float | None = None
    run_tokens: int | None = None
    day_usd: float | None = None
    day_tokens: int | None = None
    on_exceeded: str = "fail"


Budget = BudgetConfig
"""A workflow's budget (``Workflow(..., budget=Budget(day_usd=20))``): ``[budget]``'s keys."""


def workflow_budget(value: Any, workflow: str) -> BudgetConfig:
    """A workflow's ``budget=`` (a :class:`Budget`, a mapping or None), checked as ``[budget]``
    is; InvalidInputError names the workflow and the bad key."""
    if isinstance(value, BudgetConfig):
        value = {k: v for k, v in asdict(value).items() if v is not None}
    return parse_budget(value, f"Workflow {workflow!r}", "budget")


def parse_budget(data: Any, source: str, table: str = "[budget]") -> BudgetConfig:
    """``[budget]`` (or a workflow's ``budget``: ``table``) as a :class:`BudgetConfig`;
    InvalidInputError names the bad key."""
    if data is None:
        return BudgetConfig()
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{source}: {table} must be a table of budget settings.")
    known = {"run_usd", "run_tokens", "day_usd", "day_tokens", "on_exceeded"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidInputError(f"{source}: unknown {table} setting {unknown[0]!r}.")
    values: dict[str, Any] = {}
    for key in ("run_usd", "day_usd"):
        value = data.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise InvalidInputError(f"{source}: budget.{key} must be a number of dollars > 0.")
            values[key] = float(value)
    for key in ("run_tokens", "day_tokens"):
        value = data.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidInputError(f"{source}: budget.{key} must be a whole number > 0.")
            values[key] = value
    action = data.get("on_exceeded", "fail")
    if action not in RUN_BUDGET_ACTIONS:
        raise InvalidInputError(
            f"{source}: budget.on_exceeded must be one of {', '.join(RUN_BUDGET_ACTIONS)}, "
            f"not {action!r}."
        )
    return BudgetConfig(**values, on_exceeded=str(action))


@dataclass(frozen=True)
class Limit:
    """One budget: a maximum of ``unit`` over ``scope``, and what reaching it does."""

    scope: Scope
    unit: Unit
    maximum: float
    on_exceeded: str
    source: str
    """``ceiling`` (the workflow's), ``workflow`` (its ``budget``) or ``config``
    (``[budget]``)."""

    def key(self, run_id: str, day: str) -> str:
        """Identifies the budget across processes (its alerts are recorded once per key)."""
        if self.scope == "day" and self.source == "workflow":
            # Workflows may each set their own daily maximum over the same spend.
            return f"day:{day}:{self.unit}:workflow:{self.maximum:g}"
        if self.scope == "day":
            return f"day:{day}:{self.unit}"
        return f"run:{run_id}:{self.source}:{self.unit}"

    def amount(self, value: float) -> str:
        """``$1.63`` or ``81,234 tokens``."""
        return f"${value:,.2f}" if self.unit == "usd" else f"{int(value):,} tokens"

    def owner(self, run_id: str, day: str) -> str:
        """Whose budget: ``run r-…`` or ``the workspace on 2026-12-01``."""
        return f"the workspace on {day}" if self.scope == "day" else f"run {run_id}"

    def as_dict(self) -> dict[str, Any]:
        """JSON form (stored with the run, shown by ``tether budget``)."""
        return {"scope": self.scope, "unit": self.unit, "max": self.maximum,
                "on_exceeded": self.on_exceeded, "source": self.source}


@dataclass(frozen=True)
class Spend:
    """What a run (or the workspace on a day) has spent: counted tokens and priced dollars."""

    tokens: int = 0
    usd: float = 0.0

    def of(self, unit: Unit) -> float:
        return self.usd if unit == "usd" else float(self.tokens)


def run_limits(ceiling: Any, config: BudgetConfig,
               workflow: BudgetConfig | None = None) -> list[Limit]:
    """The per-run budgets of a run: its workflow's ceiling, the workflow's ``budget``, then
    ``[budget]``'s."""
    limits: list[Limit] = []
    if ceiling is not None:
        if ceiling.max_tokens is not None:
            limits.append(Limit("run", "tokens", ceiling.max_tokens, ceiling.on_exceeded,
                                "ceiling"))
        if ceiling.max_usd is not None:
            limits.append(Limit("run", "usd", ceiling.max_usd, ceiling.on_exceeded, "ceiling"))
    for budget, source in ((workflow, "workflow"), (config, "config")):
        if budget is None:
            continue
        if budget.run_tokens is not None:
            limits.append(Limit("run", "tokens", budget.run_tokens, budget.on_exceeded, source))
        if budget.run_usd is not None:
            limits.append(Limit("run", "usd", budget.run_usd, budget.on_exceeded, source))
    return limits


def day_limits(config: BudgetConfig, workflow: BudgetConfig | None = None) -> list[Limit]:
    """The workspace's daily budgets, the config's then the workflow's (reaching one fails the
    runs that reach it)."""
    limits: list[Limit] = []
    for budget, source in ((config, "config"), (workflow, "workflow")):
        if budget is None:
            continue
        if budget.day_tokens is not None:
            limits.append(Limit("day", "tokens", budget.day_tokens, "fail", source))
        if budget.day_usd is not None:
            limits.append(Limit("day", "usd", budget.day_usd, "fail", source))
    return limits


def percent(spent: float, maximum: float) -> int:
    """How much of a budget is spent, in whole percent (floored: 79.99 % is 79)."""
    return int(spent * 100 // maximum) if maximum > 0 else 100


def crossed(limit: Limit, spent: float, alerted: Sequence[int] = ()) -> list[int]:
    """The thresholds ``spent`` has reached and that were not alerted yet."""
    reached = percent(spent, limit.maximum)
    return [t for t in THRESHOLDS if reached >= t and t not in alerted]


def alert_text(limit: Limit, threshold: int, spent: float, run_id: str, day: str) -> str:
    """The one line the dashboards show for an alert."""
    text = (
        f"{threshold}% of {limit_name(limit)}: {limit.owner(run_id, day)} at "
        f"{limit.amount(spent)} of {limit.amount(limit.maximum)}"
    )
    if threshold >= 100:
        text += f"; {limit.on_exceeded} applies"
    return text


def limit_name(limit: Limit) -> str:
    """``the token ceiling``, ``the run budget ([budget] run_usd)``, ``the daily budget
    ([budget] day_tokens)``."""
    unit = "dollar" if limit.unit == "usd" else "token"
    if limit.source == "ceiling":
        return f"the {unit} ceiling"
    setting = f"{limit.scope}_{limit.unit}"
    scope = "daily" if limit.scope == "day" else "run"
    if limit.source == "workflow":
        return f"the workflow's {scope} budget (budget {setting})"
    return f"the {scope} budget ([budget] {setting})"


def unpriced_text(limits: Sequence[Limit], model: str | None) -> str:
    """The warning for a call without a known price under dollar budgets: they cannot count
    it, so they do not bound what the run spends on it."""
    names = ", ".join(f"{limit_name(limit)} of {limit.amount(limit.maximum)}" for limit in limits)
    shown = f"model {model}" if model else "a model that was not named"
    fix = f' (add [prices."{model}"] to config.toml)' if model else ""
    return (
        f"A call of {shown} has no known price, so {names} cannot count what it cost: "
        f"dollars spent on it are unknown and not held to the budget{fix}."
    )


def exceeded_reason(limit: Limit, spent: float, run_id: str, day: str) -> str:
    """The sentence a budget's stop is recorded with."""
    verb = "spent" if limit.unit == "usd" else "used"
    what = limit_name(limit)
    return (
        f"Stopped by {what}: {limit.owner(run_id, day)} {verb} {limit.amount(spent)} of its "
        f"{limit.amount(limit.maximum)}."
    )
