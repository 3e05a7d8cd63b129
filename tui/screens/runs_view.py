"""View ``1``: the live list of runs and an activity feed of the newest events."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import DataTable, Static

from store.model.executor_records import ExecutorNodeRecord
from store.model.run_records import RunRecord
from store.read.dashboard_rows import WorkerRow
from tui.event_text import event_line
from tui.format import (
    duration,
    literal,
    one_line,
    percent,
    plural,
    row_cost,
    status_text,
    tokens,
)
from tui.screens.cluster_render import cluster_text
from tui.screens.runs_search import RESHAPING, RunSearchScreen
from tui.tailing import Batch
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.log_view import FollowLog
from tui.widgets.run_chart import CALLS_CHARTED, RunChart

RUNS_SHOWN = 200
"""The runs list is a window on the newest runs (plus every running one)."""
FIRST_WINDOW = 50
"""The first listing reads only the newest runs a tall terminal shows (the rest of the window
follows right after the first paint): every row costs the table a measure and a layout."""

CHART_MIN_WIDTH = 160
"""From this many columns the selected run's chart is shown beside the list."""
CHART_MIN_INTERVAL_S = 1.0

RESHAPING_EVENTS = frozenset({"run.created", "run.deleted"})
"""Events that add or remove rows: the list is re-read in full when one arrives (with a
filter in effect, a change of status too: it may bring a run in or take it out)."""

RUN_COLUMNS = (
    ("status", "Status"),
    ("run", "Run"),
    ("workflow", "Workflow"),
    ("gen", "Gen"),
    ("elapsed", "Elapsed"),
    ("nodes", "Nodes"),
    ("tokens", "Tokens"),
    ("cost", "Cost"),
    ("cached", "Cached"),
    ("beat", "Heartbeat"),
)

NARROW_DROPS = ("beat", "cached", "gen", "elapsed")
"""Columns a narrow terminal leaves out, first to last (the STALE badge says what the heartbeat
would)."""


def workflow_cell(run: RunRecord) -> Text:
    """The workflow's name, and for a fork the run it was forked from (``↳ RUN``)."""
    cell = one_line(run.workflow)
    if run.forked_from:
        cell.append(f"  ↳ {run.forked_from}", style="dim")
    return cell


def run_cells(run: RunRecord, now_ms: int) -> list[Text]:
    """The cells of one runs-list row."""
    stale = run.is_stale(now_ms)
    status = status_text("queued" if run.is_queued else run.status)
    if stale:
        status.append(" ")
        status.append(" STALE ", style="bold black on yellow")
    beat = "–"
    if run.status == "running" and run.heartbeat_at_ms is not None:
        beat = f"{duration(max(0, now_ms - run.heartbeat_at_ms))} ago"
    return [
        status,
        one_line(run.run_id),
        workflow_cell(run),
        Text(str(run.generation), justify="right"),
        Text(duration(run.elapsed_ms(now_ms)), justify="right"),
        Text(f"{run.nodes_done}/{run.nodes_total}", justify="right"),
        Text(tokens(run.tokens.total), justify="right"),
        Text(row_cost(run), justify="right"),
        Text(percent(run.tokens.cached_share) if run.tokens.context_tokens else "–",
             justify="right"),
        Text(beat, style="bold yellow" if stale else "dim"),
    ]


def workers_text(workers: list[WorkerRow], now_ms: int) -> Text:
    """One line naming each worker: host, pid, runs held, last heartbeat (gone ones marked)."""
    text = Text("Workers ", style="bold")
    for index, worker in enumerate(workers):
        if index:
            text.append(" · ", style="dim")
        alive = worker.is_alive(now_ms)
        text.append_text(one_line(worker.host, width=24))
        text.append(f" pid {worker.pid}", style="dim")
        text.append(f" {worker.runs_held} held")
        beat = f" beat {duration(max(0, now_ms - worker.heartbeat_at_ms))} ago"
        text.append(beat, style="dim" if alive else "bold yellow")
        if not alive:
            text.append(" GONE", style="bold yellow")
    return text


class RunsScreen(RunSearchScreen):
    """The newest runs with status, progress, tokens and a stale badge; ``enter`` opens one."""

    MODE = "runs"
    FILTER_KEY = "runs"
    HELP_TITLE = "Runs"
    HELP_TEXT = (
        "The newest runs, live. A running run whose heartbeat is older than 30 s is STALE: "
        "its process is gone and it can be resumed. enter opens the run's nodes and inspector. "
        "The feed below shows the newest events as they are committed. / searches every run "
        "with the query language of tether runs --where: status = failed, workflow ~ review, "
        "created > -7d, cost > 0.5, tokens >= 200k, agent = claude-code, model STARTS_WITH "
        "claude, input.repo = demo, error ~ timeout, text ~ pytest (prompts, outputs, logs), "
        "joined by AND, OR, NOT and parentheses; a plain word matches run ids and workflows. "
        "F picks a saved filter, S saves the one in effect. $ explains the selected run's "
        "cost (its costliest nodes and calls, retries, cache). m marks a run, = compares the "
        "marked run with the selected one (= on a run that continues another compares the "
        "two generations)."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("enter", "open_run", "Open run"),
        Binding("dollar_sign", "cost", "Why this cost"),
        Binding("m", "mark", "Mark to compare"),
        Binding("equals_sign", "compare", "Compare"),
        Binding("o", "fork_chain", "Fork chain"),
    ]
    AUTO_FOCUS = "#runs-table"
    SELECTED_RUN_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"open_run", "cost", "mark", "compare", "fork_chain"})
    """Keys that act on the run under the cursor: hidden while the list shows none (no runs
    yet, or none matches the filter)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[str, RunRecord] = {}
        self.marked: str | None = None
        """The run marked with m (the A side of the next compare)."""
        self._charted_at = 0.0
        self._chart_stale = True
        self._chart_timer: Timer | None = None
        self._charted_run: str | None = None
        """The run the chart was last asked to show."""
        self.window = 0
        """How many of the newest runs the list has read: 0 before the first listing (the
        crumb then says "loading", never a count), :data:`FIRST_WINDOW` until the rest of
        the window is read, then :data:`RUNS_SHOWN`."""

    def compose_view(self) -> ComposeResult:
        # Decided before the first layout: switching it after would lay the list out twice.
        wide = "-wide" if self.app.size.width >= CHART_MIN_WIDTH else ""
        with Vertical(id="runs-body", classes=wide):
            with Horizontal(id="runs-top"):
                yield KeyedTable(RUN_COLUMNS, id="runs-table", stretch="workflow",
                                 optional=NARROW_DROPS)
                yield RunChart(id="run-chart")
            yield Static(id="runs-empty")
            yield Static(id="workers-line")
            yield Static(id="cluster-line")
            yield Static(Text("Activity", style="bold"), id="feed-title", classes="pane-title")
            yield FollowLog(id="activity-feed", max_lines=500)

    def on_resize(self) -> None:
        # The chart takes the space a wide terminal leaves beside the list.
        wide = self.size.width >= CHART_MIN_WIDTH
        self.query_one("#runs-body").set_class(wide, "-wide")
        if wide:
            self._chart_stale = True
            self._schedule_chart()

    def crumb(self) -> Text:
        if self.filter_text:
            text = self.search_crumb()
        elif not self.window:
            text = Text("loading runs…", style="dim")
        else:
            shown = len(self.query_one(KeyedTable).keys) if self.is_mounted else 0
            text = Text(f"{plural(shown, 'run')} shown")
            if self.window < RUNS_SHOWN and shown >= self.window:
                text.append(f", loading up to {RUNS_SHOWN}…", style="dim")
        if self.marked:
            text.append("  marked ", style="dim")
            text.append_text(literal(self.marked, "bold magenta"))
            text.append(" (= compares)", style="dim")
        return text

    @property
    def selected_run_id(self) -> str | None:
        """The run under the cursor."""
        return self.query_one(KeyedTable).cursor_key

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.SELECTED_RUN_ACTIONS:
            tables = self.query(KeyedTable)
            if not tables or not tables.first().keys:
                return False
        return super().check_action(action, parameters)

    async def refresh_data(self, batch: Batch) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        now = self.tether.now_ms()
        if batch.first_read or not batch.events:
            # On the clock tick, not on every commit: heartbeats age by the second anyway.
            self._show_workers(await reader.workers(), now)
            self._show_cluster(await reader.executor_nodes(), now)
        table = self.query_one(KeyedTable)
        if not batch.first_read and not batch.events and not self.filter_text:
            # A clock tick, or a commit without events (heartbeats, memory edits): only the
            # running runs' elapsed time, heartbeat and stale badge can have changed.
            self._patch(await reader.active_runs(), table, now)
            return
        if self.selected_run_id in batch.run_ids:
            self._chart_stale = True
            self._schedule_chart()
        found = await self.searched_runs(batch) if self.filter_text else None
        if self._can_patch(batch, table) or (self.filter_text and found is None):
            # Only rows of runs the new events touch change (on a tick: the running ones).
            touched = batch.run_ids or {
                key for key in table.keys if self.runs.get(key) and self.runs[key].status
                == "running"
            }
            self._patch((await reader.runs_by_ids(sorted(touched))).values(), table, now)
            self.query_one(FollowLog).append(event_line(e) for e in batch.events[-200:])
            self.update_chrome()
            return
        if found is not None:
            runs = found
            self.runs = {run.run_id: run for run in runs}
            self.tether.remember_runs(runs)
        else:
            window = RUNS_SHOWN if self.window else FIRST_WINDOW
            recent = await reader.recent_runs(window)
            active = await reader.active_runs()
            merged = {run.run_id: run for run in recent}
            for run in active:
                merged.setdefault(run.run_id, run)
            runs = sorted(merged.values(), key=lambda r: (r.created_at_ms, r.run_id),
                          reverse=True)
            self.runs = merged
            self.tether.remember_runs(runs)
        rows = [(run.run_id, run_cells(run, now)) for run in runs]
        # The cursor follows the newest run while it sits on the first row (the person has
        # not moved it), and goes to a run launched or cleared here once it is listed.
        follow = table.cursor_row <= 0
        table.sync(rows)
        if self.cursor_wanted is not None and table.select_key(self.cursor_wanted):
            self.cursor_wanted = None
        elif follow and rows and table.cursor_row != 0:
            table.move_cursor(row=0, animate=False)
        if not rows and self._charted_run is not None:
            # No row is highlighted when the list empties (a filter nothing matches): the
            # chart must not go on showing a run the list no longer does.
            self._chart_stale = True
            self._schedule_chart()
        self._show_empty(bool(rows))
        feed = self.query_one(FollowLog)
        if batch.first_read and feed.line_count == 0:
            events = list(reversed(await reader.recent_events(100)))
        else:
            events = batch.events[-200:]
        feed.append(event_line(e) for e in events)
        if found is None and self.window < RUNS_SHOWN:
            first = not self.window
            self.window = window
            if first and len(recent) >= window:
                # The rest of the window once this first screen is on the terminal.
                self.call_after_refresh(self._read_rest)
        self.update_chrome()

    def _read_rest(self) -> None:
        self.run_worker(self.tether.refresh_screen(self), group="runs-window", exclusive=True,
                        exit_on_error=False)

    def _show_workers(self, workers: list[WorkerRow], now_ms: int) -> None:
        line = self.query_one("#workers-line", Static)
        line.display = bool(workers)
        if workers:
            line.update(workers_text(workers, now_ms))

    def _show_cluster(self, nodes: list[ExecutorNodeRecord], now_ms: int) -> None:
        line = self.query_one("#cluster-line", Static)
        text = cluster_text(nodes, now_ms)
        line.display = text is not None
        if text is not None:
            line.update(text)

    def _patch(self, runs: Iterable[RunRecord], table: KeyedTable, now: int) -> None:
        """Rewrite the rows of ``runs`` in place. The run keys read the same records
        (``known_runs``), so a run that just ended offers R/d instead of c at once."""
        for run in runs:
            self.runs[run.run_id] = run
            self.tether.known_runs[run.run_id] = run
            table.update_row(run.run_id, run_cells(run, now))

    def _can_patch(self, batch: Batch, table: KeyedTable) -> bool:
        """True when the new events only change rows already shown (no run was created or
        deleted, nothing that may move a run in or out of the filter): then the list is
        patched instead of re-read."""
        if batch.first_read or not batch.events:
            return False
        reshaping = RESHAPING if self.filter_text else RESHAPING_EVENTS
        if any(e.type in reshaping for e in batch.events):
            return False
        shown = set(table.keys)
        return all(run_id in shown for run_id in batch.run_ids)

    def _show_empty(self, has_rows: bool) -> None:
        empty = self.query_one("#runs-empty", Static)
        empty.set_class(not has_rows, "-visible")
        if has_rows:
            return
        if self.filter_text:
            empty.update(Text.assemble(
                "No run matches the filter ", ("/", "bold"), " ", literal(self.filter_text),
                ". Press / and clear it to see every run.",
            ))
        else:
            empty.update(Text.assemble(
                ("No runs yet.", "bold"), "\nThis view lists the newest runs of the workspace, "
                "live: status, progress, tokens, and a STALE badge when a run's process is gone.\n"
                "Press ", ("n", "bold"), " to launch a workflow here, or run ",
                ("tether run WORKFLOW", "bold"), " in another terminal.",
            ))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.tether.select(run_id=event.row_key.value)
            self._chart_stale = True
            self._schedule_chart()

    def _schedule_chart(self) -> None:
        """Re-read the selected run's calls for the chart, at most once a second."""
        if self._chart_timer is not None or not self.query_one("#runs-body").has_class("-wide"):
            return
        wait = max(0.05, CHART_MIN_INTERVAL_S - (time.monotonic() - self._charted_at))
        self._chart_timer = self.set_timer(wait, self._update_chart)

    async def _update_chart(self) -> None:
        self._chart_timer = None
        if not self._chart_stale or self.tether.paused:
            return
        reader = self.tether.reader
        if reader is None:
            return
        self._chart_stale = False
        self._charted_at = time.monotonic()
        run_id = self._charted_run = self.selected_run_id
        calls = await reader.recent_calls_of_run(run_id, CALLS_CHARTED) if run_id else []
        try:
            await self.query_one(RunChart).show(run_id, calls)
        except NoMatches:
            return  # the view is being closed

    def action_open_run(self) -> None:
        """Open the selected run (with the words of a full-text search highlighted)."""
        run_id = self.selected_run_id
        if run_id is not None:
            self.tether.open_run(run_id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.tether.open_run(event.row_key.value)

    def action_cost(self) -> None:
        """Why the selected run cost what it did."""
        run_id = self.selected_run_id
        if run_id is not None:
            self.tether.open_cost(run_id)

    def action_fork_chain(self) -> None:
        """The selected run's fork chain: its first run and every fork below it."""
        run_id = self.selected_run_id
        if run_id is not None:
            self.tether.open_fork_chain(run_id)

    def action_mark(self) -> None:
        """Mark the selected run as the A side of a comparison (again: unmark it)."""
        run_id = self.selected_run_id
        self.marked = None if run_id == self.marked else run_id
        self.update_chrome()

    def action_compare(self) -> None:
        """The marked run beside the selected one; without a mark, the selected run beside
        the run it continues (its previous generation, or the run it was forked from)."""
        run_id = self.selected_run_id
        if run_id is None:
            return
        if self.marked and self.marked != run_id:
            self.tether.open_compare(self.marked, run_id)
            return
        run = self.runs.get(run_id) or self.tether.known_runs.get(run_id)
        origin = None if run is None else run.parent_run_id or run.forked_from
        if origin:
            self.tether.open_compare(origin, run_id)
            return
        self.app.notify("Mark a run with m, then press = on another run to compare them "
                        "(a run that continues another compares with it directly).", timeout=6)
