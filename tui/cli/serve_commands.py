"""``tether serve``: the dashboard in a browser (textual-serve), on localhost by default."""

from __future__ import annotations

import click

from tui.cli.common import workspace_option
from tui.cli.output import fail
from tui.cli.tui_commands import existing_workspace


@click.command("serve")
@workspace_option
@click.option("--host", default=None, metavar="HOST",
              help="Address to listen on (default 127.0.0.1: this machine only).")
@click.option("--port", default=None, type=click.IntRange(0, 65535), metavar="PORT",
              help="Port to listen on (default 8000; 0 lets the system choose).")
@click.pass_context
def serve_command(
    ctx: click.Context, workspace_dir: str | None, host: str | None, port: int | None
) -> None:
    """Serve the dashboard to a web browser (each tab runs its own live dashboard).

    It listens on 127.0.0.1 unless --host names another address; anyone who can reach the
    port controls the dashboard, so open it to a network only when you mean to.
    """
    from tui.serve import DEFAULT_HOST, DEFAULT_PORT, DashboardServer, bind

    workspace = existing_workspace(ctx, workspace_dir)
    chosen_host = host or DEFAULT_HOST
    chosen_port = DEFAULT_PORT if port is None else port
    try:
        sock = bind(chosen_host, chosen_port)
    except OSError as error:
        fail(f"cannot listen on {chosen_host}:{chosen_port}: {error.strerror or error}.", 3)
    DashboardServer(workspace, sock, chosen_host).serve()


COMMANDS = [serve_command]
