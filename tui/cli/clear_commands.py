"""``tether clear RUN [--reason TEXT]``: the durable ``/clear`` — hand a run off to a fresh one.

For a run an engine is executing (status running, fresh heartbeat) the request is written to the
database and that engine hands off at its next dispatch. For a run no engine is running (stale
heartbeat, pending, failed, cancelled or finished) this command performs the handoff itself
and prints the new run's id; ``tether run WORKFLOW --resume NEW_ID`` continues it.
"""

from __future__ import annotations

import click

from engine.handoff import Distiller, HandoffManager, distiller_of
from engine.loader import load_workflow
from store.database import Database
from store.errors import InvalidInputError
from store.runs import RunStore
from tui.cli.common import format_option, print_json, run_async, workspace_from, workspace_option

DEFAULT_REASON = "cleared by a person"


@click.command("clear")
@click.argument("run_id", metavar="RUN")
@click.option("--reason", default=DEFAULT_REASON, show_default=True, help="Why the run is cleared.")
@workspace_option
@format_option
@run_async
async def clear_command(run_id: str, reason: str, workspace_dir: str | None,
                        output_format: str) -> None:
    """Durable /clear: hand RUN off to a fresh run carrying only distilled state."""
    if not reason.strip():
        raise InvalidInputError("A clear needs a reason; pass some text with --reason.")
    workspace = workspace_from(workspace_dir)
    db = await Database.open(workspace, create=False)
    try:
        runs = RunStore(db)
        run = await runs.get_run(run_id)
        if run.status == "handed-off":
            raise InvalidInputError(f"Run {run_id} was already handed off; clear its successor.")
        engine_running = run.status == "running" and not run.is_stale(db.clock.now_ms())
        if engine_running:
            await runs.request_clear(run_id, reason)
            document = {"run_id": run_id, "requested": True, "new_run_id": None}
            message = (
                f"Clear requested; the engine running {run_id} hands off at its next dispatch."
            )
        else:
            new_id = await HandoffManager(db).hand_off_run(
                run, reason=reason, trigger="person", distill=_workflow_distiller(run.workflow_path)
            )
            document = {"run_id": run_id, "requested": False, "new_run_id": new_id}
            message = new_id
    finally:
        await db.close()
    if output_format == "json":
        print_json(document)
    else:
        click.echo(message)


def _workflow_distiller(path: str | None) -> Distiller | None:
    """The run's workflow's own distiller when its file still loads, else the default one."""
    if not path:
        return None
    try:
        return distiller_of(load_workflow(path))
    except InvalidInputError:
        return None


COMMANDS = [clear_command]
