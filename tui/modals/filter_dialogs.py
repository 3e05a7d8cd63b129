"""The Runs view's saved filters: save the query in effect under a name (``S``), and pick one
(``F``: ``enter`` applies it, ``d`` forgets it). The same filters ``tether runs --filter`` and
``tether filters`` use, kept in the workspace."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from store.errors import InvalidInputError
from store.runs.saved_filters import SavedFilter, validate_filter_name
from tui.format import one_line
from tui.modals.confirm import Dialog, DialogBox, target_header


class SaveFilterDialog(Dialog[str | None]):
    """Ask for the name to save ``query`` under (checked as it is typed); dismisses with the
    name, or None on cancel."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, query: str, taken: Sequence[str] = ()) -> None:
        super().__init__(classes="dialog")
        self._query = query
        self._taken = set(taken)

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box"):
            yield from target_header("Save this filter?", one_line(self._query),
                                     Text("tether runs --filter NAME uses it too."))
            yield Input(placeholder="name (letters, digits, _ . -)", max_length=64,
                        id="filter-name")
            yield Static(id="filter-name-problem")
            with Horizontal(id="dialog-buttons"):
                yield Button("Save (enter)", variant="primary", id="filter-save")
                yield Button("Cancel (esc)", id="filter-cancel")

    def on_mount(self) -> None:
        self._fit()
        self.query_one("#filter-name", Input).focus()

    def problem(self, name: str) -> str | None:
        """Why ``name`` cannot be saved, or None (a name in use is replaced, and said so)."""
        try:
            validate_filter_name(name)
        except InvalidInputError as error:
            return str(error)
        return None

    def on_input_changed(self, event: Input.Changed) -> None:
        name = event.value.strip()
        problem = self.problem(name) if name else None
        note = Text(problem or "", style="red")
        if problem is None and name in self._taken:
            note = Text(f"{name} is saved already; saving replaces it.", style="yellow")
        self.query_one("#filter-name-problem", Static).update(note)

    @on(Input.Submitted, "#filter-name")
    @on(Button.Pressed, "#filter-save")
    def action_save(self) -> None:
        """Save under the name typed (refused, with the reason shown, when it is not one)."""
        name = self.query_one("#filter-name", Input).value.strip()
        problem = self.problem(name)
        if problem is not None:
            self.query_one("#filter-name-problem", Static).update(Text(problem, style="red"))
            return
        self.dismiss(name)

    @on(Button.Pressed, "#filter-cancel")
    def action_cancel(self) -> None:
        """Close without saving."""
        self.dismiss(None)


class SavedFiltersDialog(Dialog[tuple[str, str] | None]):
    """The saved filters by name with their queries: ``enter`` applies one, ``d`` forgets it
    (dismissing with ``("apply", query)`` or ``("forget", name)``)."""

    BINDINGS = [
        Binding("escape", "cancel", "Close"),
        Binding("d", "forget", "Forget"),
    ]

    def __init__(self, filters: Sequence[SavedFilter]) -> None:
        super().__init__(classes="dialog")
        self._filters = list(filters)

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog-box"):
            yield from target_header(
                "Saved filters", Text(f"{len(self._filters)} saved in this workspace"),
                Text("enter applies one · d forgets it · esc closes"))
            if self._filters:
                yield OptionList(*(self._option(f) for f in self._filters), id="filter-list")
            else:
                yield Static(Text("None yet: press / to filter the runs, then S to save the "
                                  "filter under a name.", style="dim"), id="filter-list-empty")
            with Horizontal(id="dialog-buttons"):
                yield Button("Close (esc)", id="filters-close")

    @staticmethod
    def _option(saved: SavedFilter) -> Option:
        prompt = one_line(saved.name, "bold")
        prompt.append("  ")
        prompt.append_text(one_line(saved.query, "dim", width=80))
        return Option(prompt, id=saved.name)

    def on_mount(self) -> None:
        self._fit()
        for option_list in self.query(OptionList):
            option_list.focus()

    def _chosen(self) -> SavedFilter | None:
        lists = list(self.query(OptionList))
        if not lists or lists[0].highlighted is None:
            return None
        return self._filters[lists[0].highlighted]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        chosen = self._filters[event.option_index]
        self.dismiss(("apply", chosen.query))

    def action_forget(self) -> None:
        """Forget the highlighted filter."""
        chosen = self._chosen()
        if chosen is not None:
            self.dismiss(("forget", chosen.name))

    @on(Button.Pressed, "#filters-close")
    def action_cancel(self) -> None:
        """Close."""
        self.dismiss(None)
