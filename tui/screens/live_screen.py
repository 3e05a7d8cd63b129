"""What every live view shares: the view tabs, filter, pause banner, status line and help.

A view subclasses :class:`LiveScreen`, composes its body in :meth:`compose_view` and reads its
(bounded) data in :meth:`refresh_data`. The app calls ``refresh_data`` when the view becomes
active and after every poll that found a commit, unless updates are paused.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult, ScreenStackError
from textual.binding import ActiveBinding, Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from tui.app_api import DashboardApp, dashboard
from tui.tailing import Batch
from tui.widgets.filter_bar import FilterBar
from tui.widgets.footer import BoundedFooter
from tui.widgets.status import PauseBanner, StatusLine

VIEWS: tuple[tuple[str, str, str], ...] = (
    ("1", "runs", "Runs"),
    ("2", "tokens", "Tokens"),
    ("3", "memory", "Memory"),
    ("4", "handoffs", "Handoffs"),
    ("5", "usage", "Usage"),
)


class ViewTabs(Static):
    """The top line: the four views with the active one highlighted, then where you are."""

    DEFAULT_CSS = """
    ViewTabs { height: 1; background: $panel; padding: 0 1; }
    """

    _shown: tuple[str, Text] | None = None

    def show(self, mode: str, crumb: Text) -> None:
        """Render the tabs for ``mode`` followed by the breadcrumb; when that is wider than
        the line (80 columns), the other views' tabs keep only their keys, so the breadcrumb
        ("scope: run r-…") stays readable instead of wrapping out of sight."""
        self._shown = (mode, crumb)
        width = self.content_size.width
        line = tabs_line(mode, crumb, compact=False)
        if width and line.cell_len > width:
            line = tabs_line(mode, crumb, compact=True)
        line.no_wrap = True
        line.overflow = "ellipsis"
        self.update(line)

    def on_resize(self) -> None:
        if self._shown is not None:
            self.show(*self._shown)


def tabs_line(mode: str, crumb: Text, *, compact: bool) -> Text:
    """The top line for ``mode``: every view's tab (``compact``: the inactive ones by key
    only), then the breadcrumb."""
    line = Text()
    line.append("tether ", style="bold")
    for key, name, label in VIEWS:
        active = name == mode
        line.append(f" {key} {label} " if active or not compact else f" {key} ",
                    style="bold reverse" if active else "dim")
        line.append(" ")
    if crumb.plain:
        line.append(" │ ", style="dim")
        line.append_text(crumb)
    return line


FOOTER_FIRST = ("request_quit", "help")
"""Actions the footer shows first, so a narrow terminal (80 columns) still offers them."""


def footer_order(bindings: dict[str, ActiveBinding]) -> dict[str, ActiveBinding]:
    """``bindings`` with :data:`FOOTER_FIRST` moved to the front (the footer's order)."""
    first = {
        key: active
        for action in FOOTER_FIRST
        for key, active in bindings.items()
        if active.binding.action == action
    }
    return first | {key: active for key, active in bindings.items() if key not in first}


class QuitFirstFooter:
    """Mixin for screens with a footer: ``q Quit`` and ``? Help`` lead it."""

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        return footer_order(super().active_bindings)  # type: ignore[misc]


class LiveScreen(QuitFirstFooter, Screen[None]):
    """Base class of the dashboard's views (the issue-6 Memory view subclasses it too)."""

    MODE: ClassVar[str] = "runs"
    """Which top-level view (mode) the screen belongs to; highlights the tab."""
    FILTER_KEY: ClassVar[str] = "runs"
    """Key under which the app remembers this view's last filter."""
    HELP_TEXT: ClassVar[str] = ""
    """Plain-text help shown by ``?`` above the list of keys."""

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("escape", "back", "Back"),
        Binding("slash", "open_filter", "Filter"),
        Binding("question_mark", "help", "Help"),
    ]

    @property
    def tether(self) -> DashboardApp:
        """The app, typed by what the views need from it."""
        return dashboard(self.app)

    @property
    def filter_text(self) -> str:
        """The filter in effect for this view (remembered by the app across visits)."""
        return self.tether.filters.get(self.FILTER_KEY, "")

    def compose(self) -> ComposeResult:
        yield ViewTabs(id="view-tabs")
        yield PauseBanner(id="pause-banner")
        yield from self.compose_view()
        yield FilterBar()
        yield StatusLine(id="status-line")
        yield BoundedFooter()

    def compose_view(self) -> ComposeResult:
        """The view's own widgets."""
        yield from ()

    def crumb(self) -> Text:
        """Where the user is inside the view (shown after the tabs)."""
        return Text("")

    async def refresh_data(self, batch: Batch) -> None:
        """Re-read what the view shows; ``batch`` says what changed (first_read = everything)."""

    def on_mount(self) -> None:
        self.update_chrome()

    _bindings_signature: tuple[object, ...] | None = None

    def refresh_bindings(self) -> None:
        """Redraw the footer only when the keys it would show changed.

        Views re-check their keys after every data refresh (a key may apply to the selected
        item's new state), and a footer redraw costs tens of milliseconds; at hundreds of
        commits a second that alone would make the dashboard lag.
        """
        if not self.is_current:
            return  # shown again later: on_screen_resume recomputes the footer
        try:
            signature = tuple(
                (key, binding.action, binding.description, enabled)
                for key, (_node, binding, enabled, _tooltip) in self.active_bindings.items()
            )
        except (ScreenStackError, NoMatches):
            return  # the app is shutting down, or the view's widgets are not built yet
        if signature == self._bindings_signature:
            return
        self._bindings_signature = signature
        super().refresh_bindings()

    def update_chrome(self) -> None:
        """Refresh the tabs, banner and status line from the app's state."""
        try:
            tabs = self.query_one(ViewTabs)
            banner = self.query_one(PauseBanner)
            status = self.query_one(StatusLine)
            crumb = self.crumb()
        except NoMatches:
            return  # being composed or torn down (the app is exiting)
        tabs.show(self.MODE, crumb)
        app = self.tether
        banner.set_paused(app.paused, app.held_events)
        status.show(app.status_text(status.content_size.width or None))

    read_with: tuple[object, ...] | None = None
    """:meth:`read_inputs` as they were when the view last read everything it shows and was
    kept up to date since (None: never, or not since it was last hidden with changes)."""

    def read_inputs(self) -> tuple[object, ...]:
        """Everything the view's data depends on besides its own state: the commits polled,
        its filter, the selection, the Tokens scope, the search words, the minute (windows of
        time end now), whether updates are paused."""
        app = self.tether
        return (app.commits, self.filter_text, app.selected_run_id, app.selected_node_id,
                app.token_scope, app.highlight_terms, app.now_ms() // 60_000, app.paused)

    async def on_screen_resume(self) -> None:
        self.update_chrome()
        if self.read_with is not None and self.read_with == self.read_inputs():
            # Nothing it shows can have changed since it last read: shown as it is (the clock
            # tick updates its ages within a second), no re-read, no table rebuilt.
            return
        await self.tether.refresh_screen(self)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """escape is offered only when there is somewhere to go back to."""
        if action == "back":
            return self.can_go_back()
        return True

    def can_go_back(self) -> bool:
        """Whether escape has somewhere to go from this screen (a screen pushed over a view
        always has: the view under it)."""
        return self.tether.can_go_back()

    def action_back(self) -> None:
        """Back to where the user came from (the back stack of views)."""
        self.tether.go_back()

    def action_open_filter(self) -> None:
        """Open the filter bar with the last filter used in this view."""
        self.query_one(FilterBar).open(self.filter_text)

    async def on_filter_bar_applied(self, message: FilterBar.Applied) -> None:
        self.tether.filters[self.FILTER_KEY] = message.value
        self.update_chrome()
        await self.tether.refresh_screen(self)

    def action_help(self) -> None:
        """Show the keys of this view (and the global ones) with their descriptions."""
        from tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen.for_screen(self))
