"""View ``5``: tokens and cost over time for the whole workspace.

Two charts per day (or hour, ``h``) over a window of 1, 7 or 30 days (``w``): the cost of
each step (with the daily budget drawn when ``.tether/config.toml`` sets one) and its tokens
split into fresh input, cache reads and the rest, with the cache-read share in the title; then
a table by model, workflow or agent (``b``) with calls, runs, tokens, cache-read share, cost
and share of the cost. Read from ``usage_hours`` (a row per run, hour, agent and model), so a
month of a busy workspace is a few thousand rows; redrawn at most once a second. The same
numbers as ``tether usage``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Static

from store.read.usage_reads import DAY_MS, UsageRow, filled, usage_over_time
from tui.budget_lines import daily_budget_usd
from tui.format import cost, money, one_line, percent, plural, tokens
from tui.screens.live_screen import LiveScreen
from tui.tailing import Batch
from tui.widgets.cached_plot import CachedPlot
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.run_chart import axis_ticks, tick_count

WINDOWS_DAYS = (7, 30, 1)
GROUPS = ("model", "workflow", "agent")
PLOT_MIN_INTERVAL_S = 1.0
USAGE_TABLE_COLUMNS = (
    ("name", "Model"),
    ("calls", "Calls"),
    ("runs", "Runs"),
    ("tokens", "Tokens"),
    ("cached", "Cache read"),
    ("cost", "Cost"),
    ("share", "Share"),
)


def step_label(at_ms: int, by: str) -> str:
    """A chart step's label: ``01-05`` for a day, ``14h`` for an hour (UTC)."""
    moment = datetime.fromtimestamp(at_ms / 1000, tz=UTC)
    return moment.strftime("%m-%d") if by == "day" else moment.strftime("%Hh")


def label_ticks(count: int, most: int = 8) -> list[int]:
    """Which of ``count`` steps get a label (at most ``most``, the last one always)."""
    if count <= most:
        return list(range(count))
    step = -(-count // most)
    return sorted({*range(0, count, step), count - 1})


def totals_line(series: list[UsageRow], days: int, by: str, budget: float | None) -> Text:
    """The line above the charts: the window, its totals and the cache-read share."""
    calls = sum(r.calls for r in series)
    spent = sum(r.cost.usd or 0.0 for r in series)
    unpriced = sum(r.cost.unpriced_calls for r in series)
    context = sum(r.tokens.context_tokens for r in series)
    cached = sum(r.tokens.cache_read for r in series)
    line = Text()
    line.append(f"Last {plural(days, 'day')} by {by} (UTC) — ", style="bold")
    line.append(f"{plural(calls, 'call')} · {tokens(sum(r.tokens.total for r in series))} "
                f"tokens · {cost(spent, unpriced)} · cache read "
                f"{percent(cached / context if context else 0.0)} of the context")
    if budget is not None:
        line.append(f" · daily budget ${budget:.2f}", style="yellow")
    line.append("   (h hour/day · w window · b group)", style="dim")
    return line


class UsageScreen(LiveScreen):
    """Tokens and cost over time (see the module docstring)."""

    MODE = "usage"
    FILTER_KEY = "usage"
    HELP_TITLE = "Usage"
    HELP_TEXT = (
        "Tokens and cost over time for the whole workspace, per day or hour (UTC): the cost "
        "of each step (the daily budget drawn as a line when the config sets one) and its "
        "tokens split into fresh input, cache reads and output, then a table by model, "
        "workflow or agent. h switches day/hour, w the window (7, 30 or 1 day), b the "
        "grouping. / filters the table's rows. tether usage prints the same numbers."
    )
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("h", "toggle_step", "Hour/day"),
        Binding("w", "cycle_window", "Window"),
        Binding("b", "cycle_group", "Group by"),
    ]
    AUTO_FOCUS = "#usage-groups"

    def __init__(self) -> None:
        super().__init__()
        self.by = "day"
        self.days = WINDOWS_DAYS[0]
        self.group = GROUPS[0]
        self.series: list[UsageRow] = []
        self._drawn: tuple[object, ...] | None = None
        self._drawn_at = 0.0
        self._timer: Timer | None = None

    def compose_view(self) -> ComposeResult:
        with Vertical(id="usage-body"):
            yield Static(id="usage-totals")
            with Horizontal(id="usage-charts"):
                yield CachedPlot(id="cost-plot")
                yield CachedPlot(id="tokens-plot")
            yield KeyedTable(USAGE_TABLE_COLUMNS, id="usage-groups", stretch="name")

    def crumb(self) -> Text:
        window = "last day" if self.days == 1 else f"last {plural(self.days, 'day')}"
        return Text(f"{window} · per {self.by} · by {self.group}")

    def window(self) -> tuple[int, int]:
        """(since, until) of the window in effect."""
        now = self.tether.now_ms()
        return now - self.days * DAY_MS, now + 1

    async def refresh_data(self, batch: Batch) -> None:
        if not batch.first_read and not any(e.type == "call" for e in batch.events):
            return
        reader = self.tether.reader
        if reader is None:
            return
        since, until = self.window()
        steps = await usage_over_time(reader, by=self.by, since_ms=since, until_ms=until)
        self.series = filled(steps, self.by, since, until)
        groups = await usage_over_time(reader, by=self.group, since_ms=since, until_ms=until)
        budget = daily_budget_usd(self.tether.workspace)
        self.query_one("#usage-totals", Static).update(
            totals_line(self.series, self.days, self.by, budget))
        table = self.query_one("#usage-groups", KeyedTable)
        table.border_title = f"By {self.group}"
        total = sum(g.cost.usd or 0.0 for g in groups)
        table.relabel("name", self.group.capitalize())
        rows = []
        needle = self.filter_text.lower()
        for group in groups:
            name = str(group.key) or "(none named)"
            if needle and needle not in name.lower():
                continue
            share = (group.cost.usd or 0.0) / total if total else 0.0
            rows.append((name, [
                one_line(name), Text(f"{group.calls:,}", justify="right"),
                Text(f"{group.runs:,}", justify="right"),
                Text(tokens(group.tokens.total), justify="right"),
                Text(percent(group.cache_share), justify="right"),
                Text(cost(group.cost.usd, group.cost.unpriced_calls), justify="right"),
                Text(percent(share) if total else "–", justify="right"),
            ]))
        table.sync(rows)
        self._schedule(budget)
        self.update_chrome()

    def _schedule(self, budget: float | None) -> None:
        wait = PLOT_MIN_INTERVAL_S - (time.monotonic() - self._drawn_at)
        if wait <= 0:
            self.call_after_refresh(self._draw, budget)
        elif self._timer is None:
            self._timer = self.set_timer(wait, lambda: self._draw(budget))

    def _draw(self, budget: float | None) -> None:
        self._timer = None
        series = self.series
        key = (self.by, self.days, tuple((r.key, r.calls, r.cost.usd) for r in series), budget)
        if key == self._drawn:
            return
        self._drawn, self._drawn_at = key, time.monotonic()
        try:
            cost_plot = self.query_one("#cost-plot", CachedPlot)
            tokens_plot = self.query_one("#tokens-plot", CachedPlot)
        except NoMatches:
            return  # the view is being closed
        positions = [float(i) for i in range(len(series))]
        marks = label_ticks(len(series))
        labels = [step_label(int(series[i].key), self.by) for i in marks]
        spent = [r.cost.usd or 0.0 for r in series]
        plt = cost_plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(f"cost per {self.by} (US$)")
        if series:
            plt.bar(positions, spent, color="yellow", width=0.8)
            top = max([*spent, budget or 0.0])
            if budget is not None and self.by == "day":
                plt.hline(budget, color="red")
                plt.title(f"cost per day (US$) · red line: budget ${budget:.2f}")
            if top == 0:  # an empty chart alone would look broken: say why it is empty
                unpriced = sum(r.cost.unpriced_calls for r in series)
                plt.title(f"cost per {self.by} (US$) · nothing spent in this window" + (
                    f" · {plural(unpriced, 'call')} had no known price" if unpriced else ""))
            ticks = [top * i / 4 for i in range(5)] if top > 0 else [0.0]
            plt.ylim(0, top * 1.1 if top > 0 else 1.0)
            plt.yticks(ticks, [money(t) for t in ticks])
            plt.xticks([positions[i] for i in marks], labels)
        cost_plot.version += 1
        cost_plot.refresh()
        plt = tokens_plot.plt
        plt.clear_data()
        plt.clear_figure()
        context = sum(r.tokens.context_tokens for r in series)
        cached = sum(r.tokens.cache_read for r in series)
        plt.title(f"tokens per {self.by} · cache read "
                  f"{percent(cached / context if context else 0.0)}")
        if series:
            fresh = [float(r.tokens.input + r.tokens.cache_write) for r in series]
            reads = [float(r.tokens.cache_read) for r in series]
            out = [float(r.tokens.output + r.tokens.reasoning) for r in series]
            # plotext takes a list of labels and colours here (textual-plotext's types say one).
            plt.stacked_bar(positions, [fresh, reads, out],  # type: ignore[call-arg]
                            labels=["fresh in", "cache read", "out"],
                            color=["cyan", "green", "magenta"],  # type: ignore[arg-type]
                            width=0.8)
            highest = max((a + b + c for a, b, c in zip(fresh, reads, out, strict=True)),
                          default=0.0)
            ticks, tick_labels = axis_ticks(highest, tick_count(tokens_plot.size.height))
            plt.ylim(0, ticks[-1] or 1)
            plt.yticks(ticks, tick_labels)
            plt.xticks([positions[i] for i in marks], labels)
        tokens_plot.version += 1
        tokens_plot.refresh()

    async def _reread(self) -> None:
        self._drawn = None
        self.update_chrome()
        await self.tether.refresh_screen(self)

    async def action_toggle_step(self) -> None:
        """Per day or per hour."""
        self.by = "hour" if self.by == "day" else "day"
        await self._reread()

    async def action_cycle_window(self) -> None:
        """The last 7, 30 or 1 day."""
        self.days = WINDOWS_DAYS[(WINDOWS_DAYS.index(self.days) + 1) % len(WINDOWS_DAYS)]
        await self._reread()

    async def action_cycle_group(self) -> None:
        """The table by model, workflow or agent."""
        self.group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        await self._reread()
