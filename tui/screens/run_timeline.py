"""The run view's Timeline tab (``T``): every node iteration of the run on a time axis
(:mod:`tui.widgets.timeline_bars`), live while the run runs; the inspector below follows the
row under the cursor, and ``enter`` on an attempt or call opens it there.

The tab reads the run's node rows when it is shown and after each commit that touches the run
(:func:`store.read.timeline_reads.read_timeline`), and the attempts, calls and tool calls only
of the rows on screen (:func:`store.read.timeline_reads.read_details`, plus the tool calls an
agent CLI's log shows for expanded nodes), so a run of 10 000 nodes stays quick.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent, TabPane

from store.errors import NotFoundError
from store.read.timeline import NodeDetail, Row, RunTimeline, with_details
from store.read.timeline_reads import read_details, read_timeline
from tui.format import duration, one_line, percent
from tui.plain import plural
from tui.screens.live_screen import LiveScreen
from tui.timeline_draw import GLYPHS, LEGEND
from tui.timeline_tools import log_source_for, with_logged_tools
from tui.widgets.timeline_bars import TimelineBars

TIMELINE_TAB = "tab-timeline"


def legend_text() -> Text:
    """What each glyph means (one line)."""
    text = Text()
    for kind, meaning in LEGEND:
        glyph, style = GLYPHS[kind]
        text.append(glyph, style=style)
        text.append(f" {meaning}  ", style="dim")
    text.append("★ critical path", style="yellow")
    return text


def summary_text(timeline: RunTimeline) -> Text:
    """The line above the axis: extent, busy and idle time, the critical path."""
    total = timeline.end_ms - timeline.start_ms
    text = Text()
    text.append(f"{plural(len(timeline.bars), 'node iteration')} · {duration(total)}"
                f"{' so far (live)' if timeline.live else ''} · ", style="bold")
    text.append(f"busy {duration(timeline.busy_ms)}, idle {duration(timeline.idle_ms)} "
                f"({percent(timeline.idle_ms / total if total else 0.0)})")
    path = timeline.critical_path
    if path:
        text.append("  critical path: ", style="dim")
        text.append_text(one_line(" → ".join(path), "yellow", width=120))
    return text


class TimelineTab(LiveScreen):
    """The run view's Timeline tab (the base of :class:`RunDetailScreen`)."""

    run_id: str
    _timeline: RunTimeline | None = None
    _details: dict[str, NodeDetail] = {}

    def compose_timeline(self) -> ComposeResult:
        """The tab: summary, axis, the bars, legend."""
        with TabPane("Timeline", id=TIMELINE_TAB):
            yield Static(id="timeline-summary")
            yield Static(id="timeline-axis")
            yield TimelineBars(id="timeline")
            yield Static(legend_text(), id="timeline-legend")

    def timeline_shown(self) -> bool:
        """Whether the Timeline tab is the one on screen."""
        try:
            return self.query_one("#run-views", TabbedContent).active == TIMELINE_TAB
        except NoMatches:
            return False

    async def refresh_timeline(self, touched: bool) -> None:
        """Re-read the bars (and, when ``touched``, the details shown) while the tab is shown."""
        if not self.timeline_shown():
            return
        if not touched and self._timeline is not None:
            self._draw_timeline()  # a clock tick: live bars grow to now, nothing is read
            return
        app = self.tether
        reader = app.reader
        if reader is None:
            return
        try:
            timeline = await read_timeline(reader, self.run_id, app.now_ms())
        except NotFoundError:
            return
        bars = self.query_one(TimelineBars)
        if touched:
            self._details = {}
            bars.forget_details()
        self._timeline = with_details(timeline, self._details)
        self._draw_timeline()

    async def reread_timeline(self) -> None:
        """A worker's job: read the bars and the details shown again."""
        await self.refresh_timeline(True)

    def _draw_timeline(self) -> None:
        if self._timeline is None:
            return
        app = self.tether
        bars = self.query_one(TimelineBars)
        bars.show(self._timeline, app.now_ms())
        self.query_one("#timeline-summary", Static).update(
            summary_text(self._timeline))
        self.query_one("#timeline-axis", Static).update(bars.axis_text())

    async def on_timeline_bars_details_wanted(self, message: TimelineBars.DetailsWanted) -> None:
        app = self.tether
        reader = app.reader
        if reader is None or self._timeline is None:
            return
        found = await read_details(reader, self.run_id, message.keys)
        logs = log_source_for(app.workspace, reader)
        for key in message.expanded:
            if key in found:
                found[key], _cut = await with_logged_tools(
                    app.workspace, logs, self.run_id, key, found[key], app.now_ms())
        self._details = {**self._details, **found}
        self._timeline = with_details(self._timeline, found)
        self._draw_timeline()

    def on_timeline_bars_rescaled(self, message: TimelineBars.Rescaled) -> None:
        bars = self.query_one(TimelineBars)
        self.query_one("#timeline-axis", Static).update(bars.axis_text())

    def on_timeline_bars_moved(self, message: TimelineBars.Moved) -> None:
        if message.row.kind != "run":
            self.follow_timeline_row(message.row, open_it=False)

    def on_timeline_bars_opened(self, message: TimelineBars.Opened) -> None:
        self.follow_timeline_row(message.row, open_it=True)

    def follow_timeline_row(self, row: Row, *, open_it: bool) -> None:
        """Show the row's node in the inspector (the screen's part)."""
        raise NotImplementedError

    def action_timeline(self) -> None:
        """Show the Timeline tab (again: back to the graph)."""
        views = self.query_one("#run-views", TabbedContent)
        if views.active == TIMELINE_TAB:
            views.active = "tab-graph"
            return
        views.active = TIMELINE_TAB  # its TabActivated reads the bars (once)
        self.query_one(TimelineBars).focus()
