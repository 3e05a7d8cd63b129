"""The click command line: the top-level group and its subcommands. The ``tether`` console
script (:mod:`tui.cli.entry`) runs the hot commands itself and everything else through
:func:`main`; ``python -m tui.cli.main`` is this path alone."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from store.errors import TetherError
from tui.cli import common
from tui.cli.common import database_url_option, workspace_option
from tui.cli.lazy import LazyCommand, LazyGroup
from tui.cli.output import fail_with, flush_quietly, silence

# Each command's module is imported only when that command runs (see tui/cli/lazy.py); the
# one-line help shown by `tether --help` is given here so the help imports none of them (a
# test checks each line against the command's own docstring).
COMMAND_MODULES = {
    "tui": LazyCommand(
        "tui.cli.tui_commands",
        "Open the dashboard on the workspace (live: runs, tokens, memory,...",
    ),
    "demo": LazyCommand(
        "tui.cli.tui_commands",
        "Create a demo workspace (./tether-demo), run the example...",
    ),
    "run": LazyCommand(
        "tui.cli.run_commands",
        "Run WORKFLOW (a .py file exposing a Workflow) in the foreground,...",
    ),
    "runs": LazyCommand(
        "tui.cli.runs_commands",
        "List runs, newest first, with their generation and the run each...",
    ),
    "node": LazyCommand(
        "tui.cli.runs_commands",
        "Show a node: status, attempts, per-call token usage with buckets,...",
    ),
    "filters": LazyCommand(
        "tui.cli.search_commands",
        "Saved run filters (tether runs --filter NAME, F in the dashboard's...",
    ),
    "compare": LazyCommand(
        "tui.cli.runs_commands",
        "Two runs side by side: per node, state, tokens, cost and duration...",
    ),
    "usage": LazyCommand(
        "tui.cli.usage_commands",
        "Tokens and cost over time: calls, runs, tokens, cache-read share...",
    ),
    "cost": LazyCommand(
        "tui.cli.usage_commands",
        "Why RUN cost what it did: its nodes by cost, its costliest calls,...",
    ),
    "cancel": LazyCommand(
        "tui.cli.runs_commands",
        "Cancel RUN: the process running it stops its tasks within a moment.",
    ),
    "fork": LazyCommand(
        "tui.cli.fork_commands",
        "Fork RUN from NODE with an edit: upstream nodes carried over, NODE...",
    ),
    "steer": LazyCommand(
        "tui.cli.steer_commands",
        "Send MESSAGE to the running NODE of RUN (delivered at most once, or...",
    ),
    "replay": LazyCommand(
        "tui.cli.replay_commands",
        "Show RUN as it was at one event of its log: node states, tokens so...",
    ),
    "clear": LazyCommand(
        "tui.cli.clear_commands",
        "Durable /clear: hand RUN off to a fresh run carrying only...",
    ),
    "memory": LazyCommand(
        "tui.cli.memory_commands",
        "Facts (namespaced JSON values) and the memory maintenance...",
    ),
    "notes": LazyCommand(
        "tui.cli.notes_commands",
        "Notes: append-only knowledge that people accept or reject.",
    ),
    "mcp": LazyCommand(
        "tui.cli.mcp_commands",
        "Serve remember and recall over MCP on stdin/stdout (for Claude...",
    ),
    "serve": LazyCommand(
        "tui.cli.serve_commands",
        "Serve the dashboard to a web browser (each tab runs its own live...",
    ),
    "doctor": LazyCommand(
        "tui.cli.doctor_commands",
        "Check the workspace and say how to recover; changes nothing (see...",
    ),
    "worker": LazyCommand(
        "tui.cli.worker_commands",
        "Claim queued runs (tether run --queue, n in the dashboard) and...",
    ),
    "prices": LazyCommand(
        "tui.cli.money_commands",
        "Print the price table in use (config.toml over the built-in list,...",
    ),
    "budget": LazyCommand(
        "tui.cli.money_commands",
        "Show spend against every budget: the workspace's today ([budget]...",
    ),
    "export": LazyCommand(
        "tui.cli.export_commands",
        "Send the workspace's runs to other tools (OpenTelemetry: tether...",
    ),
    "migrate": LazyCommand(
        "tui.cli.migrate_commands",
        "Copy this SQLite workspace (every table, every artifact file)...",
    ),
}


class TetherGroup(LazyGroup):
    """The top-level group: commands load lazily, a Tether error is one sentence whatever
    raised it, and output nobody reads is dropped."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TetherError as error:
            # Commands turn their errors into one sentence themselves; this catches what is
            # raised before a command's own handling starts (its workspace's config, say).
            fail_with(error)
        except BrokenPipeError:
            # The reader of stdout or stderr went away (`tether node ... | head`): what it did
            # not read is dropped, quietly, and the command ends as it would have (click
            # itself would exit 1 here).
            silence(sys.stdout)
            silence(sys.stderr)
            raise click.exceptions.Exit(0) from None


@click.group(
    cls=TetherGroup,
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


def _typed_command_path(args: list[str]) -> str:
    """``tether node`` for ``node a --run``: the commands named at the start of ``args`` (a
    usage error click's option parser raises carries no context to say so)."""
    path: list[str] = ["tether"]
    group: click.Group = cli
    with click.Context(cli, info_name="tether", obj={}) as ctx:
        values = iter(args)
        for arg in values:
            if arg in ("--workspace", "--database-url"):  # accepted before the command name
                next(values, None)
                continue
            if arg.startswith("-"):
                continue
            command = group.get_command(ctx, arg)
            if command is None:
                break
            path.append(arg)
            if not isinstance(command, click.Group):
                break
            group = command
    return " ".join(path)


def usage_sentence(error: click.UsageError, args: list[str] | None = None) -> str:
    """A usage error as one sentence naming the help to read (click prints four lines)."""
    if error.ctx is not None:
        command = error.ctx.command_path
    else:
        command = _typed_command_path(sys.argv[1:] if args is None else args)
    group = error.ctx.command if error.ctx is not None else None
    if isinstance(error, click.exceptions.NoArgsIsHelpError) and isinstance(group, click.Group):
        # `tether memory` alone: click's message is the whole help, flattened to one line.
        assert error.ctx is not None
        names = [name for name in group.list_commands(error.ctx)
                 if not getattr(group.get_command(error.ctx, name), "hidden", False)]
        spelled = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        return f"'{command}' needs a command: {spelled} (see '{command} --help')."
    message = " ".join(error.format_message().split()).rstrip(".")
    return f"{message} (see '{command} --help')."


def main(*, fast_exit: bool = True) -> None:
    """Run the click command line: usage errors are one sentence with exit code 2.

    A short command (run without an event loop, see :func:`tui.cli.common.run_direct`) has
    closed the database and written everything by the time it returns: with ``fast_exit`` the
    process ends at once instead of tearing down every module one by one (a tenth of such a
    command's start-up). Callers that run the command line inside a longer-lived process (the
    tests) pass ``fast_exit=False`` and get SystemExit as usual.
    """
    common.direct_command_finished = False
    try:
        code = cli.main(obj={}, prog_name="tether", standalone_mode=False)
    except click.UsageError as error:
        click.echo(f"tether: {usage_sentence(error)}", err=True)
        sys.exit(2)
    except click.ClickException as error:
        click.echo(f"tether: {' '.join(error.format_message().split())}", err=True)
        sys.exit(error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("tether: interrupted.", err=True)
        sys.exit(common.EXIT_INTERRUPTED)
    except SystemExit as done:
        if not isinstance(done.code, int | None):
            raise
        code = done.code
    _finish(code if isinstance(code, int) else 0, fast_exit)


def _finish(code: int, fast_exit: bool) -> None:
    if fast_exit and common.direct_command_finished:
        flush_quietly()
        os._exit(code)
    if code:
        sys.exit(code)  # ctx.exit(code) inside a command, or a command's sys.exit


if __name__ == "__main__":
    main()
