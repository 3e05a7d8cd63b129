"""Accepting and rejecting one note from the dashboard (the Memory view and the review
screen): the same ``MemoryStore`` methods as ``tether notes accept/reject``, then a toast."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from store.memory import MemoryStore
from store.notes import Note
from tui.actions.feedback import write_safely
from tui.format import plural
from tui.modals import reject_note_dialog


async def accept_note(screen: Screen[Any], memory: MemoryStore, note: Note) -> Note | None:
    """Accept a proposal (retiring what it supersedes in the same write) and say so."""
    targets = await memory.supersedes(note.id)
    accepted = await write_safely(screen, lambda: memory.accept_note(note.id))
    if accepted is not None:
        retired = f"; {plural(len(targets), 'superseded note')} retired" if targets else ""
        screen.app.notify(f"Accepted note {note.id}{retired}.", markup=False)
    return accepted


async def reject_note(screen: Screen[Any], memory: MemoryStore, note: Note) -> Note | None:
    """Ask for an optional reason, then reject the note; None when the person cancelled."""
    answer = await screen.app.push_screen_wait(
        reject_note_dialog(note.id, note.namespace, note.body)
    )
    if answer is None:
        return None
    rejected = await write_safely(
        screen, lambda: memory.reject_note(note.id, reason=answer.reason)
    )
    if rejected is not None:
        screen.app.notify(f"Rejected note {note.id}.", markup=False)
    return rejected
