"""Launching a run: pick a workflow the workspace knows (listed without running any of them),
edit its JSON input, validated live; the chosen file is loaded only when launched."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Label, Select, Static, TextArea

from tui.modals.confirm import Dialog, DialogBox
from tui.modals.validation import json_problem, parse_json


def _accept_anything(value: object) -> str | None:
    return None


@dataclass(frozen=True)
class WorkflowChoice:
    """A workflow offered in the launch dialog.

    ``validate`` checks a parsed input against the workflow's input type and returns why it is
    rejected (one sentence) or None; ``example_input`` is the JSON text pre-filled for editing.
    """

    key: str
    name: str
    source: str
    description: str = ""
    example_input: str = "{}"
    validate: Callable[[object], str | None] = field(default=_accept_anything, compare=False)


@dataclass(frozen=True)
class LaunchRequest:
    """The workflow chosen and the (already validated) input value."""

    choice: WorkflowChoice
    input: object


NO_WORKFLOWS = "This workspace knows no workflows (see examples/ or `tether run`)."


class LaunchRunDialog(Dialog[LaunchRequest | None]):
    """Choose a workflow and its input; Launch stays disabled until the input is valid.

    With ``load`` the dialog opens at once and reads the workflows itself, so keys typed while
    it loads them reach the dialog, never the view under it (a ``c`` or a ``d`` there would
    act on a run)."""

    BINDINGS = [
        Binding("ctrl+s", "launch", "Launch"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self,
        choices: Sequence[WorkflowChoice] = (),
        selected: str | None = None,
        *,
        load: Callable[[], Awaitable[Sequence[WorkflowChoice] | None]] | None = None,
        queues: bool = False,
    ) -> None:
        super().__init__(classes="dialog")
        self._queues = queues
        """True when launching puts the run on the queue for a worker (a PostgreSQL
        workspace) instead of starting it in this dashboard's engine."""
        self._choices = {choice.key: choice for choice in choices}
        self._selected = selected if selected in self._choices else next(iter(self._choices), None)
        self._problem: str | None = "choose a workflow"
        self._load = load

    def _options(self) -> list[tuple[Text, str]]:
        return [(Text.assemble((c.name, "bold"), ("  " + c.source, "dim")), c.key)
                for c in self._choices.values()]

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box", classes="-editor"):
            yield Label("Launch a run", id="dialog-title")
            empty = Static(Text("Reading the workspace's workflows…" if self._load else
                                NO_WORKFLOWS), id="launch-empty")
            empty.display = bool(self._load) or not self._choices
            yield empty
            yield Label("Workflow", classes="field-label")
            yield Select(
                self._options(),
                value=self._selected if self._selected is not None else Select.NULL,
                allow_blank=self._selected is None,
                id="launch-workflow",
            )
            yield Static("", id="launch-description")
            yield Label("Input (JSON)", classes="field-label")
            yield TextArea.code_editor(
                self._current_example(), language="json", tab_behavior="focus", id="launch-input"
            )
            yield Static("", id="json-status")
            with Horizontal(id="dialog-buttons"):
                yield Button("Queue (ctrl+s)" if self._queues else "Launch (ctrl+s)",
                             variant="primary", id="launch-ok")
                yield Button("Cancel (esc)", id="launch-cancel")

    def _current(self) -> WorkflowChoice | None:
        return self._choices.get(self._selected) if self._selected is not None else None

    def _current_example(self) -> str:
        choice = self._current()
        return choice.example_input if choice is not None else "{}"

    def on_mount(self) -> None:
        self._fit()
        self._describe()
        self._validate()
        self.query_one("#launch-input", TextArea).focus()
        if self._load is not None:
            self.run_worker(self._fill(), group="launch-load", exclusive=True)

    async def _fill(self) -> None:
        """Offer the workflows once read (what was typed meanwhile stays)."""
        assert self._load is not None
        choices = await self._load()
        if choices is None:  # reading failed (the view said why)
            self.dismiss(None)
            return
        self._choices = {choice.key: choice for choice in choices}
        self._selected = next(iter(self._choices), None)
        empty = self.query_one("#launch-empty", Static)
        empty.update(Text(NO_WORKFLOWS))
        empty.display = not self._choices
        select = self.query_one("#launch-workflow", Select)
        select.set_options(self._options())
        if self._selected is not None:
            select.value = self._selected
        area = self.query_one("#launch-input", TextArea)
        if area.text == "{}":  # nothing typed while the workflows were read
            area.text = self._current_example()
        self._describe()
        self._validate()

    def _describe(self) -> None:
        choice = self._current()
        text = Text()
        if choice is not None:
            text.append(choice.description, style="italic")
            # Listing read the file without running it; launching loads (runs) it.
            text.append(f"\nQueue puts the run on the queue; a tether worker runs "
                        f"{choice.source}" if self._queues else
                        f"\nLaunch loads and runs {choice.source}", style="dim")
        self.query_one("#launch-description", Static).update(text)

    @on(Select.Changed, "#launch-workflow")
    def _workflow_changed(self, event: Select.Changed) -> None:
        value = event.value
        if not isinstance(value, str) or value == self._selected:
            return
        self._selected = value
        self._describe()
        self.query_one("#launch-input", TextArea).text = self._current_example()
        self._validate()

    @on(TextArea.Changed, "#launch-input")
    def _input_changed(self) -> None:
        self._validate()

    def _validate(self) -> None:
        self._problem = self.input_problem()
        status = self.query_one("#json-status", Static)
        if self._problem is None:
            status.update(Text("✓ input is valid for this workflow", style="green"))
        else:
            status.update(Text(f"✗ {self._problem}"))
        status.set_class(self._problem is not None, "-invalid")
        self.query_one("#launch-ok", Button).disabled = self._problem is not None
        self.refresh_bindings()

    def input_problem(self) -> str | None:
        """Why the current input cannot be launched, or None."""
        choice = self._current()
        if choice is None:
            return "choose a workflow"
        text = self.query_one("#launch-input", TextArea).text
        problem = json_problem(text)
        if problem is not None:
            return f"not JSON: {problem.describe()}"
        return choice.validate(parse_json(text))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Launch is disabled while the input is invalid."""
        if action == "launch" and self._problem is not None:
            return None
        return True

    @on(Button.Pressed, "#launch-ok")
    def action_launch(self) -> None:
        """Dismiss with the chosen workflow and parsed input, when valid."""
        self._validate()
        choice = self._current()
        if self._problem is not None or choice is None:
            self.app.bell()
            return
        value = parse_json(self.query_one("#launch-input", TextArea).text)
        self.dismiss(LaunchRequest(choice, value))

    @on(Button.Pressed, "#launch-cancel")
    def action_cancel(self) -> None:
        """Close without launching."""
        self.dismiss(None)
