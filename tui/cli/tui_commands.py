"""``tether tui`` (also bare ``tether``) and ``tether demo``."""

from __future__ import annotations

import asyncio
import os
import sys

import click

from store.errors import TetherError
from store.workspace.layout import ENV_VAR, Workspace
from tui.cli.common import chosen_workspace_dir, run_async, workspace_from, workspace_option
from tui.cli.dashboard_start import check_database, require_existing
from tui.cli.output import fail


def existing_workspace(ctx: click.Context, workspace_dir: str | None) -> Workspace:
    """The workspace the command names or finds; exits 1 with one sentence when it has no
    database yet, 2 when its file is not a usable Tether database."""
    named = chosen_workspace_dir(workspace_dir)
    return require_existing(workspace_from(named), named)


@click.command("tui")
@workspace_option
@click.pass_context
def tui_command(ctx: click.Context, workspace_dir: str | None) -> None:
    """Open the dashboard on the workspace (live: runs, tokens, memory, handoffs)."""
    workspace = existing_workspace(ctx, workspace_dir)
    from tui.app import run_dashboard

    code = run_dashboard(workspace)
    if code:
        sys.exit(code)


@click.command("demo")
@workspace_option
@click.option(
    "--headless",
    is_flag=True,
    help="Run the demo workflows to the end without the dashboard and print a summary.",
)
@click.pass_context
def demo_command(ctx: click.Context, workspace_dir: str | None, headless: bool) -> None:
    """Create a demo workspace (./tether-demo), run the example workflows live, open the dashboard.

    Offline: the simulated agent answers every call. Runs are slowed down so the dashboard moves
    for about a minute (parallel nodes, retries, a cache hit, recalled memory, a handoff, notes
    waiting for review).
    """
    from tui import demo

    # --workspace (either place), else TETHER_WORKSPACE, else ./tether-demo (not .tether/).
    chosen = chosen_workspace_dir(workspace_dir) or os.environ.get(ENV_VAR) or demo.DEFAULT_DEMO_DIR
    workspace = Workspace(workspace_from(chosen).root)
    check_database(workspace)
    if not demo.demo_steps():
        fail(f"No example workflows found in {demo.EXAMPLES_DIR}; reinstall Tether.", 1)
    demo.tune_agents(live=not headless)
    if headless:
        _headless(workspace)
        return
    from tui.terminal import NO_TERMINAL_EXIT, terminal_problem

    if (problem := terminal_problem()) is not None:
        fail(problem, NO_TERMINAL_EXIT)  # before the demo workspace is made for nothing
    try:
        db = asyncio.run(demo.prepare_workspace(workspace))
    except TetherError as error:
        fail(str(error), error.exit_code)
    asyncio.run(db.close())
    from tui.app import run_dashboard

    click.echo(f"Demo workspace: {workspace.root}")
    code = run_dashboard(workspace, background=[demo.live_demo])
    if code:
        sys.exit(code)
    # The line above is still on the terminal once the dashboard's screen is gone.
    click.echo(
        f"Open it again with: tether --workspace {workspace.root}  (or `tether` inside that folder)"
    )


@run_async
async def _headless(workspace: Workspace) -> None:
    from tui import demo

    result = await demo.headless_demo(workspace)
    for line in await demo.summary_lines(workspace, result):
        click.echo(line)
    if result.problems:
        raise SystemExit(1)


COMMANDS = [tui_command, demo_command]
