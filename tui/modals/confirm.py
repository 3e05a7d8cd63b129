"""A yes/no confirmation that names the exact target of a destructive action."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

CSS_FILE = Path(__file__).with_name("modals.tcss")
SMALL_HEIGHT = 32
"""Below this many rows a dialog tightens its spacing and its editors (see modals.tcss)."""

ResultT = TypeVar("ResultT")


class DialogBox(VerticalScroll):
    """The dialog's box: it scrolls when the terminal is too small to show it whole, and the
    field that takes the focus (Tab) is scrolled into view, so nothing is ever out of reach."""


class Dialog(ModalScreen[ResultT]):
    """A modal dialog that adapts to the terminal: tighter below :data:`SMALL_HEIGHT` rows."""

    CSS_PATH = CSS_FILE

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        for box in self.query(DialogBox):
            box.set_class(self.app.size.height < SMALL_HEIGHT, "-small")

    def on_descendant_focus(self) -> None:
        focused = self.focused
        if focused is not None:
            focused.scroll_visible(animate=False)


def as_text(value: Text | str) -> Text:
    """Data becomes a plain Text (never parsed as markup); Text passes through."""
    return value if isinstance(value, Text) else Text(value)


def named_targets(items: Sequence[tuple[str, Text]], limit: int) -> Text:
    """Several targets of one confirmation, one a line: the id in bold, then what it is; the
    first ``limit``, then how many more."""
    text = Text()
    for index, (name, what) in enumerate(items[:limit]):
        if index:
            text.append("\n")
        text.append_text(Text(name, style="bold"))
        text.append("  ")
        text.append_text(what)
    if len(items) > limit:
        text.append(f"\n… and {len(items) - limit} more", style="dim")
    return text


def target_header(title: str, target: Text, detail: Text) -> ComposeResult:
    """The heading every confirmation starts with: what is asked, the exact target, context."""
    yield Label(Text(title), id="dialog-title")
    yield Static(target, id="confirm-target")
    if detail.plain:
        yield Static(detail, id="confirm-detail")


class ConfirmDialog(Dialog[bool]):
    """Ask before doing something that cannot be undone; dismisses with True only on "yes".

    The target (a run id, ``namespace`` + ``key``...) is shown literally on its own line so a
    person sees exactly what will be affected. Cancel has the focus, so a stray ``enter`` is safe.
    """

    BINDINGS = [
        Binding("y", "confirm", "Yes"),
        Binding("n,escape", "cancel", "No"),
    ]

    def __init__(
        self,
        title: str,
        target: Text | str,
        *,
        detail: Text | str = "",
        confirm_label: str = "Delete",
        cancel_label: str = "Keep it",
    ) -> None:
        super().__init__(classes="dialog")
        self._header = (title, as_text(target), as_text(detail))
        self._confirm_label = confirm_label
        self._cancel_label = cancel_label
        """What "no" keeps (never the word of the action itself: "Cancel run" beside "Cancel"
        made the cancel dialog ambiguous)."""

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box", classes="-danger"):
            yield from target_header(*self._header)
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self._confirm_label} (y)", variant="error", id="confirm-yes")
                yield Button(f"{self._cancel_label} (n)", variant="default", id="confirm-no")

    def on_mount(self) -> None:
        self._fit()
        self.query_one("#confirm-no", Button).focus()

    @on(Button.Pressed, "#confirm-yes")
    def action_confirm(self) -> None:
        """Confirm: dismiss with True."""
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-no")
    def action_cancel(self) -> None:
        """Cancel: dismiss with False; nothing is changed."""
        self.dismiss(False)
