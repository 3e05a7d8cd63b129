"""A run opened from the list: its node table and an inspector for the selected node.

Inspector tabs: the prompt as sent, the memory block (recalled items, source, score, why; bytes
of budget; truncation; warnings), output, live log tail, attempts with errors, calls."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from store.model.run_records import TERMINAL_RUN_STATUSES, NodeRecord, RunRecord
from store.read.timeline import Row
from tui.actions.fork_action import FORK_NOTE, fork_allowed, fork_from_node
from tui.actions.read_only import write_refused
from tui.actions.steer_action import STEER_NOTE, steer_allowed, steer_node
from tui.format import (
    duration,
    literal,
    one_line,
    plural,
    pretty_json,
    row_cost,
    status_text,
    tokens,
)
from tui.graph_layout import build_graph
from tui.screens.inspector_search import InspectorSearch
from tui.screens.replay_entry import ReplayEntry
from tui.screens.run_detail_render import (
    ATTEMPT_COLUMNS,
    CALL_COLUMNS,
    NODE_COLUMNS,
    attempt_cells,
    attempt_warnings,
    call_cells,
    memory_block_text,
    node_cells,
)
from tui.screens.run_timeline import TIMELINE_TAB
from tui.tailing import Batch, DatabaseLogTail, FileTail, find_node_log, find_stored_log
from tui.widgets.filter_bar import matches
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.log_view import FollowLog
from tui.widgets.workflow_graph import WorkflowGraph


class RunDetailScreen(ReplayEntry, InspectorSearch):
    """Nodes of one run and the inspector for the node under the cursor."""

    MODE = "runs"
    FILTER_KEY = "run-detail"
    HELP_TITLE = "Run"
    HELP_TEXT = (
        "The run as a live graph (a box per task, a fan-out's items counted, a loop's iteration; "
        "arrows move) and, on the Nodes tab (g), a row per node iteration; below, the node's "
        "inspector: prompt as sent, memory block (what recall injected and why), output, live "
        "log, attempts, calls. b forks the run from the node (F follows live on the Timeline), "
        "o shows its fork chain, m steers a running node, r replays the run (a read-only "
        "cursor over its event log). escape goes back."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("left_square_bracket", "tab(-1)", "Prev tab", show=False),
        Binding("right_square_bracket", "tab(1)", "Next tab", show=False),
        Binding("g", "toggle_graph", "Graph/table"),
        Binding("T", "timeline", "Timeline"),
        Binding("t", "tokens", "Tokens of node"),
        Binding("f", "follow_log", "Follow log"),
        Binding("b", "fork_node", "Fork (branch) from node"),
        Binding("m", "steer_node", "Steer node"),
        Binding("o", "fork_chain", "Fork chain"),
    ]
    KEY_NOTES: ClassVar[dict[str, str]] = {**InspectorSearch.KEY_NOTES, "fork_node": FORK_NOTE,
                                             "steer_node": STEER_NOTE}
    AUTO_FOCUS = "#run-graph"

    _graph_wanted: tuple[list[NodeRecord], Any, Any] | None = None
    """What the graph should show next (drawn when its tab is on screen)."""
    _graph_moved = False
    """The graph's cursor moved while its tab was hidden (redraw it when shown)."""

    def __init__(
        self, run_id: str, *, came_from: str = "runs", node_key: str | None = None
    ) -> None:
        super().__init__()
        self.run_id = run_id
        self._wanted_node = node_key
        """The node to put the cursor on once the nodes are read (the cost view's enter)."""
        self.came_from = came_from
        """The view the run was opened from (escape returns there)."""
        self.run: RunRecord | None = None
        self.nodes: dict[str, NodeRecord] = {}
        self._shown_node: str | None = None
        self._log_tail: FileTail | None = None
        self._db_log_busy = False
        self._log_key: str | None = None
        self._pinned: NodeRecord | None = None
        """A node the timeline chose that the node table does not list (beyond its 2 000)."""
        self._open_in_inspector: tuple[str, str] | None = None
        """(inspector tab, row key) to select once the inspector has the node."""

    def compose_view(self) -> ComposeResult:
        with Vertical(id="detail-body"):
            yield Static(id="run-summary")
            with TabbedContent(id="run-views"):
                with TabPane("Graph", id="tab-graph"), ScrollableContainer(id="graph-box"):
                    yield WorkflowGraph(id="run-graph")
                with TabPane("Nodes", id="tab-nodes"):
                    yield KeyedTable(NODE_COLUMNS, id="nodes-table", stretch="node")
                yield from self.compose_timeline()
            with TabbedContent(id="inspector"):
                with TabPane("Prompt", id="tab-prompt"), VerticalScroll():
                    yield Static(id="prompt-text")
                with TabPane("Memory", id="tab-memory"), VerticalScroll():
                    yield Static(id="memory-text")
                with TabPane("Output", id="tab-output"), VerticalScroll():
                    yield Static(id="output-text")
                with TabPane("Log", id="tab-log"):
                    yield Static(id="log-status")
                    yield FollowLog(id="node-log")
                with TabPane("Attempts", id="tab-attempts"), Vertical():
                    yield KeyedTable(ATTEMPT_COLUMNS, id="attempts-table", stretch="error")
                    yield VerticalScroll(Static(id="attempt-errors"), id="attempt-errors-box")
                with TabPane("Calls", id="tab-calls"):
                    yield KeyedTable(CALL_COLUMNS, id="calls-table", stretch="agent")

    def on_mount(self) -> None:
        # Textual calls each base class's on_mount too (most derived first): no super().
        self.set_interval(0.25, self._poll_log)

    def crumb(self) -> Text:
        text = Text("run ")
        text.append_text(one_line(self.run_id, "bold"))
        node = self.selected_node
        if node is not None:
            text.append(" › node ")
            text.append_text(one_line(node.key, "bold"))
        return text

    @property
    def selected_node(self) -> NodeRecord | None:
        """The node iteration under the cursor."""
        if not self.is_mounted:
            return None
        key = self.query_one("#nodes-table", KeyedTable).cursor_key
        if self._pinned is not None and key != self._pinned.key:
            return self.nodes.get(self._pinned.key, self._pinned)
        return self.nodes.get(key) if key else None

    async def refresh_data(self, batch: Batch) -> None:
        if not (batch.first_read or batch.touches(self.run_id) or not batch.events):
            return
        reader = self.tether.reader
        if reader is None:
            return
        now = self.tether.now_ms()
        ticked = not batch.first_read and not batch.events
        if ticked and self.run is not None and self.run.status in TERMINAL_RUN_STATUSES:
            return  # a clock tick changes nothing shown of an ended run (10 000 nodes or 4)
        self.run = await reader.run(self.run_id)
        nodes = await reader.nodes(self.run_id)
        usage = await reader.node_usage(self.run_id)
        memory = await reader.memory_summaries(self.run_id)
        warned = await reader.warned_nodes(self.run_id)
        self.nodes = {node.key: node for node in nodes}
        needle = self.filter_text
        rows = [
            (n.key, node_cells(n, usage.get(n.key), memory.get(n.key), now, n.key in warned))
            for n in nodes
            if matches(needle, n.node_id, n.state)
        ]
        table = self.query_one("#nodes-table", KeyedTable)
        table.sync(rows)
        if self._wanted_node is not None and table.select_key(self._wanted_node):
            self._wanted_node = None
            self.query_one("#run-views", TabbedContent).active = "tab-nodes"
            table.focus()
        shown = [n for n in nodes if matches(needle, n.node_id, n.state)]
        self._graph_wanted = (shown, usage, warned)
        if self.query_one("#run-views", TabbedContent).active == "tab-graph":
            self._draw_graph()
        self._show_summary(now)
        node = self.selected_node
        if node is not None and (
            batch.first_read
            or node.key != self._shown_node
            or batch.touches(self.run_id, node.node_id)
        ):
            await self._show_node(node)
        await self.refresh_timeline(batch.first_read or batch.touches(self.run_id))
        self.update_chrome()

    def _show_summary(self, now_ms: int) -> None:
        run = self.run
        summary = self.query_one("#run-summary", Static)
        if run is None:
            summary.update(Text("This run no longer exists (deleted).", style="bold red"))
            return
        line = status_text(run.status)
        if run.is_stale(now_ms):
            line.append("  STALE (heartbeat older than 30 s; resumable)", style="bold yellow")
        line.append("  ")
        line.append_text(one_line(run.workflow, "bold"))
        line.append(f"  gen {run.generation}  elapsed {duration(run.elapsed_ms(now_ms))}")
        if run.forked_from:
            line.append(f"  forked from {run.forked_from}", style="bold")
        line.append(f"  nodes {run.nodes_done}/{run.nodes_total}")
        line.append(
            f"  tokens {tokens(run.tokens.total)} (fresh {tokens(run.tokens.input)}, cached "
            f"{tokens(run.tokens.cache_read)}, out {tokens(run.tokens.output)})"
            f"  cost {row_cost(run)}"
        )
        if run.error:
            line.append("\nerror: ", style="bold red")
            line.append_text(one_line(run.error, "red", width=300))
        summary.update(line)

    async def _show_node(self, node: NodeRecord) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        self._shown_node = node.key
        attempts = await reader.attempts(self.run_id, node.node_id, node.iteration)
        block = await reader.memory_block(self.run_id, node.node_id, node.iteration)
        calls = await reader.calls(self.run_id, node.node_id, node.iteration)
        latest = attempts[-1] if attempts else None

        prompt = Text()
        if latest is None:
            prompt.append("No attempt yet.", style="dim")
        else:
            prompt.append(
                f"attempt {latest.attempt} of {max(node.attempts, len(attempts))} · agent "
                f"{latest.agent or '–'}",
                style="dim",
            )
            warnings = attempt_warnings(latest)
            if warnings:
                prompt.append(f" · ⚠ {plural(len(warnings), 'warning')} (Attempts tab)",
                              style="bold yellow")  # fmt: skip
            prompt.append("\n\n")
            prompt.append_text(literal(latest.prompt or "(prompt not recorded)"))
        self.show_text("tab-prompt", prompt)
        self.show_text("tab-memory", memory_block_text(block))

        output = Text()
        if node.error:
            output.append("error: ", style="bold red")
            output.append_text(literal(node.error, "red"))
            output.append("\n\n")
        if node.output_json is not None:
            output.append_text(literal(pretty_json(node.output_json)))
        elif latest is not None and latest.response_text:
            output.append("raw response of the latest attempt:\n", style="dim")
            output.append_text(literal(latest.response_text))
        elif not node.error:
            output.append("No output yet.", style="dim")
        self.show_text("tab-output", output)

        self.query_one("#attempts-table", KeyedTable).sync(
            [(str(a.attempt), attempt_cells(a)) for a in attempts]
        )
        errors = Text()
        for attempt in attempts:
            if attempt.error:
                errors.append(f"attempt {attempt.attempt}: ", style="bold red")
                errors.append_text(literal(attempt.error))
                errors.append("\n")
            for warning in attempt_warnings(attempt):
                errors.append(f"attempt {attempt.attempt} warning: ", style="bold yellow")
                errors.append_text(literal(warning))
                errors.append("\n")
        self.query_one("#attempt-errors", Static).update(errors)
        self.query_one("#calls-table", KeyedTable).sync(
            [(str(c.call_id), call_cells(c)) for c in calls]
        )
        if self._open_in_inspector is not None:
            tab, key = self._open_in_inspector
            self._open_in_inspector = None
            self.query_one("#inspector", TabbedContent).active = tab
            table_id = "#attempts-table" if tab == "tab-attempts" else "#calls-table"
            self.query_one(table_id, KeyedTable).select_key(key)

    def on_workflow_graph_moved(self, event: WorkflowGraph.Moved) -> None:
        # The node table is the one selection: the inspector follows its row.
        self.query_one("#nodes-table", KeyedTable).select_key(event.row_key)

    def on_workflow_graph_opened(self, event: WorkflowGraph.Opened) -> None:
        table = self.query_one("#nodes-table", KeyedTable)
        table.select_key(event.row_key)
        self.query_one("#run-views", TabbedContent).active = "tab-nodes"
        table.focus()

    def action_toggle_graph(self) -> None:
        """Switch between the graph and the node table (the selection is shared)."""
        views = self.query_one("#run-views", TabbedContent)
        if views.active == "tab-graph":
            views.active = "tab-nodes"
            self.query_one("#nodes-table", KeyedTable).focus()
        else:
            views.active = "tab-graph"
            self.query_one(WorkflowGraph).focus()

    def follow_timeline_row(self, row: Row, *, open_it: bool) -> None:
        """The timeline's cursor is on ``row``: the inspector shows its node (and, on
        ``enter``, its attempt or call)."""
        if open_it and row.attempt is not None:
            tab = "tab-calls" if row.kind == "call" else "tab-attempts"
            key = str(row.item_id) if row.kind == "call" else str(row.attempt)
            self._open_in_inspector = (tab, key)
        node = self.nodes.get(row.node_key)
        table = self.query_one("#nodes-table", KeyedTable)
        if node is not None and table.select_key(row.node_key):
            self._pinned = None
            if node.key == self._shown_node:
                self.run_worker(self._show_node_safely(node), group="inspector", exclusive=True)
            return
        self.run_worker(self._pin(row.node_key), group="inspector", exclusive=True)

    async def _pin(self, node_key: str) -> None:
        reader = self.tether.reader
        node_id, _, iteration = node_key.rpartition("#")
        node = await reader.node(self.run_id, node_id, int(iteration)) if reader else None
        if node is not None:
            self._pinned = node
            self.tether.select(run_id=self.run_id, node_id=node.node_id)
            self.update_chrome()
            await self._show_node_safely(node)

    def _draw_graph(self) -> None:
        """Draw the graph the last read left (only while its tab is shown: a run of 10 000
        nodes is not drawn again behind the timeline on every commit)."""
        table = self.query_one("#nodes-table", KeyedTable)
        graph = self.query_one(WorkflowGraph)
        if self._graph_wanted is None:  # the same graph: its cursor followed the table
            if self._graph_moved:
                self._graph_moved = False
                graph.show(graph.graph)
            return
        shown, usage, warned = self._graph_wanted
        self._graph_wanted = None
        graph.show(build_graph(shown, usage, warned), table.cursor_key)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == TIMELINE_TAB:
            self.run_worker(self.reread_timeline(), group="timeline",
                            exclusive=True)
        elif event.pane.id == "tab-graph":
            self._draw_graph()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "nodes-table":
            return
        self._pinned = None
        node = self.selected_node
        if node is None:
            return
        graph = self.query_one(WorkflowGraph)
        position = graph.graph.position_of(node.key)
        if position is not None and position != graph.cursor:
            graph.cursor = position
            if self.query_one("#run-views", TabbedContent).active == "tab-graph":
                graph.show(graph.graph)
            else:
                self._graph_moved = True  # drawn when the Graph tab is shown again
        self.tether.select(run_id=self.run_id, node_id=node.node_id)
        if node.key != self._shown_node:
            self.update_chrome()
            self.run_worker(self._show_node_safely(node), group="inspector", exclusive=True)

    async def _show_node_safely(self, node: NodeRecord) -> None:
        try:
            await self._show_node(node)
        except NoMatches:
            return  # the screen was closed while the inspector was loading

    def _poll_log(self) -> None:
        if self.tether.paused or not self.is_current:
            return
        if self.tether.workspace.is_shared:
            # The log lives in the database (it may be written on another host).
            if not self._db_log_busy:
                self._db_log_busy = True
                self.run_worker(self._follow_db_log(), group="db-log", exit_on_error=False)
            return
        try:
            self._follow_log()
        except NoMatches:
            return  # the screen is being closed

    def _follow_log(self) -> None:
        node = self.selected_node
        log = self.query_one("#node-log", FollowLog)
        if node is None:
            return
        if node.key != self._log_key:
            self._log_key = node.key
            log.clear()
            log.pending = 0
            path = find_node_log(self.tether.workspace, node)
            self._log_tail = FileTail(path) if path else None
        else:
            # A retry starts a new attempt with its own log: switch to it when it appears.
            path = find_node_log(self.tether.workspace, node)
            if path is not None and (self._log_tail is None or path != self._log_tail.path):
                self._log_tail = FileTail(path)
                log.append([f"── {path.parent.name and 'attempt ' + path.parent.name} ──"])
        if self._log_tail is not None:
            log.append(self._log_tail.read_new_lines())
        self._show_log_status(log)

    async def _follow_db_log(self) -> None:
        try:
            chunks = getattr(self.tether.reader, "chunks", None)
            node = self.selected_node
            if chunks is None or node is None:
                return
            log = self.query_one("#node-log", FollowLog)
            path = await find_stored_log(chunks, node)
            if node.key != self._log_key:
                self._log_key = node.key
                log.clear()
                log.pending = 0
                self._log_tail = DatabaseLogTail(chunks, path) if path else None
            elif path is not None and (self._log_tail is None or path != self._log_tail.path):
                self._log_tail = DatabaseLogTail(chunks, path)
                log.append([f"── attempt {path.parent.name} ──"])
            if isinstance(self._log_tail, DatabaseLogTail):
                log.append(await self._log_tail.read_new_lines_async())
            self._show_log_status(log)
        except NoMatches:
            return  # the screen is being closed
        finally:
            self._db_log_busy = False

    def _show_log_status(self, log: FollowLog) -> None:
        status = self.query_one("#log-status", Static)
        if self._log_tail is None:
            text = Text("No log artifact for this node yet.", style="dim")
        elif log.pending:
            text = Text(f"▼ {plural(log.pending, 'new line')} — press f to follow",
                        style="bold yellow")
        else:
            text = Text("following ", style="green")
            text.append_text(one_line(self._log_tail.path.name, "dim"))
        status.update(text)

    def action_follow_log(self) -> None:
        """Jump to the end of the log and follow it again."""
        log = self.query_one("#node-log", FollowLog)
        log.scroll_end(animate=False)
        log.pending = 0

    def action_tab(self, step: int) -> None:
        """Switch the inspector tab."""
        tabs = self.query_one("#inspector", TabbedContent)
        panes = [pane.id for pane in tabs.query(TabPane) if pane.id]
        if tabs.active in panes:
            tabs.active = panes[(panes.index(tabs.active) + step) % len(panes)]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``b`` only on a node that ran, and never on a workspace that may only be read."""
        if write_refused(self.app, action):
            return False
        if action == "fork_node":
            return fork_allowed(self.selected_node)
        if action == "steer_node":
            return steer_allowed(self.run, self.selected_node)
        return super().check_action(action, parameters)

    def action_fork_chain(self) -> None:
        """This run's fork chain, from its first run down (tui.screens.fork_chain_view)."""
        self.tether.open_fork_chain(self.run_id)

    @work(group="fork", exclusive=True)
    async def action_fork_node(self) -> None:
        """Fork the run from the node under the cursor, with an edit (tui.actions.fork_action)."""
        node = self.selected_node
        if fork_allowed(node) and node is not None:
            await fork_from_node(self, self.run_id, node)

    @work(group="steer", exclusive=True)
    async def action_steer_node(self) -> None:
        """Send the node under the cursor a message (tui.actions.steer_action)."""
        node, run = self.selected_node, self.run
        if steer_allowed(run, node) and node is not None and run is not None:
            await steer_node(self, run, node)

    def action_tokens(self) -> None:
        """Open the Tokens view scoped to the selected node."""
        node = self.selected_node
        if node is not None:
            self.tether.select(run_id=self.run_id, node_id=node.node_id)
        self.tether.show_tokens(scope="node" if node is not None else "run")
