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
                tries: int = 2000) -> None:
    """Let the app work until ``condition()`` holds (bounded; no wall-clock assertion).

    The bound is generous (40 s of pauses at least): a save or a review waits on another
    process's write lock, and on a machine loaded far past its cores that can take seconds."""
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


async def choose_in_palette(pilot: Pilot[None], app: App[Any], query: str, expect: str) -> None:
    """Open the command palette, type ``query``, wait until the highlighted hit shows
    ``expect`` (the palette searches in workers, so hits arrive a little later, later still
    on a busy machine), then choose it with enter."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the command palette")
    await pilot.press(*query)

    def highlighted() -> str:
        hits = app.screen.query_one(CommandList)
        if hits.highlighted is None or hits.option_count == 0:
            return ""
        return str(hits.get_option_at_index(hits.highlighted).prompt)

    await until(pilot, lambda: expect in highlighted(), f"the palette to offer {expect!r}")
    await pilot.press("enter")


def screen_lines(app: App[Any]) -> list[str]:
    """The screen as lines of plain text, as the terminal shows them (the compositor's strips:
    columns stay where they are drawn, which the SVG export does not keep)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]
