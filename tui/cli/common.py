"""Pieces every click command shares: the workspace option, the output format and ``--limit``
options, and how a command body runs (with or without an event loop) with errors mapped to exit
codes. What commands print is in :mod:`tui.cli.output`; how they open the database, in
:mod:`tui.cli.database_access` (both free of click, for :mod:`tui.cli.entry`).

Kept light on purpose: ``tether memory get`` imports this module, so asyncio and the engine are
imported only by the commands that need them (:func:`run_async`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from store.db.paging import LARGEST_INTEGER
from store.errors import InvalidInputError, TetherError
from store.workspace.layout import Workspace, resolve_workspace
from tui.cli.output import MAX_LIMIT, fail, fail_with

P = ParamSpec("P")
T = TypeVar("T")

EXIT_NOT_COMPLETED = 3
"""Exit code of a command that could not complete: an I/O error, a damaged database, or a run
that ended failed or cancelled (BRIEF section 4)."""

EXIT_INTERRUPTED = 130
"""Exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)."""

class CountRange(click.IntRange):
    """click's IntRange, named so that ``--limit abc`` is "'abc' is not a valid whole number"
    (click's own name made it "not a valid integer range")."""

    name = "whole number"


class _WholeNumber(CountRange):
    """0 or more, and no more than the database can compare (a larger number failed as the
    query bound it); the help still says ``x>=0``."""

    def __init__(self) -> None:
        super().__init__(0)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number > LARGEST_INTEGER:
            self.fail(f"{number} is too large; the most is {LARGEST_INTEGER}.",
                      param, ctx)
        return number


WHOLE_NUMBER = _WholeNumber()
"""An option taking 0 or more that reaches a query (an iteration, an offset, provenance)."""

direct_command_finished = False
"""Set once a :func:`run_direct` command has run to its end (its database closed): the
console script may then end the process without tearing modules down."""

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

listing_format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "jsonl"]),
    default="text",
    show_default=True,
    help='Readable text; one JSON document {"items": [...], "more": N}; or one JSON object per '
    "line (jsonl, for streaming; the count of items left out goes to stderr).",
)


def limit_option(default: int, what: str = "items") -> Callable[[Callable[P, T]], Callable[P, T]]:
    """``--limit N`` of a listing command: at most N items, then a line saying how many more."""
    return click.option(
        "--limit",
        type=CountRange(1, MAX_LIMIT),
        default=default,
        show_default=True,
        metavar="N",
        help=f"Show at most N {what}; a last line says how many more there are.",
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
    else ``TETHER_WORKSPACE``, else the nearest ``.tether/`` (see store.workspace.layout).

    ``--database-url`` given to the command or to ``tether`` itself names a PostgreSQL
    workspace; a password in it is refused (command lines are visible to every user).
    """
    if database_url is None:
        context = click.get_current_context(silent=True)
        root = context.find_root() if context is not None else None
        if root is not None and isinstance(root.obj, dict):
            database_url = root.obj.get("database_url")
    if database_url is not None:
        from store.db.database_url import refuse_password_in_argument

        database_url = refuse_password_in_argument(database_url)
    return resolve_workspace(chosen_workspace_dir(workspace_dir), database_url=database_url)


def run_async(coro_fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """Run an async command body on an event loop (commands that run the engine or agents),
    turning Tether errors into one sentence and an exit code."""

    @wraps(coro_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        import asyncio

        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except (TetherError, OSError) as error:
            fail_with(error)
        raise AssertionError("unreachable")

    return wrapper


def run_direct(coro_fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """Run an async command body that only calls the stores on a
    :class:`~store.db.sqlite.direct.DirectDatabase`: no event loop, no thread (see
    :mod:`store.db.sqlite.direct`).
    A PostgreSQL workspace has no such database: its commands run on an event loop
    (:func:`run_async`), and the body's opener (:func:`open_database`) gives the async one."""

    @wraps(coro_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        global direct_command_finished
        from store.db.sqlite.direct import run_now

        workspace_dir = kwargs.get("workspace_dir")
        try:
            shared = workspace_from(workspace_dir if isinstance(workspace_dir, str) else None)
        except TetherError as error:
            fail(str(error), error.exit_code)
            raise AssertionError("unreachable") from error
        if shared.is_shared:
            return run_async(coro_fn)(*args, **kwargs)
        try:
            return run_now(coro_fn(*args, **kwargs))
        except (TetherError, OSError) as error:
            direct_command_finished = True
            fail_with(error)
            raise AssertionError("unreachable") from error
        finally:
            direct_command_finished = True

    return wrapper
