"""The ``tether`` console script: the hot commands straight away, everything else through click.

``tether memory get``, ``tether notes add`` and ``tether runs`` are called from agents' hooks
and scripts in loops, where start-up is most of their cost: Python itself starts in about
11 ms, and importing click (20 ms) and dataclasses (9 ms) would triple that. So this module
reads the command line of those three commands itself, when it is one of their ordinary
forms (:func:`parse_hot`), and runs the same bodies the click commands run
(:mod:`tui.cli.hot_commands`). The dashboard's own command line (``tether``, ``tether tui``,
with ``--workspace DIR``) opens it the same way (:func:`parse_dashboard`): its first paint
waits for whatever is imported before Textual starts.

Anything else goes to click untouched, and click then decides exactly as it always has: help,
any option or argument this parser does not know, a malformed value, a repeated option, a
PostgreSQL workspace. The fast path never has to reproduce a usage error, so the two ways
cannot disagree about one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NamedTuple

from store.model.states import RUN_STATUSES

HOT_COMMANDS = ("memory get", "notes add", "runs")
# For each hot command: its positional arguments and, per option, the values it accepts
# (None: any text) and whether it may be repeated. Tests check these against the click
# commands' own parameters, so the two cannot drift apart.
_SPECS: dict[str, tuple[int, dict[str, tuple[tuple[str, ...] | None, bool]]]] = {
    "memory get": (2, {"--format": (("text", "json"), False)}),
    "notes add": (
        2,
        {
            "--status": (("pending", "accepted"), False),
            "--supersedes": (None, True),
            "--tag": (None, True),
            "--kind": (None, False),
        },
    ),
    "runs": (
        0,
        {
            "--status": ((*RUN_STATUSES, "stale"), False),
            "--limit": (None, False),
            "--format": (("text", "json", "jsonl"), False),
        },
    ),
}

# Options of a hot command that only click runs (a search, a timeline): a command line with one
# of them is not a hot command line at all (parse_hot does not know them, so it returns None).
CLICK_ONLY: dict[str, frozenset[str]] = {
    "runs": frozenset({"--where", "--filter", "--save", "--scan", "--timeline", "--forks"}),
}


class HotCall(NamedTuple):
    """A hot command line, parsed: the command, its positional arguments, its options (each
    with every value given) and the ``--workspace`` folder, if any."""

    command: str
    arguments: tuple[str, ...]
    options: dict[str, list[str]]
    workspace_dir: str | None


def parse_hot(argv: Sequence[str]) -> HotCall | None:
    """``argv`` (without the program name) as a hot command, or None when it is anything else
    or anything this parser does not fully understand (click then handles it)."""
    args = list(argv)
    workspace_dirs: list[str] = []
    while args and args[0].startswith("--workspace"):
        taken = _take_value(args, 0, "--workspace")
        if taken is None:
            return None
        workspace_dirs.append(taken)
    command = _command_at(args)
    if command is None:
        return None
    positional_count, specs = _SPECS[command]
    rest = args[len(command.split()):]
    arguments: list[str] = []
    options: dict[str, list[str]] = {}
    while rest:
        token = rest[0]
        if token == "-" or not token.startswith("-"):
            arguments.append(rest.pop(0))
            continue
        name = token.split("=", 1)[0]
        if name == "--workspace":
            value = _take_value(rest, 0, name)
            if value is None:
                return None
            workspace_dirs.append(value)
            continue
        if name not in specs:
            return None  # --help, --, a typo, an option of another command: click says
        choices, repeatable = specs[name]
        value = _take_value(rest, 0, name)
        if value is None or (choices is not None and value not in choices):
            return None
        if name in options and not repeatable:
            return None
        options.setdefault(name, []).append(value)
    if len(arguments) != positional_count or len(workspace_dirs) > 1:
        return None
    if "--limit" in options and _limit(options["--limit"][0]) is None:
        return None
    workspace_dir = workspace_dirs[0] if workspace_dirs else None
    return HotCall(command, tuple(arguments), options, workspace_dir)


def _command_at(args: list[str]) -> str | None:
    for command in HOT_COMMANDS:
        words = command.split()
        if args[: len(words)] == words:
            return command
    return None


def _take_value(args: list[str], index: int, name: str) -> str | None:
    """Remove ``--name VALUE`` or ``--name=VALUE`` at ``index`` and return the value; None
    when it is not exactly that (no value, or a value that looks like an option)."""
    token = args.pop(index)
    if token.startswith(name + "="):
        value = token[len(name) + 1 :]
    elif token == name and index < len(args):
        value = args.pop(index)
    else:
        return None
    return None if value.startswith("-") and value != "-" else value


def _limit(text: str) -> int | None:
    from tui.cli.output import MAX_LIMIT

    if not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if 1 <= value <= MAX_LIMIT else None


def run_hot(call: HotCall) -> int | None:
    """Run a parsed hot command and return its exit code, or None when it must go through
    click after all (a PostgreSQL workspace runs on an event loop there). Errors are one
    sentence on stderr, with the exit code :func:`tui.cli.common.run_direct` gives them."""
    from store.db.sqlite.direct import run_now
    from store.errors import TetherError
    from store.workspace.layout import resolve_workspace
    from tui.cli import hot_commands
    from tui.cli.output import echo, fail_with

    try:
        try:
            workspace = resolve_workspace(call.workspace_dir)
        except TetherError as error:
            fail_with(error)
        if workspace.is_shared:
            return None
        options = call.options
        try:
            if call.command == "memory get":
                namespace, key = call.arguments
                body = hot_commands.memory_get(
                    workspace, namespace, key, _one(options, "--format", "text")
                )
            elif call.command == "notes add":
                namespace, text = call.arguments
                body = hot_commands.notes_add(
                    workspace,
                    namespace,
                    text,
                    status=_one(options, "--status", "accepted"),
                    supersedes=tuple(options.get("--supersedes", ())),
                    tags=tuple(options.get("--tag", ())),
                    kind=options["--kind"][0] if "--kind" in options else None,
                )
            else:
                body = hot_commands.list_runs(
                    workspace,
                    status=options["--status"][0] if "--status" in options else None,
                    # parse_hot checked it is a whole number in range
                    limit=int(_one(options, "--limit", str(hot_commands.DEFAULT_RUNS_LIMIT))),
                    output_format=_one(options, "--format", "text"),
                )
            run_now(body)
        except (TetherError, OSError) as error:
            fail_with(error)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 1
    except KeyboardInterrupt:
        echo("tether: interrupted.", err=True)
        return 130
    return 0


def _one(options: dict[str, list[str]], name: str, default: str) -> str:
    return options[name][0] if name in options else default


def parse_dashboard(argv: Sequence[str]) -> tuple[str | None] | None:
    """``argv`` as the command line that opens the dashboard: ``tether`` or ``tether tui``,
    with at most one ``--workspace DIR`` before or after ``tui``; a 1-tuple of that folder (or
    None), or None for any other command line (``--help``, ``--database-url``, a typo: click
    handles it)."""
    args = list(argv)
    workspace_dirs: list[str] = []
    index = 0
    while index < len(args):
        if args[index].split("=", 1)[0] != "--workspace":
            index += 1
            continue
        value = _take_value(args, index, "--workspace")
        if not value or value == "-":
            return None  # no folder, or one click reads its own way
        workspace_dirs.append(value)
    if args not in ([], ["tui"]) or len(workspace_dirs) > 1:
        return None
    return (workspace_dirs[0] if workspace_dirs else None,)


def run_dashboard_line(workspace_dir: str | None) -> int:
    """Open the dashboard as ``tether tui`` does (:func:`tui.cli.dashboard_start.open_dashboard`)
    and return its exit code; errors before it starts are one sentence, as through click."""
    from tui.cli.dashboard_start import open_dashboard
    from tui.cli.output import echo

    try:
        return open_dashboard(workspace_dir)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 1
    except KeyboardInterrupt:
        echo("tether: interrupted.", err=True)
        return 130


def main(*, fast_exit: bool = True) -> None:
    """Console-script entry: a hot command runs here, any other command line goes to click
    (:func:`tui.cli.main.main`).

    With ``fast_exit`` a hot command ends the process at once (its database is closed and its
    output flushed, so nothing is left to tear down); callers that run the command line inside
    a longer-lived process (the tests) pass ``fast_exit=False`` and get SystemExit.
    """
    call = parse_hot(sys.argv[1:])
    if call is not None:
        code = run_hot(call)
        if code is not None:
            if not fast_exit:
                sys.exit(code)
            from tui.cli.output import flush_quietly

            flush_quietly()
            os._exit(code)
    dashboard = parse_dashboard(sys.argv[1:])
    if dashboard is not None:
        # Straight to the dashboard: its first paint does not wait for click (see
        # tui.cli.dashboard_start). It ends like any process, threads and all.
        code = run_dashboard_line(dashboard[0])
        if code:
            sys.exit(code)
        return
    from tui.cli.main import main as click_main

    click_main(fast_exit=fast_exit)


if __name__ == "__main__":
    main()
