"""Small Pilot helpers the dashboard-action tests share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Static

S = TypeVar("S", bound=Screen[Any])


async def until(pilot: Pilot[None], condition: Callable[[], Any], what: str,
                tries: int = 400) -> None:
    """Let the app work until ``condition()`` holds (bounded; no wall-clock assertion)."""
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def press_for(pilot: Pilot[None], app: App[Any], key: str, screen_type: type[S]) -> S:
    """Press ``key`` and wait for the dialog (or screen) of ``screen_type`` it opens."""
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, screen_type), screen_type.__name__)
    screen = app.screen
    assert isinstance(screen, screen_type)
    return screen


def dialog_target(app: App[Any]) -> str:
    """The exact target a confirmation on screen names."""
    return str(app.screen.query_one("#confirm-target", Static).render())


def shown_keys(app: App[Any]) -> set[str]:
    """The keys the footer offers right now (check_action False removes a key)."""
    return {key for key, active in app.screen.active_bindings.items() if active.enabled}
