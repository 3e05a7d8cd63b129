"""A click group that imports a subcommand's module only when that subcommand runs.

``tether memory get`` should not pay for importing the engine and the dashboard: each command
names the module that defines it, and the module is imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class LazyCommand:
    """Where a lazily loaded command lives, and the one line ``--help`` shows for it (so the
    group's help lists it without importing its module)."""

    module: str
    short_help: str = ""


class LazyGroup(click.Group):
    """A group whose subcommands live in modules imported on demand.

    Args:
        lazy_commands: command name -> dotted module path (or a :class:`LazyCommand`). The
            module must define a click command of that name, either listed in its
            ``COMMANDS`` or registered on this group.
    """

    def __init__(
        self,
        *args: Any,
        lazy_commands: Mapping[str, str | LazyCommand] | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.lazy_commands = {
            name: spec if isinstance(spec, LazyCommand) else LazyCommand(spec)
            for name, spec in (lazy_commands or {}).items()
        }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``: the given one-line help of commands not loaded yet
        (importing every command's module only to print its first line would be slow)."""
        rows = []
        for name in self.list_commands(ctx):
            lazy = self.lazy_commands.get(name)
            if lazy is not None and lazy.short_help and name not in self.commands:
                rows.append((name, lazy.short_help))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is not None and cmd_name not in self.commands:
            module = importlib.import_module(lazy.module)
            for command in getattr(module, "COMMANDS", ()):
                if command.name == cmd_name:
                    self.add_command(command)
        return super().get_command(ctx, cmd_name)
