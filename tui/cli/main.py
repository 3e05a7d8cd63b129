"""Entry point of the ``tether`` console script: the top-level group and its subcommands."""

from __future__ import annotations

import sys

import click

from tui.cli.common import database_url_option, workspace_option
from tui.cli.lazy import LazyGroup

# Each command's module is imported only when that command runs (see tui/cli/lazy.py).
COMMAND_MODULES = {
    "tui": "tui.cli.tui_commands",
    "demo": "tui.cli.tui_commands",
    "serve": "tui.cli.serve_commands",
    "run": "tui.cli.run_commands",
    "runs": "tui.cli.run_commands",
    "node": "tui.cli.run_commands",
    "cancel": "tui.cli.run_commands",
    "clear": "tui.cli.clear_commands",
    "doctor": "tui.cli.doctor_commands",
    "memory": "tui.cli.memory_commands",
    "notes": "tui.cli.notes_commands",
    "mcp": "tui.cli.mcp_commands",
    "worker": "tui.cli.worker_commands",
    "migrate": "tui.cli.migrate_commands",
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMAND_MODULES,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@workspace_option
@database_url_option
@click.pass_context
def cli(ctx: click.Context, workspace_dir: str | None, database_url: str | None) -> None:
    """Tether: watch agent workflow runs, review their memory, launch and clear runs."""
    ctx.ensure_object(dict)
    ctx.obj["workspace_dir"] = workspace_dir
    ctx.obj["database_url"] = database_url
    if ctx.invoked_subcommand is None:
        tui_command = cli.get_command(ctx, "tui")
        if tui_command is None:
            raise click.UsageError("the dashboard is not available in this build")
        ctx.invoke(tui_command, workspace_dir=workspace_dir)


def usage_sentence(error: click.UsageError) -> str:
    """A usage error as one sentence naming the help to read (click prints four lines)."""
    message = " ".join(error.format_message().split()).rstrip(".")
    command = error.ctx.command_path if error.ctx is not None else "tether"
    return f"{message} (see '{command} --help')."


def main() -> None:
    """Console-script entry: usage errors are one sentence with exit code 2."""
    try:
        code = cli.main(obj={}, prog_name="tether", standalone_mode=False)
    except click.UsageError as error:
        click.echo(f"tether: {usage_sentence(error)}", err=True)
        sys.exit(2)
    except click.ClickException as error:
        click.echo(f"tether: {' '.join(error.format_message().split())}", err=True)
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo("tether: interrupted.", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("tether: interrupted.", err=True)
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)  # ctx.exit(code) inside a command


if __name__ == "__main__":
    main()
