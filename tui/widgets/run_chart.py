"""The Runs view's chart of the selected run: tokens per minute, and context window per call.

A context window that keeps growing call after call is what ends in a breached ceiling (or a
costly run); seeing the curve climb while the run is live is the point. The series are pure
functions over a bounded window of the run's newest calls (tested directly); the plots are
redrawn at most once a second, and only when the data changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Static

from store.model.buckets import BUCKET_EDGES
from store.model.run_records import CallRecord
from tui.format import duration, one_line, plural, tokens

CALLS_CHARTED = 300
"""The chart reads at most this many of the selected run's newest calls."""
PLOT_MIN_INTERVAL_S = 1.0


@dataclass(frozen=True)
class RateSeries:
    """Token rate over time: bin start (seconds from the first call) and tokens per minute."""

    bin_s: int
    starts: tuple[float, ...]
    per_minute: tuple[float, ...]


BIN_SIZES_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600)
MAX_BINS = 40


def tokens_per_minute(calls: Sequence[CallRecord]) -> RateSeries:
    """Tokens per minute along the run: at the end of each bin, the tokens of the calls that
    started in the minute before it (a trailing minute, so the first seconds of a run are not
    extrapolated into a rate). The bin is the smallest of :data:`BIN_SIZES_S` giving at most
    :data:`MAX_BINS` bins, so a short run still shows a few bars and a long one stays readable."""
    if not calls:
        return RateSeries(60, (), ())
    first = min(call.started_at_ms for call in calls)
    last = max(call.started_at_ms for call in calls)
    span_ms = last - first
    bin_s = next((size for size in BIN_SIZES_S if span_ms // (size * 1000) < MAX_BINS),
                 BIN_SIZES_S[-1])
    # Calls far apart (a thread resumed days later, times an agent CLI reported): the newest
    # MAX_BINS bins only, never thousands of bars.
    first = max(first, last - (MAX_BINS - 1) * bin_s * 1000)
    span_ms = last - first
    count = span_ms // (bin_s * 1000) + 1
    starts = tuple(float(i * bin_s) for i in range(count))
    per_minute = []
    for start in starts:
        end_ms = first + int((start + bin_s) * 1000)
        per_minute.append(float(sum(
            call.tokens.total for call in calls
            if end_ms - 60_000 <= call.started_at_ms < end_ms
        )))
    return RateSeries(bin_s, starts, tuple(per_minute))


def axis_ticks(highest: float, count: int = 4) -> tuple[list[float], list[str]]:
    """Round tick positions from 0 to at least ``highest``, labelled like token counts."""
    if highest <= 0:
        return [0.0], ["0"]
    raw = highest / count
    magnitude = 10 ** (len(str(int(raw))) - 1)
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    ticks = [float(step * i) for i in range(count + 2) if step * (i - 1) < highest]
    return ticks, [tokens(int(t)) for t in ticks]


def time_ticks(starts: Sequence[float], most: int = 5) -> list[float]:
    """Where the rate plot's x axis is labelled: the first bin, the last, and a few between."""
    if not starts:
        return [0.0]
    step = max(1, -(-len(starts) // most))
    return sorted({*starts[::step], starts[-1]})


def tick_count(height: int) -> int:
    """How many steps the y axis of a plot ``height`` rows tall can label without two labels
    landing on one row (the title and the x axis take four rows)."""
    return max(1, min(4, (height - 4) // 3))


def call_ticks(count: int) -> list[int]:
    """Whole call numbers for the x axis: the first, the last and about five between."""
    if count <= 1:
        return [1]
    step = max(1, round(count / 6))
    return sorted({1, *range(step, count, step), count})


def context_per_call(calls: Sequence[CallRecord]) -> tuple[int, ...]:
    """The context window (input + cache read + cache write) of each model call, in call
    order. A row that is no call (a turn's or a session's totals, a retry) has no context
    window: its tokens count per minute, not here."""
    return tuple(call.context_tokens for call in calls if call.kind == "model")


def edges_in_view(highest: int) -> list[int]:
    """The context-window bucket edges worth drawing under a curve that reaches ``highest``."""
    return [edge for edge in BUCKET_EDGES if edge <= highest * 1.25]


class RunChart(Vertical):
    """Two small plots for one run; :meth:`show` gives it the run's newest calls."""

    DEFAULT_CSS = """
    RunChart { border-left: vkey $panel; padding: 0 0 0 1; }
    RunChart #chart-title { height: 1; }
    RunChart CachedPlot { height: 1fr; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._run_id: str | None = None
        self._calls: tuple[CallRecord, ...] = ()
        self._drawn: tuple[object, ...] | None = None
        self._drawn_at = 0.0
        self._timer: Timer | None = None

    @property
    def drawn_run_id(self) -> str | None:
        """The run whose calls the plots show now (they lag :meth:`show` by up to a second)."""
        return None if self._drawn is None else self._drawn[0]  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(id="chart-title")

    async def show(self, run_id: str | None, calls: Sequence[CallRecord]) -> None:
        """Chart ``calls`` of ``run_id`` (redrawn at most once a second); nothing once the
        chart is no longer mounted (its read finished while the dashboard was quitting)."""
        if not self.is_mounted:
            return
        if not self.query("#rate-plot"):
            # The plots are built on first use, after the Runs view's first paint: an empty
            # plotext figure still costs tens of milliseconds to draw, and plotext itself
            # tens to import.
            from tui.widgets.cached_plot import CachedPlot

            await self.mount(CachedPlot(id="rate-plot"), CachedPlot(id="context-plot"))
        self._run_id = run_id
        self._calls = tuple(calls)
        wait = PLOT_MIN_INTERVAL_S - (time.monotonic() - self._drawn_at)
        if wait <= 0:
            self.call_after_refresh(self._draw)
        elif self._timer is None:
            self._timer = self.set_timer(wait, self._draw)

    def _title(self) -> Text:
        """The chart's title: the run its plots show, with its calls and tokens."""
        title = Text("Selected run ", style="bold")
        if self._run_id is None:
            title.append("— none", style="dim")
            return title
        title.append_text(one_line(self._run_id, "bold"))
        # The spaces end the bold piece: SVG renderers drop the leading spaces of a run.
        title.append("  ")
        total = sum(call.tokens.total for call in self._calls)
        model_calls = sum(1 for call in self._calls if call.kind == "model")
        title.append(f"{plural(model_calls, 'call')} · {tokens(total)} tokens", style="dim")
        if len(self._calls) >= CALLS_CHARTED:
            title.append(f" (newest {CALLS_CHARTED})", style="dim")
        return title

    def _draw(self) -> None:
        self._timer = None
        key = (self._run_id, len(self._calls), self._calls[-1].call_id if self._calls else None)
        if key == self._drawn:
            return
        self._drawn = key
        self._drawn_at = time.monotonic()
        from tui.widgets.cached_plot import CachedPlot

        try:
            rate_plot = self.query_one("#rate-plot", CachedPlot)
            context_plot = self.query_one("#context-plot", CachedPlot)
            # The title changes with the plots, never before them: no run's name over
            # another run's curves while the redraw waits.
            self.query_one("#chart-title", Static).update(self._title())
        except NoMatches:
            return  # being removed
        rate = tokens_per_minute(self._calls)
        plt = rate_plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("tokens per minute")
        if rate.starts:
            plt.bar(list(rate.starts), list(rate.per_minute), color="cyan", width=0.8)
            # At least a minute wide, so the first bars of a young run are not page-wide.
            plt.xlim(-rate.bin_s, max(rate.starts[-1] + rate.bin_s, 60.0))
            positions, labels = axis_ticks(max(rate.per_minute), tick_count(rate_plot.size.height))
            plt.ylim(0, max(positions[-1], 1.0))  # an empty range would divide by zero
            plt.yticks(positions, labels)
            marks = time_ticks(rate.starts)
            plt.xticks(marks, [duration(int(mark * 1000)) if mark else "0s" for mark in marks])
            plt.xlabel(f"time since the first call (trailing minute, every {rate.bin_s} s)")
        rate_plot.version += 1
        rate_plot.refresh()
        contexts = context_per_call(self._calls)
        plt = context_plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("context window per call")
        if contexts:
            numbers = list(range(1, len(contexts) + 1))
            for edge in edges_in_view(max(contexts)):
                plt.hline(edge, color="gray")
            plt.plot(numbers, list(contexts), color="magenta", marker="braille")
            # From 0, so the labels are in view and a small change does not look like a cliff.
            positions, labels = axis_ticks(max(contexts), tick_count(context_plot.size.height))
            plt.ylim(0, max(positions[-1], 1.0))
            plt.yticks(positions, labels)
            call_numbers = call_ticks(len(contexts))
            plt.xticks([float(n) for n in call_numbers], [str(n) for n in call_numbers])
            plt.xlabel("call (gray lines: context-window bucket edges)")
        context_plot.version += 1
        context_plot.refresh()
