"""A click group that imports a subcommand's module only when that subcommand runs.

``tether memory get`` should not pay for importing the engine and the dashboard: each command
names the module that defines it, and the module is imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """A group whose subcommands live in modules imported on demand.

    Args:
        lazy_commands: command name -> dotted module path. The module must define a click
            command of that name, either listed in its ``COMMANDS`` or registered on this group.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_path = self.lazy_commands.get(cmd_name)
        if module_path is not None and cmd_name not in self.commands:
            module = importlib.import_module(module_path)
            for command in getattr(module, "COMMANDS", ()):
                if command.name == cmd_name:
                    self.add_command(command)
        return super().get_command(ctx, cmd_name)
