"""The top-level views, built on demand: each factory imports its view's module only when the
view is first composed, so starting the dashboard imports the Runs view alone (the others are
built in the background after the first paint, see ``TetherApp._warm_views``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from textual.screen import Screen

    from tui.screens.run_detail import RunDetailScreen
    from tui.screens.runs_view import RunsScreen


def runs_view() -> Screen[Any]:
    """View ``1``."""
    from tui.screens.runs_view import RunsScreen

    return RunsScreen()


def tokens_view() -> Screen[Any]:
    """View ``2``."""
    from tui.screens.tokens_view import TokensScreen

    return TokensScreen()


def memory_view() -> Screen[Any]:
    """View ``3``."""
    from tui.screens.memory_view import MemoryScreen

    return MemoryScreen()


def handoffs_view() -> Screen[Any]:
    """View ``4``."""
    from tui.screens.handoffs_view import HandoffsScreen

    return HandoffsScreen()


def usage_view() -> Screen[Any]:
    """View ``5``."""
    from tui.screens.usage_view import UsageScreen

    return UsageScreen()


def is_run_detail(screen: object) -> TypeGuard[RunDetailScreen]:
    """Whether ``screen`` is a run's detail screen, without importing that module when no such
    screen was ever built (asked on every footer redraw, from the first paint on)."""
    module = sys.modules.get("tui.screens.run_detail")
    return module is not None and isinstance(screen, module.RunDetailScreen)


def is_runs_view(screen: object) -> TypeGuard[RunsScreen]:
    """Whether ``screen`` is the Runs view (same reasoning as :func:`is_run_detail`)."""
    module = sys.modules.get("tui.screens.runs_view")
    return module is not None and isinstance(screen, module.RunsScreen)
