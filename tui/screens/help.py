"""The ``?`` overlay: the focused view's help and keys, filterable by typing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tui.widgets.filter_bar import matches

if TYPE_CHECKING:
    from textual.screen import Screen


class HelpScreen(ModalScreen[None]):
    """Lists keys as ``key  description``; typing narrows the list; ``escape`` closes."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 80; max-height: 90%; height: auto; border: round $accent;
        background: $surface; padding: 0 1;
    }
    HelpScreen #help-text { color: $text-muted; margin-bottom: 1; }
    HelpScreen VerticalScroll { height: auto; max-height: 30; }
    """

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("escape", "dismiss_help", "Close"),
    ]

    def __init__(self, title: str, text: str, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self._title = title
        self._text = text
        self._keys = keys

    @classmethod
    def for_screen(cls, screen: Screen[Any]) -> HelpScreen:
        """Collect the keys active on ``screen`` (its own, the focused widget's, the app's)."""
        view_keys: list[tuple[str, str]] = []
        widget_keys: list[tuple[str, str]] = []
        seen: set[str] = set()
        for node, binding, enabled, _tooltip in screen.active_bindings.values():
            if not binding.description or not enabled or binding.key in seen:
                continue
            seen.add(binding.key)
            entry = (screen.app.get_key_display(binding), binding.description)
            # The view's and the app's keys first; the focused widget's movement keys after.
            (view_keys if node is screen or node is screen.app else widget_keys).append(entry)
        keys = view_keys + widget_keys
        keys.append(("ctrl+p", "Command palette"))
        title = getattr(screen, "HELP_TITLE", "") or type(screen).__name__
        return cls(title, getattr(screen, "HELP_TEXT", ""), keys)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Help — {self._title}", style="bold"), id="help-title")
            yield Static(Text(self._text), id="help-text")
            yield Input(placeholder="type to filter keys", id="help-filter")
            with VerticalScroll():
                yield Static(self._render_keys(""), id="help-keys")

    def _render_keys(self, needle: str) -> Text:
        lines = Text()
        for key, description in self._keys:
            if matches(needle, key, description):
                lines.append(f"{key:>10}  ", style="bold")
                lines.append(description + "\n")
        return lines if lines.plain else Text("no key matches", style="dim")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#help-keys", Static).update(self._render_keys(event.value))

    def action_dismiss_help(self) -> None:
        """Close the overlay."""
        self.dismiss(None)
