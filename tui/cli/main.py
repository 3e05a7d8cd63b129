"""Entry point of the ``tether`` console script: the top-level group and its subcommands."""

from __future__ import annotations

import click

from tui.cli.common import workspace_option


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@workspace_option
@click.pass_context
def cli(ctx: click.Context, workspace_dir: str | None) -> None:
    """Tether: watch agent workflow runs, review their memory, launch and clear runs."""
    ctx.ensure_object(dict)
    ctx.obj["workspace_dir"] = workspace_dir
    if ctx.invoked_subcommand is None:
        tui_command = cli.get_command(ctx, "tui")
        if tui_command is None:
            raise click.UsageError("the dashboard is not available in this build")
        ctx.invoke(tui_command, workspace_dir=workspace_dir)


def _register() -> None:
    """Attach every command group. Each lives in its own module under tui/cli/."""
    import importlib
    import pkgutil

    import tui.cli as package

    for module_info in pkgutil.iter_modules(package.__path__):
        if not module_info.name.endswith("_commands"):
            continue
        module = importlib.import_module(f"tui.cli.{module_info.name}")
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry."""
    cli(obj={})


if __name__ == "__main__":
    main()
