"""``tether tui`` (also bare ``tether``) and ``tether demo``."""

from __future__ import annotations

import click

from store.database import inspect_database_file
from store.errors import TetherError
from tui.cli.common import fail, workspace_from, workspace_option


def _workspace_dir(ctx: click.Context, workspace_dir: str | None) -> str | None:
    # `tether --workspace DIR` (group option) and `tether tui --workspace DIR` both work.
    if workspace_dir:
        return workspace_dir
    obj = ctx.find_root().obj or {}
    value = obj.get("workspace_dir") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


@click.command("tui")
@workspace_option
@click.pass_context
def tui_command(ctx: click.Context, workspace_dir: str | None) -> None:
    """Open the dashboard on the workspace (live: runs, tokens, memory, handoffs)."""
    workspace = workspace_from(_workspace_dir(ctx, workspace_dir))
    if workspace.database_path.exists():
        try:
            inspect_database_file(workspace.database_path)
        except TetherError as error:
            fail(str(error), error.exit_code)
    from tui.app import run_dashboard

    run_dashboard(workspace)


COMMANDS = [tui_command]
