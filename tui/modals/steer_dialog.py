"""The message dialog of ``m`` in the run detail: the text for the node and when it is
delivered, now (a steerable Claude Code agent after the turn under way, an HTTP agent before
its next tool turn) or on the node's **next attempt** (a retry, or the run resumed: first in
that attempt's prompt; the way to reach an agent that runs one shot, and the only one left
for a node that failed)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Checkbox, Input

from store.runs.steer_log import MAX_STEER_BYTES
from tui.modals.confirm import Dialog, DialogBox, target_header


@dataclass(frozen=True)
class SteerRequest:
    """What the person sends: the message, and whether the next attempt reads it."""

    message: str
    next_attempt: bool


class SteerDialog(Dialog[SteerRequest | None]):
    """Ask for a steer's message and when it is delivered; dismisses with a
    :class:`SteerRequest` (None: cancelled, or nothing typed)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                Binding("ctrl+n", "toggle_next", "Next attempt")]

    def __init__(self, target: Text, *, only_next_attempt: bool) -> None:
        super().__init__(classes="dialog")
        self._target = target
        self._only_next = only_next_attempt
        """The node ended (failed): only its next attempt, when the run is resumed, reads it."""

    def compose(self) -> ComposeResult:
        detail = Text(
            "The node ended: its next attempt (when the run is resumed) reads the message "
            "first in its prompt." if self._only_next else
            "Now: a steerable Claude Code agent reads it after the turn under way, an HTTP "
            "agent before its next tool turn; an agent that runs one shot refuses it. Next "
            "attempt (ctrl+n): the node's next attempt, a retry or a resume, reads it first "
            "in its prompt.")
        with DialogBox(id="dialog-box"):
            yield from target_header("Send the node a message?", self._target, detail)
            yield Input(placeholder="What the node should read", max_length=MAX_STEER_BYTES,
                        id="steer-input")
            yield Checkbox("For the node's next attempt (a retry or a resume)",
                           value=self._only_next, disabled=self._only_next, id="steer-next")
            with Horizontal(id="dialog-buttons"):
                yield Button("Send (enter)", variant="primary", id="steer-ok")
                yield Button("Cancel (esc)", id="steer-cancel")

    def on_mount(self) -> None:
        self._fit()
        self.query_one("#steer-input", Input).focus()

    def action_toggle_next(self) -> None:
        """Deliver now, or on the node's next attempt (fixed when the node ended)."""
        box = self.query_one("#steer-next", Checkbox)
        if not self._only_next:
            box.value = not box.value

    @on(Input.Submitted, "#steer-input")
    @on(Button.Pressed, "#steer-ok")
    def action_send(self) -> None:
        """Send what is typed (nothing typed: the same as cancel)."""
        message = self.query_one("#steer-input", Input).value
        next_attempt = self.query_one("#steer-next", Checkbox).value
        self.dismiss(SteerRequest(message, next_attempt) if message.strip() else None)

    @on(Button.Pressed, "#steer-cancel")
    def action_cancel(self) -> None:
        """Cancel: nothing is sent."""
        self.dismiss(None)
