"""Forking a run from a node (``b`` in the run detail): the node's task prompt to edit, an
optional other agent, and what the fork carries over, named before anything is written."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Input, Label, Static, TextArea

from tui.modals.confirm import Dialog, DialogBox


@dataclass(frozen=True)
class ForkRequest:
    """What the person asked for: the prompt (None: the node's own, unchanged) and the agent
    (None: the task's own)."""

    prompt: str | None
    agent: str | None


def task_prompt_as_sent(sent: str | None, block: str | None) -> str:
    """The task's part of a prompt as sent: what the memory block put first is taken off
    (the fork's node gets its block again)."""
    text = sent or ""
    if block and text.startswith(block.rstrip()):
        text = text[len(block.rstrip()):].lstrip("\n")
    return text


class ForkDialog(Dialog[ForkRequest | None]):
    """Edit the node's prompt (and agent), then fork; dismisses with a :class:`ForkRequest`
    on ctrl+s and ``None`` on escape."""

    BINDINGS = [
        Binding("ctrl+s", "fork", "Fork"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, target: Text, prompt: str, carried: Text) -> None:
        super().__init__(classes="dialog")
        self._target = target
        self._prompt = prompt
        self._carried = carried

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box", classes="-editor"):
            yield Label("Fork this run from the node?", id="dialog-title")
            yield Static(self._target, id="fork-target")
            yield Static(self._carried, id="fork-carried")
            yield Label("Prompt the node runs with (as it was sent; edit it)",
                        classes="field-label")
            yield TextArea(self._prompt, tab_behavior="focus", id="fork-prompt")
            yield Label("Agent (blank: the task's own)", classes="field-label")
            yield Input(placeholder="agent name", max_length=200, id="fork-agent")
            with Horizontal(id="dialog-buttons"):
                yield Button("Fork (ctrl+s)", variant="primary", id="fork-ok")
                yield Button("Cancel (esc)", id="fork-cancel")

    def on_mount(self) -> None:
        self._fit()
        self.query_one("#fork-prompt", TextArea).focus()

    @on(Button.Pressed, "#fork-ok")
    def action_fork(self) -> None:
        """Fork with the prompt as edited (unchanged: the node's own) and the agent typed."""
        text = self.query_one("#fork-prompt", TextArea).text
        if not text.strip():
            self.app.bell()
            self.app.notify("The prompt is empty; give the text the node runs.",
                            severity="warning", markup=False)
            return
        agent = self.query_one("#fork-agent", Input).value.strip() or None
        self.dismiss(ForkRequest(None if text == self._prompt else text, agent))

    @on(Button.Pressed, "#fork-cancel")
    def action_cancel(self) -> None:
        """Close without forking."""
        self.dismiss(None)
