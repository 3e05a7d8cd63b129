"""The Memory view's note keys: ``a`` accepts and ``r`` rejects the selected pending note
(with an optional recorded reason), ``space``/``shift+arrows``/``*`` mark pending notes for one
bulk decision, ``v`` or ``enter`` opens the review screen, ``s`` searches note bodies. Every
decision goes through ``MemoryStore`` like ``tether notes accept/reject``, one per note."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.binding import Binding
from textual.widgets import DataTable, Input

from store.errors import TetherError
from tui.actions.feedback import write_safely
from tui.actions.note_decisions import accept_note, reject_note
from tui.actions.read_only import write_refused
from tui.format import plural
from tui.modals import bulk_decision_dialog
from tui.screens.memory_lists import MemoryListsScreen, NoteSearchBar
from tui.screens.memory_render import note_row_key, parse_row_key
from tui.screens.note_review import NoteReviewScreen


class NoteActionsScreen(MemoryListsScreen):
    """The Memory view's lists with the keys that decide, mark, review and search notes."""

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("a", "accept_note", "Accept"),
        Binding("r", "reject_note", "Reject"),
        Binding("space", "mark_note", "Mark"),
        Binding("shift+down", "mark_step(1)", "Mark and move down", show=False),
        Binding("shift+up", "mark_step(-1)", "Mark and move up", show=False),
        Binding("asterisk", "mark_all", "Mark all shown", show=False),
        Binding("v", "review_note", "Review"),
        Binding("s", "search_notes", "Search notes"),
    ]
    KEY_NOTES: ClassVar[dict[str, str]] = {
        "accept_note": "on a pending note, or on every marked note at once",
        "reject_note": "on a pending note, or on every marked note at once (one reason)",
        "mark_note": "on a pending note: mark or unmark it for one bulk decision",
        "mark_step": "on pending notes: mark and move (shift+up / shift+down)",
        "mark_all": "notes list: mark every pending note shown (the / filter applies); "
                    "again to unmark",
        "review_note": "on a note (notes list)",
    }
    """When each note key applies (the ? help lists every key with this note)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide note keys that do not apply to the selected row (they also do nothing)."""
        if write_refused(self.app, action):
            return False
        if action in ("accept_note", "reject_note"):
            if self._active == "notes" and self._marked:
                return True
            note = self.selected_note() if self._active == "notes" else None
            return note is not None and note.status == "pending"
        if action in ("mark_note", "mark_step"):
            note = self.selected_note() if self._active == "notes" else None
            return note is not None and note.status == "pending"
        if action == "mark_all":
            return self._active == "notes" and bool(self._shown_pending())
        if action == "review_note":
            return self._active == "notes" and self.selected_note() is not None
        return super().check_action(action, parameters)

    @on(DataTable.RowSelected, "#notes-table")
    def _note_chosen(self) -> None:
        self.action_review_note()

    # -- bulk review ----------------------------------------------------------------------

    def _shown_pending(self) -> list[str]:
        """Ids of the pending notes the list shows (after the / filter), in list order."""
        pending = {note.id for note in self._book.notes if note.status == "pending"}
        ids = [parse_row_key(key)[1] for key in self.notes_table.keys]
        return [i for i in ids if i in pending]

    def _redraw_marks(self) -> None:
        self._redraw(self._fact_list, self._book, self.tether.now_ms())
        self.refresh_bindings()

    def action_mark_note(self) -> None:
        """Mark (or unmark) the selected pending note for a bulk accept or reject."""
        note = self.selected_note()
        if note is None or note.status != "pending":
            return
        self._marked ^= {note.id}
        self._redraw_marks()

    def action_mark_step(self, step: int) -> None:
        """Mark the selected pending note and move the cursor (shift+arrows extend a range)."""
        note = self.selected_note()
        if note is None or note.status != "pending":
            return
        self._marked.add(note.id)
        table = self.notes_table
        table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + step)))
        following = self.selected_note()
        if following is not None and following.status == "pending":
            self._marked.add(following.id)
        self._redraw_marks()

    def action_mark_all(self) -> None:
        """Mark every pending note shown (all matching the filter); when all of them are
        marked already, unmark them (marks on notes the filter hides stay)."""
        shown = set(self._shown_pending())
        self._marked = self._marked - shown if shown <= self._marked else self._marked | shown
        self._redraw_marks()

    async def _decide_marked(self, status: str) -> None:
        """Accept or reject every marked note after one confirmation with one reason; each
        decision goes through ``MemoryStore`` like ``tether notes accept/reject``."""
        notes = [n for i in sorted(self._marked) if (n := self._book.by_id(i)) is not None]
        if not notes:
            return
        verb = "Accept" if status == "accepted" else "Reject"
        answer = await self.app.push_screen_wait(bulk_decision_dialog(verb, notes))
        if answer is None:
            return
        memory = await self.memory()
        decide = memory.accept_note if status == "accepted" else memory.reject_note
        done = 0
        for note in notes:
            decided = await write_safely(
                self, lambda note=note: decide(note.id, reason=answer.reason)  # type: ignore[misc]
            )
            if decided is None:
                break  # write_safely said why; the rest stay marked
            done += 1
            self._marked.discard(note.id)
        past = "Accepted" if status == "accepted" else "Rejected"
        self.app.notify(f"{past} {plural(done, 'note')} of {len(notes)}.", markup=False)
        await self.refresh_data()

    # -- one note -------------------------------------------------------------------------

    @work(group="memory-action", exclusive=True)
    async def action_accept_note(self) -> None:
        """Accept the selected pending note (retiring what it supersedes), or every marked
        note after one confirmation."""
        if self._marked and self._active == "notes":
            await self._decide_marked("accepted")
            return
        note = self.selected_note()
        if note is None or not self.check_action("accept_note", ()):
            return
        following = self._pending_after(note.id)
        if await accept_note(self, await self.memory(), note):
            await self._then_select(following)

    @work(group="memory-action", exclusive=True)
    async def action_reject_note(self) -> None:
        """Reject the selected pending note (or every marked note), with an optional reason."""
        if self._marked and self._active == "notes":
            await self._decide_marked("rejected")
            return
        note = self.selected_note()
        if note is None or not self.check_action("reject_note", ()):
            return
        following = self._pending_after(note.id)
        if await reject_note(self, await self.memory(), note):
            await self._then_select(following)

    def _pending_after(self, note_id: str) -> list[str]:
        """The pending notes shown after ``note_id`` (then those before it): where the cursor
        goes once it is decided, so ``a a a`` walks the queue."""
        pending = self._shown_pending()
        if note_id not in pending:
            return pending
        at = pending.index(note_id)
        return pending[at + 1 :] + pending[:at][::-1]

    async def _then_select(self, candidates: list[str]) -> None:
        await self.refresh_data()
        still = set(self._shown_pending())
        for note_id in candidates:
            if note_id in still and self.notes_table.select_key(note_row_key(note_id)):
                await self._show_detail()
                break
        self.refresh_bindings()

    def action_review_note(self) -> None:
        """Open the review screen on the selected note."""
        note = self.selected_note()
        if note is None:
            return
        pending = [n.id for n in self._book.notes if n.status == "pending"]
        self.app.push_screen(NoteReviewScreen(self, note.id, pending))

    def review_first_pending(self) -> None:
        """Open the review screen on the oldest pending proposal (nothing when none waits)."""
        pending = [n.id for n in self._book.notes if n.status == "pending"]
        if not pending:
            self.app.notify("No note proposals are waiting for review.")
            return
        self._active = "notes"
        self.notes_table.select_key(note_row_key(pending[0]))
        self.app.push_screen(NoteReviewScreen(self, pending[0], pending))

    def action_search_notes(self) -> None:
        """Full-text search over notes of every status."""
        self.query_one(NoteSearchBar).open(self._search)

    @on(Input.Submitted, "#note-search")
    async def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(NoteSearchBar).remove_class("-open")
        self._search = event.value.strip()
        try:
            await self.refresh_data()
        except TetherError as error:
            self.app.notify(str(error), severity="error", markup=False)
            self._search = ""
            await self.refresh_data()
        self.notes_table.focus()
