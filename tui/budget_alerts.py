"""Budget alerts in the dashboard: every ``budget.alert`` event (any process's engine writes
one when a budget passes 50, 80 or 100 %) rings the terminal bell once, and the newest stays on
the status line, red at 100 %, while it is current (:data:`ALERT_SHOWN_MS`) and only in the
room the line's freshness text leaves it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text

from store.model.history_records import EventRecord
from tui.format import ago, literal

ALERT_SHOWN_MS = 5 * 60_000
"""How long the newest alert stays on the status line. An older one is no longer news: the
activity feed, ``tether budget`` and the runs' own rows keep saying it, and the status line's
room goes back to saying how fresh the data is."""
ALERT_GAP = 2
"""The spaces after the alert, before the freshness text."""


class BudgetAlerts:
    """The budget alerts one dashboard has seen since it opened."""

    def __init__(self, ring: Callable[[], None] | None = None) -> None:
        self.ring = ring
        """Rings the terminal bell (the dashboard's ``bell``)."""
        self.newest: tuple[str, int, int] | None = None
        """The newest alert: its text, threshold and time (ms)."""
        self.bells = 0
        """How many alerts rang the bell."""

    def take(self, events: Iterable[EventRecord]) -> int:
        """Note the alerts among ``events`` and ring once for each; how many there were."""
        rung = 0
        for event in events:
            if event.type != "budget.alert":
                continue
            payload = event.payload if isinstance(event.payload, dict) else {}
            threshold = payload.get("threshold")
            self.newest = (
                str(payload.get("text") or "a budget alert"),
                threshold if isinstance(threshold, int) else 0,
                event.at_ms,
            )
            rung += 1
            if self.ring is not None:
                self.ring()
        self.bells += rung
        return rung

    def status(self, line: Text, now_ms: int, room: int | None = None) -> None:
        """Append the newest alert to the status line while it is current (nothing before the
        first, nothing once it is older than :data:`ALERT_SHOWN_MS`), in at most ``room``
        cells (None: no bound)."""
        piece = alert_piece(self.newest, now_ms, room)
        if piece.cell_len:
            line.append_text(piece)
            line.append(" " * ALERT_GAP)


def alert_piece(newest: tuple[str, int, int] | None, now_ms: int, room: int | None) -> Text:
    """The status line's alert (pure, tested directly): ``⚠ budget TEXT (AGE)``; its text cut
    with an ellipsis to fit ``room`` cells (gap included), then only ``⚠ budget 80%``, then
    nothing, so the freshness after it never goes off the screen."""
    if newest is None:
        return Text()
    text, threshold, at_ms = newest
    if now_ms - at_ms > ALERT_SHOWN_MS:
        return Text()
    style = "bold red" if threshold >= 100 else "bold yellow"
    age = f" ({ago(now_ms, at_ms)})"
    whole = literal(f"budget {text}{age}", style)
    short = literal(f"budget {threshold}%{age}", style)
    limit = None if room is None else room - ALERT_GAP - 2  # "⚠ " before it
    if limit is None or whole.cell_len <= limit:
        body = whole
    elif short.cell_len + 1 < limit:
        # Cut the alert's words, never its age: "budget 100% of the token… (1.4s ago)".
        body = literal(f"budget {text}", style)
        body.truncate(limit - len(age) - 1)
        body.append("…", style)
        body.append(age, style)
    elif short.cell_len <= limit:
        body = short
    else:
        return Text()
    return Text.assemble(("⚠ ", "bold"), body)
