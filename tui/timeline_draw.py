"""Drawing a timeline's spans into character cells (pure, shared by the dashboard's Timeline
tab and ``tether runs --timeline``): which span wins a cell, the glyph and style of each kind,
the time axis, and a scale that fits a stretch of time into a width."""

from __future__ import annotations

from collections.abc import Sequence

from store.read.timeline import Span
from tui.plain import duration

GLYPHS: dict[str, tuple[str, str]] = {
    "waiting": ("·", "dim"),
    "queued": ("░", "yellow"),
    "running": ("▒", "bold cyan"),
    "finished": ("█", "green"),
    "failed": ("▓", "bold red"),
    "cancelled": ("╳", "magenta"),
    "abandoned": ("╳", "dim red"),
    "skipped": ("–", "dim"),
    "retrying": ("╌", "bold yellow"),
    "cached": ("◆", "bold green"),
    "carried": ("◇", "bold blue"),
    "call": ("▬", "magenta"),
    "tool": ("▪", "yellow"),
    "tool-failed": ("✗", "bold red"),
    "steer": ("»", "bold cyan"),
    "steer-refused": ("»", "dim red"),
    "busy": ("█", "blue"),
    "idle": ("·", "dim"),
}
"""Each span kind's character and style (the legend the views print)."""

LEGEND = (
    ("waiting", "waiting on dependencies"), ("queued", "queued"), ("running", "running"),
    ("finished", "finished"), ("failed", "failed"), ("retrying", "retry wait"),
    ("cached", "cache hit"), ("carried", "carried over"), ("call", "model call"),
    ("tool", "tool call"), ("steer", "steer"), ("idle", "idle (run row)"),
)

# Which kind a cell shows when several spans meet in it: what went wrong first, then what
# happened, then the waits.
_PRIORITY = {kind: rank for rank, kind in enumerate((
    "steer", "steer-refused", "tool-failed", "failed", "tool", "cached", "carried", "call",
    "cancelled", "abandoned", "skipped", "retrying", "running", "finished", "busy", "queued",
    "waiting", "idle",
))}

NICE_STEPS_MS = (
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
    120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000,
    43_200_000, 86_400_000,
)


def fit_scale(span_ms: int, width: int) -> int:
    """Milliseconds per cell so ``span_ms`` fits in ``width`` cells (a round number)."""
    need = max(1, -(-max(span_ms, 1) // max(1, width)))
    return next((step for step in NICE_STEPS_MS if step >= need), need)


def cells_needed(span_ms: int, ms_per_cell: int) -> int:
    """How many cells ``span_ms`` takes at ``ms_per_cell`` (the last one included)."""
    return max(1, -(-max(span_ms, 1) // ms_per_cell) + 1)


def cells(
    spans: Sequence[Span], start_ms: int, ms_per_cell: int, width: int, now_ms: int
) -> list[str | None]:
    """The kind each of ``width`` cells shows (None: nothing), starting at ``start_ms``. A span
    still going on ends now; one shorter than a cell (a cache hit, a tool call) still marks
    the cell it starts in."""
    out: list[str | None] = [None] * max(0, width)
    for span in spans:
        end = span.end_ms if span.end_ms is not None else now_ms
        first = (span.start_ms - start_ms) // ms_per_cell
        last = (max(end, span.start_ms) - start_ms - 1) // ms_per_cell if end > span.start_ms \
            else first
        if last < 0 or first >= width:
            continue
        for index in range(max(0, first), min(width - 1, last) + 1):
            current = out[index]
            if current is None or _PRIORITY.get(span.kind, 99) < _PRIORITY.get(current, 99):
                out[index] = span.kind
    return out


def bar_plain(
    spans: Sequence[Span], start_ms: int, ms_per_cell: int, width: int, now_ms: int
) -> str:
    """The bar as plain characters (a space where nothing happened)."""
    return "".join(
        GLYPHS[kind][0] if kind in GLYPHS else " "
        for kind in cells(spans, start_ms, ms_per_cell, width, now_ms)
    )


def axis(offset_ms: int, ms_per_cell: int, width: int, every: int = 12) -> tuple[str, str]:
    """Two lines over a bar of ``width`` cells starting ``offset_ms`` after the run's start:
    tick marks, and the time since the start under each tick."""
    ticks = [" "] * width
    labels = [" "] * width
    step_cells = max(4, every)
    position = 0
    while position < width:
        ticks[position] = "┬" if position else "├"
        label = duration(offset_ms + position * ms_per_cell) if offset_ms or position else "0s"
        if position + len(label) <= width:
            labels[position : position + len(label)] = list(label)
        position += step_cells
    return "".join(ticks), "".join(labels)


def span_text(span: Span, origin_ms: int, now_ms: int) -> str:
    """``+1.2s → +3.4s (2.2s)``: a span relative to the run's start."""
    end = span.end_ms if span.end_ms is not None else now_ms
    tail = "" if span.end_ms is not None else ", still going"
    return (f"+{duration(span.start_ms - origin_ms)} → +{duration(end - origin_ms)} "
            f"({duration(end - span.start_ms)}{tail})")
