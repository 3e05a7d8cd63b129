"""The run's timeline as a widget: a row per node iteration (attempts, calls and tool calls
beneath the expanded ones) with its bar on a time axis, drawn a line at a time (Textual's line
API), so a run of 10 000 nodes costs what the rows on screen cost.

Keys: ``↑``/``↓`` (``j``/``k``) move, ``→``/``l`` (or ``space``) expand a node, ``←``/``h``
collapse it (or go to its node), ``enter`` opens the row's attempt or call in the inspector,
``+``/``-`` zoom around the cursor's time, ``<``/``>`` pan, ``0`` fits the whole run, ``c``
jumps to the next node on the critical path, ``F`` keeps the end of a live run in view.
The widget asks its screen for the details of rows it shows without them
(:class:`TimelineBars.DetailsWanted`); the screen reads them and calls :meth:`show` again.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from store.read.timeline import (
    RUN_ROW,
    NodeRows,
    Row,
    RunTimeline,
    attempt_rows,
    flatten,
    visible_node_keys,
)
from tui.plain import duration, visible
from tui.timeline_draw import GLYPHS, cells, fit_scale

LABEL_WIDTH = 30
TOOK_WIDTH = 9
ZOOM_STEPS = 2


class TimelineBars(ScrollView, can_focus=True):
    """The rows of a :class:`RunTimeline` on a time axis (see the module docstring)."""

    DEFAULT_CSS = """
    TimelineBars { height: 1fr; overflow-x: hidden; }
    """
    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("home", "jump(0)", "First row", show=False),
        Binding("end", "jump(-1)", "Last row", show=False),
        Binding("right,l,space", "expand", "Expand"),
        Binding("left,h", "collapse", "Collapse", show=False),
        Binding("enter", "open", "Open in inspector"),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in"),
        Binding("minus", "zoom(1)", "Zoom out"),
        Binding("less_than_sign,comma", "pan(-1)", "Pan left", show=False),
        Binding("greater_than_sign,full_stop", "pan(1)", "Pan right", show=False),
        Binding("0", "fit", "Fit run", show=False),
        Binding("c", "next_critical", "Critical path", show=False),
        Binding("F", "follow", "Follow live", show=False),
    ]

    cursor: reactive[int] = reactive(0)

    class DetailsWanted(Message):
        """The node iterations shown without their attempts (the screen reads them)."""

        def __init__(self, keys: list[str], expanded: list[str]) -> None:
            super().__init__()
            self.keys = keys
            self.expanded = expanded

    class Moved(Message):
        """The cursor is on another row."""

        def __init__(self, row: Row) -> None:
            super().__init__()
            self.row = row

    class Rescaled(Message):
        """The time window changed (zoom, pan, fit, a wider terminal): redraw the axis."""

    class Opened(Message):
        """``enter`` on a row: show its attempt (or call) in the inspector."""

        def __init__(self, row: Row) -> None:
            super().__init__()
            self.row = row

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.timeline: RunTimeline | None = None
        self.rows: list[Row] = []
        self.expanded: set[str] = set()
        self.now_ms = 0
        self.ms_per_cell: int | None = None
        """None: fit the whole run in the width."""
        self.offset_ms = 0
        """Where the bars start, after the run's start."""
        self.follow = True
        self._styles: dict[str, Style] = {k: Style.parse(s) for k, (_c, s) in GLYPHS.items()}
        self._asked: set[str] = set()
        self._built: NodeRows = {}
        """Node rows kept between draws (one run's nodes at most)."""

    # -- data ----------------------------------------------------------------------------

    def show(self, timeline: RunTimeline, now_ms: int) -> None:
        """Draw ``timeline`` (the cursor stays on the same row's key)."""
        keep = self.rows[self.cursor].key if self.rows and self.cursor < len(self.rows) else None
        self.timeline = timeline
        self.now_ms = now_ms
        self.rows = flatten(timeline, self.expanded, self._built)
        if keep is not None:
            index = next((i for i, r in enumerate(self.rows) if r.key == keep), None)
            if index is not None:
                self.set_reactive(TimelineBars.cursor, index)
        self.cursor = min(self.cursor, max(0, len(self.rows) - 1))
        if self.follow and timeline.live and self.ms_per_cell is not None:
            span = self.bar_width * self.ms_per_cell
            self.offset_ms = max(0, timeline.end_ms - timeline.start_ms - span + span // 10)
        self.virtual_size = Size(self.width_inside, len(self.rows))
        self.refresh()
        self._want_details()
        self.post_message(self.Rescaled())

    @property
    def width_inside(self) -> int:
        """The cells a row can use (less the vertical scrollbar when there is one)."""
        return self.scrollable_content_region.width or self.size.width

    @property
    def bar_width(self) -> int:
        """Cells of the bar area (the width less the label and duration columns)."""
        return max(10, self.width_inside - LABEL_WIDTH - TOOK_WIDTH - 2)

    @property
    def scale(self) -> int:
        """Milliseconds per cell in effect."""
        if self.ms_per_cell is not None:
            return self.ms_per_cell
        if self.timeline is None:
            return 1000
        # Fitted exactly, so the whole run takes the whole width.
        total = self.timeline.end_ms - self.timeline.start_ms
        return max(1, -(-total // self.bar_width))

    @property
    def current(self) -> Row | None:
        """The row under the cursor."""
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def _want_details(self) -> None:
        if self.timeline is None:
            return
        first = int(self.scroll_offset.y)
        shown = visible_node_keys(self.rows, first, max(1, self.size.height) + 5)
        missing = [k for k in shown if k != RUN_ROW and k not in self.timeline.details
                   and k not in self._asked]
        missing += [k for k in self.expanded if k not in self.timeline.details
                    and k not in self._asked and k not in missing]
        if missing:
            self._asked.update(missing)
            self.post_message(self.DetailsWanted(missing, sorted(self.expanded)))

    def forget_details(self) -> None:
        """Ask again for the details of what is shown (new events touched them)."""
        self._asked.clear()

    # -- drawing -------------------------------------------------------------------------

    def on_resize(self) -> None:
        self.virtual_size = Size(self.width_inside, len(self.rows))
        self._want_details()
        self.post_message(self.Rescaled())

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._want_details()

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_offset.y) + y
        if self.timeline is None or not 0 <= index < len(self.rows):
            return Strip.blank(self.width_inside)
        return self.render_row(self.rows[index], index == self.cursor)

    def render_row(self, row: Row, selected: bool) -> Strip:
        """One row: label, bar, duration."""
        assert self.timeline is not None
        base = Style(reverse=True) if selected and self.has_focus else (
            Style(bgcolor="grey23") if selected else Style()
        )
        marker = "  "
        if row.kind == "node":
            marker = ("▾ " if row.key in self.expanded else "▸ ") if row.expandable else "  "
        critical = "★" if row.critical and row.kind == "node" else " "
        label = Text(critical + "  " * row.depth + marker + visible(row.label, keep_newlines=False))
        label.truncate(LABEL_WIDTH - 1, overflow="ellipsis")
        label.pad_right(LABEL_WIDTH - label.cell_len)
        segments = [Segment(label.plain, base + Style(bold=row.kind in ("node", "run"),
                                                       color="yellow" if row.critical
                                                       and row.kind == "node" else None))]
        segments.append(Segment(" ", base))
        start = self.timeline.start_ms + self.offset_ms
        kinds = cells(row.spans, start, self.scale, self.bar_width, self.now_ms)
        run_start = 0
        for position in range(1, len(kinds) + 1):
            if position == len(kinds) or kinds[position] != kinds[run_start]:
                kind = kinds[run_start]
                count = position - run_start
                if kind is None:
                    segments.append(Segment(" " * count, base))
                else:
                    glyph, _ = GLYPHS.get(kind, ("?", ""))
                    segments.append(Segment(glyph * count, base + self._styles.get(kind,
                                                                                    Style())))
                run_start = position
        took = ""
        if row.spans:
            end = row.spans[-1].end_ms if row.spans[-1].end_ms is not None else self.now_ms
            took = duration(max(0, end - row.spans[0].start_ms))
        segments.append(Segment(" " + took.rjust(TOOK_WIDTH), base + Style(dim=True)))
        strip = Strip(segments)
        return strip.crop_extend(0, self.width_inside, base)

    def axis_text(self) -> Text:
        """The axis over the bars: the time since the run's start every 12 cells."""
        from tui.timeline_draw import axis

        ticks, labels = axis(self.offset_ms, self.scale, self.bar_width)
        text = Text(" " * (LABEL_WIDTH + 1))
        text.append(labels, style="dim")
        text.append("\n")
        text.append(f"each cell {duration(self.scale)}".ljust(LABEL_WIDTH + 1), style="dim")
        text.append(ticks, style="dim")
        return text

    # -- keys ----------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        height = max(1, self.size.height)
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + height:
            self.scroll_to(y=new - height + 1, animate=False)
        self.refresh()
        row = self.current
        if row is not None and old != new:
            self.post_message(self.Moved(row))

    def action_move(self, step: int) -> None:
        """Move the cursor."""
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + step))

    def action_jump(self, where: int) -> None:
        """First (0) or last (-1) row."""
        if self.rows:
            self.cursor = 0 if where == 0 else len(self.rows) - 1

    def action_expand(self) -> None:
        """Show the attempts, calls and tool calls under the node (again: collapse)."""
        row = self.current
        if row is None or self.timeline is None:
            return
        if row.kind != "node" or not row.expandable:
            self.action_move(1)
            return
        if row.key in self.expanded:
            self._fold(row.key)
            return
        self.expanded.add(row.key)
        self._asked.discard(row.key)
        detail = self.timeline.details.get(row.key)
        if detail is None:
            self._want_details()  # drawn beneath it once read (show again)
            return
        # Only this node's rows go in: a run of 10 000 nodes is not flattened again.
        below = [r for a in sorted(detail.attempts, key=lambda a: a.attempt)
                 for r in attempt_rows(row.key, a, detail, row.critical)]
        self.rows[self.cursor + 1 : self.cursor + 1] = below
        self._rows_changed()

    def _fold(self, key: str) -> None:
        """Take the rows beneath the expanded node ``key`` out (the cursor stays on it)."""
        self.expanded.discard(key)
        at = next((i for i in range(self.cursor, -1, -1) if self.rows[i].key == key), None)
        if at is None:
            return
        end = at + 1
        while end < len(self.rows) and self.rows[end].depth and self.rows[end].node_key == key:
            end += 1
        del self.rows[at + 1 : end]
        self.set_reactive(TimelineBars.cursor, at)
        self._rows_changed()

    def _rows_changed(self) -> None:
        self.virtual_size = Size(self.width_inside, len(self.rows))
        self.refresh()
        # More rows may bring a scrollbar (a narrower bar area): once laid out, the axis is
        # drawn again.
        self.call_after_refresh(self.post_message, self.Rescaled())

    def action_collapse(self) -> None:
        """Fold the node (from one of its rows: go to the node)."""
        row = self.current
        if row is None or self.timeline is None:
            return
        if row.kind == "node" and row.key in self.expanded:
            self._fold(row.key)
            return
        if row.depth:  # its node is the nearest node row above
            self.cursor = next(i for i in range(self.cursor, -1, -1)
                               if self.rows[i].key == row.node_key)

    def action_open(self) -> None:
        """Show the row's attempt (or call) in the inspector."""
        row = self.current
        if row is not None and row.kind != "run":
            self.post_message(self.Opened(row))

    def _cursor_time(self) -> int:
        row = self.current
        if row is not None and row.spans:
            return row.spans[0].start_ms
        assert self.timeline is not None
        return self.timeline.start_ms + self.offset_ms

    def action_zoom(self, direction: int) -> None:
        """Halve (``-1``) or double the time per cell, around the cursor's time."""
        if self.timeline is None:
            return
        scale = self.scale
        anchor = self._cursor_time() - self.timeline.start_ms
        new = max(1, scale // ZOOM_STEPS) if direction < 0 else scale * ZOOM_STEPS
        total = self.timeline.end_ms - self.timeline.start_ms
        if direction > 0 and new >= fit_scale(total, self.bar_width):
            self.action_fit()
            return
        self.ms_per_cell = new
        self.offset_ms = max(0, anchor - (self.bar_width // 3) * new)
        self.follow = False
        self.refresh()
        self.post_message(self.Rescaled())

    def action_pan(self, direction: int) -> None:
        """Move the time window by a quarter of its width."""
        if self.timeline is None:
            return
        total = self.timeline.end_ms - self.timeline.start_ms
        step = max(1, self.bar_width // 4) * self.scale
        self.offset_ms = max(0, min(max(0, total - step), self.offset_ms + direction * step))
        self.follow = False
        self.refresh()
        self.post_message(self.Rescaled())

    def action_fit(self) -> None:
        """The whole run in the width again."""
        self.ms_per_cell = None
        self.offset_ms = 0
        self.follow = True
        self.refresh()
        self.post_message(self.Rescaled())

    def action_follow(self) -> None:
        """Keep the end of a live run in view (at the current zoom)."""
        self.follow = True
        if self.timeline is not None:
            self.show(self.timeline, self.now_ms)

    def action_next_critical(self) -> None:
        """Go to the next node on the critical path (from the top after the last)."""
        marked = [i for i, r in enumerate(self.rows) if r.critical and r.kind == "node"]
        if marked:
            self.cursor = next((i for i in marked if i > self.cursor), marked[0])
