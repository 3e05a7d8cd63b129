"""Pieces every command shares: the workspace option, output format, error-to-exit mapping."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Coroutine
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import click

from store.errors import TetherError
from store.workspace import Workspace, resolve_workspace

P = ParamSpec("P")
T = TypeVar("T")

workspace_option = click.option(
    "--workspace",
    "workspace_dir",
    metavar="DIR",
    default=None,
    help="Workspace folder holding tether.db (default: nearest .tether/ or $TETHER_WORKSPACE).",
)

database_url_option = click.option(
    "--database-url",
    "database_url",
    metavar="URL",
    default=None,
    help="A PostgreSQL workspace (postgresql://user@host/db); no password here, use PGPASSWORD "
    "or ~/.pgpass (default: $TETHER_DATABASE_URL, or database_url in the workspace's "
    "config.toml).",
)

format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output as readable text or as one JSON document.",
)


def workspace_from(workspace_dir: str | None, database_url: str | None = None) -> Workspace:
    """Resolve the workspace named on the command line (or found from the environment).

    ``--database-url`` given to the command or to ``tether`` itself names a PostgreSQL
    workspace; a password in it is refused (command lines are visible to every user).
    """
    if database_url is None:
        context = click.get_current_context(silent=True)
        root = context.find_root() if context is not None else None
        if root is not None and isinstance(root.obj, dict):
            database_url = root.obj.get("database_url")
    if database_url is not None:
        from store.database_url import refuse_password_in_argument

        database_url = refuse_password_in_argument(database_url)
    return resolve_workspace(workspace_dir, database_url=database_url)


def fail(message: str, exit_code: int) -> None:
    """Print one sentence to stderr and exit with ``exit_code``."""
    click.echo(f"tether: {message}", err=True)
    sys.exit(exit_code)


def run_async(coro_fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """Run an async command body, turning Tether errors into one sentence and an exit code."""

    @wraps(coro_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except TetherError as error:
            fail(str(error), error.exit_code)
            raise AssertionError("unreachable") from error

    return wrapper


def print_json(document: Any) -> None:
    """Write one JSON document to stdout."""
    click.echo(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=False))


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` when it is awaitable."""
    if isinstance(value, Awaitable):
        return await value
    return value
