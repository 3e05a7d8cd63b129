"""The ``?`` overlay: the focused view's help and keys, filterable by typing."""

from __future__ import annotations

import dataclasses
import textwrap
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

OVERLAY_WIDTH = 80
KEY_WIDTH = 10
# The overlay's border, padding, the key column and room for a scrollbar leave this much for
# a description, whose wrapped lines hang under its first.
DESCRIPTION_WIDTH = OVERLAY_WIDTH - 4 - (KEY_WIDTH + 2) - 2


def hanging(description: str) -> str:
    """``description`` wrapped to the description column, continuation lines indented
    under its first (not back at the key column)."""
    lines = textwrap.wrap(description, DESCRIPTION_WIDTH) or [""]
    return ("\n" + " " * (KEY_WIDTH + 2)).join(lines)


def action_name(action: str) -> str:
    """``mark_step(1)`` -> ``mark_step``."""
    return action.split("(", 1)[0]


def own_bindings(kind: type) -> list[Binding]:
    """The bindings Tether's own classes in ``kind``'s ancestry declare (not Textual's), the
    class's own first, each key once."""
    found: list[Binding] = []
    for klass in kind.__mro__:
        if not klass.__module__.startswith("tui."):
            continue
        for binding in klass.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding):
                found.append(binding)
    return found


def _applies(owner: Any, binding: Binding) -> bool:
    """Whether the binding's action applies now (``check_action`` not saying no)."""
    action = action_name(binding.action)
    check = getattr(owner, "check_action", None)
    if check is None:
        return True
    try:
        return check(action, ()) is not False
    except Exception:  # a check that needs state the screen has not read yet: list it
        return True


class HelpScreen(ModalScreen[None]):
    """Lists keys as ``key  description``; typing narrows the list; ``escape`` closes."""

    DEFAULT_CSS = f"""
    HelpScreen {{ align: center middle; }}
    HelpScreen > Vertical {{
        width: {OVERLAY_WIDTH}; max-height: 90%; height: auto; border: round $accent;
        background: $surface; padding: 0 1;
    }}
    HelpScreen #help-text {{ color: $text-muted; margin-bottom: 1; }}
    HelpScreen VerticalScroll {{ height: auto; max-height: 30; }}
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
        """The keys of ``screen`` first (in the order the view declares them), then the
        dashboard's own keys (the views, pause, quit), then those of the focused widget when it
        is one of Tether's (the timeline's zoom, the graph's moves); generic Textual keys
        (focus cycling, copy, the data table's cursor) are left out. Keys of the view that do
        not apply right now are listed after, dimmed, with when they do (``KEY_NOTES``)."""
        notes: dict[str, str] = getattr(screen, "KEY_NOTES", {})
        seen: set[str] = set()
        keys: list[tuple[str, str]] = []
        later: list[tuple[str, str]] = []

        def describe(binding: Binding) -> str:
            note = notes.get(action_name(binding.action))
            return f"{binding.description} — {note}" if note else binding.description

        def add(owner: Any, binding: Binding, check: bool = True) -> None:
            for key in binding.key.split(","):
                key = key.strip()
                if not binding.description or key in seen:
                    continue
                seen.add(key)
                shown = screen.app.get_key_display(dataclasses.replace(binding, key=key))
                enabled = not check or _applies(owner, binding)
                if enabled:
                    keys.append((shown, describe(binding)))
                else:
                    note = notes.get(action_name(binding.action), "does not apply here right now")
                    later.append((shown, f"{binding.description} — {note}"))

        for binding in own_bindings(type(screen)):
            add(screen, binding)
        for binding in own_bindings(type(screen.app)):
            add(screen.app, binding, check=False)
        focused = screen.focused
        if focused is not None:
            for binding in own_bindings(type(focused)):
                add(focused, binding, check=False)
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
                lines.append(f"{key:>{KEY_WIDTH}}  ", style="bold")
                lines.append(hanging(description) + "\n")
        later = [(k, d) for k, d in self._later if matches(needle, k, d)]
        if later:
            lines.append("\nNot available on the current selection\n", style="bold dim")
            for key, description in later:
                lines.append(f"{key:>{KEY_WIDTH}}  ", style="dim bold")
                lines.append(hanging(description) + "\n", style="dim")
        return lines if lines.plain else Text("no key matches", style="dim")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#help-keys", Static).update(self._render_keys(event.value))

    def action_dismiss_help(self) -> None:
        """Close the overlay."""
        self.dismiss(None)
