"""What a command prints: lines, JSON documents, listings in the one shape every listing
command shares, and the one sentence (with its exit code) that ends a command on an error.

Free of click on purpose: the hot commands (:mod:`tui.cli.hot_commands`) print through this
module when :mod:`tui.cli.entry` runs them without importing click. Every line is written and
flushed at once, as ``click.echo`` does, so output interleaves correctly with a pipe reader.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TypeVar

from store.db.storage_errors import os_storage_error
from store.errors import TetherError

T = TypeVar("T")

MAX_LIMIT = 100_000
"""The most items ``--limit`` lets a listing command print."""


def echo(text: str, *, err: bool = False) -> None:
    """Write one line to stdout (or stderr) and flush it; dropped once its reader is gone."""
    write_line(sys.stderr if err else sys.stdout, text)


def write_line(stream: Any, text: str) -> bool:
    """Write and flush one line; False (and nothing raised) when the reader closed the pipe
    (``tether runs | head``): output nobody reads is dropped, never fatal."""
    try:
        stream.write(text + "\n")
        stream.flush()
    except BrokenPipeError:
        silence(stream)
        return False
    return True


def silence(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null: what is still buffered, and any later
    write or the flush at exit, goes nowhere instead of raising BrokenPipeError again."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a test's StringIO): nothing to redirect
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def flush_quietly() -> None:
    """Flush stdout and stderr before the process ends, dropping what a closed pipe refuses."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            silence(stream)
        except (OSError, ValueError):
            pass


def one_line(message: str) -> str:
    """``message`` on one line with control characters escaped (it may quote data, paths or
    SQLite's own multi-line reports)."""
    flat = " ".join(message.split())
    if not flat.endswith((".", "?", "!")):
        flat += "."  # messages quoting an exception's text end where it ends
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in flat)


def fail(message: str, exit_code: int) -> NoReturn:
    """Print one sentence to stderr and exit with ``exit_code``."""
    echo(f"tether: {one_line(message)}", err=True)
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


def print_json(document: Any) -> None:
    """Write one JSON document to stdout."""
    echo(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=False))


class Page(NamedTuple):
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
            echo(more_text(page.more), err=True)
        return
    if not page.items:
        echo(empty)
    else:
        print_text(page.items)
    if page.more:
        echo(more_text(page.more))


def write_json_lines(documents: Iterable[Any]) -> None:
    """One compact JSON document per line on stdout, flushed line by line."""
    for document in documents:
        echo(json.dumps(document, ensure_ascii=False, separators=(",", ":")))


def more_line(
    count: int, noun: str, cap: int | None = None, hint: str = "raise --limit to see them"
) -> str:
    """The last line of a cut listing: "… 1,234 more runs (raise --limit to see them)";
    a count that reached ``cap`` (where counting stopped) reads "10,000+"."""
    shown = f"{count:,}+" if cap is not None and count >= cap else f"{count:,}"
    if shown == "1":  # "1 more run" (the nouns are given in the plural)
        noun = noun.removesuffix("s")
    return f"… {shown} more {noun} ({hint})"
