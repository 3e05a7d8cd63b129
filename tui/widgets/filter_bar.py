"""The ``/`` filter input: hidden until asked for, remembers its last value per view."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    """A one-line filter docked at the bottom of a screen.

    ``enter`` applies the text and hides the bar; ``escape`` hides it without changing the
    filter that is in effect. Filtering is case-insensitive substring matching.
    """

    DEFAULT_CSS = """
    FilterBar { dock: bottom; display: none; height: 3; }
    FilterBar.-open { display: block; }
    """

    BINDINGS = [Binding("escape", "close", "Close filter", show=False)]

    class Applied(Message):
        """The filter text the view should apply."""

        def __init__(self, value: str) -> None:
            super().__init__()
            self.value = value

    def __init__(self) -> None:
        super().__init__(placeholder="filter (enter to apply, empty to clear, esc to close)")

    def open(self, value: str) -> None:
        """Show the bar with the remembered value and focus it."""
        self.value = value
        self.add_class("-open")
        self.focus()
        self.cursor_position = len(value)

    def action_close(self) -> None:
        """Hide without changing the filter in effect."""
        self.remove_class("-open")
        self.screen.focus_next()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Applied(event.value.strip()))
        self.remove_class("-open")
        self.screen.focus_next()


def matches(needle: str, *haystack: object) -> bool:
    """Case-insensitive substring match of the filter against any of the fields."""
    if not needle:
        return True
    lowered = needle.lower()
    return any(lowered in str(value).lower() for value in haystack if value is not None)
