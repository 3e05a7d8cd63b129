"""The floor for the dashboard's pty benchmarks: a bare Textual app, the least a Textual
dashboard can cost (not Tether).

    python bench/bare_textual.py

Two screens (modes ``1`` and ``2``), each a header line, a screenful of rows like the Runs
view's (200 rows by 10 columns as one text, in a scrolling container) and a footer; nothing
read from a database and no table widget. Through the same pty as ``tether tui``, its first
paint is Python + Textual starting and drawing one screen of text, and its switch is Textual
changing screens and writing a whole screen to the terminal.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

COLUMNS = ("Status", "Run", "Workflow", "Gen", "Elapsed", "Nodes", "Tokens", "Cost", "Cached",
           "Heartbeat")


class TableScreen(Screen[None]):
    """A title line and 200 rows of text."""

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        yield Static(self.title_text)
        rows = [" ".join(f"{name:<10}" for name in COLUMNS)]
        rows += [
            " ".join(f"{cell:<10}" for cell in (
                "finished", f"r-{n:08d}", "workflow", "0", "30.0s", "10/10", f"{n % 30}.5M",
                "$0", "90%", "-"))
            for n in range(200, 0, -1)
        ]
        with VerticalScroll():
            yield Static("\n".join(rows), markup=False)
        yield Footer()


class BareApp(App[None]):
    """Two table screens, ``1`` and ``2``, ``q`` quits."""

    MODES: ClassVar[dict[str, Any]] = {
        "first": lambda: TableScreen("floor view one"),
        "second": lambda: TableScreen("floor view two"),
    }
    DEFAULT_MODE = "first"
    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("1", "switch_mode('first')", "One"),
        Binding("2", "switch_mode('second')", "Two"),
        Binding("q", "quit", "Quit"),
    ]


if __name__ == "__main__":
    BareApp().run()
