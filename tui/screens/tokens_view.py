"""View ``2``: token usage for the workspace, a run or a node.

A histogram of calls per context-window bucket (BRIEF section 2 buckets, drawn with plotext and
redrawn at most once a second, since a plotext plot is rebuilt on every render), the split into
fresh input, cache read, cache write, output and reasoning, a per-node (or per-run) usage table
and the largest calls. Every number comes from the usage rollups or an indexed query.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Static

from store.model.buckets import BUCKET_LABELS
from store.model.run_records import CallRecord
from store.model.token_lanes import TokenUsage
from store.read.dashboard_rows import BucketUsage
from tui.format import call_cost, cost, one_line, percent, plural, row_cost, tokens
from tui.screens.live_screen import LiveScreen
from tui.tailing import Batch
from tui.widgets.cached_plot import CachedPlot
from tui.widgets.filter_bar import matches
from tui.widgets.keyed_table import KeyedTable

PLOT_MIN_INTERVAL_S = 1.0


USAGE_COLUMNS = (
    ("name", "Node"),
    ("total", "Total"),
    ("cost", "Cost"),
    ("cached", "Cached"),
    ("calls", "Calls"),
    ("fresh", "Fresh in"),
    ("cache_read", "Cache read"),
    ("cache_write", "Cache write"),
    ("output", "Output"),
    ("reasoning", "Reasoning"),
)

TOP_COLUMNS = (
    ("context", "Context"),
    ("bucket", "Bucket"),
    ("where", "Node · run"),
    ("agent", "Agent"),
    ("cost", "Cost"),
    ("cached", "Cached"),
)

USAGE_NARROW_DROPS = ("reasoning", "cache_write", "fresh")
"""Usage-table columns left out, in this order, while the table is too narrow for them (the
lanes they split are in the totals beside the chart): a cut-off "1." never stands for 1.2k."""
TOP_NARROW_DROPS = ("cached", "agent")
"""Largest-calls columns left out in this order when narrow, so that the run id beside the
node stays whole."""

USAGE_SHARE = (3, 5)
"""The usage table's share of the width beside the largest calls (the stylesheet's 3fr:2fr)."""


def usage_panel_width(total: int, usage_whole: int, top_whole: int, top_least: int) -> int | None:
    """The usage table's width beside the largest calls (pure, tested directly), panels' borders
    included: its share when both fit whole in it; else the width that shows both whole, or the
    usage table whole beside the largest calls' columns that never give way (it is the view's
    main table); None (the 3:2 share) when even that does not fit."""
    share = total * USAGE_SHARE[0] // USAGE_SHARE[1]
    if usage_whole + top_whole <= total:
        return min(max(share, usage_whole), total - top_whole)
    if usage_whole + top_least <= total:
        return max(share, usage_whole)
    return None


SCOPES = ("workspace", "run", "node")
RUNS_IN_USAGE_TABLE = 50
"""In the workspace scope the usage table lists the newest runs (a bounded window)."""


def usage_cells(
    name: Text, calls: int, usage: TokenUsage, spent: str = "–"
) -> list[Text]:
    """The cells of one usage-table row (``spent``: its cost as text)."""
    return [
        name,
        Text(tokens(usage.total), justify="right"),
        Text(spent, justify="right"),
        Text(percent(usage.cached_share) if usage.context_tokens else "–", justify="right"),
        Text(str(calls), justify="right"),
        *(Text(tokens(lane), justify="right") for lane in usage),
    ]


def top_call_cells(call: CallRecord) -> list[Text]:
    """The cells of one largest-calls row."""
    # The node first: a narrow column still names it.
    where = one_line(f"{call.node_id}#{call.iteration}")
    where.append(" · ", style="dim")
    where.append_text(one_line(call.run_id, "dim"))
    agent = one_line(call.agent)
    if call.simulated:
        agent.append(" (sim)", style="dim")
    return [
        Text(tokens(call.context_tokens), justify="right"),
        one_line(call.bucket),
        where,
        agent,
        Text(call_cost(call), justify="right"),
        Text(percent(call.tokens.cached_share) if call.context_tokens else "–", justify="right"),
    ]


def whole_ticks(highest: int, count: int = 5) -> list[int]:
    """Integer y-axis ticks from 0 to at least ``highest`` (calls are counted, not measured)."""
    step = max(1, -(-highest // count))
    return list(range(0, max(highest, 1) + step, step))


EMPTY_TOKENS = Text.assemble(
    ("No model calls yet.\n\n", "bold"),
    "This view counts every model call by its context window (input + cache read + cache "
    "write) and splits the tokens into fresh input, cache reads and writes, output and "
    "reasoning, for the workspace, a run or a node (",
    ("s", "bold"),
    ").\n\nCalls appear as runs make them: press ",
    ("1", "bold"), " then ", ("n", "bold"), " to launch a run, or run ",
    ("tether run WORKFLOW", "bold"), ".",
)


def totals_text(buckets: list[BucketUsage]) -> Text:
    """The lanes split: fresh vs cached input, output, reasoning, with shares."""
    usage = TokenUsage.sum(bucket.tokens for bucket in buckets)
    calls = sum(b.calls for b in buckets)
    if not calls and not usage.total:
        return EMPTY_TOKENS
    total = usage.total or 1
    out = Text()
    out.append(f"{plural(calls, 'call')} · {tokens(usage.total)} tokens\n", style="bold")
    if not calls:
        # Only rows that are no call: a Codex turn without its rollout file, session totals.
        out.append("no model call: these are turn or session totals, in no bucket\n", style="dim")
    out.append("\n")
    lanes = (
        ("fresh input", usage.input, "cyan"),
        ("cache read", usage.cache_read, "green"),
        ("cache write", usage.cache_write, "yellow"),
        ("output", usage.output, "magenta"),
        ("reasoning", usage.reasoning, "blue"),
    )
    for label, value, style in lanes:
        share = value / total
        bar = "█" * round(share * 20)
        out.append(f"{label:<12}{tokens(value):>9} {percent(share):>4} ")
        out.append(f"{bar}\n", style=style)
    out.append(
        f"\ncontext window {tokens(usage.context_tokens)}; "
        f"{percent(usage.cached_share)} read from cache\n",
        style="dim",
    )
    priced = [b.cost.usd for b in buckets if b.cost.usd is not None]
    unpriced = sum(b.cost.unpriced_calls for b in buckets)
    out.append(f"cost {cost(sum(priced) if priced else None, unpriced)}\n", style="bold")
    return out


class BucketPlot(CachedPlot):
    """The histogram of calls per context-window bucket."""


class TokensScreen(LiveScreen):
    """Token usage by context-window bucket, lane, node and largest call."""

    MODE = "tokens"
    FILTER_KEY = "tokens"
    HELP_TITLE = "Tokens"
    HELP_TEXT = (
        "Calls per context-window bucket (input + cache read + cache write): <50k, 50k–100k, "
        "100k–200k, 200k–500k, 500k–1M, ≥1M. s cycles the scope: the whole workspace, the "
        "selected run, the selected node. The histogram is redrawn at most once a second."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("s", "cycle_scope", "Scope"),
    ]
    AUTO_FOCUS = "#usage-table"

    def __init__(self) -> None:
        super().__init__()
        self._buckets: list[BucketUsage] = []
        self._plotted: list[int] | None = None
        self._plotted_at = 0.0
        self._plot_timer: Timer | None = None

    def compose_view(self) -> ComposeResult:
        with Vertical(id="tokens-body"):
            yield Static(id="scope-line")
            with Horizontal(id="tokens-top"):
                yield BucketPlot(id="bucket-plot")
                yield Static(id="lanes", classes="panel")
            with Horizontal(id="tokens-bottom"):
                yield KeyedTable(USAGE_COLUMNS, id="usage-table", stretch="name",
                                 optional=USAGE_NARROW_DROPS)
                yield KeyedTable(TOP_COLUMNS, id="top-calls", stretch="where",
                                 optional=TOP_NARROW_DROPS)

    def on_mount(self) -> None:
        super().on_mount()
        try:
            self.query_one("#usage-table", KeyedTable).border_title = "Usage"
            self.query_one("#top-calls", KeyedTable).border_title = "Largest calls"
        except NoMatches:
            return  # warmed in the background while the app shuts down


    def scope(self) -> tuple[str, str | None, str | None]:
        """(scope name, run id, node id) actually in effect (falls back when nothing selected)."""
        app = self.tether
        scope = app.token_scope
        if scope == "node" and app.selected_node_id and app.selected_run_id:
            return "node", app.selected_run_id, app.selected_node_id
        if scope in ("run", "node") and app.selected_run_id:
            return "run", app.selected_run_id, None
        return "workspace", None, None

    def crumb(self) -> Text:
        scope, run_id, node_id = self.scope()
        text = Text(f"scope: {scope}")
        if run_id:
            text.append(" ")
            text.append_text(one_line(run_id, "bold"))
        if node_id:
            text.append(" › ")
            text.append_text(one_line(node_id, "bold"))
        return text

    async def refresh_data(self, batch: Batch) -> None:
        reader = self.tether.reader
        if reader is None:
            return
        scope, run_id, node_id = self.scope()
        if (
            scope != "workspace"
            and batch.events
            and not batch.first_read
            and run_id is not None
            and not batch.touches(run_id)
        ):
            return
        self._buckets = await reader.usage_by_bucket(run_id, node_id)
        self.query_one("#lanes", Static).update(totals_text(self._buckets))
        needle = self.filter_text
        usage_table = self.query_one("#usage-table", KeyedTable)
        rows: list[tuple[str, list[Text]]] = []
        if run_id is None:
            usage_table.relabel("name", "Run (newest)")
            runs = await reader.recent_runs(RUNS_IN_USAGE_TABLE)
            calls = await reader.calls_of_runs([run.run_id for run in runs])
            for run in runs:
                if matches(needle, run.run_id, run.workflow):
                    name = one_line(run.workflow, width=16)
                    name.append(" ")
                    name.append_text(one_line(run.run_id, "dim"))
                    made = calls.get(run.run_id, 0)
                    rows.append((run.run_id, usage_cells(name, made, run.tokens, row_cost(run))))
        else:
            usage_table.relabel("name", "Node")
            for key, usage in sorted((await reader.node_usage(run_id)).items()):
                if matches(needle, usage.node_id):
                    style = "bold" if node_id == usage.node_id else ""
                    name = one_line(key, style)
                    spent = row_cost(usage)
                    rows.append((key, usage_cells(name, usage.calls, usage.tokens, spent)))
        usage_table.sync(rows)
        top = await reader.top_calls(run_id, node_id, limit=10)
        self.query_one("#top-calls", KeyedTable).sync(
            [(str(c.call_id), top_call_cells(c)) for c in top]
        )
        self._split_panels()
        self.query_one("#scope-line", Static).update(self._scope_line())
        self._schedule_plot()
        self.update_chrome()

    def on_resize(self) -> None:
        self._split_panels()

    def _split_panels(self) -> None:
        """Share the width between the two tables by what their rows need: the optional
        columns give way only when the panels really have no room for them (at 200 columns a
        fixed 3:2 left the usage table one cell short of its Reasoning column)."""
        try:
            usage = self.query_one("#usage-table", KeyedTable)
            top = self.query_one("#top-calls", KeyedTable)
            total = self.query_one("#tokens-bottom").size.width
        except NoMatches:
            return
        if not total:
            return  # not laid out yet (built in the background): on its first resize

        def chrome(table: KeyedTable) -> int:  # borders, and a scrollbar when there is one
            return (table.outer_size.width - table.scrollable_content_region.width
                    if table.outer_size.width else 2)

        width = usage_panel_width(
            total,
            usage.needed_width() + chrome(usage),
            top.needed_width() + chrome(top),
            top.needed_width(top.optional_count) + chrome(top),
        )
        wanted = f"{USAGE_SHARE[0]}fr" if width is None else str(width)
        if str(usage.styles.width) != wanted:
            usage.styles.width = wanted

    def _scope_line(self) -> Text:
        scope, run_id, node_id = self.scope()
        line = Text()
        line.append("Histogram of calls by context window — ", style="bold")
        if scope == "workspace":
            line.append("whole workspace")
        else:
            line.append("run ")
            line.append_text(one_line(run_id))
            if node_id:
                line.append(" › node ")
                line.append_text(one_line(node_id))
        line.append("   (s: change scope)", style="dim")
        return line

    def _schedule_plot(self) -> None:
        # A plotext plot is rebuilt on every render: redraw at most once per interval.
        # Drawn after the tables have been painted, so the view shows its numbers at once.
        wait = PLOT_MIN_INTERVAL_S - (time.monotonic() - self._plotted_at)
        if wait <= 0:
            self.call_after_refresh(self._draw_plot)
        elif self._plot_timer is None:
            self._plot_timer = self.set_timer(wait, self._draw_plot)

    def _draw_plot(self) -> None:
        self._plot_timer = None
        counts = [b.calls for b in self._buckets] or [0] * len(BUCKET_LABELS)
        if counts == self._plotted:
            return
        self._plotted = counts
        self._plotted_at = time.monotonic()
        try:
            plot = self.query_one(BucketPlot)
        except NoMatches:
            return  # the view is being closed
        plot.version += 1
        plt = plot.plt
        plt.clear_data()
        positions = [float(i) for i in range(1, len(BUCKET_LABELS) + 1)]
        # Explicit tick positions keep label placement identical from run to run.
        plt.bar(positions, counts, color="cyan", width=0.6)
        # Each bar says its count (a short bar is still read exactly).
        ticks = whole_ticks(max(counts))
        for position, count in zip(positions, counts, strict=True):
            if count:
                plt.text(str(count), position, count + ticks[-1] * 0.06, color="white",
                         alignment="center")
        # Explicit tick positions keep label placement identical from run to run.
        plt.xticks(positions, list(BUCKET_LABELS))
        plt.ylim(0, ticks[-1] * 1.15)
        plt.yticks([float(t) for t in ticks])
        plt.title("calls per context-window bucket")
        plt.xlabel("context window (input + cache read + cache write)")
        plt.ylabel("calls")
        plot.refresh()

    def action_cycle_scope(self) -> None:
        """workspace → run → node → workspace (run/node: the ones last selected)."""
        app = self.tether
        current = self.scope()[0]
        order = [s for s in SCOPES if s == "workspace" or app.selected_run_id]
        if "node" in order and not app.selected_node_id:
            order.remove("node")
        app.token_scope = order[(order.index(current) + 1) % len(order)]
        self._plotted = None
        self.update_chrome()
        self.run_worker(app.refresh_screen(self), group="tokens", exclusive=True)
