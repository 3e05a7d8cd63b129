"""Replay (``r`` in a run): a read-only cursor over the run's event log.

Every part of the screen shows the run as it was right after the cursor's event, folded from
the event log (:mod:`store.read.replay`): node states on the graph and in the Nodes table,
tokens so far per node and for the run, the context-window histogram, the memory blocks recall
had saved and the notes the run had proposed. ``[``/``]`` step one event, ``{``/``}`` jump
between node ends, ``home``/``end`` go to the first and last event, ``escape`` leaves. The log
is read once when replay opens (a run still running replays what it had done by then); ``/``
filters the nodes by name or state. Nothing is executed and nothing is written.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from store.errors import NotFoundError
from store.model.history_records import MemoryBlockRecord
from store.model.run_records import TERMINAL_RUN_STATUSES
from store.read.replay import ReplayState
from store.read.replay_reads import NoteText, RunHistory, notes_text, read_history
from tui.format import one_line
from tui.graph_layout import build_graph
from tui.screens.live_screen import LiveScreen
from tui.screens.replay_render import (
    events_text,
    header_text,
    histogram_text,
    memory_text,
    notes_panel_text,
    summary_text,
)
from tui.screens.run_detail_render import NODE_COLUMNS, node_cells
from tui.tailing import Batch
from tui.widgets.filter_bar import matches
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.workflow_graph import WorkflowGraph


class ReplayScreen(LiveScreen):
    """A run's event log under a cursor; the run as it was at the cursor's event."""

    MODE = "runs"
    FILTER_KEY = "replay"
    HELP_TITLE = "Replay"
    HELP_TEXT = (
        "The run as it was right after one event of its log (read-only: nothing runs, nothing "
        "is written). The header says which event (its place among the run's events, its "
        "time in UTC, what it did); the graph and the Nodes table (g) show each node's state "
        "then, with its attempts and tokens so far; beside them the calls so far by "
        "context-window bucket, the memory blocks recall had saved and the notes proposed "
        "for review; below, the events around the cursor. [ and ] step one event, { and } "
        "jump to the previous or next node end, home and end go to the first and last event, "
        "/ filters the nodes by name or state. escape goes back to the run. A run still "
        "running replays the events it had when replay opened (r again reads the newer "
        "ones). tether replay RUN --at N prints the same."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("left_square_bracket", "step(-1)", "Step back", priority=True),
        Binding("right_square_bracket", "step(1)", "Step", priority=True),
        Binding("left_curly_bracket", "node_end(-1)", "Prev node end", priority=True),
        Binding("right_curly_bracket", "node_end(1)", "Next node end", priority=True),
        Binding("home", "edge(-1)", "First event", priority=True),
        Binding("end", "edge(1)", "Last event", priority=True),
        Binding("g", "toggle_graph", "Graph/table"),
    ]
    AUTO_FOCUS = "#replay-graph"

    def __init__(self, run_id: str, *, position: int | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.history: RunHistory | None = None
        self.position = position or 0
        """The cursor: 1-based place of its event among the run's events (0: the last)."""
        self.state: ReplayState | None = None
        self.notes: dict[str, NoteText] = {}
        self.blocks: dict[str, MemoryBlockRecord | None] = {}
        """Memory blocks read so far, by node iteration (each saved once per iteration)."""

    def compose_view(self) -> ComposeResult:
        with Vertical(id="replay-body"):
            yield Static(id="replay-header")
            yield Static(id="replay-summary")
            with Horizontal(id="replay-main"):
                with TabbedContent(id="replay-views"):
                    with TabPane("Graph", id="replay-tab-graph"), ScrollableContainer():
                        yield WorkflowGraph(id="replay-graph")
                    with TabPane("Nodes", id="replay-tab-nodes"):
                        yield KeyedTable(NODE_COLUMNS, id="replay-nodes", stretch="node")
                with VerticalScroll(id="replay-side"):
                    yield Static(id="replay-tokens")
                    yield Static(id="replay-memory")
                    yield Static(id="replay-notes")
            yield Static(id="replay-events")

    def crumb(self) -> Text:
        text = Text("run ")
        text.append_text(one_line(self.run_id, "bold"))
        text.append(" › replay")
        if self.state is not None:
            text.append(f" {self.state.position}/{self.state.total}")
        return text

    def can_go_back(self) -> bool:
        return True

    def action_back(self) -> None:
        """Leave replay: back to the run as it is now."""
        self.app.pop_screen()

    async def refresh_data(self, batch: Batch) -> None:
        # The log is read once: a replay shows a history, not the live run.
        if self.history is not None:
            if batch.first_read:
                self.show()  # the filter changed
            return
        if not batch.first_read:
            return
        reader = self.tether.reader
        if reader is None:
            return
        try:
            self.history = await read_history(reader, self.run_id)
        except (NotFoundError, ValueError) as error:
            self.query_one("#replay-header", Static).update(
                Text(f"Nothing to replay: {error}", style="bold red"))
            return
        log = self.history.log
        self.notes = await notes_text(reader, [n.note_id for n in log.at(log.total).notes])
        self.position = min(self.position, log.total) or log.total
        self.show()

    def show(self) -> None:
        """Draw every part of the screen as of the cursor's event."""
        history = self.history
        if history is None:
            return
        state = self.state = history.log.at(self.position)
        try:
            self.query_one("#replay-header", Static).update(
                header_text(state, history.cut, history.run.status not in TERMINAL_RUN_STATUSES))
            self.query_one("#replay-summary", Static).update(
                summary_text(state, history.run.nodes_total, history.run.workflow))
            at, needle = state.event.at_ms, self.filter_text
            nodes = [n for n in state.nodes if matches(needle, n.node_id, n.state)]
            table = self.query_one("#replay-nodes", KeyedTable)
            table.sync([(n.key, node_cells(n, state.usage.get(n.key), state.memory.get(n.key),
                                           at)) for n in nodes])
            graph = self.query_one(WorkflowGraph)
            graph.show(build_graph(nodes, state.usage), table.cursor_key)
            side = self.query_one("#replay-side").size.width or 40
            self.query_one("#replay-tokens", Static).update(
                histogram_text(state.buckets, side - 2))
            self._show_memory()
            self.query_one("#replay-notes", Static).update(notes_panel_text(state, self.notes))
            self.query_one("#replay-events", Static).update(
                events_text(history.log.events, state.position))
        except NoMatches:
            return  # the screen is being closed
        self.update_chrome()

    def _show_memory(self) -> None:
        """The blocks so far and, for the node under the cursor, its recalled items."""
        state = self.state
        if state is None:
            return
        key = self.query_one("#replay-nodes", KeyedTable).cursor_key
        if key is not None and key in state.memory and key not in self.blocks:
            self.blocks[key] = None  # being read: asked once
            self.run_worker(self._read_block(key), group="replay-block")
        block = self.blocks.get(key) if key is not None else None
        self.query_one("#replay-memory", Static).update(memory_text(state, key, block))

    async def _read_block(self, key: str) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        node_id, _, iteration = key.rpartition("#")
        self.blocks[key] = await reader.memory_block(self.run_id, node_id, int(iteration))
        try:
            self._show_memory()
        except NoMatches:
            return  # closed while reading

    def on_workflow_graph_moved(self, event: WorkflowGraph.Moved) -> None:
        # The node table is the one selection, as in the run's view.
        self.query_one("#replay-nodes", KeyedTable).select_key(event.row_key)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "replay-nodes":
            return
        graph = self.query_one(WorkflowGraph)
        key = event.row_key.value
        if key is not None and graph.graph.position_of(key) not in (None, graph.cursor):
            graph.show(graph.graph, key)  # the graph's cursor follows the table's
        self._show_memory()

    def on_resize(self) -> None:
        self.show()  # the histogram's bars fit the new width

    def _move_to(self, position: int) -> None:
        if self.history is None:
            return
        position = max(1, min(position, self.history.log.total))
        if position != self.position:
            self.position = position
            self.show()
        else:
            self.app.bell()  # already at the first or last event (or node end) that way

    def action_step(self, step: int) -> None:
        """Move the cursor one event back or forward."""
        self._move_to(self.position + step)

    def action_node_end(self, step: int) -> None:
        """Move the cursor to the previous or next event at which a node iteration ended."""
        if self.history is not None:
            self._move_to(self.history.log.next_end(self.position, step))

    def action_edge(self, step: int) -> None:
        """Move the cursor to the first (``-1``) or the last (``1``) event."""
        if self.history is not None:
            self._move_to(1 if step < 0 else self.history.log.total)

    def action_toggle_graph(self) -> None:
        """Switch between the graph and the node table."""
        views = self.query_one("#replay-views", TabbedContent)
        if views.active == "replay-tab-graph":
            views.active = "replay-tab-nodes"
            self.query_one("#replay-nodes", KeyedTable).focus()
        else:
            views.active = "replay-tab-graph"
            self.query_one(WorkflowGraph).focus()
