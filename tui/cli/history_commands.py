"""What happened, as text: ``tether runs --timeline RUN`` and ``tether node NODE --run RUN
--timeline`` print a run's timeline (the dashboard's Timeline tab, in characters), read with
:mod:`store.read.timeline_reads` on either backend.

Exit codes: 0, 1 for a run or node that does not exist.
"""

from __future__ import annotations

import shutil
from typing import Any

from store.errors import NotFoundError
from store.read.timeline import NodeDetail, Row, RunTimeline, flatten, with_details
from store.read.timeline_reads import MAX_DETAIL_NODES, read_details, read_timeline
from store.workspace.layout import Workspace
from tui.cli.database_access import reading, require_workspace
from tui.cli.output import echo, print_json
from tui.plain import duration, percent, visible
from tui.timeline_draw import (
    GLYPHS,
    LEGEND,
    axis,
    bar_plain,
    cells_needed,
    fit_scale,
    span_text,
)
from tui.timeline_tools import log_source_for, with_logged_tools

LABEL_WIDTH = 30
MIN_BAR_WIDTH = 30


async def load_timeline(
    workspace: Workspace, db: Any, run_id: str, node_key: str | None, now_ms: int
) -> tuple[RunTimeline, bool]:
    """The run's timeline with every node's attempts (one node's, with its tool calls from the
    logs, when ``node_key`` is given); True when a log was longer than what was read."""
    timeline = await read_timeline(db, run_id, now_ms)
    keys = [bar.node.key for bar in timeline.bars]
    if node_key is not None:
        if node_key not in keys:
            raise NotFoundError(f"Run {run_id} has no node {node_key!r}.")
        keys = [node_key]
    details: dict[str, NodeDetail] = {}
    for start in range(0, len(keys), MAX_DETAIL_NODES):
        details.update(await read_details(db, run_id, keys[start : start + MAX_DETAIL_NODES]))
    cut = False
    if node_key is not None and node_key in details:
        logs = log_source_for(workspace, db)
        details[node_key], cut = await with_logged_tools(
            workspace, logs, run_id, node_key, details[node_key], now_ms
        )
    return with_details(timeline, details), cut


def _row_json(row: Row) -> dict[str, Any]:
    return {**row._asdict(), "spans": [s._asdict() for s in row.spans]}


def timeline_json(timeline: RunTimeline, rows: list[Row]) -> dict[str, Any]:
    """The timeline as one JSON document (times in ms since the epoch)."""
    return {
        "run_id": timeline.run.run_id,
        "workflow": timeline.run.workflow,
        "status": timeline.run.status,
        "start_ms": timeline.start_ms,
        "end_ms": timeline.end_ms,
        "live": timeline.live,
        "busy_ms": timeline.busy_ms,
        "idle_ms": timeline.idle_ms,
        "critical_path": timeline.critical_path,
        "rows": [_row_json(row) for row in rows],
    }


def timeline_lines(
    timeline: RunTimeline, rows: list[Row], width: int, now_ms: int, *, focus: str | None = None
) -> list[str]:
    """The timeline as text lines ``width`` columns wide: a summary, the critical path, the
    axis, a bar per row, and the legend. ``focus`` (a node key) scales the axis to that node."""
    run = timeline.run
    total = timeline.end_ms - timeline.start_ms
    idle_share = timeline.idle_ms / total if total else 0.0
    lines = [
        f"Run {visible(run.run_id)} ({visible(run.workflow, keep_newlines=False)}) "
        f"{run.status}{' (live)' if timeline.live else ''} · {len(timeline.bars)} node "
        f"iterations · {duration(total)} · busy {duration(timeline.busy_ms)}, idle "
        f"{duration(timeline.idle_ms)} ({percent(idle_share)})",
        "Critical path: " + (" → ".join(visible(k) for k in timeline.critical_path) or "–"),
    ]
    start = timeline.start_ms
    span_ms = total
    if focus is not None:
        focused = [s for row in rows if row.node_key == focus for s in row.spans]
        if focused:
            start = min(s.start_ms for s in focused)
            span_ms = max((s.end_ms or now_ms) for s in focused) - start
    bar_width = max(MIN_BAR_WIDTH, width - LABEL_WIDTH - 12)
    scale = fit_scale(span_ms, bar_width)
    bar_width = min(bar_width, cells_needed(span_ms, scale))
    ticks, labels = axis(start - timeline.start_ms, scale, bar_width)
    lines.append(f"{'':<{LABEL_WIDTH}} {labels}")
    lines.append(f"{'each cell ' + duration(scale):<{LABEL_WIDTH}} {ticks}")
    for row in rows:
        mark = "*" if row.critical and row.depth == 0 else " "
        label = mark + "  " * row.depth + visible(row.label, keep_newlines=False)
        if len(label) > LABEL_WIDTH:
            label = label[: LABEL_WIDTH - 1] + "…"
        took = ""
        if row.spans:
            last = row.spans[-1]
            took = duration((last.end_ms or now_ms) - row.spans[0].start_ms)
        bar = bar_plain(row.spans, start, scale, bar_width, now_ms)
        lines.append(f"{label:<{LABEL_WIDTH}} {bar} {took}")
    lines.append("Legend: " + "  ".join(f"{GLYPHS[k][0]} {text}" for k, text in LEGEND)
                 + "  * critical path")
    return lines


def detail_lines(timeline: RunTimeline, rows: list[Row], now_ms: int) -> list[str]:
    """Each row's spans in words (``tether node --timeline``): where the time went."""
    lines = []
    for row in rows:
        spans = ", ".join(f"{s.kind} {span_text(s, timeline.start_ms, now_ms)}"
                          for s in row.spans)
        lines.append(f"{'  ' * row.depth}{visible(row.label, keep_newlines=False)}: {spans}")
    return lines


async def print_timeline(
    workspace: Workspace, run_id: str, node_key: str | None, output_format: str
) -> None:
    """Print RUN's timeline (or one node's, expanded, with its calls and tool calls)."""
    from store.model.ids import validate_run_id
    from store.runs.run_store import RunStore

    validate_run_id(run_id)
    require_workspace(workspace)
    async with reading(workspace) as db:
        if db is None:
            raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
        now = RunStore(db).now_ms
        timeline, cut = await load_timeline(workspace, db, run_id, node_key, now)
    expanded = {node_key} if node_key is not None else set()
    rows = flatten(timeline, expanded)
    if node_key is not None:
        rows = [row for row in rows if row.node_key in (node_key, "run")]
    if output_format in ("json", "jsonl"):
        print_json(timeline_json(timeline, rows))
        return
    width = shutil.get_terminal_size((120, 24)).columns
    for line in timeline_lines(timeline, rows, width, now, focus=node_key):
        echo(line)
    if node_key is not None:
        echo("")
        for line in detail_lines(timeline, [r for r in rows if r.kind != "run"], now):
            echo(line)
    if cut:
        echo("A stream log was longer than 4 MiB: tool calls are shown from its first 4 MiB.")
