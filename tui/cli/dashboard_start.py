"""Opening the dashboard from the command line without click: ``tether``, ``tether tui`` and
``tether [tui] --workspace DIR`` (:func:`tui.cli.entry.parse_dashboard`), and the checks the
click commands ``tui``, ``demo`` and ``serve`` share.

Importing click and the command groups costs 8-12 ms on a small machine, several times that
under load; the dashboard's first paint waits for every millisecond before Textual starts.
"""

from __future__ import annotations

import os
from pathlib import Path

from store.errors import TetherError
from store.workspace.layout import ENV_VAR, Workspace
from tui.cli.output import fail


def check_database(workspace: Workspace) -> None:
    """Exit 2 (the error's code) with one sentence when the workspace's file exists but is not
    a usable Tether database."""
    if workspace.database_path.exists():
        from store.db.sqlite.sqlite_database import inspect_database_file

        try:
            inspect_database_file(workspace.database_path)
        except TetherError as error:
            fail(str(error), error.exit_code)


def no_workspace_message(workspace: Workspace, named: bool, cwd: Path) -> str:
    """One sentence saying no workspace was found, where, and how to make one."""
    start = "create one with `tether demo` (./tether-demo) or `tether run WORKFLOW` (./.tether)"
    if named:
        return f"no Tether workspace at {workspace.root} (no tether.db there); {start}."
    return (
        f"no Tether workspace found in {cwd} or any folder above it (no .tether/ folder, no "
        f"tether.db); {start}, or name one with --workspace DIR."
    )


def require_existing(workspace: Workspace, named: str | None) -> Workspace:
    """``workspace`` (found from the ``--workspace`` folder ``named``, or without one); exits 1
    with one sentence when it has no database yet, 2 when its file is not a usable Tether
    database."""
    if not workspace.exists():
        fail(no_workspace_message(workspace, bool(named or os.environ.get(ENV_VAR)), Path.cwd()),
             1)
    check_database(workspace)
    return workspace


def open_dashboard(workspace_dir: str | None) -> int:
    """``tether [tui] [--workspace DIR]`` run straight from the console script: the same
    workspace, checks, sentences and exit codes as the click command ``tui``."""
    from store.workspace.layout import resolve_workspace
    from tui.cli.output import fail_with

    try:
        workspace = resolve_workspace(workspace_dir)
    except TetherError as error:
        fail_with(error)
    require_existing(workspace, workspace_dir)
    from tui.app import run_dashboard

    return run_dashboard(workspace)
