"""Pure helpers that turn stored values into text for the dashboard.

Everything from the database or the artifact folder reaches the screen through :func:`literal`:
it returns a :class:`rich.text.Text` (never markup), and replaces control characters with
visible symbols, so ``[bold red]x[/]``, ``[@click=app.quit]q[/]`` or an ANSI escape sequence
is shown as the characters it contains and does nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tui.plain import (
    ago,
    cost,
    duration,
    money,
    percent,
    plural,
    pretty_json,
    spent,
    tokens,
    visible,
)

if TYPE_CHECKING:
    from store.model.run_records import AttemptRecord, CallRecord, RunRecord
    from store.read.dashboard_rows import BucketUsage, NodeUsage

__all__ = [
    "STATUS_GLYPHS",
    "STATUS_STYLES",
    "ago",
    "call_cost",
    "cost",
    "duration",
    "literal",
    "money",
    "one_line",
    "percent",
    "plural",
    "pretty_json",
    "row_cost",
    "spent",
    "status_text",
    "tokens",
    "visible",
]


def literal(value: object, style: str = "", *, keep_newlines: bool = True) -> Text:
    """A Text that shows ``value`` exactly as stored: no markup, no escape sequences."""
    if value is None:
        return Text("", style=style)
    return Text(visible(str(value), keep_newlines=keep_newlines), style=style)


def one_line(value: object, style: str = "", width: int = 0) -> Text:
    """Like :func:`literal` on a single line, optionally cut to ``width`` cells with an ellipsis."""
    text = literal(value, style, keep_newlines=False)
    if width and text.cell_len > width:
        text.truncate(max(1, width - 1))
        text.append("…")
    return text


def row_cost(row: RunRecord | AttemptRecord | NodeUsage | BucketUsage) -> str:
    """The cost of a dashboard row (run, node, attempt, bucket): "–" before any call."""
    return spent(row.tokens.total, row.cost.usd, row.cost.unpriced_calls)


def call_cost(call: CallRecord) -> str:
    """One call's cost ("unknown" when its model has no price; a retry costs nothing)."""
    return cost(call.cost_usd, int(call.cost_usd is None and call.kind != "retry"))


STATUS_STYLES: dict[str, str] = {
    "pending": "dim",
    "running": "bold cyan",
    "retrying": "bold yellow",
    "finished": "green",
    "failed": "bold red",
    "cancelled": "magenta",
    "skipped": "dim",
    "handed-off": "blue",
    "abandoned": "dim red",
    "stale": "bold black on yellow",
    "queued": "cyan",
}

STATUS_GLYPHS: dict[str, str] = {
    "pending": "·",
    "running": "▶",
    "retrying": "↻",
    "finished": "✓",
    "failed": "✗",
    "cancelled": "⊘",
    "skipped": "–",
    "handed-off": "⇢",
    "abandoned": "⊘",
    "stale": "!",
    "queued": "◷",
}


def status_text(status: str) -> Text:
    """A coloured status with its glyph (the status comes from the schema's fixed vocabulary,
    but is still shown literally)."""
    style = STATUS_STYLES.get(status, "")
    text = Text()
    text.append(f"{STATUS_GLYPHS.get(status, '?')} ", style=style)
    text.append_text(literal(status, style))
    return text
