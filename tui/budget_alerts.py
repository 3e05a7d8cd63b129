"""Budget alerts in the dashboard: every ``budget.alert`` event (any process's engine writes
one when a budget passes 50, 80 or 100 %) rings the terminal bell once, and the newest stays on
the status line, red at 100 %."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text

from store.model.history_records import EventRecord
from tui.format import ago, literal


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

    def status(self, line: Text, now_ms: int) -> None:
        """Append the newest alert to the status line (nothing before the first)."""
        if self.newest is None:
            return
        text, threshold, at_ms = self.newest
        line.append("⚠ ", style="bold")
        line.append_text(literal(f"budget {text} ({ago(now_ms, at_ms)})",
                                 "bold red" if threshold >= 100 else "bold yellow"))
        line.append("  ")
