"""The run's workflow as a live graph: one box per task, columns by dependency depth.

Boxes are coloured by live state and show tokens (and cost when the usage carries one); a
fan-out is one box with its items counted, a loop one box with its latest iteration. The arrow
keys move a cursor along the graph; the screen shows the node under it in the inspector.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.widget import Widget

from tui.format import STATUS_GLYPHS, STATUS_STYLES, money, one_line, tokens
from tui.graph_layout import GraphBox, RunGraph, move

BOX_WIDTH = 26
"""Cells per box, borders included."""
GUTTER = 5
"""Cells between two columns (where the arrows are drawn)."""
BOX_HEIGHT = 3
"""A box is three lines: its name in the top border, usage inside, progress in the bottom."""
ROW_GAP = 1


def box_lines(box: GraphBox) -> tuple[Text, Text, Text]:
    """The box's three texts: state glyph and name; tokens (and cost); progress (after ⚠ when
    an attempt recorded warnings)."""
    inner = BOX_WIDTH - 6
    style = STATUS_STYLES.get(box.state, "")
    name = Text(f"{STATUS_GLYPHS.get(box.state, '?')} ", style=style)
    name.append_text(one_line(box.key, "bold", width=inner - 2))
    usage = Text(f"{tokens(box.tokens)} tok" if box.tokens else _without_calls(box),
                 style="" if box.tokens else "dim")
    if box.cost is not None:
        usage.append(f" · {money(box.cost)}", style="green")
    if box.is_fan_out:
        progress = Text(f"{box.done}/{len(box.members)} done")
    elif box.is_loop:
        progress = Text(f"↻ iteration {box.iteration}", style="cyan")
    else:
        attempts = box.members[0].attempts
        progress = Text(box.state if attempts <= 1 else f"{box.state} · attempt {attempts}",
                        style="yellow" if attempts > 1 else "dim")
    if box.warnings:  # first, so a long progress text cannot cut it off
        progress = Text("⚠ ", style="bold yellow").append_text(progress)
    for line in (name, usage, progress):
        line.truncate(inner, overflow="ellipsis")
    return name, usage, progress


def _without_calls(box: GraphBox) -> str:
    """What a box without tokens says: why there are none (yet)."""
    if box.members and all(m.cached for m in box.members):
        return "output from cache"
    if box.state in ("pending", "running", "retrying"):
        return "no calls yet"
    return "no model calls"


def _border_line(left: str, fill: str, right: str, label: Text, border: Style) -> Text:
    """``╭─ label ─────╮``: a border line with a label set into it."""
    line = Text(left + fill, border)
    line.append(" ")
    line.append_text(label)
    line.append(" ")
    line.append(fill * max(0, BOX_WIDTH - 1 - line.cell_len), border)
    line.append(right, border)
    return line


def render_graph(graph: RunGraph, cursor: tuple[int, int] | None) -> list[Text]:
    """The graph as lines of text (boxes, borders coloured by state, arrows between columns)."""
    rows = max((len(column) for column in graph.columns), default=0)
    height = max(1, rows * (BOX_HEIGHT + ROW_GAP) - ROW_GAP)
    width = max(1, len(graph.columns) * (BOX_WIDTH + GUTTER) - GUTTER)
    lines = [Text(" " * width) for _ in range(height)]
    placed: dict[str, tuple[int, int]] = {}
    for x, column in enumerate(graph.columns):
        for y, box in enumerate(column):
            placed[box.key] = (x, y)
    for x, column in enumerate(graph.columns):
        left = x * (BOX_WIDTH + GUTTER)
        for y, box in enumerate(column):
            top = y * (BOX_HEIGHT + ROW_GAP)
            selected = cursor == (x, y)
            colour = Style.parse(STATUS_STYLES.get(box.state, "") or "white")
            border = Style(color=colour.color or colour.bgcolor, bold=selected)
            glyphs = "┏━┓┃┗┛" if selected else "╭─╮│╰╯"
            name, usage, progress = box_lines(box)
            if selected:
                name.stylize("reverse")
            _put(lines[top], left, _border_line(glyphs[0], glyphs[1], glyphs[2], name, border))
            middle = Text(glyphs[3], border)
            body = Text("  ") + usage
            body.pad_right(BOX_WIDTH - 2 - body.cell_len)
            middle.append_text(body)
            middle.append(glyphs[3], border)
            _put(lines[top + 1], left, middle)
            _put(lines[top + 2], left,
                 _border_line(glyphs[4], glyphs[1], glyphs[5], progress, border))
            if box.depends_on and x > 0:
                near = all(placed.get(dep, (-1, 0))[0] == x - 1 for dep in box.depends_on)
                arrow = ("─" if near else "╌") * (GUTTER - 2) + "▶ "
                _put(lines[top + 1], left - GUTTER, Text(arrow, "dim" if near else "dim italic"))
        _join_arrows(lines, x, column)
    return lines


def _join_arrows(lines: list[Text], x: int, column: list[GraphBox]) -> None:
    """Where several boxes of a column have arrows, join them into one fork in the gutter
    (``─┬─▶``, `` ├─▶``, `` └─▶``) so a fan-in or fan-out reads as one."""
    if x == 0:
        return
    rows = [y * (BOX_HEIGHT + ROW_GAP) + 1 for y, box in enumerate(column) if box.depends_on]
    if len(rows) < 2:
        return
    at = x * (BOX_WIDTH + GUTTER) - GUTTER + 1
    for row in range(rows[0], rows[-1] + 1):
        if row == rows[0]:
            glyph = "┬"
        elif row == rows[-1]:
            glyph = "└"
        else:
            glyph = "├" if row in rows else "│"
        _put(lines[row], at, Text(glyph, "dim"))
        if row in rows and row != rows[0]:
            _put(lines[row], at - 1, Text(" ", "dim"))


def _put(line: Text, at: int, piece: Text) -> None:
    """Overwrite ``line`` from cell ``at`` with ``piece`` (single-width characters only)."""
    end = at + piece.cell_len
    before = line[:at]
    after = line[end:]
    line.truncate(0)
    line.append_text(before)
    line.append_text(piece)
    line.append_text(after)


class WorkflowGraph(Widget, can_focus=True):
    """The graph of one run; arrow keys move the cursor from box to box."""

    DEFAULT_CSS = """
    WorkflowGraph { width: auto; height: auto; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("left,h", "move(-1, 0)", "Previous column", show=False),
        Binding("right,l", "move(1, 0)", "Next column", show=False),
        Binding("up,k", "move(0, -1)", "Up", show=False),
        Binding("down,j", "move(0, 1)", "Down", show=False),
        Binding("home", "edge(-1)", "First task", show=False),
        Binding("end", "edge(1)", "Last task", show=False),
        Binding("enter", "open", "Node in table"),
    ]

    class Moved(Message):
        """The cursor is on another box; ``row_key`` is the node iteration to inspect."""

        def __init__(self, row_key: str) -> None:
            super().__init__()
            self.row_key = row_key

    class Opened(Message):
        """Enter on a box: show its node iteration in the node table."""

        def __init__(self, row_key: str) -> None:
            super().__init__()
            self.row_key = row_key

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.graph = RunGraph()
        self.cursor: tuple[int, int] = (0, 0)
        self._lines: list[Text] = [Text("")]

    def show(self, graph: RunGraph, row_key: str | None = None) -> None:
        """Draw ``graph``; the cursor goes to the box holding ``row_key`` when given."""
        self.graph = graph
        if row_key is not None:
            position = graph.position_of(row_key)
            if position is not None:
                self.cursor = position
        self.cursor = move(graph, self.cursor, 0, 0)
        self._redraw()

    @property
    def drawn(self) -> str:
        """The graph as it is drawn now, as plain text."""
        return "\n".join(line.plain for line in self._lines)

    @property
    def selected(self) -> GraphBox | None:
        """The box under the cursor."""
        x, y = self.cursor
        if x < len(self.graph.columns) and y < len(self.graph.columns[x]):
            return self.graph.columns[x][y]
        return None

    def _redraw(self) -> None:
        if self.graph.columns:
            self._lines = render_graph(self.graph, self.cursor)
        else:
            self._lines = [Text("No nodes yet: the graph appears as the run schedules tasks.",
                                style="dim")]
        self.refresh(layout=True)
        self.call_after_refresh(self._show_cursor)

    def _show_cursor(self) -> None:
        x, y = self.cursor
        region = Region(x * (BOX_WIDTH + GUTTER), y * (BOX_HEIGHT + ROW_GAP), BOX_WIDTH,
                        BOX_HEIGHT)
        parent = self.parent
        if isinstance(parent, Widget):
            # The graph sits in a scrolling container: bring the selected box into view.
            parent.scroll_to_region(region.translate((1, 0)), animate=False)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max(line.cell_len for line in self._lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def render(self) -> Text:
        return Text("\n").join(self._lines)

    def _moved(self, position: tuple[int, int]) -> None:
        if position == self.cursor:
            return
        self.cursor = position
        self._redraw()
        box = self.selected
        if box is not None:
            self.post_message(self.Moved(box.focus_member.key))

    def action_move(self, dx: int, dy: int) -> None:
        """Move the cursor one box along the graph."""
        self._moved(move(self.graph, self.cursor, dx, dy))

    def action_edge(self, direction: int) -> None:
        """The first box of the first column, or the last box of the last column."""
        if not self.graph.columns:
            return
        if direction < 0:
            self._moved((0, 0))
        else:
            last = len(self.graph.columns) - 1
            self._moved((last, len(self.graph.columns[last]) - 1))

    def action_open(self) -> None:
        """Show the box's node iteration in the node table."""
        box = self.selected
        if box is not None:
            self.post_message(self.Opened(box.focus_member.key))
