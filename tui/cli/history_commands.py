"""What happened, as text: ``tether runs --timeline RUN`` and ``tether node NODE --run RUN
--timeline`` print a run's timeline (the dashboard's Timeline tab, in characters), read with
:mod:`store.read.timeline_reads` on either backend.

Exit codes: 0, 1 for a run or node that does not exist.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from store.errors import NotFoundError
from store.read.timeline import NodeDetail, Row, RunTimeline, flatten, with_details
from store.read.timeline_reads import MAX_DETAIL_NODES, read_details, read_timeline
from store.workspace.layout import Workspace
from tui.cli.database_access import reading, require_workspace
from tui.cli.output import echo, print_json
from tui.plain import duration, percent, plural, visible
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


NodeChoice = tuple[str, int | None]
"""A node id and its iteration (None: the latest, as ``tether node`` reads it)."""


def chosen_keys(timeline: RunTimeline, run_id: str, node: NodeChoice) -> list[str]:
    """The key (``draft#2``) of the node iteration ``node`` names, or, for a fan-out's own id
    (``review``), the keys of the copies it made (as ``tether node review`` lists them);
    NotFoundError if none."""
    node_id, iteration = node
    found = [bar.node for bar in timeline.bars if bar.node.node_id == node_id
             and iteration in (None, bar.node.iteration)]
    if found:
        return [max(found, key=lambda record: record.iteration).key]
    copies = [bar.node.key for bar in timeline.bars
              if iteration is None and bar.node.node_id.startswith(f"{node_id}[")]
    if not copies:
        at = "" if iteration is None else f" at iteration {iteration}"
        raise NotFoundError(f"Run {run_id} has no node {node_id!r}{at}.")
    return copies


async def load_timeline(
    workspace: Workspace, db: Any, run_id: str, node: NodeChoice | None, now_ms: int
) -> tuple[RunTimeline, bool, list[str] | None]:
    """The run's timeline with every node's attempts (only the chosen node's, with its tool
    calls from the logs, when ``node`` is given; a fan-out's copies' for its id), True when a
    log was longer than what was read, and the keys of the nodes shown."""
    timeline = await read_timeline(db, run_id, now_ms)
    keys = [bar.node.key for bar in timeline.bars]
    chosen = None if node is None else chosen_keys(timeline, run_id, node)
    if chosen is not None:
        keys = chosen
    node_key = chosen[0] if chosen is not None and len(chosen) == 1 else None
    details: dict[str, NodeDetail] = {}
    for start in range(0, len(keys), MAX_DETAIL_NODES):
        details.update(await read_details(db, run_id, keys[start : start + MAX_DETAIL_NODES]))
    cut = False
    if node_key is not None and node_key in details:
        logs = log_source_for(workspace, db)
        details[node_key], cut = await with_logged_tools(
            workspace, logs, run_id, node_key, details[node_key], now_ms
        )
    return with_details(timeline, details), cut, chosen


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
        f"{run.status}{' (live)' if timeline.live else ''} · "
        f"{plural(len(timeline.bars), 'node iteration')} · {duration(total)} · "
        f"busy {duration(timeline.busy_ms)}, idle {duration(timeline.idle_ms)} "
        f"({percent(idle_share)})",
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


@asynccontextmanager
async def reading_runs(workspace: Workspace, *run_ids: str) -> AsyncIterator[tuple[Any, int]]:
    """The workspace read-only and its clock's now, for commands that read named runs (ids
    checked first; no workspace database: the first run is not found)."""
    from store.model.ids import validate_run_id
    from store.runs.run_store import RunStore

    for run_id in run_ids:
        validate_run_id(run_id)
    require_workspace(workspace)
    async with reading(workspace) as db:
        if db is None:
            raise NotFoundError(f"There is no run {run_ids[0]!r} in this workspace.")
        yield db, RunStore(db).now_ms


async def print_timeline(
    workspace: Workspace, run_id: str, node: NodeChoice | None, output_format: str
) -> None:
    """Print RUN's timeline (or one node's, expanded, with its calls and tool calls)."""
    async with reading_runs(workspace, run_id) as (db, now):
        timeline, cut, chosen = await load_timeline(workspace, db, run_id, node, now)
    node_key = chosen[0] if chosen is not None and len(chosen) == 1 else None
    rows = flatten(timeline, set(chosen or ()))
    if chosen is not None:
        rows = [row for row in rows if row.node_key in (*chosen, "run")]
    if output_format in ("json", "jsonl"):
        print_json(timeline_json(timeline, rows))
        return
    width = shutil.get_terminal_size((120, 24)).columns
    for line in timeline_lines(timeline, rows, width, now, focus=node_key):
        echo(line)
    if chosen is not None:
        echo("")
        for line in detail_lines(timeline, [r for r in rows if r.kind != "run"], now):
            echo(line)
    if cut:
        echo("A stream log was longer than 4 MiB: tool calls are shown from its first 4 MiB.")


async def print_fork_chain(workspace: Workspace, run_id: str, output_format: str) -> None:
    """Print RUN's fork chain: its first run, every fork below it (forks of forks too), each
    with the node it was forked from, its edit and how many node iterations it carried."""
    from store.read.fork_chain import MAX_FAMILY, read_fork_chain
    from tui.fork_chain_text import chain_json, fork_words, tree_prefix

    async with reading_runs(workspace, run_id) as (db, now):
        chain = await read_fork_chain(db, run_id)
    if output_format in ("json", "jsonl"):
        print_json(chain_json(chain, now))
        return
    echo(f"Fork chain of {run_id}: {plural(len(chain.links), 'run')}")
    for link in chain.links:
        mark = "*" if link.run.run_id == run_id else " "
        echo(f"{mark} {tree_prefix(link)}{link.run.run_id}  {link.run.display_status(now):<11} "
             f"{visible(fork_words(link), keep_newlines=False)}")
    if chain.cut:
        echo(f"The chain has more than {MAX_FAMILY} runs; the first {MAX_FAMILY} are shown.")


# -- tether compare ---------------------------------------------------------------------------


def _side_cells(side: Any, now_ms: int) -> tuple[str, str, str, str]:
    from tui.plain import spent, tokens

    if side is None:
        return "–", "–", "–", "–"
    state = "cache hit" if side.node.cached else side.node.state
    return (state, tokens(side.tokens.total),
            spent(side.tokens.total, side.cost.usd, side.cost.unpriced_calls),
            duration(side.duration_ms(now_ms)))


def compare_lines(comparison: Any, now_ms: int) -> list[str]:
    """The node table of two runs side by side (changed rows marked ``≠``, rows carried over
    with one recorded output ``↳``)."""
    a, b = comparison.a, comparison.b
    lines = [f"A {visible(a.run_id)} ({a.status})  vs  B {visible(b.run_id)} ({b.status}): "
             f"{visible(comparison.relation, keep_newlines=False)}",
             f"  {'NODE':<28} {'STATE A':<10} {'STATE B':<10} {'TOKENS A':>9} {'TOKENS B':>9} "
             f"{'COST A':>10} {'COST B':>10} {'TOOK A':>7} {'TOOK B':>7}"]
    for pair in comparison.pairs:
        sa, ta, ca, da = _side_cells(pair.a, now_ms)
        sb, tb, cb, db = _side_cells(pair.b, now_ms)
        mark = "↳" if pair.carried else "≠" if pair.differs else " "
        name = visible(pair.key, keep_newlines=False)
        name = name if len(name) <= 28 else name[:27] + "…"
        lines.append(f"{mark} {name:<28} {sa:<10} {sb:<10} {ta:>9} {tb:>9} {ca:>10} {cb:>10} "
                     f"{da:>7} {db:>7}")
    return lines


async def print_compare(
    workspace: Workspace, a_id: str, b_id: str, node: tuple[str, int | None] | None,
    output_format: str,
) -> None:
    """Print two runs side by side, or (``node``: an id and an iteration, None for its latest
    in either run) also one node's prompt, memory block and output as word diffs."""
    from store.read.compare_reads import compare_runs, latest_iteration, node_texts
    from tui.word_diff import comparable, diff_plain, word_diff

    node_key = None
    async with reading_runs(workspace, a_id, b_id) as (db, now):
        comparison = await compare_runs(db, a_id, b_id)
        texts = None
        if node is not None:
            node_id, iteration = node
            asked = node_id if iteration is None else f"{node_id}#{iteration}"
            if iteration is None:
                iteration = latest_iteration(comparison, node_id)
            node_key = f"{node_id}#{iteration}"
            if node_key not in {p.key for p in comparison.pairs}:
                raise NotFoundError(f"Neither run has a node {asked!r}.")
            texts = (await node_texts(db, a_id, node_key), await node_texts(db, b_id, node_key))
    if output_format in ("json", "jsonl"):
        document: dict[str, Any] = {
            "a": comparison.a.as_dict(now), "b": comparison.b.as_dict(now),
            "relation": comparison.relation,
            "nodes": [{"node": p.key, "differs": p.differs, "carried": p.carried,
                       "a": None if p.a is None else {**p.a.node.as_dict(), "tokens":
                                                       p.a.tokens.total, **p.a.cost.as_dict()},
                       "b": None if p.b is None else {**p.b.node.as_dict(), "tokens":
                                                       p.b.tokens.total, **p.b.cost.as_dict()}}
                      for p in comparison.pairs],
        }
        if texts is not None:
            document["node"] = node_key
            document["texts"] = {
                field: {"a": getattr(texts[0], field), "b": getattr(texts[1], field),
                        "diff": word_diff(*(comparable(t, field) for t in texts)).pieces}
                for field in ("prompt", "memory", "output")
            }
        print_json(document)
        return
    for line in compare_lines(comparison, now):
        echo(line)
    if texts is None:
        return
    for field, title in (("prompt", "Prompt as sent (latest attempt)"),
                         ("memory", "Memory block"), ("output", "Output")):
        diff = word_diff(*(comparable(t, field) for t in texts))
        echo("")
        echo(f"{title} of {visible(node_key or '')}: {diff.summary()}")
        if not diff.same:
            echo(diff_plain(diff))
