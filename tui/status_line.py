"""The dashboard's status line (pure over the app's state): live, paused, waiting or
reconnecting, problems first, how fresh the data is, the newest event, the workspace."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tui.actions.read_only import read_only
from tui.format import ago, literal


def status_line(app: Any, width: int | None = None) -> Text:
    """The status line of ``app`` (the TetherApp: typed loosely, as importing it here would
    make a circle): live/paused, freshness of the data, newest event, problems. With the
    line's ``width`` the budget alert takes only the room the freshness leaves it (the BRIEF's
    status line "shows data freshness": an alert never pushes that off the screen)."""
    now = app.now_ms()
    line = Text()
    # Separating spaces end the styled piece before them rather than start the next one:
    # SVG renderers such as rsvg drop the leading spaces of a text run, which turned
    # "● live  checked" into "● livechecked" in exported screenshots.
    if app.paused:
        line.append("❚❚ paused  ", style="bold yellow")
    elif app.reader is None:
        line.append("○ waiting  ", style="yellow")
    elif app.tailer.link_state == "reconnecting":
        # Never a stale "live": the listening connection to the database is down.
        line.append("◌ reconnecting  ", style="bold yellow")
    else:
        line.append("● live  ", style="bold green")
    export_problem, export_state = app.export_status.pieces()
    line.append_text(export_problem)
    problem = app.read_problem or app.tailer.problem
    if problem:
        # First, so a narrow terminal still shows it.
        line.append("⚠ ", style="bold red")
        line.append_text(literal(problem, "red"))
        line.append("  ", style="red")
    freshness = Text(f"checked {ago(now, app.checked_at_ms)}"
                     f" · last change {ago(now, app.changed_at_ms)}")
    room = None if width is None else width - line.cell_len - freshness.cell_len
    app.tailer.budget_alerts.status(line, now, room)
    line.append_text(freshness)
    line.append(f" · event #{app.tailer.last_seq}")
    line.append(" · workspace ")
    if app.workspace.is_shared:
        line.append_text(literal(app.workspace.describe()))  # never shows a password
    else:
        line.append_text(literal(app.workspace.root.name or str(app.workspace.root)))
    if read_only(app):
        line.append(" · read-only", style="bold cyan")
    if app.engine is not None:
        line.append(" ")
        line.append("· embedded engine", style="cyan")
    line.append_text(export_state)
    return line
