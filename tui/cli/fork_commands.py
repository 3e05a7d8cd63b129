"""``tether fork RUN NODE``: a new run of RUN's workflow from NODE, with an edit.

Every node upstream of NODE is carried over finished with the output RUN recorded (never
executed again); NODE runs with the edit (``--prompt``, ``--memory-block``, ``--agent``,
``--input``); everything else runs anew. The fork runs in the foreground with progress on
stderr, as ``tether run`` does (``--no-start`` only records it; ``tether run WORKFLOW --resume
FORK`` runs it later). Exit codes as ``tether run``: 0 finished, 1 no such run, 2 refused
(nothing written), 3 the fork did not finish.
"""

from __future__ import annotations

import json
import sys

import click

from engine.fork import ForkEdit, edit_words
from engine.run.engine_config import load_config
from engine.run.wiring import open_engine
from engine.workflow.loader import load_workflow
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.model.ids import validate_run_id
from store.runs.run_store import RunStore
from tui.cli.arguments import read_text_argument
from tui.cli.common import (
    EXIT_NOT_COMPLETED,
    format_option,
    run_async,
    workspace_from,
    workspace_option,
)
from tui.cli.output import echo, print_json
from tui.cli.run_commands import ProgressPrinter, parse_input, run_summary
from tui.plain import plural, visible


def fork_edit(prompt: str | None, memory_block: str | None, agent: str | None,
              input_text: str | None) -> ForkEdit:
    """The edit the options describe (files and stdin read, bounded; JSON parsed)."""
    return ForkEdit(
        prompt=None if prompt is None else read_text_argument(prompt, "the fork's prompt"),
        memory_block=None if memory_block is None
        else read_text_argument(memory_block, "the fork's memory block"),
        agent=agent,
        input=parse_input(input_text),
        input_given=input_text is not None,
    )


@click.command("fork")
@click.argument("run_id", metavar="RUN")
@click.argument("node_id", metavar="NODE")
@click.option("--prompt", metavar="TEXT|@FILE|-", help="The prompt NODE runs with instead.")
@click.option("--input", "input_text", metavar="JSON|@FILE",
              help="The run input the fork's nodes read instead of RUN's.")
@click.option("--memory-block", metavar="TEXT|@FILE|-",
              help="The memory block NODE gets instead of what recall would inject.")
@click.option("--agent", metavar="NAME", help="The agent NODE runs on instead.")
@click.option("--workflow", "workflow_file", metavar="FILE",
              help="The workflow file (default: the one RUN recorded).")
@click.option("--no-start", is_flag=True, help="Record the fork without running it.")
@format_option
@workspace_option
@run_async
async def fork_command(
    run_id: str, node_id: str, prompt: str | None, input_text: str | None,
    memory_block: str | None, agent: str | None, workflow_file: str | None, no_start: bool,
    output_format: str, workspace_dir: str | None,
) -> None:
    """Fork RUN from NODE with an edit: upstream nodes carried over, NODE and the rest run."""
    validate_run_id(run_id)
    edit = fork_edit(prompt, memory_block, agent, input_text)
    workspace = workspace_from(workspace_dir)
    config = load_config(workspace.config_path)
    printer = ProgressPrinter()
    async with await open_database(workspace, create=False) as db:
        origin = await RunStore(db).get_run(run_id)
        path = workflow_file or origin.workflow_path
        if not path:
            raise InvalidInputError(
                f"Run {run_id} has no workflow file recorded; name it with --workflow FILE."
            )
        workflow = load_workflow(path)
        engine = open_engine(db, on_progress=printer, config=config)
        fork = await engine.fork(workflow, run_id, node_id, edit, workflow_path=path)
        document = fork.fork or {}
        carried = len(document.get("carried") or [])
        asked = visible(str(document.get("asked") or document.get("node")))
        echo(f"Forked {run_id} from {asked} as {fork.run_id} "
             f"({edit_words(document)}; {plural(carried, 'node iteration')} carried over).",
             err=True)
        if no_start:
            if output_format == "json":
                print_json(fork.as_dict(db.clock.now_ms()))
            else:
                echo(fork.run_id)
            return
        outcome = await engine.run_chain(workflow, await engine.resume(workflow, fork.run_id))
        run = (await RunStore(db).get_run(outcome.run_id)).as_dict(db.clock.now_ms())
    if output_format == "json":
        print_json({**run, "outcome": outcome.status, "next_run_id": outcome.next_run_id})
    else:
        echo(run_summary(run, outcome), err=True)
        echo(f"compare with: tether compare {run_id} {fork.run_id}", err=True)
        if run["output"] is not None:
            echo(visible(json.dumps(run["output"], ensure_ascii=False, indent=2)))
    if outcome.status != "finished":
        sys.exit(EXIT_NOT_COMPLETED)


COMMANDS = [fork_command]
