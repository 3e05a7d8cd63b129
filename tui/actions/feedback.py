"""Turning a refused or failed write into one sentence on screen instead of a crash."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from textual.screen import Screen

from store.errors import TetherError
from tui.format import visible

T = TypeVar("T")


async def write_safely(screen: Screen[Any], action: Callable[[], Awaitable[T]]) -> T | None:
    """Run one write; a refusal or database error becomes a toast (one sentence), not a crash.

    Writes are short ``BEGIN IMMEDIATE`` transactions that wait on the busy timeout, so a busy
    engine in another process delays them briefly instead of failing them. Messages are shown
    literally (they can quote ids and keys typed by anyone).
    """
    try:
        return await action()
    except TetherError as error:
        screen.app.notify(visible(str(error)), severity="error", markup=False)
    except sqlite3.Error as error:
        screen.app.notify(
            visible(f"The database refused the change: {error}."), severity="error", markup=False
        )
    return None
