"""Pieces every command shares: the workspace option, output format, error-to-exit mapping."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from store.errors import InvalidInputError, TetherError
from store.storage_errors import os_storage_error
from store.workspace import Workspace, resolve_workspace

if TYPE_CHECKING:
    from store.database import Database

P = ParamSpec("P")
T = TypeVar("T")

workspace_option = click.option(
    "--workspace",
    "workspace_dir",
    metavar="DIR",
    default=None,
    help="Workspace folder holding tether.db (default: $TETHER_WORKSPACE, else the nearest "
    ".tether/). Accepted before or after the command name.",
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


def _top_level_workspace_dir() -> str | None:
    """``DIR`` of ``tether --workspace DIR <command>`` (given before the command name)."""
    context = click.get_current_context(silent=True)
    root = context.find_root().obj if context is not None else None
    value = root.get("workspace_dir") if isinstance(root, dict) else None
    return value if isinstance(value, str) and value else None


def chosen_workspace_dir(workspace_dir: str | None) -> str | None:
    """The ``--workspace`` folder of this invocation, wherever it was written (before or after
    the command name), or None. Two different folders are refused."""
    top = _top_level_workspace_dir()
    if workspace_dir and top and Path(workspace_dir).expanduser().resolve() != Path(
        top
    ).expanduser().resolve():
        raise InvalidInputError(
            f"--workspace was given twice with different folders ({top} and {workspace_dir}); "
            "give it once."
        )
    return workspace_dir or top


def workspace_from(workspace_dir: str | None, database_url: str | None = None) -> Workspace:
    """The workspace of this invocation: ``--workspace`` (before or after the command name),
    else ``TETHER_WORKSPACE``, else the nearest ``.tether/`` (see store.workspace).

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
    return resolve_workspace(chosen_workspace_dir(workspace_dir), database_url=database_url)


@asynccontextmanager
async def reading(workspace: Workspace) -> AsyncIterator[Database | None]:
    """The workspace database opened read-only for a reading command, or None when there is
    none yet. A read never creates, migrates or chmods anything."""
    from store.database import Database

    db = await Database.open_readonly(workspace)
    try:
        yield db
    finally:
        if db is not None:
            await db.close()


def one_line(message: str) -> str:
    """``message`` on one line with control characters escaped (it may quote data, paths or
    SQLite's own multi-line reports)."""
    flat = " ".join(message.split())
    if not flat.endswith((".", "?", "!")):
        flat += "."  # messages quoting an exception's text end where it ends
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in flat)


def fail(message: str, exit_code: int) -> None:
    """Print one sentence to stderr and exit with ``exit_code``."""
    click.echo(f"tether: {one_line(message)}", err=True)
    sys.exit(exit_code)


def run_async(coro_fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """Run an async command body, turning Tether errors into one sentence and an exit code."""

    @wraps(coro_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except TetherError as error:
            fail(str(error), error.exit_code)
        except OSError as error:
            # A workspace or artifact file that could not be written (disk full, read-only).
            problem = os_storage_error(error, Path(error.filename or "the workspace"))
            if problem is None:
                raise
            fail(str(problem), problem.exit_code)
        raise AssertionError("unreachable")

    return wrapper


def print_json(document: Any) -> None:
    """Write one JSON document to stdout."""
    click.echo(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=False))


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` when it is awaitable."""
    if isinstance(value, Awaitable):
        return await value
    return value
