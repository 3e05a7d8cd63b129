"""What the views need from the dashboard app, as a protocol.

Screens, actions and palette providers talk to the app through :class:`DashboardApp` instead of
importing :class:`tui.app.TetherApp`, which imports every screen: the views depend on this small
interface and the app module depends on the views, never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from rich.text import Text

from store.model.run_records import RunRecord
from store.read.dashboard_reader import DashboardReader
from store.workspace.layout import Workspace

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from tui.clear_follow import ClearFollowUps


class DashboardApp(Protocol):
    """The dashboard's shared state and navigation, as the views use them."""

    workspace: Workspace
    filters: dict[str, str]
    """The last filter of each view (by the view's FILTER_KEY)."""
    paused: bool
    held_events: int
    known_runs: dict[str, RunRecord]
    selected_run_id: str | None
    selected_node_id: str | None
    token_scope: str
    highlight_terms: tuple[str, ...]
    """The words of the Runs view's full-text search (a run opened from it highlights them)."""
    commits: int
    """How many polls found a commit (by anyone) since the dashboard started."""

    @property
    def clear_follow_ups(self) -> ClearFollowUps:
        """The clears this dashboard requested, followed to each run's end."""

    @property
    def reader(self) -> DashboardReader | None:
        """The read-only connection, or None while the workspace does not exist yet."""

    def now_ms(self) -> int:
        """The app's clock."""

    def status_text(self, width: int | None = None) -> Text:
        """The status line's text (fitted to ``width`` cells when given)."""

    def select(self, *, run_id: str, node_id: str | None = None) -> None:
        """Record the run (and node) the user is looking at."""

    def remember_runs(self, runs: Iterable[RunRecord]) -> None:
        """Keep the runs last listed (for the command palette and the run keys)."""

    def open_run(self, run_id: str, node_key: str | None = None) -> None:
        """Show a run's detail screen (escape comes back to where it was opened from), on
        ``node_key`` when given."""

    def open_compare(self, run_a: str, run_b: str) -> None:
        """Show two runs side by side."""

    def open_fork_chain(self, run_id: str) -> None:
        """Show a run's fork chain: its first run and every fork below it."""

    def open_cost(self, run_id: str) -> None:
        """Show why a run cost what it did."""

    def show_tokens(self, scope: str) -> None:
        """Switch to the Tokens view with ``scope`` (workspace, run or node)."""

    def can_go_back(self) -> bool:
        """Whether there is a previous place to return to."""

    def go_back(self) -> None:
        """Return to the previous place (the back stack of views)."""

    async def refresh_screen(self, screen: Screen[Any]) -> None:
        """Re-read everything ``screen`` shows."""

    def wake(self) -> None:
        """Ask for a poll now."""

    def live_screen(self) -> Any:
        """The topmost live view of the current mode."""

    async def action_show_view(self, mode: str) -> None:
        """Switch to a top-level view."""


def dashboard(app: App[Any]) -> DashboardApp:
    """``app`` as the dashboard (the one App subclass the views run in)."""
    return cast(DashboardApp, app)
