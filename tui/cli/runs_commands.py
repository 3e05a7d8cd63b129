"""``tether runs``, ``tether node`` and ``tether cancel``: reading runs and asking one to stop.

These only read and write the run records, so they run without an event loop on a
:class:`~store.db.sqlite.direct.DirectDatabase` and start quickly (``tether run`` is in
:mod:`tui.cli.run_commands`). Exit codes: 0 success, 1 not found, 2 invalid input. Text output
passes every stored string through :func:`tui.plain.visible`, so data can never inject terminal
escape sequences.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

import click

from store.errors import NotFoundError
from store.model.history_records import MemoryBlockRecord
from store.model.ids import validate_node_id, validate_run_id
from store.model.run_records import AttemptRecord, CallRecord, NodeRecord
from store.model.states import RUN_STATUSES
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.cli.arguments import split_iteration
from tui.cli.common import (
    WHOLE_NUMBER,
    format_option,
    limit_option,
    listing_format_option,
    run_direct,
    workspace_from,
    workspace_option,
)
from tui.cli.database_access import open_database, reading
from tui.cli.hot_commands import DEFAULT_RUNS_LIMIT, list_runs
from tui.cli.memory_block_text import memory_block_json, memory_block_lines
from tui.cli.output import page_of, print_json, print_listing
from tui.plain import cost as format_cost
from tui.plain import duration, plural, visible

DEFAULT_ATTEMPTS_LIMIT = 10
DEFAULT_FAN_OUT_LIMIT = 200


async def open_runs(workspace: Workspace) -> RunStore:
    """The run records of an existing workspace (:func:`tui.cli.common.open_database`;
    NotFoundError when the workspace has no database)."""
    return RunStore(await open_database(workspace, create=False))


# -- tether runs ----------------------------------------------------------------------------


@click.command("runs")
@click.option(
    "--status",
    type=click.Choice([*RUN_STATUSES, "stale"]),
    default=None,
    help="Only runs with this status (stale = running with an old heartbeat).",
)
@click.option(
    "--where",
    metavar="QUERY",
    default=None,
    help="Only runs the query matches, e.g. 'status = failed AND created > -7d', "
    "'cost > 0.5', 'model STARTS_WITH claude', 'input.repo = demo', 'text ~ pytest' "
    "(docs/commands.md lists every field).",
)
@click.option("--filter", "filter_name", metavar="NAME", default=None,
              help="Only runs a saved filter matches (tether filters lists them).")
@click.option("--save", metavar="NAME", default=None,
              help="Also save the --where query as the filter NAME.")
@click.option(
    "--scan",
    type=click.IntRange(1, 1_000_000),
    default=2000,
    show_default=True,
    metavar="N",
    help="A full-text condition (text, prompt, output, log) reads the newest N runs; the "
    "output says what it covered.",
)
@click.option("--timeline", "timeline_run", metavar="RUN", default=None,
              help="Print RUN's timeline: every node's attempts, calls and tool calls in time.")
@click.option("--forks", "forks_run", metavar="RUN", default=None,
              help="Print RUN's fork chain: the run it was forked from, back to the first, "
              "and every fork below it, with the node and the edit of each.")
@limit_option(DEFAULT_RUNS_LIMIT, "runs")
@listing_format_option
@workspace_option
@run_direct
async def runs_command(
    status: str | None,
    where: str | None,
    filter_name: str | None,
    save: str | None,
    scan: int,
    timeline_run: str | None,
    forks_run: str | None,
    limit: int,
    output_format: str,
    workspace_dir: str | None,
) -> None:
    """List runs, newest first, with their generation and the run each one continues."""
    workspace = workspace_from(workspace_dir)
    if timeline_run is not None:
        from tui.cli.history_commands import print_timeline

        await print_timeline(workspace, timeline_run, None, output_format)
        return
    if forks_run is not None:
        from tui.cli.history_commands import print_fork_chain

        await print_fork_chain(workspace, forks_run, output_format)
        return
    if where is None and filter_name is None and save is None:
        await list_runs(workspace, status=status, limit=limit, output_format=output_format)
        return
    from tui.cli.search_commands import search_listing

    await search_listing(
        workspace, where=where, filter_name=filter_name, status=status, limit=limit,
        output_format=output_format, save=save, scan=scan,
    )


# -- tether node ----------------------------------------------------------------------------


def _call_line(call: CallRecord) -> str:
    t = call.tokens
    detail = call.detail if isinstance(call.detail, dict) else {}
    if call.kind == "retry":
        said = f"HTTP {detail['status']}" if detail.get("status") else "request failed"
        what = (
            f"fell back {detail['fallback']}"
            if detail.get("fallback")
            else f"waited {float(detail.get('wait_s') or 0):.2f}s"
        )
        return (
            f"    call {call.call_id}: retry, {said}, {what}: "
            f"{visible(str(detail.get('error', '')), keep_newlines=False)[:160]}"
        )
    sim = " simulated" if call.simulated else ""
    if detail.get("usage") == "not reported":
        return (
            f"    call {call.call_id}: usage not reported by the server ({visible(call.agent)}"
            f"{'/' + visible(call.model) if call.model else ''}) cost unknown"
        )
    kind = "reconciliation " if call.kind == "reconciliation" else ""
    # A whole turn's usage is no context window: never shown with a bucket.
    where = (
        "turn total (several model requests; no bucket)"
        if detail.get("aggregate")
        else f"{call.bucket:<10} context"
    )
    return (
        f"    call {call.call_id}: {kind}{where} {call.context_tokens:>8,} = "
        f"input {t.input:,} + cache read {t.cache_read:,} + cache write {t.cache_write:,}; "
        f"output {t.output:,}, reasoning {t.reasoning:,} ({visible(call.agent)}"
        f"{'/' + visible(call.model) if call.model else ''}{sim}) "
        f"cost {format_cost(call.cost_usd, int(call.cost_usd is None))}"
    )


def _invocation_lines(details: Any) -> list[str]:
    """What the agent passed and reported per invocation (command line, session, models)."""
    invocations = details.get("invocations") if isinstance(details, dict) else None
    lines: list[str] = []
    for invocation in invocations if isinstance(invocations, list) else []:
        if not isinstance(invocation, dict):
            continue
        command = invocation.get("command")
        if isinstance(command, list):
            lines.append(f"    command: {visible(shlex.join(str(a) for a in command))}")
        facts = []
        for key, label in (("session_id", "id"), ("thread_id", "thread")):
            if invocation.get(key):
                facts.append(f"{label} {invocation[key]}")
        for key in ("num_turns", "turns", "requests", "messages", "reconnects", "exit_status"):
            if invocation.get(key) is not None:
                facts.append(f"{key.replace('_', ' ')} {invocation[key]}")
        if invocation.get("total_cost_usd") is not None:
            facts.append(f"reported cost {format_cost(float(invocation['total_cost_usd']))}")
        if facts:
            lines.append(f"    session: {visible(', '.join(facts), keep_newlines=False)}")
        models = invocation.get("models")
        for name, usage in (models.items() if isinstance(models, dict) else []):
            if isinstance(usage, dict):
                spent = sum(int(v) for k, v in usage.items() if k.endswith("_tokens"))
                reported = usage.get("cost_usd")
                lines.append(
                    f"      model {visible(str(name))}: {spent:,} tokens, cost "
                    f"{format_cost(reported if isinstance(reported, int | float) else None)}"
                )
        lines.extend(_tool_lines(invocation.get("tool_calls"), invocation.get("tool_calls_total")))
        for note in invocation.get("notes") or []:
            lines.append(f"      note: {visible(str(note), keep_newlines=False)}")
    return lines


def _ran_on(attempt: AttemptRecord) -> str:
    """Where the attempt's agent ran: the Ray node in full (host and id), or in-process."""
    if attempt.executor is not None:
        return f"{attempt.host or '?'}, {attempt.executor} node {attempt.executor_node or '?'}"
    return attempt.ran_on


def _tool_lines(records: Any, total: Any) -> list[str]:
    """The tool calls an agent CLI made: how many of each status, then each that did not
    complete."""
    records = [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    if not records:
        return []
    statuses: dict[str, int] = {}
    for record in records:
        statuses[str(record.get("status"))] = statuses.get(str(record.get("status")), 0) + 1
    count = total if isinstance(total, int) else len(records)
    said = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    lines = [f"      tool calls: {count} ({visible(said, keep_newlines=False)})"]
    for record in records:
        if record.get("status") not in ("completed", None):
            why = record.get("error") or (
                f"exit code {record['exit_code']}" if "exit_code" in record else ""
            )
            text = f"{record.get('type')} {record.get('name')} {record.get('status')}"
            text += f": {why}" if why else ""
            lines.append(f"      tool: {visible(text, keep_newlines=False)}")
    return lines


def _attempt_lines(attempt: AttemptRecord, calls: list[CallRecord]) -> list[str]:
    took = (
        duration(attempt.finished_at_ms - attempt.started_at_ms)
        if attempt.finished_at_ms
        else "running"
    )
    head = f"  attempt {attempt.attempt}"
    if attempt.iteration:
        head += f" (iteration {attempt.iteration})"
    details = attempt.details if isinstance(attempt.details, dict) else {}
    marker = " (cached)" if attempt.cached else ""
    if details.get("stopped_by") == "budget":
        marker = " (stopped by a budget)"
    head += f" - {attempt.state}{marker}, {took}"
    if details.get("resumed_session"):
        head += (f"; continued session {visible(str(details['resumed_session']))} of attempt "
                 f"{details.get('continues_attempt', '?')}")
    t = attempt.tokens
    mine = [c for c in calls if c.attempt == attempt.attempt and c.iteration == attempt.iteration]
    priced = [c.cost_usd for c in mine if c.cost_usd is not None]
    unpriced = sum(1 for c in mine if c.cost_usd is None and c.kind != "retry")
    lines = [
        head,
        f"    tokens: input {t.input:,}, cache read {t.cache_read:,}, cache write "
        f"{t.cache_write:,}, output {t.output:,}, reasoning {t.reasoning:,}",
        f"    cost: {format_cost(sum(priced) if priced else None, unpriced)}",
        f"    ran on: {visible(_ran_on(attempt), keep_newlines=False)}",
    ]
    lines.extend(_invocation_lines(attempt.details))
    details = attempt.details if isinstance(attempt.details, dict) else {}
    for warning in details.get("warnings") or []:
        lines.append(f"    warning: {visible(str(warning), keep_newlines=False)}")
    if attempt.error:
        lines.append(f"    error: {visible(attempt.error)}")
    lines.extend(_call_line(c) for c in mine)
    return lines


@click.command("node")
@click.argument("node_id", metavar="NODE")
@click.option("--run", "run_id", required=True, metavar="RUN", help="The run the node belongs to.")
@click.option(
    "--iteration", type=WHOLE_NUMBER, default=None, help="Loop iteration (default: latest)."
)
@click.option("--attempts", "all_attempts", is_flag=True, help="Show a page of attempts in full.")
@click.option("--timeline", is_flag=True,
              help="Show the node on a time axis: waits, attempts, calls and tool calls.")
@limit_option(DEFAULT_ATTEMPTS_LIMIT, "attempts (newest first) with --attempts or --format json")
@click.option(
    "--offset",
    type=WHOLE_NUMBER,
    default=0,
    show_default=True,
    metavar="K",
    help="Skip the K newest attempts (the next page).",
)
@format_option
@workspace_option
@run_direct
async def node_command(
    node_id: str,
    run_id: str,
    iteration: int | None,
    all_attempts: bool,
    timeline: bool,
    limit: int,
    offset: int,
    output_format: str,
    workspace_dir: str | None,
) -> None:
    """Show a node: status, attempts, per-call token usage with buckets, and its output.

    NODE is a node id as `tether run` prints it: `plan`, `review[api.py]`, `draft#2` (a loop
    node at iteration 2). A fan-out's id (`review`) lists the nodes it made.
    """
    validate_run_id(run_id)
    node_id, iteration = split_iteration(node_id, iteration)
    validate_node_id(node_id)
    workspace = workspace_from(workspace_dir)
    if timeline:
        from tui.cli.history_commands import print_timeline

        await print_timeline(workspace, run_id, (node_id, iteration), output_format)
        return
    async with reading(workspace) as db:
        if db is None:
            raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
        await _show_node(
            RunStore(db), run_id, node_id, iteration, all_attempts, limit, offset, output_format
        )


async def _show_node(
    store: RunStore,
    run_id: str,
    node_id: str,
    iteration: int | None,
    all_attempts: bool,
    limit: int,
    offset: int,
    output_format: str,
) -> None:
    await store.get_run(run_id)
    try:
        node = await store.get_node(run_id, node_id, iteration)
    except NotFoundError:
        copies = await store.fan_out_nodes(run_id, node_id, DEFAULT_FAN_OUT_LIMIT + 1)
        if not copies or iteration is not None:
            raise
        _print_fan_out(node_id, copies, output_format)
        return
    states = await store.attempt_states(run_id, node.node_id, node.iteration)
    total = sum(states.values())
    page_size = limit if all_attempts or output_format == "json" else 1
    attempts = await store.attempts_page(
        run_id, node.node_id, node.iteration, limit=page_size, offset=offset
    )
    calls: list[CallRecord] = []
    if attempts:
        calls = await store.calls_of_attempts(
            run_id, node.node_id, node.iteration, attempts[0].attempt, attempts[-1].attempt
        )
    block = await store.get_memory_block(run_id, node.node_id, node.iteration)
    steers = [s for s in await store.list_steers(run_id, node.node_id)
              if s.iteration == node.iteration]
    if output_format == "json":
        print_json(
            {
                "run_id": run_id,
                **node.as_dict(),
                "attempts": [
                    {
                        **a.as_dict(),
                        "calls": [c.as_dict() for c in calls if c.attempt == a.attempt],
                    }
                    for a in attempts
                ],
                "attempts_total": total,
                "attempts_offset": offset,
                "memory_block": memory_block_json(block),
                "steers": [s.as_dict() for s in steers],
            }
        )
        return
    from tui.cli.steer_commands import steer_lines

    lines = _node_lines(node, attempts, calls, states, offset, block, all_attempts)
    click.echo("\n".join([*lines, *steer_lines(steers)]))


def _node_lines(
    node: NodeRecord,
    attempts: list[AttemptRecord],
    calls: list[CallRecord],
    states: dict[str, int],
    offset: int,
    block: MemoryBlockRecord | None,
    all_attempts: bool,
) -> list[str]:
    took = (
        duration(node.finished_at_ms - node.started_at_ms)
        if node.finished_at_ms and node.started_at_ms
        else "–"
    )
    total = sum(states.values())
    summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
    marker = " (cached)" if node.cached else ""
    if node.carried_from:
        marker = f" (carried from run {node.carried_from}: no attempt here)"
    lines = [
        f"Node: {visible(node.node_id)} (iteration {node.iteration})",
        f"Status: {node.state}{marker}",
        f"Duration: {took}",
        f"Attempts: {total} ({summary})",
    ]
    if node.error:
        lines.append(f"Error: {visible(node.error)}")
    older = total - offset - len(attempts)
    if older > 0:
        hint = (
            f"--offset {offset + len(attempts)} shows the next page"
            if all_attempts
            else "--attempts shows them"
        )
        lines.append(f"  ({plural(older, 'earlier attempt')}; {hint})")
    for attempt in attempts:
        lines.extend(_attempt_lines(attempt, calls))
    if block is not None:
        lines.extend(memory_block_lines(block))
    if node.output is not None:
        lines.append("Output:")
        lines.append(visible(json.dumps(node.output, ensure_ascii=False, indent=2)))
    return lines


def _print_fan_out(fan_out_id: str, copies: list[NodeRecord], output_format: str) -> None:
    """``tether node review``: the nodes fan-out ``review`` made, as a listing."""
    page = page_of(copies, DEFAULT_FAN_OUT_LIMIT)

    def print_text(nodes: Sequence[NodeRecord]) -> None:
        click.echo(f"{visible(fan_out_id)} is a fan-out; its nodes:")
        for node in nodes:
            name = visible(node.node_id, keep_newlines=False)
            suffix = f"#{node.iteration}" if node.iteration else ""
            click.echo(f"  {name}{suffix}  {node.state}")

    print_listing(
        output_format,
        page,
        lambda node: {"node_id": node.node_id, "iteration": node.iteration, "state": node.state},
        print_text,
        empty="",
        more_text=lambda _: f"… more nodes of {visible(fan_out_id)} (show one with its full id)",
    )


# -- tether cancel --------------------------------------------------------------------------


@click.command("cancel")
@click.argument("run_id", metavar="RUN")
@workspace_option
@run_direct
async def cancel_command(run_id: str, workspace_dir: str | None) -> None:
    """Cancel RUN: the process running it stops its tasks within a moment."""
    validate_run_id(run_id)
    workspace = workspace_from(workspace_dir)
    if not workspace.exists():
        raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
    store = await open_runs(workspace)
    try:
        run = await store.request_cancel(run_id)
    finally:
        await store.db.close()
    if run.status == "cancelled":
        click.echo(f"Run {run_id} cancelled.")
    else:
        click.echo(f"Cancel requested for run {run_id}; its process will stop it shortly.")


COMMANDS = [runs_command, node_command, cancel_command]


# -- tether compare -------------------------------------------------------------------------


@click.command("compare")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--node", "node_key", metavar="NODE", default=None,
              help="Also diff this node's prompt, memory block and output, word by word "
              "(its latest iteration in either run; draft#2 names another).")
@format_option
@workspace_option
@run_direct
async def compare_command(run_a: str, run_b: str, node_key: str | None, output_format: str,
                          workspace_dir: str | None) -> None:
    """Two runs side by side: per node, state, tokens, cost and duration (two generations of a
    chain, a run and its fork, any two runs)."""
    from tui.cli.history_commands import print_compare

    # As `tether node`: a loop node without #N is its latest iteration, not its first.
    node = None if node_key is None else split_iteration(node_key, None)
    await print_compare(workspace_from(workspace_dir), run_a, run_b, node, output_format)


COMMANDS.append(compare_command)
