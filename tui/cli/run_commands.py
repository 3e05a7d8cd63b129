"""``tether run``, ``tether runs``, ``tether node`` and ``tether cancel``.

Exit codes: 0 success; 1 not found; 2 invalid input (bad workflow file, bad JSON input,
unknown status); 3 could not complete (the run failed, was cancelled or lost, or the workspace
could not be written). Text output passes every stored string
through :func:`tui.format.visible`, so data can never inject terminal escape sequences.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import click

from engine.config import load_config
from engine.hooks import Progress
from engine.loader import load_workflow
from engine.run_end import RunOutcome
from engine.setup import open_engine, preflight
from engine.workflow import Workflow
from store.database import Database
from store.errors import InvalidInputError, NotFoundError
from store.ids import validate_node_id, validate_run_id
from store.json_text import JsonTextError, describe, parse_json_text
from store.run_records import AttemptRecord, CallRecord, MemoryBlockRecord
from store.runs import RunStore
from store.schema import RUN_STATUSES
from store.workspace import Workspace
from tui.cli.arguments import read_text_argument
from tui.cli.common import (
    format_option,
    print_json,
    reading,
    run_async,
    workspace_from,
    workspace_option,
)
from tui.format import cost as format_cost
from tui.format import duration, tokens, visible


def parse_input(raw: str | None) -> Any:
    """``--input``: JSON text, ``@FILE`` holding JSON, or ``-`` (stdin), at most 1 MiB.
    InvalidInputError (one sentence) otherwise."""
    if raw is None:
        return None
    text = read_text_argument(raw, "the run input")
    try:
        return parse_json_text(text)
    except JsonTextError as error:
        raise InvalidInputError(describe("--input", error)) from None


class ProgressPrinter:
    """Prints one line per state change to stderr (plain text: works in logs and terminals)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.run_id: str | None = None

    def __call__(self, update: Progress) -> None:
        if update.kind == "call":
            return
        if update.kind == "run" and update.state == "running":
            self.run_id = update.detail
        elapsed = time.monotonic() - self.started
        node = update.node_id or "run"
        if update.iteration:
            node = f"{node}#{update.iteration}"
        parts = [f"{elapsed:7.2f}s", f"{visible(node, keep_newlines=False):<28}", update.state]
        if update.detail:
            parts.append(visible(update.detail, keep_newlines=False)[:160])
        if update.tokens and update.state == "finished":
            parts.append(f"{tokens(update.tokens)} tokens")
        print("  ".join(parts), file=self.stream, flush=True)


def _summary(run: dict[str, Any], outcome: RunOutcome) -> str:
    tok = run["tokens"]
    total = sum(tok.values())
    spent = format_cost(run["cost_usd"] if total else None, run["unpriced_calls"])
    lines = [
        f"run {run['run_id']} {outcome.status}: {run['nodes_done']}/{run['nodes_total']} nodes, "
        f"{tokens(total)} tokens (input {tokens(tok['input_tokens'])}, cache read "
        f"{tokens(tok['cache_read_tokens'])}, output {tokens(tok['output_tokens'])}), "
        f"cost {spent}",
    ]
    if outcome.error:
        lines.append(f"error: {visible(outcome.error)}")
    if outcome.next_run_id:
        lines.append(f"continued in run {outcome.next_run_id}")
    return "\n".join(lines)


@click.command("run")
@click.argument("workflow_file", metavar="WORKFLOW")
@click.option("--input", "input_text", metavar="JSON|@FILE", help="Run input as JSON or @file.")
@click.option("--resume", "resume_id", metavar="RUN_ID", help="Continue this run instead.")
@click.option("--queue", "queue", is_flag=True,
              help="Put the run on the queue for `tether worker` instead of running it here.")
@format_option
@workspace_option
@run_async
async def run_command(
    workflow_file: str,
    input_text: str | None,
    resume_id: str | None,
    queue: bool,
    output_format: str,
    workspace_dir: str | None,
) -> None:
    """Run WORKFLOW (a .py file exposing a Workflow) in the foreground, with progress on stderr."""
    if resume_id and input_text is not None:
        raise InvalidInputError("--input cannot be combined with --resume; a run keeps its input.")
    if resume_id and queue:
        raise InvalidInputError("--queue starts a new run; it cannot be combined with --resume.")
    if resume_id:
        validate_run_id(resume_id)
    workspace = workspace_from(workspace_dir)
    raw_input = parse_input(input_text)
    workflow = load_workflow(workflow_file)
    config = load_config(workspace.config_path)
    # Everything the engine would refuse is refused before the workspace is opened (or made).
    preflight(workflow, config, raw_input, check_input=not resume_id)
    if queue:
        await enqueue_run(workspace, workflow, raw_input, workflow_file, output_format)
        return
    printer = ProgressPrinter()
    async with await Database.open(workspace, create=not resume_id) as db:
        engine = open_engine(db, on_progress=printer, config=config)
        try:
            if resume_id:
                outcome = await engine.resume(workflow, resume_id)
            else:
                outcome = await engine.start(
                    workflow, raw_input, workflow_path=str(Path(workflow_file).resolve())
                )
            outcome = await engine.run_chain(workflow, outcome)
        except asyncio.CancelledError:
            # Ctrl-C: the run stays resumable (its owner process is gone).
            if printer.run_id:
                click.echo(
                    f"tether: interrupted; resume with: tether run {workflow_file} "
                    f"--resume {printer.run_id}",
                    err=True,
                )
            raise
        run = (await RunStore(db).get_run(outcome.run_id)).as_dict(db.clock.now_ms())
    if output_format == "json":
        print_json({**run, "outcome": outcome.status, "next_run_id": outcome.next_run_id})
    else:
        click.echo(_summary(run, outcome), err=True)
        if run["output"] is not None:
            click.echo(visible(json.dumps(run["output"], ensure_ascii=False, indent=2)))
    if outcome.status != "finished":
        sys.exit(3)  # could not complete: the run failed, was cancelled or was lost


async def enqueue_run(
    workspace: Workspace, workflow: Workflow, raw_input: Any, workflow_file: str,
    output_format: str,
) -> None:
    """Validate the input here, then queue the run for any worker; prints its id."""
    from engine.root_prompts import check_root_prompts
    from engine.structured import to_jsonable
    from store.queue import RunQueue

    workflow.validate()
    parsed = workflow.parse_input(raw_input)
    check_root_prompts(workflow, parsed)
    async with await Database.open(workspace) as db:
        run = await RunQueue(db).enqueue(
            workflow.name,
            input=to_jsonable(parsed),
            workflow_path=str(Path(workflow_file).resolve()),
        )
        document = run.as_dict(db.clock.now_ms())
    if output_format == "json":
        print_json(document)
    else:
        click.echo(run.run_id)


@click.command("runs")
@click.option(
    "--status",
    type=click.Choice([*RUN_STATUSES, "stale"]),
    default=None,
    help="Only runs with this status (stale = running with an old heartbeat).",
)
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@format_option
@workspace_option
@run_async
async def runs_command(
    status: str | None, limit: int, output_format: str, workspace_dir: str | None
) -> None:
    """List runs, newest first."""
    workspace = workspace_from(workspace_dir)
    records: list[Any] = []
    now = 0
    async with reading(workspace) as db:
        if db is not None:
            records = await RunStore(db).list_runs(status=status, limit=limit)
            now = db.clock.now_ms()
    if output_format == "json":
        print_json({"runs": [r.as_dict(now) for r in records]})
        return
    if not records:
        click.echo("No runs.")
        return
    click.echo(
        f"{'RUN':<16} {'WORKFLOW':<22} {'STATUS':<11} {'NODES':>7} {'TOKENS':>8} "
        f"{'COST':>10} {'AGE':>8}"
    )
    for r in records:
        spent = format_cost(r.cost.usd if r.tokens.total else None, r.cost.unpriced_calls)
        click.echo(
            f"{r.run_id:<16} {visible(r.workflow, keep_newlines=False)[:22]:<22} "
            f"{r.display_status(now):<11} {f'{r.nodes_done}/{r.nodes_total}':>7} "
            f"{tokens(r.tokens.total):>8} {spent:>10} {duration(now - r.created_at_ms):>8}"
        )


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
    kind = "reconciliation " if call.kind == "reconciliation" else ""
    return (
        f"    call {call.call_id}: {kind}{call.bucket:<10} context {call.context_tokens:>8,} = "
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
        for key in ("num_turns", "turns", "messages", "reconnects", "exit_status"):
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
        for note in invocation.get("notes") or []:
            lines.append(f"      note: {visible(str(note), keep_newlines=False)}")
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
    head += f" - {attempt.state}{' (cached)' if attempt.cached else ''}, {took}"
    t = attempt.tokens
    mine = [c for c in calls if c.attempt == attempt.attempt and c.iteration == attempt.iteration]
    priced = [c.cost_usd for c in mine if c.cost_usd is not None]
    unpriced = sum(1 for c in mine if c.cost_usd is None and c.kind != "retry")
    lines = [
        head,
        f"    tokens: input {t.input:,}, cache read {t.cache_read:,}, cache write "
        f"{t.cache_write:,}, output {t.output:,}, reasoning {t.reasoning:,}",
        f"    cost: {format_cost(sum(priced) if priced else None, unpriced)}",
    ]
    lines.extend(_invocation_lines(attempt.details))
    if attempt.error:
        lines.append(f"    error: {visible(attempt.error)}")
    lines.extend(_call_line(c) for c in mine)
    return lines


def _memory_block_json(block: MemoryBlockRecord | None) -> dict[str, Any] | None:
    """The recalled memory block a node iteration saw (None when it has no memory config)."""
    if block is None:
        return None
    return {
        "text": block.text,
        "items": block.items,
        "bytes_used": block.bytes_used,
        "budget_bytes": block.budget_bytes,
        "truncated": block.truncated,
        "warning": block.warning,
        "degraded": block.degraded,
        "query": block.query,
        "banks": block.banks,
    }


def _memory_block_lines(block: MemoryBlockRecord) -> list[str]:
    """The memory block as text: accounting, each recalled item and why, then the block."""
    head = f"Memory block: {block.bytes_used} of {block.budget_bytes} bytes"
    head += f", {sum(1 for i in block.items if i.get('included', True))} item(s)"
    if block.truncated:
        head += ", truncated"
    lines = [head]
    if block.warning:
        lines.append(f"  {'warning' if block.degraded else 'note'}: {visible(block.warning)}")
    for item in block.items:
        mark = "" if item.get("included", True) else " (left out: budget)"
        # "why" says how the item was found (words matched, similarity, primer); blocks stored
        # before it existed only have the matched terms.
        why = str(item.get("why") or "") or "matched: " + (
            ", ".join(str(t) for t in item.get("matched_terms") or []) or "-")
        lines.append(
            f"  - {visible(str(item.get('id')))} {visible(str(item.get('namespace', '')))}"
            f" score {float(item.get('score') or 0):.3f} {visible(why)}{mark}"
        )
    if block.text:
        lines.extend(f"  | {visible(line)}" for line in block.text.split("\n"))
    return lines


@click.command("node")
@click.argument("node_id", metavar="NODE")
@click.option("--run", "run_id", required=True, metavar="RUN", help="The run the node belongs to.")
@click.option("--iteration", type=int, default=None, help="Loop iteration (default: the latest).")
@click.option("--attempts", "all_attempts", is_flag=True, help="Show every attempt in full.")
@format_option
@workspace_option
@run_async
async def node_command(
    node_id: str,
    run_id: str,
    iteration: int | None,
    all_attempts: bool,
    output_format: str,
    workspace_dir: str | None,
) -> None:
    """Show a node: status, attempts, per-call token usage with buckets, and its output."""
    validate_run_id(run_id)
    validate_node_id(node_id)
    workspace = workspace_from(workspace_dir)
    async with reading(workspace) as db:
        if db is None:
            raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
        store = RunStore(db)
        await store.get_run(run_id)
        node = await store.get_node(run_id, node_id, iteration)
        attempts = await store.list_attempts(run_id, node_id, node.iteration)
        calls = [
            c for c in await store.list_calls(run_id, node_id) if c.iteration == node.iteration
        ]
        block = await store.get_memory_block(run_id, node_id, node.iteration)
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
                "memory_block": _memory_block_json(block),
            }
        )
        return
    took = (
        duration(node.finished_at_ms - node.started_at_ms)
        if node.finished_at_ms and node.started_at_ms
        else "–"
    )
    counts: dict[str, int] = {}
    for a in attempts:
        counts[a.state] = counts.get(a.state, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
    lines = [
        f"Node: {visible(node.node_id)} (iteration {node.iteration})",
        f"Status: {node.state}{' (cached)' if node.cached else ''}",
        f"Duration: {took}",
        f"Attempts: {len(attempts)} ({summary})",
    ]
    if node.error:
        lines.append(f"Error: {visible(node.error)}")
    shown = attempts if all_attempts else attempts[-1:]
    if len(attempts) > len(shown):
        lines.append(f"  ({len(attempts) - len(shown)} earlier attempt(s); --attempts shows all)")
    for attempt in shown:
        lines.extend(_attempt_lines(attempt, calls))
    if block is not None:
        lines.extend(_memory_block_lines(block))
    if node.output is not None:
        lines.append("Output:")
        lines.append(visible(json.dumps(node.output, ensure_ascii=False, indent=2)))
    click.echo("\n".join(lines))


@click.command("cancel")
@click.argument("run_id", metavar="RUN")
@workspace_option
@run_async
async def cancel_command(run_id: str, workspace_dir: str | None) -> None:
    """Cancel RUN: the process running it stops its tasks within a moment."""
    validate_run_id(run_id)
    workspace = workspace_from(workspace_dir)
    if not workspace.exists():
        raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
    async with await Database.open(workspace, create=False) as db:
        run = await RunStore(db).request_cancel(run_id)
    if run.status == "cancelled":
        click.echo(f"Run {run_id} cancelled.")
    else:
        click.echo(f"Cancel requested for run {run_id}; its process will stop it shortly.")


COMMANDS = [run_command, runs_command, node_command, cancel_command]

__all__ = ["COMMANDS", "parse_input"]
