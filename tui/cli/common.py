"""Pieces every command shares: the workspace option, output formats and listings, and how a
command body runs (with or without an event loop) with errors mapped to exit codes.

Kept light on purpose: ``tether memory get`` imports this module, so asyncio and the engine are
imported only by the commands that need them (:func:`run_async`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

from store.errors import InvalidInputError, TetherError
from store.storage_errors import os_storage_error
from store.workspace import Workspace, resolve_workspace

if TYPE_CHECKING:
    from store.backend import Database

P = ParamSpec("P")
T = TypeVar("T")

EXIT_NOT_COMPLETED = 3
"""Exit code of a command that could not complete: an I/O error, a damaged database, or a run
that ended failed or cancelled (BRIEF section 4)."""

MAX_LIMIT = 100_000

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
        type=click.IntRange(1, MAX_LIMIT),
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
    none yet. A read never creates, migrates or chmods anything. A SQLite workspace is read in
    this thread (works with or without an event loop, see :func:`run_direct`)."""
    db: Database | None
    if workspace.is_shared:
        from store.backend import Database as Backend

        db = await Backend.open_readonly(workspace)
    else:
        from store.direct import DirectDatabase
        from store.errors import NotFoundError

        try:
            db = DirectDatabase.open_now(workspace, create=False, read_only=True)
        except NotFoundError:
            db = None
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


def fail(message: str, exit_code: int) -> NoReturn:
    """Print one sentence to stderr and exit with ``exit_code``."""
    click.echo(f"tether: {one_line(message)}", err=True)
    sys.exit(exit_code)


def fail_with(error: TetherError | OSError) -> NoReturn:
    """Exit with the one sentence and exit code of a Tether error, or of an OS error on a
    workspace or artifact file (disk full, read-only); any other OS error is re-raised."""
    if isinstance(error, TetherError):
        fail(str(error), error.exit_code)
    problem = os_storage_error(error, Path(error.filename or "the workspace"))
    if problem is None:
        raise error
    fail(str(problem), problem.exit_code)


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
    :class:`~store.direct.DirectDatabase`: no event loop, no thread (see :mod:`store.direct`).
    A PostgreSQL workspace has no such database: its commands run on an event loop
    (:func:`run_async`), and the body's opener (:func:`open_database`) gives the async one."""

    @wraps(coro_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        global direct_command_finished
        from store.direct import run_now

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


async def open_database(workspace: Workspace, *, create: bool) -> Database:
    """The workspace's database for a short command: in this thread (no event loop) for a
    SQLite workspace, the PostgreSQL backend for a shared one (then :func:`run_direct` has put
    the command on an event loop). With ``create`` false a missing workspace raises
    NotFoundError."""
    if workspace.is_shared:
        from store.backend import Database as Backend

        return await Backend.open(workspace, create=create)
    from store.direct import DirectDatabase

    return DirectDatabase.open_now(workspace, create=create)


def print_json(document: Any) -> None:
    """Write one JSON document to stdout."""
    click.echo(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=False))


@dataclass(frozen=True)
class Page:
    """One page of a listing: the items shown and how many more there are beyond them."""

    items: Sequence[Any]
    more: int


def page_of(rows: Sequence[T], limit: int, total: int | None = None) -> Page:
    """A page from ``rows`` read with ``limit + 1`` (so one extra row says there are more) or
    with an exact ``total`` count of matching items."""
    shown = list(rows[:limit])
    if total is not None:
        return Page(shown, max(0, total - len(shown)))
    return Page(shown, 1 if len(rows) > limit else 0)


def print_listing(
    output_format: str,
    page: Page,
    to_json: Callable[[Any], Any],
    print_text: Callable[[Sequence[Any]], None],
    *,
    empty: str,
    more_text: Callable[[int], str],
) -> None:
    """Print a listing in the chosen format, in the one shape every listing command shares.

    * ``json``: ``{"items": [...], "more": N}`` (``N`` items were left out by ``--limit``);
    * ``jsonl``: one item per line on stdout, the "N more" line on stderr;
    * ``text``: ``print_text(items)`` (or ``empty`` when there is nothing) and the "N more"
      line.
    """
    if output_format == "json":
        print_json({"items": [to_json(item) for item in page.items], "more": page.more})
        return
    if output_format == "jsonl":
        write_json_lines(to_json(item) for item in page.items)
        if page.more:
            click.echo(more_text(page.more), err=True)
        return
    if not page.items:
        click.echo(empty)
    else:
        print_text(page.items)
    if page.more:
        click.echo(more_text(page.more))


def write_json_lines(documents: Iterable[Any]) -> None:
    """One compact JSON document per line on stdout, flushed line by line."""
    for document in documents:
        click.echo(json.dumps(document, ensure_ascii=False, separators=(",", ":")))


def more_line(
    count: int, noun: str, cap: int | None = None, hint: str = "raise --limit to see them"
) -> str:
    """The last line of a cut listing: "… 1,234 more runs (raise --limit to see them)";
    a count that reached ``cap`` (where counting stopped) reads "10,000+"."""
    shown = f"{count:,}+" if cap is not None and count >= cap else f"{count:,}"
    return f"… {shown} more {noun} ({hint})"


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` when it is awaitable."""
    if isinstance(value, Awaitable):
        return await value
    return value
