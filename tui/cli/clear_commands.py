"""``tether clear RUN [--reason TEXT]``: the durable ``/clear`` — hand a run off to a fresh one.

For a run an engine is executing (status running, fresh heartbeat) the request is written to the
database and that engine hands off at its next dispatch. For a run no engine is running (stale
heartbeat, pending, failed, cancelled or finished) this command performs the handoff itself
and says how to start the new run (``tether run WORKFLOW --resume NEW_ID``).
"""

from __future__ import annotations

import shlex

import click

from engine.handoff import DEFAULT_CLEAR_REASON, clear_run
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.runs.run_params import check_clear_reason
from store.runs.run_store import RunStore
from tui.cli.common import format_option, run_async, workspace_from, workspace_option
from tui.cli.output import print_json


@click.command("clear")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--reason", default=DEFAULT_CLEAR_REASON, show_default=True, help="Why the run is cleared."
)
@workspace_option
@format_option
@run_async
async def clear_command(run_id: str, reason: str, workspace_dir: str | None,
                        output_format: str) -> None:
    """Durable /clear: hand RUN off to a fresh run carrying only distilled state."""
    if not reason.strip():
        raise InvalidInputError("A clear needs a reason; pass some text with --reason.")
    check_clear_reason(reason)  # refused before the workspace is opened
    workspace = workspace_from(workspace_dir)
    async with await open_database(workspace, create=False) as db:
        result = await clear_run(db, run_id, reason)
        run = await RunStore(db).get_run(run_id)
    start = None
    if result.new_run_id is not None:
        workflow = shlex.quote(run.workflow_path) if run.workflow_path else "WORKFLOW.py"
        start = f"tether run {workflow} --resume {result.new_run_id}"
    document = {
        "run_id": run_id,
        "requested": result.requested,
        "new_run_id": result.new_run_id,
        "start_command": start,
    }
    if output_format == "json":
        print_json(document)
    elif result.requested:
        click.echo(f"Clear requested; the engine running {run_id} hands off at its next dispatch.")
    else:
        # No engine runs the new generation yet: say how to start it.
        click.echo(f"Run {run_id} handed off to {result.new_run_id}; start it with: {start}")


COMMANDS = [clear_command]
