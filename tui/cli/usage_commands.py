"""``tether usage --by day|hour|model|workflow|agent --since 7d`` (tokens and cost over time,
the Usage view's numbers) and ``tether cost RUN`` (why one run cost what it did: the Runs
view's ``$`` drill-down), read through :mod:`store.read.usage_reads` on either backend.

Exit codes: 0, 1 for a workspace or run that does not exist, 2 for a bad ``--since``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from store.model.token_lanes import CostTotal, TokenUsage
from store.read.query_fields import since_ms
from store.read.usage_reads import (
    GROUPINGS,
    UsageRow,
    run_breakdown,
    usage_over_time,
    window_start,
)
from tui.budget_lines import daily_budget_usd
from tui.cli.common import format_option, run_direct, workspace_from, workspace_option
from tui.cli.database_access import reading, require_workspace
from tui.cli.output import echo, print_json
from tui.cost_story import why_sentences
from tui.plain import cost, percent, tokens, visible


def key_text(row: UsageRow, by: str) -> str:
    """The group a row stands for: a UTC day or hour, or a name."""
    if by in ("day", "hour"):
        moment = datetime.fromtimestamp(int(row.key) / 1000, tz=UTC)
        return moment.strftime("%Y-%m-%d" if by == "day" else "%Y-%m-%d %H:00")
    return visible(str(row.key) or "(none)", keep_newlines=False)


def total_of(rows: list[UsageRow]) -> UsageRow:
    """Every row added up."""
    priced = [r.cost.usd for r in rows if r.cost.usd]
    return UsageRow("total", sum(r.calls for r in rows), TokenUsage.sum(r.tokens for r in rows),
                    CostTotal(sum(priced) if priced else 0.0,
                              sum(r.cost.unpriced_calls for r in rows)),
                    sum(r.runs for r in rows))


def usage_lines(rows: list[UsageRow], by: str, budget: float | None) -> list[str]:
    """The text table: one line per group, then the total (and the daily budget when set)."""
    width = max([len(key_text(r, by)) for r in rows] + [len(by), 10])
    lines = [f"{by.upper():<{width}}  {'CALLS':>7} {'RUNS':>5} {'TOKENS':>8} {'CACHED':>6} "
             f"{'COST':>11}"]
    for row in [*rows, total_of(rows)]:
        name = "total" if row.key == "total" else key_text(row, by)
        over = ""
        if budget is not None and by == "day" and row.key != "total" and (
            row.cost.usd or 0) > budget:
            over = f"  over the ${budget:.2f} daily budget"
        lines.append(
            f"{name:<{width}}  {row.calls:>7,} {row.runs:>5,} {tokens(row.tokens.total):>8} "
            f"{percent(row.cache_share):>6} {cost(row.cost.usd, row.cost.unpriced_calls):>11}"
            f"{over}"
        )
    return lines


@click.command("usage")
@click.option("--by", type=click.Choice(GROUPINGS), default="day", show_default=True,
              help="Group calls by UTC day or hour, or by model, workflow or agent.")
@click.option("--since", "since", default="7d", show_default=True, metavar="WHEN",
              help="From when: 7d, 12h, today, 2026-01-01 (UTC).")
@format_option
@workspace_option
@run_direct
async def usage_command(by: str, since: str, output_format: str,
                        workspace_dir: str | None) -> None:
    """Tokens and cost over time: calls, runs, tokens, cache-read share and cost per day, hour,
    model, workflow or agent."""
    from store.runs.run_store import RunStore

    workspace = workspace_from(workspace_dir)
    require_workspace(workspace)
    rows: list[UsageRow] = []
    async with reading(workspace) as db:
        now = RunStore(db).now_ms if db is not None else 0
        start = since_ms(since, now or _now())
        if db is not None:
            rows = await usage_over_time(db, by=by, since_ms=start, until_ms=now + 1)
    budget = daily_budget_usd(workspace)
    if output_format == "json":
        print_json({"by": by, "since_ms": start, "until_ms": now, "daily_budget_usd": budget,
                    "items": [r.as_dict() for r in rows], "total": total_of(rows).as_dict()})
        return
    shown = window_start(start, by)
    when = datetime.fromtimestamp(shown / 1000, tz=UTC).strftime(
        "%Y-%m-%d" if by == "day" else "%Y-%m-%d %H:00"
    )
    echo(f"Usage by {by} since {when} UTC"
         + (f" (daily budget ${budget:.2f})" if budget is not None else ""))
    if not rows:
        echo("No model call in that time.")
        return
    for line in usage_lines(rows, by, budget):
        echo(line)


def _now() -> int:
    import time

    return int(time.time() * 1000)


def breakdown_json(found: Any) -> dict[str, Any]:
    """A run's cost breakdown as one JSON document."""
    return {
        "run_id": found.run_id,
        **found.total.as_dict(),
        "tokens": found.tokens.as_dict(),
        "retried_usd": round(found.retried_usd, 9),
        "nodes": [{"node": n.key, "state": n.state, "attempts": n.attempts, "calls": n.calls,
                   "tokens": n.tokens.total, **n.cost.as_dict(),
                   "retried_usd": round(n.retried_usd, 9)} for n in found.nodes],
        "top_calls": [c.as_dict() | {"node": f"{c.node_id}#{c.iteration}"}
                      for c in found.top_calls],
        "models": [{"model": name, "tokens": t.total, **spent.as_dict()}
                   for name, t, spent in found.models],
        "why": why_sentences(found),
    }


@click.command("cost")
@click.argument("run_id", metavar="RUN")
@format_option
@workspace_option
@run_direct
async def cost_command(run_id: str, output_format: str, workspace_dir: str | None) -> None:
    """Why RUN cost what it did: its nodes by cost, its costliest calls, retries and models."""
    from store.runs.run_store import RunStore
    from tui.cli.history_commands import reading_runs

    async with reading_runs(workspace_from(workspace_dir), run_id) as (db, _now):
        await RunStore(db).get_run(run_id)
        found = await run_breakdown(db, run_id)
    if output_format == "json":
        print_json(breakdown_json(found))
        return
    echo(f"Run {run_id}: {cost(found.total.usd, found.total.unpriced_calls)}, "
         f"{tokens(found.tokens.total)} tokens")
    for sentence in why_sentences(found):
        echo(f"  {sentence}")
    echo("")
    echo(f"{'NODE':<32} {'STATE':<10} {'ATT':>3} {'CALLS':>5} {'TOKENS':>8} {'COST':>11} "
         f"{'RETRIED':>10}")
    for node in found.nodes[:20]:
        echo(f"{visible(node.key, keep_newlines=False)[:32]:<32} {node.state:<10} "
             f"{node.attempts:>3} {node.calls:>5} {tokens(node.tokens.total):>8} "
             f"{cost(node.cost.usd, node.cost.unpriced_calls):>11} "
             f"{cost(node.retried_usd) if node.retried_usd else '–':>10}")
    echo("")
    echo("Costliest calls:")
    for call in found.top_calls[:5]:
        echo(f"  #{call.call_id} {visible(call.node_id, keep_newlines=False)}#{call.iteration} "
             f"attempt {call.attempt}: {call.context_tokens:,} context, "
             f"{cost(call.cost_usd, int(call.cost_usd is None))}")


COMMANDS = [usage_command, cost_command]
