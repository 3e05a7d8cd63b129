"""The modal dialogs on their own: live JSON validation, TTL parsing, confirm/cancel results."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Select, Static, TextArea

from store.memory.ttl import format_ttl, parse_ttl
from tui.modals import (
    ConfirmDialog,
    FactEdit,
    FactEditor,
    LaunchRequest,
    LaunchRunDialog,
    NewFactForm,
    ReasonResult,
    WorkflowChoice,
    reject_note_dialog,
)
from tui.modals.validation import json_problem


class Host(App[None]):
    """An empty app that shows one dialog and keeps what it dismissed with."""

    def __init__(self, dialog: ModalScreen[Any]) -> None:
        super().__init__()
        self.dialog = dialog
        self.results: list[Any] = []

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self.results.append)


def test_json_problem_names_line_and_column() -> None:
    assert json_problem('{"a": 1}') is None
    problem = json_problem('{\n  "a": ,\n}')
    assert problem is not None
    assert (problem.line, problem.column) == (2, 8)
    assert problem.describe().startswith("line 2, column 8: ")


@pytest.mark.parametrize(
    ("text", "ms"),
    [("", None), ("  ", None), ("1500", 1500), ("30s", 30_000), ("5m", 300_000),
     ("2h", 7_200_000), ("7d", 604_800_000), ("250ms", 250)],
)
def test_parse_ttl(text: str, ms: int | None) -> None:
    assert parse_ttl(text) == ms
    assert parse_ttl(format_ttl(ms)) == ms


@pytest.mark.parametrize("text", ["-5", "5 weeks", "abc", "1.5h", "0", "0s"])
def test_parse_ttl_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ttl(text)


async def test_fact_editor_blocks_invalid_json_and_saves_valid() -> None:
    app = Host(FactEditor("workflow:review", "answer", '{"a": 1}', ttl_ms=60_000))
    async with app.run_test() as pilot:
        editor = app.screen
        assert isinstance(editor, FactEditor)
        area = editor.query_one("#fact-value", TextArea)
        assert area.text == '{\n  "a": 1\n}'
        assert editor.query_one("#fact-ttl", Input).value == "1m"
        area.text = '{"a": 1,,}'
        await pilot.pause()
        status = str(editor.query_one("#json-status", Static).render())
        assert "not valid JSON" in status and "line 1 column 9" in status
        assert editor.query_one("#fact-save", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is editor and app.results == []
        area.text = '["fixed"]'
        await pilot.pause()
        assert not editor.query_one("#fact-save", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.results == [FactEdit("workflow:review", "answer", ["fixed"], 60_000)]


async def test_fact_editor_refuses_bad_ttl_and_escape_cancels() -> None:
    app = Host(FactEditor("global:x", "k", "1"))
    async with app.run_test() as pilot:
        editor = app.screen
        editor.query_one("#fact-ttl", Input).value = "soon"
        await pilot.pause()
        assert editor.query_one("#fact-save", Button).disabled
        assert "TTL must be" in str(editor.query_one("#ttl-status", Static).render())
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


async def test_new_fact_form_validates_address() -> None:
    def check(namespace: str, key: str) -> str | None:
        if not namespace.startswith("workflow:"):
            return "bad namespace"
        return None if key else "The key is empty."

    app = Host(NewFactForm("workflow:w", check=check))
    async with app.run_test() as pilot:
        form = app.screen
        assert form.query_one("#fact-save", Button).disabled
        await pilot.press(*"limit")
        form.query_one("#fact-value", TextArea).text = "42"
        await pilot.pause()
        assert not form.query_one("#fact-save", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.results == [FactEdit("workflow:w", "limit", 42, None)]


@pytest.mark.parametrize(("keys", "expected"), [(("y",), True), (("n",), False),
                                                 (("escape",), False), (("enter",), False)])
async def test_confirm_dialog(keys: tuple[str, ...], expected: bool) -> None:
    app = Host(ConfirmDialog("Delete fact?", "global:x / k"))
    async with app.run_test() as pilot:
        assert "global:x / k" in str(app.screen.query_one("#confirm-target", Static).render())
        await pilot.press(*keys)
        await pilot.pause()
    assert app.results == [expected]


async def test_reason_dialog_records_reason_or_none() -> None:
    app = Host(reject_note_dialog("n1", "workflow:w", "[bold]body[/]"))
    async with app.run_test() as pilot:
        assert "[bold]body[/]" in str(app.screen.query_one("#confirm-detail", Static).render())
        await pilot.press(*"outdated", "enter")
        await pilot.pause()
    assert app.results == [ReasonResult("outdated")]


async def test_launch_dialog_validates_against_the_input_type() -> None:
    def needs_topic(value: object) -> str | None:
        ok = isinstance(value, dict) and isinstance(value.get("topic"), str)
        return None if ok else "input.topic must be a string"

    choices = [
        WorkflowChoice("a", "alpha", "examples/alpha.py", example_input='{"topic": "x"}',
                       validate=needs_topic),
        WorkflowChoice("b", "beta", "examples/beta.py", example_input="{}"),
    ]
    app = Host(LaunchRunDialog(choices))
    async with app.run_test() as pilot:
        dialog = app.screen
        area = dialog.query_one("#launch-input", TextArea)
        area.text = '{"topic": 3}'
        await pilot.pause()
        assert dialog.query_one("#launch-ok", Button).disabled
        assert "input.topic" in str(dialog.query_one("#json-status", Static).render())
        area.text = '{"topic": "memory"'
        await pilot.pause()
        assert "not JSON: line 1" in str(dialog.query_one("#json-status", Static).render())
        area.text = '{"topic": "memory"}'
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.results == [LaunchRequest(choices[0], {"topic": "memory"})]


async def test_the_blank_workflow_choice_launches_nothing() -> None:
    # The dashboard reads the workflows after the dialog opens, so its Select offers a blank
    # "Select" line; picking it showed "Select" while ctrl+s launched the workflow chosen
    # before (seen in tmux: incident-runbook started from a dialog that named no workflow).
    choices = [WorkflowChoice("a", "alpha", "examples/alpha.py", example_input="{}"),
               WorkflowChoice("b", "beta", "examples/beta.py", example_input="{}")]

    async def load() -> list[WorkflowChoice]:
        return choices

    app = Host(LaunchRunDialog(load=load))
    async with app.run_test() as pilot:
        dialog = app.screen
        select = dialog.query_one("#launch-workflow", Select)
        for _ in range(100):
            if select.value == "a":
                break
            await pilot.pause(0.01)
        select.focus()
        await pilot.press("enter", "home", "enter")
        await pilot.pause()
        assert select.value == Select.NULL
        assert "choose a workflow" in str(dialog.query_one("#json-status", Static).render())
        assert dialog.query_one("#launch-ok", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.results == []
        select.value = "b"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.results == [LaunchRequest(choices[1], {})]


@pytest.mark.parametrize(("text", "expected"), [
    ("NaN", "NaN is not allowed"),
    ('{"a": Infinity}', "Infinity is not allowed"),
    ("", "not valid JSON"),
])
async def test_fact_editor_uses_the_stores_rules(text: str, expected: str) -> None:
    app = Host(FactEditor("global:x", "k", "1"))
    async with app.run_test() as pilot:
        editor = app.screen
        editor.query_one("#fact-value", TextArea).text = text
        await pilot.pause()
        assert expected in str(editor.query_one("#json-status", Static).render())
        assert editor.query_one("#fact-save", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.results == []
