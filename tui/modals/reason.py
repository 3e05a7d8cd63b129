"""A prompt for an optional reason: rejecting a proposed note, clearing a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Input

from tui.format import one_line
from tui.modals.confirm import Dialog, DialogBox, as_text, named_targets, target_header

REASON_MAX_CHARS = 500


@dataclass(frozen=True)
class ReasonResult:
    """The person confirmed; ``reason`` is None when they left it blank."""

    reason: str | None


class ReasonDialog(Dialog[ReasonResult | None]):
    """Confirm an action on a named target, with an optional one-line reason.

    Dismisses with a :class:`ReasonResult` on confirm and ``None`` on cancel.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self,
        title: str,
        target: Text | str,
        *,
        detail: Text | str = "",
        confirm_label: str = "Confirm",
        placeholder: str = "Reason (optional)",
        danger: bool = False,
    ) -> None:
        super().__init__(classes="dialog")
        self._header = (title, as_text(target), as_text(detail))
        self._confirm_label = confirm_label
        self._placeholder = placeholder
        self._danger = danger

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box", classes="-danger" if self._danger else ""):
            yield from target_header(*self._header)
            yield Input(
                placeholder=self._placeholder, max_length=REASON_MAX_CHARS, id="reason-input"
            )
            with Horizontal(id="dialog-buttons"):
                yield Button(
                    f"{self._confirm_label} (enter)",
                    variant="error" if self._danger else "primary",
                    id="reason-ok",
                )
                yield Button("Cancel (esc)", id="reason-cancel")

    def on_mount(self) -> None:
        self._fit()
        self.query_one("#reason-input", Input).focus()

    @on(Input.Submitted, "#reason-input")
    @on(Button.Pressed, "#reason-ok")
    def action_confirm(self) -> None:
        """Confirm with the reason typed so far (blank -> None)."""
        reason = self.query_one("#reason-input", Input).value.strip()
        self.dismiss(ReasonResult(reason or None))

    @on(Button.Pressed, "#reason-cancel")
    def action_cancel(self) -> None:
        """Cancel: nothing happens."""
        self.dismiss(None)


def reject_note_dialog(note_id: str, namespace: str, body: str) -> ReasonDialog:
    """The dialog shown before rejecting a note: names the note; the reason is recorded."""
    target = Text.assemble(("note ", "dim"), (note_id, "bold"), ("  in  ", "dim"), namespace)
    preview = body if len(body) <= 200 else body[:199] + "…"
    return ReasonDialog(
        "Reject this note?",
        target,
        detail=Text(preview),
        confirm_label="Reject",
        placeholder="Why? (optional, recorded with the note)",
        danger=True,
    )


def bulk_decision_dialog(verb: str, notes: Sequence[Any]) -> ReasonDialog:
    """One confirmation for accepting or rejecting several notes, with one optional reason
    recorded on each; names every note (the first ten, then how many more)."""
    target = named_targets(
        [(note.id, one_line(note.namespace, "dim") + Text("  ") + one_line(note.body, width=60))
         for note in notes],
        limit=10,
    )
    effect = (
        "Each becomes live for recall and retires the notes it supersedes."
        if verb == "Accept"
        else "None reaches a prompt; the notes they would supersede stay live."
    )
    count = f"{len(notes)} note" + ("" if len(notes) == 1 else "s")
    return ReasonDialog(
        f"{verb} {count}?",
        target,
        detail=Text(effect),
        confirm_label=f"{verb} {count}",
        placeholder="Reason (optional, recorded on each note)",
        danger=verb == "Reject",
    )


def clear_run_dialog(run_id: str, workflow: str, workflow_path: str | None = None) -> ReasonDialog:
    """The dialog shown before a durable /clear of a run: names the run, and the workflow file
    the new generation loads when it starts here; the reason is kept."""
    target = Text.assemble(("run ", "dim"), (run_id, "bold"), ("  of  ", "dim"), workflow)
    detail = Text(
        "The run stops dispatching, hands its distilled state to a new run and is marked "
        "handed-off."
    )
    if workflow_path:
        detail.append(
            f"\nUnless an engine still runs it, the new run starts here and loads {workflow_path}.",
            style="dim",
        )
    return ReasonDialog(
        "Clear this run into a fresh generation?",
        target,
        detail=detail,
        confirm_label="Clear",
        placeholder="Reason (optional, recorded with the handoff)",
        danger=True,
    )
