"""``tether run``: run a workflow in the foreground with progress on stderr.

Exit codes: 0 the run finished; 1 not found (an unknown run to resume); 2 invalid input (bad
workflow file, bad JSON input); 3 the run could not complete: it failed, was cancelled or lost,
or the workspace could not be written (BRIEF section 4). Text output passes every stored string
through :func:`tui.plain.visible`, so data can never inject terminal escape sequences. Reading
runs (``runs``, ``node``) and ``cancel`` are in :mod:`tui.cli.runs_commands`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from engine.hooks import Progress
from engine.run.engine_config import load_config
from engine.run.run_end import RunOutcome
from engine.run.wiring import open_engine, preflight
from engine.workflow.definition import Workflow
from engine.workflow.loader import load_workflow
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.model.ids import validate_run_id
from store.model.json_columns import recorded_text
from store.model.json_text import JsonTextError, describe, parse_json_text
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.cli.arguments import read_text_argument
from tui.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    format_option,
    run_async,
    workspace_from,
    workspace_option,
)
from tui.cli.output import echo, print_json, write_line
from tui.plain import spent, tokens, visible


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
        self.stream: Any = stream or sys.stderr
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
            # Details quote what agents and servers said: secrets are masked, as in the rows.
            parts.append(visible(recorded_text(update.detail) or "", keep_newlines=False)[:160])
        if update.tokens and update.state == "finished":
            parts.append(f"{tokens(update.tokens)} tokens")
        if self.stream is not None and not write_line(self.stream, "  ".join(parts)):
            self.stream = None  # its reader went away: the run goes on without progress lines


def run_summary(run: dict[str, Any], outcome: RunOutcome) -> str:
    tok = run["tokens"]
    total = sum(tok.values())
    paid = spent(total, run["cost_usd"], run["unpriced_calls"])
    lines = [
        f"run {run['run_id']} {outcome.status}: {run['nodes_done']}/{run['nodes_total']} nodes, "
        f"{tokens(total)} tokens (input {tokens(tok['input_tokens'])}, cache read "
        f"{tokens(tok['cache_read_tokens'])}, output {tokens(tok['output_tokens'])}), "
        f"cost {paid}",
    ]
    if outcome.error:
        lines.append(f"error: {visible(recorded_text(outcome.error) or '')}")
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
    async with await open_database(workspace, create=not resume_id) as db:
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
            # Ctrl-C: the run stays resumable (its owner process is gone). This line is the
            # one sentence; exiting here keeps the generic "tether: interrupted." from following.
            if printer.run_id:
                echo(
                    f"tether: interrupted; resume with: tether run {workflow_file} "
                    f"--resume {printer.run_id}",
                    err=True,
                )
                sys.exit(EXIT_INTERRUPTED)
            raise
        run = (await RunStore(db).get_run(outcome.run_id)).as_dict(db.clock.now_ms())
    if output_format == "json":
        print_json({**run, "outcome": outcome.status, "next_run_id": outcome.next_run_id})
    else:
        echo(run_summary(run, outcome), err=True)
        if run["output"] is not None:
            echo(visible(json.dumps(run["output"], ensure_ascii=False, indent=2)))
    if outcome.status != "finished":
        sys.exit(EXIT_NOT_COMPLETED)


async def enqueue_run(
    workspace: Workspace, workflow: Workflow, raw_input: Any, workflow_file: str,
    output_format: str,
) -> None:
    """Validate the input here, then queue the run for any worker; prints its id."""
    from engine.structured import to_jsonable
    from engine.workflow.root_prompts import check_root_prompts
    from store.runs.run_queue import RunQueue

    workflow.validate()
    parsed = workflow.parse_input(raw_input)
    check_root_prompts(workflow, parsed)
    async with await open_database(workspace) as db:
        run = await RunQueue(db).enqueue(
            workflow.name,
            input=to_jsonable(parsed),
            workflow_path=str(Path(workflow_file).resolve()),
        )
        document = run.as_dict(db.clock.now_ms())
    if output_format == "json":
        print_json(document)
    else:
        echo(run.run_id)  # stdout: the id alone, for scripts
        echo(f"Queued {workflow.name} as {run.run_id}; a `tether worker` on this "
             "workspace will run it (tether runs shows it as queued).", err=True)


COMMANDS = [run_command]

__all__ = ["COMMANDS", "parse_input", "run_summary"]
