"""The command palette's system commands (ctrl+p): Textual's own, Quit saying that it asks
first, then the dashboard's views, pause, the selected run's tokens and the run actions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import SystemCommand


def dashboard_commands(
    app: Any, textual_commands: Iterable[SystemCommand]
) -> Iterable[SystemCommand]:
    """Every system command the dashboard's palette offers (``app``: the TetherApp, typed
    loosely, as importing it here would make a circle)."""
    for command in textual_commands:
        if command.title == "Quit":  # Textual's says "as soon as possible"; ours asks
            command = SystemCommand(
                "Quit", "Quit the dashboard (asks first while its embedded engine runs "
                "something; those runs stay resumable)", command.callback)
        yield command
    for key, mode, label in (
        ("1", "runs", "Runs"),
        ("2", "tokens", "Tokens"),
        ("3", "memory", "Memory"),
        ("4", "handoffs", "Handoffs"),
        ("5", "usage", "Usage"),
    ):
        yield SystemCommand(
            f"{label} view",
            f"Switch to the {label} view (key {key})",
            lambda mode=mode: app.run_worker(app.action_show_view(mode)),
        )
    yield SystemCommand(
        "Pause / resume live updates",
        "Hold the screen still; data keeps being collected (key p)",
        lambda: app.run_worker(app.action_toggle_pause()),
    )
    yield SystemCommand(
        "Tokens of the selected run",
        "Token histogram and usage for the run last selected",
        lambda: app.show_tokens("run"),
    )
    from tui.actions.run_actions import palette_commands

    yield from palette_commands(app)
