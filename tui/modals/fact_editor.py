"""Editing a fact's JSON value and TTL, and adding a new fact, with live validation.

The value is edited in a JSON code editor; every keystroke re-checks it with the store's own
validation (the code ``tether memory set`` runs) and the first problem is shown inline with its
line and column. While the value is not JSON (or the TTL, namespace or key is invalid) Save is
disabled and ``ctrl+s`` does nothing, so a bad value can never be stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static, TextArea

from store.errors import InvalidInputError
from store.facts import parse_value_json, validate_key, validate_ttl
from store.namespaces import validate_namespace
from store.ttl import format_ttl, parse_ttl
from tui.format import pretty_json
from tui.modals.confirm import Dialog, DialogBox
from tui.modals.validation import parse_json

AddressCheck = Callable[[str, str], str | None]
"""Returns why a (namespace, key) pair is invalid, or None when it is fine."""


def value_problem(text: str) -> str | None:
    """Why the store would refuse ``text`` as a fact value (with line and column), or None."""
    try:
        parse_value_json(text)
    except InvalidInputError as error:
        return str(error)
    return None


def ttl_problem(text: str) -> str | None:
    """Why a typed TTL is unusable, or None."""
    try:
        validate_ttl(parse_ttl(text))
    except (ValueError, InvalidInputError) as error:
        return str(error)
    return None


def address_problem(namespace: str, key: str) -> str | None:
    """Why a (namespace, key) pair would be refused by ``tether memory set``, or None."""
    try:
        validate_namespace(namespace)
        validate_key(key)
    except InvalidInputError as error:
        return str(error)
    return None


@dataclass(frozen=True)
class FactEdit:
    """What the person saved: the parsed JSON value and the TTL (None = never expires)."""

    namespace: str
    key: str
    value: object
    ttl_ms: int | None
    value_json: str = field(default="null", compare=False)
    """The text as typed, so a write that fails can reopen the editor with it."""


class FactEditor(Dialog[FactEdit | None]):
    """Edit the value (as JSON) and the TTL of an existing fact."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self, namespace: str, key: str, value_json: str = "null", ttl_ms: int | None = None
    ) -> None:
        super().__init__(classes="dialog")
        self.namespace = namespace
        self.key = key
        self._initial_text = pretty_json(value_json)
        self._initial_ttl = format_ttl(ttl_ms)
        self._problems: dict[str, str] = {}

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box", classes="-editor"):
            yield Label(Text(self.dialog_title()), id="dialog-title")
            yield from self.compose_address()
            yield Label("Value (JSON)", classes="field-label")
            yield TextArea.code_editor(
                self._initial_text, language="json", tab_behavior="focus", id="fact-value"
            )
            yield Static("", id="json-status")
            yield Label(
                "TTL, counted from this save (blank = never expires; 90000, 30s, 5m, 2h, 7d)",
                classes="field-label",
            )
            yield Input(self._initial_ttl, placeholder="never expires", id="fact-ttl")
            yield Static("", id="ttl-status", classes="field-status")
            with Horizontal(id="dialog-buttons"):
                yield Button("Save (ctrl+s)", variant="primary", id="fact-save")
                yield Button("Cancel (esc)", id="fact-cancel")

    def dialog_title(self) -> str:
        """The heading; names the fact being edited."""
        return "Edit fact"

    def compose_address(self) -> ComposeResult:
        """The namespace and key: fixed text when editing an existing fact."""
        yield Static(
            Text.assemble(("namespace ", "dim"), (self.namespace, "bold"),
                          ("   key ", "dim"), (self.key, "bold")),
            id="fact-address",
        )

    def on_mount(self) -> None:
        self._fit()
        self._validate_all()
        self.query_one(self.first_focus()).focus()

    def first_focus(self) -> str:
        """Selector of the field the cursor starts in."""
        return "#fact-value"

    # -- validation ---------------------------------------------------------------------------

    def _validate_all(self) -> None:
        self._check_value()
        self._check_ttl()
        self.check_address()
        self._show_state()

    def _set_problem(self, field: str, problem: str | None) -> None:
        if problem is None:
            self._problems.pop(field, None)
        else:
            self._problems[field] = problem

    def _check_value(self) -> None:
        problem = value_problem(self.query_one("#fact-value", TextArea).text)
        self._set_problem("value", problem)
        status = self.query_one("#json-status", Static)
        status.update(Text(f"✗ {problem}") if problem else Text("✓ valid JSON", style="green"))
        status.set_class(problem is not None, "-invalid")

    def _check_ttl(self) -> None:
        problem = ttl_problem(self.query_one("#fact-ttl", Input).value)
        self._set_problem("ttl", problem)
        status = self.query_one("#ttl-status", Static)
        status.update(Text(problem or ""))
        status.set_class(problem is not None, "-invalid")

    def check_address(self) -> None:
        """Validate namespace and key (nothing to check when they are fixed)."""

    def _show_state(self) -> None:
        self.query_one("#fact-save", Button).disabled = bool(self._problems)
        self.query_one("#dialog-box").set_class(bool(self._problems), "-invalid")
        self.refresh_bindings()

    @on(TextArea.Changed, "#fact-value")
    def _value_changed(self) -> None:
        self._check_value()
        self._show_state()

    @on(Input.Changed, "#fact-ttl")
    def _ttl_changed(self) -> None:
        self._check_ttl()
        self._show_state()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Save is shown disabled (and does nothing) while anything is invalid."""
        if action == "save" and self._problems:
            return None
        return True

    # -- results ------------------------------------------------------------------------------

    def current_address(self) -> tuple[str, str]:
        """The namespace and key the value will be stored under."""
        return self.namespace, self.key

    @on(Button.Pressed, "#fact-save")
    def action_save(self) -> None:
        """Dismiss with the parsed value, only when everything is valid."""
        self._validate_all()
        if self._problems:
            self.app.bell()
            return
        namespace, key = self.current_address()
        text = self.query_one("#fact-value", TextArea).text
        ttl_ms = parse_ttl(self.query_one("#fact-ttl", Input).value)
        self.dismiss(FactEdit(namespace, key, parse_json(text), ttl_ms, text))

    @on(Button.Pressed, "#fact-cancel")
    def action_cancel(self) -> None:
        """Close without saving anything."""
        self.dismiss(None)


class NewFactForm(FactEditor):
    """Add a new fact: namespace and key are typed and validated like the CLI validates them."""

    def __init__(
        self, namespace: str = "", key: str = "", *, check: AddressCheck = address_problem
    ) -> None:
        super().__init__(namespace, key, "null", None)
        self._check = check

    def dialog_title(self) -> str:
        return "New fact"

    def compose_address(self) -> ComposeResult:
        with Horizontal(id="fact-address-inputs"):
            with Vertical():
                yield Label("Namespace (kind:id)", classes="field-label")
                yield Input(self.namespace, placeholder="workflow:code-review", id="fact-namespace")
            with Vertical():
                yield Label("Key", classes="field-label")
                yield Input(self.key, placeholder="key", id="fact-key")
        yield Static("", id="address-status", classes="field-status")

    def first_focus(self) -> str:
        return "#fact-key" if self.namespace else "#fact-namespace"

    def current_address(self) -> tuple[str, str]:
        return (
            self.query_one("#fact-namespace", Input).value.strip(),
            self.query_one("#fact-key", Input).value,
        )

    def check_address(self) -> None:
        namespace, key = self.current_address()
        problem = self._check(namespace, key)
        self._set_problem("address", problem)
        status = self.query_one("#address-status", Static)
        status.update(Text(problem or ""))
        status.set_class(problem is not None, "-invalid")

    @on(Input.Changed, "#fact-namespace, #fact-key")
    def _address_changed(self) -> None:
        self.check_address()
        self._show_state()
