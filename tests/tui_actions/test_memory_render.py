"""The Memory view's pure helpers: ordering, grouping, ages and the "why is this remembered"
wording, called directly."""

from __future__ import annotations

import io

from rich.console import Console

from store.memory.facts import Fact
from store.memory.note_values import Note
from tui.screens.memory_render import (
    NoteBook,
    NoteLinks,
    coarse_age,
    fact_row_key,
    fact_rows,
    namespace_row_key,
    note_order,
    note_row_key,
    note_rows,
    verdict_text,
    why_remembered,
)


def note(note_id: str, status: str = "accepted", created: int = 0, body: str = "b") -> Note:
    return Note(note_id, "workflow:w", body, None, (), "agent", status, None, None, created,
                None, None, None)


def fact(namespace: str, key: str, ttl_ms: int | None = None) -> Fact:
    return Fact(namespace, key, "1", 0, 0, ttl_ms, None, None, None)


def plain(parts: list[object]) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    for part in parts:
        console.print(part)
    return console.export_text()


def test_pending_first_oldest_first_then_live_then_retired_and_rejected_newest_first() -> None:
    notes = [note("old-live", created=1), note("new-live", created=5),
             note("p-new", "pending", 9), note("p-old", "pending", 2),
             note("gone", "rejected", 8), note("retired", created=7)]
    ordered = [n.id for n in note_order(notes, retired={"retired"})]
    assert ordered == ["p-old", "p-new", "new-live", "old-live", "retired", "gone"]


def test_fact_rows_group_under_one_heading_per_namespace_and_filter() -> None:
    facts = [fact("user:a", "x"), fact("workflow:w", "k1"), fact("workflow:w", "k2")]
    rows = fact_rows(facts, "", 0)
    assert [key for key, _ in rows] == [
        namespace_row_key("user:a"), fact_row_key("user:a", "x"),
        namespace_row_key("workflow:w"), fact_row_key("workflow:w", "k1"),
        fact_row_key("workflow:w", "k2"),
    ]
    assert [key for key, _ in fact_rows(facts, "K2", 0)] == [
        namespace_row_key("workflow:w"), fact_row_key("workflow:w", "k2")]


def test_ages_and_ttls_are_coarse_in_lists() -> None:
    assert coarse_age(100_000, 90_000) == "<1m ago"
    assert coarse_age(3_700_000, 0) == "1h ago"
    assert coarse_age(2 * 86_400_000, 0) == "2d ago"
    rows = dict(fact_rows([fact("user:a", "t", ttl_ms=300_000)], "", 50_000))
    assert rows[fact_row_key("user:a", "t")][2].plain == "4m"
    rows = dict(fact_rows([fact("user:a", "t", ttl_ms=300_000)], "", 280_000))
    assert rows[fact_row_key("user:a", "t")][2].plain == "20.0s"


def test_notes_rows_show_bodies_literally_with_supersession_counts() -> None:
    proposal = note("p", "pending", body="[bold]x[/] and \x1b[31mred")
    book = NoteBook([proposal], set(), {"p": NoteLinks((note("a"), note("b")),)})
    cells = dict(note_rows(book, "", 0))[note_row_key("p")]
    assert cells[1].plain == proposal.namespace  # the namespace column
    assert cells[2].plain == "[bold]x[/] and ␛[31mred"
    assert cells[3].plain == "⇢2"
    marked = dict(note_rows(book, "", 0, marked={"p"}))[note_row_key("p")]
    assert marked[0].plain.startswith("● ")


def test_why_remembered_names_targets_history_and_superseders() -> None:
    proposal = note("rule", "pending")
    links = NoteLinks(
        supersedes=(note("lesson-a", body="Run ruff first."),),
        superseded_by=(note("newer", "pending"),),
        history=((2, note("lesson-0", body="Lint sometimes.")),),
    )
    text = plain(why_remembered(proposal, links, retired=set()))
    assert "Proposed, not yet reviewed" in text
    assert "Would retire when accepted:" in text and "lesson-a" in text
    assert "Earlier versions" in text and "lesson-0" in text and "Lint sometimes." in text
    assert "Superseded by:" in text and "newer" in text
    verdict = verdict_text(proposal, links).plain
    assert "retires the note on the right" in verdict and "leaves the note live" in verdict
