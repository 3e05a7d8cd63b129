"""View ``1``: the live list of runs and an activity feed of the newest events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from store.dashboard import EventRow, RunRow
from tui.actions.run_actions import RunControlScreen
from tui.format import duration, literal, one_line, percent, row_cost, status_text, tokens
from tui.tailing import Batch
from tui.widgets.filter_bar import matches
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.log_view import FollowLog

RUNS_SHOWN = 200
"""The runs list is a window on the newest runs (plus every running one)."""

RESHAPING_EVENTS = frozenset({"run.created", "run.deleted"})
"""Events that add or remove rows: the list is re-read in full when one arrives."""

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


def run_cells(run: RunRow, now_ms: int) -> list[Text]:
    """The cells of one runs-list row."""
    stale = run.is_stale(now_ms)
    status = status_text(run.status)
    if stale:
        status.append(" ")
        status.append(" STALE ", style="bold black on yellow")
    beat = "–"
    if run.status == "running" and run.heartbeat_at_ms is not None:
        beat = f"{duration(max(0, now_ms - run.heartbeat_at_ms))} ago"
    return [
        status,
        one_line(run.run_id),
        one_line(run.workflow, width=28),
        Text(str(run.generation), justify="right"),
        Text(duration(run.elapsed_ms(now_ms)), justify="right"),
        Text(f"{run.nodes_done}/{run.nodes_total}", justify="right"),
        Text(tokens(run.total_tokens), justify="right"),
        Text(row_cost(run), justify="right"),
        Text(percent(run.cached_share) if run.context_tokens else "–", justify="right"),
        Text(beat, style="bold yellow" if stale else "dim"),
    ]


def event_line(event: EventRow) -> str:
    """One line of the activity feed (made literal by the log widget)."""
    when = datetime.fromtimestamp(event.at_ms / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    where = " ".join(
        part
        for part in (
            event.run_id or "",
            f"{event.node_id}#{event.iteration}" if event.node_id else "",
            f"attempt {event.attempt}" if event.attempt else "",
        )
        if part
    )
    payload = (event.payload_json or "")[:160]
    return f"{when}  {event.seq:>7}  {event.type:<18} {where}  {payload}"


class RunsScreen(RunControlScreen):
    """The newest runs with status, progress, tokens and a stale badge; ``enter`` opens one."""

    MODE = "runs"
    FILTER_KEY = "runs"
    HELP_TITLE = "Runs"
    HELP_TEXT = (
        "The newest runs, live. A running run whose heartbeat is older than 30 s is STALE: "
        "its process is gone and it can be resumed. enter opens the run's nodes and inspector. "
        "The feed below shows the newest events as they are committed."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("enter", "open_run", "Open run"),
    ]
    AUTO_FOCUS = "#runs-table"

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[str, RunRow] = {}

    def compose_view(self) -> ComposeResult:
        with Vertical(id="runs-body"):
            yield KeyedTable(RUN_COLUMNS, id="runs-table")
            yield Static(Text("Activity", style="bold"), id="feed-title", classes="pane-title")
            yield FollowLog(id="activity-feed", max_lines=500)

    def crumb(self) -> Text:
        shown = len(self.query_one(KeyedTable).keys) if self.is_mounted else 0
        text = Text(f"{shown} runs shown")
        if self.filter_text:
            text.append("  filter: ", style="dim")
            text.append_text(literal(self.filter_text))
        return text

    @property
    def selected_run_id(self) -> str | None:
        """The run under the cursor."""
        return self.query_one(KeyedTable).cursor_key

    async def refresh_data(self, batch: Batch) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        now = self.tether.now_ms()
        table = self.query_one(KeyedTable)
        if not batch.first_read and not batch.events and not self.filter_text:
            # A clock tick, or a commit without events (heartbeats, memory edits): only the
            # running runs' elapsed time, heartbeat and stale badge can have changed.
            for run in await reader.active_runs():
                self.runs[run.run_id] = run
                table.update_row(run.run_id, run_cells(run, now))
            return
        if self._can_patch(batch, table):
            # Only rows of runs the new events touch change: read those runs by key.
            for run in (await reader.runs_by_ids(sorted(batch.run_ids))).values():
                self.runs[run.run_id] = run
                table.update_row(run.run_id, run_cells(run, now))
            self.query_one(FollowLog).append(event_line(e) for e in batch.events[-200:])
            return
        recent = await reader.recent_runs(RUNS_SHOWN)
        active = await reader.active_runs()
        merged = {run.run_id: run for run in recent}
        for run in active:
            merged.setdefault(run.run_id, run)
        runs = sorted(merged.values(), key=lambda r: (r.created_at_ms, r.run_id), reverse=True)
        self.runs = merged
        self.tether.remember_runs(runs)
        needle = self.filter_text
        rows = [
            (run.run_id, run_cells(run, now))
            for run in runs
            if matches(needle, run.run_id, run.workflow, run.status)
            or (needle.lower() == "stale" and run.is_stale(now))
        ]
        self.query_one(KeyedTable).sync(rows)
        feed = self.query_one(FollowLog)
        if batch.first_read and feed.line_count == 0:
            events = list(reversed(await reader.recent_events(100)))
        else:
            events = batch.events[-200:]
        feed.append(event_line(e) for e in events)
        self.update_chrome()

    def _can_patch(self, batch: Batch, table: KeyedTable) -> bool:
        """True when the new events only change rows already shown (no run was created or
        deleted, no filter in effect): then the list is patched instead of re-read."""
        if batch.first_read or not batch.events or self.filter_text:
            return False
        if any(e.type in RESHAPING_EVENTS for e in batch.events):
            return False
        shown = set(table.keys)
        return all(run_id in shown for run_id in batch.run_ids)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.tether.select(run_id=event.row_key.value)

    def action_open_run(self) -> None:
        """Open the selected run."""
        run_id = self.selected_run_id
        if run_id is not None:
            self.tether.open_run(run_id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.tether.open_run(event.row_key.value)
