"""The Memory view in the real dashboard: facts and notes edited and reviewed from the keyboard,
every change checked through the real ``tether memory`` / ``tether notes`` command line."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, Static, TextArea

from store.clock import ManualClock
from store.memory.memory_store import MemoryStore
from store.workspace.layout import Workspace
from tests.cli.memory_cli_support import tether
from tests.tui_actions.memory_seed import Seeded
from tests.tui_actions.pilot_support import (
    choose_in_palette,
    dialog_target,
    press_for,
    shown_keys,
    until,
)
from tui.app import TetherApp
from tui.modals import ConfirmDialog, FactEditor, LaunchRunDialog, NewFactForm, ReasonDialog
from tui.screens.memory_render import fact_row_key, namespace_row_key, note_row_key
from tui.screens.memory_view import MemoryScreen
from tui.screens.note_review import NoteReviewScreen

SIZE = (150, 42)
MakeApp = Callable[[], TetherApp]


async def open_memory(app: TetherApp, pilot: Pilot[None]) -> MemoryScreen:
    """Switch to view 3 and wait until it has read the workspace."""
    await pilot.press("3")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, MemoryScreen)
    await screen.refresh_data()
    await pilot.pause()
    return screen


@contextlib.asynccontextmanager
async def memory_view(
    make_app: MakeApp,
) -> AsyncIterator[tuple[TetherApp, Pilot[None], MemoryScreen]]:
    """The real app, opened on the Memory view with the workspace read."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        yield app, pilot, await open_memory(app, pilot)


async def on_fact(screen: MemoryScreen, pilot: Pilot[None], row_key: str) -> None:
    screen.facts_table.focus()
    assert screen.facts_table.select_key(row_key)
    await pilot.pause()


async def on_note(screen: MemoryScreen, pilot: Pilot[None], note_id: str) -> None:
    screen.notes_table.focus()
    assert screen.notes_table.select_key(note_row_key(note_id))
    await pilot.pause()






def static_text(widget: Static) -> str:
    """The plain text a Static shows (its content may be a Rich renderable group)."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def cli_json(workspace: Workspace, *args: str) -> Any:
    """The items of a CLI listing (every --format json listing is {"items": [...], "more": N})."""
    result = tether(*args, "--workspace", str(workspace.root), "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["items"]


def cell_text(screen: MemoryScreen, table: str, row_key: str, column: str) -> str:
    cell = screen.query_one(f"#{table}").get_cell(row_key, column)  # type: ignore[attr-defined]
    assert isinstance(cell, Text)
    return cell.plain


async def test_facts_grouped_by_namespace_and_pending_notes_first(
    make_app: MakeApp, seeded: Seeded
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        assert screen.facts_table.keys == [
            namespace_row_key("user:ada"), fact_row_key("user:ada", "editor"),
            namespace_row_key("workflow:code-review"),
            fact_row_key("workflow:code-review", "answer"),
            fact_row_key("workflow:code-review", "limits"),
        ]
        assert cell_text(screen, "facts-table", fact_row_key("workflow:code-review", "limits"),
                         "ttl") == "5m"
        notes = screen.notes_table.keys
        assert notes[:2] == [note_row_key(seeded.rule), note_row_key(seeded.lone)]
        assert set(notes[2:]) == {note_row_key(seeded.lesson_a), note_row_key(seeded.lesson_b)}
        # Data is shown literally: markup in a note body is just characters.
        # Literal; cut to the width the namespace column leaves at 150 columns.
        assert cell_text(screen, "notes-table", note_row_key(seeded.lone), "body").startswith(
            "[bold red]x[/] prefers s"
        )


async def test_edit_refuses_invalid_json_then_saves_value_and_ttl(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, fact_row_key("workflow:code-review", "limits"))
        await press_for(pilot, app, "e", FactEditor)
        editor = app.screen
        area = editor.query_one("#fact-value", TextArea)
        area.text = '{"max_files": 5,\n "strict": tru}'
        await pilot.pause()
        status = str(editor.query_one("#json-status", Static).render())
        assert "not valid JSON" in status and "line 2 column" in status
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is editor  # not saved, still editing
        area.text = '{"max_files": 5, "strict": true}'
        editor.query_one("#fact-ttl", Input).value = "10m"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, "the editor to close")
        await until(pilot, lambda: "5" in cell_text(
            screen, "facts-table", fact_row_key("workflow:code-review", "limits"), "value"),
            "the new value on screen")
    listed = cli_json(workspace, "memory", "list", "workflow:code-review")
    limits = next(f for f in listed if f["key"] == "limits")
    assert limits["value"] == {"max_files": 5, "strict": True}
    assert limits["ttl_ms"] == 600_000
    assert limits["run_id"] is None  # the person is the last writer now


async def test_cancelled_edit_changes_nothing(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace, clock: ManualClock
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, fact_row_key("workflow:code-review", "answer"))
        await press_for(pilot, app, "e", FactEditor)
        app.screen.query_one("#fact-value", TextArea).text = '"something else"'
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the editor to close")
    async with await MemoryStore.open(workspace, clock=clock) as memory:
        fact = await memory.get_fact("workflow:code-review", "answer")
    assert fact is not None and fact.value == "use pytest -x"


async def test_new_fact_validates_namespace_and_key(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, namespace_row_key("user:ada"))
        await press_for(pilot, app, "n", NewFactForm)
        form = app.screen
        assert form.query_one("#fact-namespace", Input).value == "user:ada"
        form.query_one("#fact-namespace", Input).value = "workflow:"
        await pilot.press(*"theme")
        form.query_one("#fact-value", TextArea).text = '"dark"'
        await pilot.pause()
        assert "empty id" in str(form.query_one("#address-status", Static).render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is form
        form.query_one("#fact-namespace", Input).value = "user:ada"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, "the form to close")
        assert screen.facts_table.cursor_key == fact_row_key("user:ada", "theme")
    got = tether("memory", "get", "user:ada", "theme", "--workspace", str(workspace.root))
    assert got.returncode == 0 and json.loads(got.stdout) == "dark"


async def test_delete_asks_naming_namespace_and_key(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, fact_row_key("workflow:code-review", "answer"))
        await press_for(pilot, app, "d", ConfirmDialog)
        target = dialog_target(app)
        assert "workflow:code-review" in target and "answer" in target
        await pilot.press("n")  # changed my mind
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        assert fact_row_key("workflow:code-review", "answer") in screen.facts_table.keys
        await press_for(pilot, app, "d", ConfirmDialog)
        await pilot.press("y")
        await until(
            pilot,
            lambda: fact_row_key("workflow:code-review", "answer") not in screen.facts_table.keys,
            "the fact to disappear",
        )
    got = tether("memory", "get", "workflow:code-review", "answer",
                 "--workspace", str(workspace.root))
    assert got.returncode == 1


async def test_keys_that_do_not_apply_are_hidden_and_inert(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace, clock: ManualClock
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, namespace_row_key("user:ada"))
        keys = shown_keys(app)
        assert "n" in keys and not {"e", "d", "a", "r"} & keys
        await pilot.press("e", "d")
        await pilot.pause()
        assert app.screen is screen
        await on_fact(screen, pilot, fact_row_key("user:ada", "editor"))
        assert {"e", "d"} <= shown_keys(app)
        await on_note(screen, pilot, seeded.lesson_a)  # accepted: nothing to decide
        keys = shown_keys(app)
        assert not {"a", "r", "e", "d"} & keys and "v" in keys
        await pilot.press("a", "r")
        await pilot.pause()
        assert app.screen is screen
        await on_note(screen, pilot, seeded.rule)
        assert {"a", "r"} <= shown_keys(app)
    async with await MemoryStore.open(workspace, clock=clock) as memory:
        lesson = await memory.get_note(seeded.lesson_a)
    assert lesson is not None and lesson.status == "accepted" and lesson.status_reason is None


async def test_accepting_a_proposal_retires_both_superseded_notes_at_once(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_note(screen, pilot, seeded.rule)
        await pilot.press("a")
        await until(pilot, lambda: cell_text(screen, "notes-table", note_row_key(seeded.lesson_a),
                                             "status").endswith("retired"), "retired lessons")
        assert cell_text(screen, "notes-table", note_row_key(seeded.lesson_b),
                         "status").endswith("retired")
        # The cursor goes on to the next pending note, so a a a walks the review queue.
        assert screen.notes_table.cursor_key == note_row_key(seeded.lone)
    live = {note["id"] for note in cli_json(workspace, "notes", "list")}
    assert live == {seeded.rule}  # the default read: both lessons retired by one decision


async def test_rejecting_a_proposal_records_the_reason_and_leaves_both_live(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_note(screen, pilot, seeded.rule)
        await press_for(pilot, app, "r", ReasonDialog)
        assert seeded.rule in dialog_target(app)
        await pilot.press(*"too broad", "enter")
        await until(pilot, lambda: cell_text(screen, "notes-table", note_row_key(seeded.rule),
                                             "status").endswith("rejected"), "the rejection")
    live = {note["id"] for note in cli_json(workspace, "notes", "list")}
    assert live == {seeded.lesson_a, seeded.lesson_b}
    rejected = cli_json(workspace, "notes", "list", "--status", "rejected")
    assert [(n["id"], n["status_reason"]) for n in rejected] == [(seeded.rule, "too broad")]


async def test_review_screen_side_by_side_and_through_the_queue(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_note(screen, pilot, seeded.rule)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NoteReviewScreen)
                    and app.screen.note is not None, "the review screen")
        review = app.screen
        assert isinstance(review, NoteReviewScreen)
        targets = static_text(review.query_one("#review-targets-body", Static))
        assert "Run ruff before pytest." in targets and "Lint first" in targets
        proposal = static_text(review.query_one("#review-proposal-body", Static))
        assert "consolidator" in proposal and "run-3c4d/consolidate" in proposal
        await pilot.press("a")  # accept: the next pending note is shown
        await until(pilot, lambda: review.note_id == seeded.lone, "the next pending note")
        await press_for(pilot, app, "r", ReasonDialog)
        await pilot.press("escape")  # cancel the rejection
        await until(pilot, lambda: app.screen is review, "back on the review screen")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "back on the memory view")
    notes = cli_json(workspace, "notes", "list", "--status", "any", "--include-superseded")
    assert {n["id"]: n["status"] for n in notes} == {
        seeded.rule: "accepted", seeded.lone: "pending",
        seeded.lesson_a: "accepted", seeded.lesson_b: "accepted",  # retired by the rule
    }


async def test_search_and_filter(make_app: MakeApp, seeded: Seeded) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await pilot.press("s", *"lint", "enter")
        await until(pilot, lambda: set(screen.notes_table.keys) == {
            note_row_key(seeded.rule), note_row_key(seeded.lesson_b)}, "search results")
        banner = str(screen.query_one("#memory-search-banner", Static).render())
        assert "(all words)" in banner and "recall: " in banner  # which search, which recall
        await pilot.press("s", "ctrl+u", "enter")  # empty search: everything again
        await until(pilot, lambda: len(screen.notes_table.keys) == 4, "all notes")
        await pilot.press("slash", *"helix", "enter")
        await until(pilot, lambda: screen.facts_table.keys == [
            namespace_row_key("user:ada"), fact_row_key("user:ada", "editor")], "the filter")
        assert app.filters["memory"] == "helix"


async def test_command_palette_opens_the_review_queue_and_the_launch_dialog(
    make_app: MakeApp, seeded: Seeded
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await choose_in_palette(pilot, app, "pending", "Review pending notes")
        await until(pilot, lambda: isinstance(app.screen, NoteReviewScreen)
                    and app.screen.note is not None, "the review screen")
        assert app.screen.note_id == seeded.rule  # type: ignore[attr-defined]
        await pilot.press("escape")
        await choose_in_palette(pilot, app, "launch", "Launch a run")
        await until(pilot, lambda: isinstance(app.screen, LaunchRunDialog), "the launch dialog")


async def test_bulk_review_marks_notes_and_decides_them_in_one_confirmed_step(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_note(screen, pilot, seeded.rule)
        assert {"space", "a", "r"} <= shown_keys(app)
        await pilot.press("space")
        assert screen._marked == {seeded.rule}
        await pilot.press("space")  # space again unmarks
        assert screen._marked == set()
        await pilot.press("asterisk")  # every pending note shown
        assert screen._marked == {seeded.rule, seeded.lone}
        assert "2 marked" in str(screen.notes_table.border_title)
        await pilot.press("asterisk")  # all marked: * unmarks
        assert screen._marked == set()
        await on_note(screen, pilot, seeded.rule)
        await pilot.press("shift+down")  # mark and extend over the next pending note
        assert screen._marked == {seeded.rule, seeded.lone}
        # The / filter narrows "all shown".
        app.filters["memory"] = "small diffs"
        await screen.refresh_data()
        await pilot.press("asterisk")  # the one shown was marked: * unmarks just it
        assert screen._marked == {seeded.rule}
        await pilot.press("asterisk")
        assert screen._marked == {seeded.rule, seeded.lone}
        app.filters["memory"] = ""
        await screen.refresh_data()
        await press_for(pilot, app, "r", ReasonDialog)
        target = dialog_target(app)
        assert seeded.rule in target and seeded.lone in target
        assert "Reject 2 notes?" in str(app.screen.query_one("#dialog-title").render())
        await pilot.press(*"duplicates", "enter")
        await until(pilot, lambda: not screen._marked, "both decisions")
    rejected = cli_json(workspace, "notes", "list", "--status", "rejected")
    assert sorted((n["id"], n["status_reason"]) for n in rejected) == sorted(
        [(seeded.rule, "duplicates"), (seeded.lone, "duplicates")])
    live = {note["id"] for note in cli_json(workspace, "notes", "list")}
    assert live == {seeded.lesson_a, seeded.lesson_b}  # rejecting retires nothing


async def test_bulk_accept_of_the_notes_matching_the_filter(
    make_app: MakeApp, seeded: Seeded, workspace: Workspace
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        app.filters["memory"] = "lint"
        await screen.refresh_data()
        await on_note(screen, pilot, seeded.rule)
        await pilot.press("asterisk")
        assert screen._marked == {seeded.rule}  # "lone" does not match the filter
        assert "matching the filter" in str(screen.notes_table.border_title)
        await press_for(pilot, app, "a", ReasonDialog)
        await pilot.press("enter")
        await until(pilot, lambda: not screen._marked, "the decision")
    accepted = {n["id"] for n in cli_json(workspace, "notes", "list")}
    assert accepted == {seeded.rule}  # live, and both lessons it supersedes retired


async def test_help_lists_accept_and_reject_with_when_they_apply(
    make_app: MakeApp, seeded: Seeded
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await on_fact(screen, pilot, fact_row_key("user:ada", "editor"))
        assert "a" not in shown_keys(app)  # not on a fact...
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen.query("#help-keys"), "the help")
        text = str(app.screen.query_one("#help-keys").render())
        # ...but ? still lists it, saying when it applies.
        assert "Accept — on a pending note, or on every marked note at once" in text
        assert "Reject — on a pending note" in text
        assert "Mark — on a pending note" in text


async def test_escape_leaves_search_results_and_a_filter_that_hides_everything_says_so(
    make_app: MakeApp, seeded: Seeded
) -> None:
    async with memory_view(make_app) as (app, pilot, screen):
        await pilot.press("s", *"lint", "enter")
        await until(pilot, lambda: len(screen.notes_table.keys) == 2, "search results")
        await pilot.press("escape")  # back to the whole list, still in the Memory view
        await until(pilot, lambda: len(screen.notes_table.keys) == 4, "the whole list")
        assert app.screen is screen
        await pilot.press("slash", *"no-such-word-anywhere", "enter")
        screen.facts_table.focus()
        detail = screen.query_one("#memory-detail-body", Static)
        await until(pilot, lambda: "No fact matches the filter" in static_text(detail),
                    "the sentence saying the filter hides every fact")
        assert "No facts here yet" not in static_text(detail)
