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


def action_name(action: str) -> str:
    """``mark_step(1)`` -> ``mark_step``."""
    return action.split("(", 1)[0]


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

    def __init__(
        self, title: str, text: str, keys: list[tuple[str, str]],
        later: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__()
        self._title = title
        self._text = text
        self._keys = keys
        self._later = later or []
        """Keys of the view that do not apply to the current selection, with when they do."""

    @classmethod
    def for_screen(cls, screen: Screen[Any]) -> HelpScreen:
        """Collect the keys of ``screen`` (its own, the focused widget's, the app's). Keys of
        the view that do not apply right now are listed too, dimmed, with when they do
        (``KEY_NOTES`` on the screen)."""
        notes: dict[str, str] = getattr(screen, "KEY_NOTES", {})
        view_keys: list[tuple[str, str]] = []
        widget_keys: list[tuple[str, str]] = []
        seen: set[str] = set()
        for node, binding, enabled, _tooltip in screen.active_bindings.values():
            if not binding.description or not enabled or binding.key in seen:
                continue
            seen.add(binding.key)
            note = notes.get(action_name(binding.action))
            description = f"{binding.description} — {note}" if note else binding.description
            entry = (screen.app.get_key_display(binding), description)
            # The view's and the app's keys first; the focused widget's movement keys after.
            (view_keys if node is screen or node is screen.app else widget_keys).append(entry)
        later: list[tuple[str, str]] = []
        for key, bindings in screen._bindings.key_to_bindings.items():
            for binding in bindings:
                if key in seen or not binding.description:
                    continue
                seen.add(key)
                note = notes.get(action_name(binding.action), "does not apply here right now")
                later.append((screen.app.get_key_display(binding),
                              f"{binding.description} — {note}"))
        keys = view_keys + widget_keys
        keys.append(("ctrl+p", "Command palette"))
        title = getattr(screen, "HELP_TITLE", "") or type(screen).__name__
        return cls(title, getattr(screen, "HELP_TEXT", ""), keys, later)

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
        later = [(k, d) for k, d in self._later if matches(needle, k, d)]
        if later:
            lines.append("\nNot available on the current selection\n", style="bold dim")
            for key, description in later:
                lines.append(f"{key:>10}  ", style="dim bold")
                lines.append(description + "\n", style="dim")
        return lines if lines.plain else Text("no key matches", style="dim")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#help-keys", Static).update(self._render_keys(event.value))

    def action_dismiss_help(self) -> None:
        """Close the overlay."""
        self.dismiss(None)
