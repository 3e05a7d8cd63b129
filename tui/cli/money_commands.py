"""``tether prices`` and ``tether budget``: the price table in use and which prices a
workspace's calls used; spend against every budget (the workspace's today, each run's).

Both only read (a read-only connection; a missing workspace reads as empty). Prices come from
the workspace's ``config.toml`` over the built-in list (``engine/pricing.py``); budgets from
``[budget]`` and from what each run recorded it is held to (``engine/budget.py``).
"""

from __future__ import annotations

from typing import Any

import click

from engine.budget import Limit, day_limits, limit_name, percent
from engine.ceiling import counted_tokens
from engine.pricing import Priced, PriceTable
from engine.run.engine_config import load_config
from store.model.run_records import RunRecord
from store.runs.budget_log import DaySpend, ModelSpend, utc_day
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.cli.common import (
    format_option,
    limit_option,
    run_direct,
    workspace_from,
    workspace_option,
)
from tui.cli.database_access import reading
from tui.cli.output import print_json
from tui.plain import cost as format_cost
from tui.plain import plural, tokens, visible

# -- tether prices --------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3f}".rstrip("0").rstrip(".")


def _price_json(priced: Priced) -> dict[str, Any]:
    row, price = priced.row, priced.row.price
    long = price.long
    return {
        "model": priced.name,
        "input": price.input,
        "output": price.output,
        "cache_read": price.cache_read,
        "cache_write_5m": price.cache_write,
        "cache_write_1h": price.cache_write_1h if price.cache_write_1h is not None
        else price.cache_write,
        "long_context": None if long is None else {
            "above_prompt_tokens": price.long_above, "input": long.input, "output": long.output,
            "cache_read": long.cache_read, "cache_write_5m": long.cache_write,
        },
        "since": row.since,
        "configured": priced.configured,
        "source": row.source,
        "checked": row.checked or None,
        "note": row.note or None,
    }


def _price_line(priced: Priced) -> str:
    price = priced.row.price
    long = "-"
    if price.long is not None and price.long_above is not None:
        long = f">{tokens(price.long_above)}: {_rate(price.long.input)}/{_rate(price.long.output)}"
    origin = "config.toml" if priced.configured else priced.row.source
    if priced.row.checked:
        origin += f", checked {priced.row.checked}"
    return (
        f"{visible(priced.name, keep_newlines=False)[:22]:<22} {_rate(price.input):>7} "
        f"{_rate(price.output):>7} {_rate(price.cache_read):>6} {_rate(price.cache_write):>7} "
        f"{_rate(price.cache_write_1h or price.cache_write):>7} {long:<18} "
        f"{priced.row.since or '-':<10} {visible(origin, keep_newlines=False)}"
        + (f" ({visible(priced.row.note, keep_newlines=False)})" if priced.row.note else "")
    )


def _used_json(spend: ModelSpend, table: PriceTable) -> dict[str, Any]:
    priced = table.resolve(spend.model)
    return {
        "model": spend.model,
        "calls": spend.calls,
        "rows": spend.rows,
        "tokens": spend.tokens.as_dict(),
        **spend.cost.as_dict(),
        "simulated_calls": spend.simulated_calls,
        "priced_by": None if priced is None else priced.name,
        "priced_from": None if priced is None else (
            "config.toml" if priced.configured else priced.row.source),
    }


def _used_line(spend: ModelSpend, table: PriceTable) -> str:
    priced = table.resolve(spend.model)
    if spend.simulated_calls and spend.simulated_calls == spend.calls:
        how = "simulated (free)"
    elif priced is None:
        how = "no price: unknown"
    else:
        how = f"{priced.name} ({'config.toml' if priced.configured else 'built-in list'})"
    name = visible(spend.model or "(none)", keep_newlines=False)[:30]
    return (
        f"{name:<30} {spend.calls:>7,} {tokens(spend.tokens.total):>8} "
        f"{format_cost(spend.cost.usd, spend.cost.unpriced_calls):>10}  {visible(how)}"
    )


@click.command("prices")
@click.option("--model", default=None, metavar="MODEL",
              help="Only the price a model name resolves to (as calls record it).")
@format_option
@workspace_option
@run_direct
async def prices_command(model: str | None, output_format: str,
                         workspace_dir: str | None) -> None:
    """Print the price table in use (config.toml over the built-in list, each row with its
    source and date) and which prices this workspace's calls used.

    USD per million tokens: input, output (reasoning is billed as output), cache read, cache
    write with the 5-minute and the 1-hour TTL, and the long-context rate above a prompt size.
    """
    workspace = workspace_from(workspace_dir)
    table = PriceTable(load_config(workspace.config_path).prices)
    rows = table.rows()
    if model is not None:
        found = table.resolve(model)
        if found is None:
            if output_format == "json":  # stdout holds the one JSON document, nothing else
                print_json({"prices": [], "used": []})
            else:
                click.echo(f"{visible(model)} has no price: its calls are recorded as unknown.")
            return
        rows = [r for r in rows if r.name == found.name]
    used = await _prices_used(workspace)
    if model is not None:
        used = [u for u in used if _resolved(table, u.model) == _resolved(table, model)]
    if output_format == "json":
        print_json({"prices": [_price_json(r) for r in rows],
                    "used": [_used_json(u, table) for u in used]})
        return
    click.echo("Prices in USD per million tokens (config.toml first, then the built-in list):")
    click.echo(f"{'MODEL':<22} {'INPUT':>7} {'OUTPUT':>7} {'READ':>6} {'WRITE5M':>7} "
               f"{'WRITE1H':>7} {'LONG CONTEXT':<18} {'SINCE':<10} SOURCE")
    for row in rows:
        click.echo(_price_line(row))
    if not used:
        of = "" if model is None else f" of {visible(model)}"
        click.echo(f"This workspace has recorded no calls{of} yet.")
        return
    click.echo("")
    click.echo("Prices this workspace's calls used:")
    click.echo(f"{'MODEL':<30} {'CALLS':>7} {'TOKENS':>8} {'COST':>10}  PRICED BY")
    for spend in used:
        click.echo(_used_line(spend, table))


def _resolved(table: PriceTable, model: str | None) -> str | None:
    priced = table.resolve(model)
    return None if priced is None else priced.name


async def _prices_used(workspace: Workspace) -> list[ModelSpend]:
    async with reading(workspace) as db:
        return [] if db is None else await RunStore(db).prices_used()


# -- tether budget --------------------------------------------------------------------------


def _budget_row(limit: dict[str, Any], spent: float) -> dict[str, Any]:
    maximum = float(limit.get("max") or 0)
    return {**limit, "spent": round(spent, 6), "percent": percent(spent, maximum)}


def _run_budgets(run: RunRecord) -> list[dict[str, Any]]:
    counted = counted_tokens(run.tokens)
    return [
        _budget_row(b, (run.cost.usd or 0.0) if b.get("unit") == "usd" else counted)
        for b in run.budgets if b.get("scope", "run") == "run"
    ]


def _workflow_day_limits(runs: list[RunRecord], today: str) -> list[tuple[str, Limit]]:
    """The daily budgets the workflows of ``runs`` set for ``today`` (once each), with the
    workflow that set them."""
    found: dict[str, tuple[str, Limit]] = {}
    for run in runs:
        for row in run.budgets:
            if row.get("scope") == "day" and row.get("day") == today:
                limit = _limit_of(row)
                found.setdefault(f"{run.workflow}:{limit.key(run.run_id, today)}",
                                 (run.workflow, limit))
    return list(found.values())


def _limit_of(row: dict[str, Any]) -> Limit:
    return Limit(row.get("scope", "run"), row.get("unit", "usd"), float(row.get("max") or 0),
                 str(row.get("on_exceeded", "fail")), str(row.get("source", "config")))


def _budget_line(owner: str, row: dict[str, Any], unpriced: int) -> str:
    """One budget's line; ``unpriced`` calls (no known price) make its dollars ``+?``: the
    budget could not count them."""
    limit = _limit_of(row)
    unknown = "+?" if unpriced and limit.unit == "usd" else ""
    spent = f"{limit.amount(row['spent'])}{unknown} of {limit.amount(limit.maximum)}"
    return (f"{owner:<28} {limit_name(limit):<38} {spent:>32} {row['percent']:>4}%  "
            f"{limit.on_exceeded}")


@click.command("budget")
@click.option("--run", "run_id", default=None, metavar="RUN", help="Only this run's budgets.")
@limit_option(20, "runs")
@format_option
@workspace_option
@run_direct
async def budget_command(run_id: str | None, limit: int, output_format: str,
                         workspace_dir: str | None) -> None:
    """Show spend against every budget: the workspace's today ([budget] day_usd, day_tokens)
    and each run's (its ceiling, [budget] run_usd and run_tokens), running runs first."""
    workspace = workspace_from(workspace_dir)
    config = load_config(workspace.config_path).budget
    async with reading(workspace) as db:
        store = None if db is None else RunStore(db)
        today = utc_day(store.now_ms if store is not None else _wall_ms())
        spend = DaySpend(today) if store is None else await store.day_spend(today)
        if run_id is not None:
            runs = [] if store is None else [await store.get_run(run_id)]
        else:
            runs = [] if store is None else await store.runs_with_budgets(limit)
    counted = counted_tokens(spend.tokens)
    owned = [("", x) for x in day_limits(config)] + _workflow_day_limits(runs, today)
    day = [
        {**_budget_row(x.as_dict(), (spend.cost.usd or 0.0) if x.unit == "usd" else counted),
         **({"workflow": name} if name else {})}
        for name, x in owned
    ] if run_id is None else []
    held = [(r, b) for r in runs if (b := _run_budgets(r))]
    if output_format == "json":
        print_json({
            "day": today, "day_spend": {"calls": spend.calls, "tokens": spend.tokens.as_dict(),
                                        **spend.cost.as_dict()},
            "day_budgets": day,
            "runs": [{"run_id": r.run_id, "status": r.status, "budgets": b} for r, b in held],
        })
        return
    if run_id is None:
        spent = format_cost(spend.cost.usd or 0.0, spend.cost.unpriced_calls)
        click.echo(f"The workspace on {today} (UTC): {spent} and "
                   f"{tokens(counted)} tokens in {plural(spend.calls, 'call')}.")
        for row in day:
            owner = f"today, {row['workflow']}" if "workflow" in row else "workspace today"
            click.echo(_budget_line(owner, row, spend.cost.unpriced_calls))
        if not day:
            click.echo("No daily budget: set [budget] day_usd or day_tokens in config.toml "
                       "(or budget= on a workflow).")
    if not held:
        click.echo("No run is held to a budget." if run_id is None
                   else f"Run {run_id} is held to no budget.")
        return
    click.echo("")
    click.echo(f"{'RUN':<28} {'BUDGET':<38} {'SPENT':>32} {'USED':>5}  ON REACHING IT")
    for run, budgets in held:
        for row in budgets:
            click.echo(_budget_line(f"{run.run_id} {run.status}", row, run.cost.unpriced_calls))


def _wall_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


COMMANDS = [prices_command, budget_command]
