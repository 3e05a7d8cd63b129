"""The Memory view (``3``): facts by namespace and notes, with editing and review.

Facts are grouped under one heading row per namespace; ``e`` edits the selected fact's value
(JSON, validated live) and TTL, ``n`` adds a fact, ``d`` deletes one after a confirmation that
names its namespace and key. Notes list pending proposals first; ``a`` accepts and ``r`` rejects
(with an optional recorded reason); ``enter`` opens the review screen, which shows a proposal
side by side with the notes it would supersede. The inspector on the right says why something is
remembered: who wrote it (run, node, time, author), what it replaces and what replaced it.

Every read and write goes through :class:`store.memory.memory_store.MemoryStore` on the dashboard's
writable
connection (:mod:`tui.run_control`): the same methods as ``tether memory`` / ``tether notes``.
Keys that do not apply to the selected row are hidden from the footer and do nothing.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from store.errors import NotFoundError, TetherError
from store.memory.facts import Fact
from store.memory.memory_store import MemoryStore
from store.memory.notes import Note
from tui.actions.feedback import write_safely
from tui.actions.read_only import write_refused
from tui.cli.background import embed_in_background
from tui.format import literal, plural, visible
from tui.modals import (
    ConfirmDialog,
    FactEditor,
    NewFactForm,
    bulk_decision_dialog,
    reject_note_dialog,
)
from tui.modals.fact_editor import FactEdit
from tui.run_control import host_for
from tui.screens.base import LiveScreen, QuitFirstFooter
from tui.screens.memory_render import (
    NOTE_NAMESPACE_CELLS,
    NoteBook,
    NoteLinks,
    fact_detail,
    fact_row_key,
    fact_rows,
    namespace_detail,
    note_detail,
    note_row_key,
    note_rows,
    parse_row_key,
    provenance_table,
    shown_status,
    status_cell,
    verdict_text,
    why_remembered,
)
from tui.tailing import Batch
from tui.widgets.keyed_table import KeyedTable


def recall_line() -> str:
    """Which recall tasks get (hybrid or keyword), without loading the model."""
    from engine.memory.encoder import describe

    return str(describe()["line"])


FACTS_LIMIT = 1_000
"""Facts read per refresh (the view is a window; ``tether memory list`` shows everything)."""
PENDING_LIMIT = 300
DECIDED_LIMIT = 300
SEARCH_LIMIT = 100
REREAD_MIN_INTERVAL_S = 1.0
"""While another process keeps committing, re-read at most this often (a view, not a log)."""

EMPTY_FACTS = Text.assemble(
    ("No facts here yet.\n\n", "bold"),
    "Facts are namespaced JSON values (kind:id, e.g. workflow:code-review) that recall can "
    "inject into prompts; the last write wins and a TTL can expire them. Press ",
    ("n", "bold"), " to add one, or run ", ("tether memory set NAMESPACE KEY VALUE", "bold"), ".",
)
EMPTY_NOTES = Text.assemble(
    ("No notes here yet.\n\n", "bold"),
    "Notes are knowledge agents propose (the remember tool, retained outputs) and people "
    "accept or reject here (", ("a", "bold"), " / ", ("r", "bold"), ", or ",
    ("space", "bold"), " to mark several). Run a workflow with memory, or ",
    ("tether notes add NAMESPACE BODY", "bold"), ".",
)

FACT_COLUMNS = (("key", "Key"), ("value", "Value"), ("ttl", "TTL"),
                ("updated", "Updated"), ("writer", "Written by"))
NOTE_COLUMNS = (("status", "Status"), ("namespace", "Namespace"), ("body", "Note"),
                ("edges", "⇢"), ("author", "Author"), ("age", "Age"))
# Cells of the columns other than the text one, plus two cells of padding per column: what is
# left of the table's width goes to the fact value / note body (no horizontal scrolling).
FACT_OTHER_CELLS = 30 + 6 + 8 + 20 + 2 * len(FACT_COLUMNS)
NOTE_OTHER_CELLS = 11 + 3 + 14 + 8 + 2 * len(NOTE_COLUMNS)
"""The notes list's columns but the body and the namespace."""
MIN_NOTE_BODY_CELLS = 30
MIN_TEXT_CELLS = 16


def text_width(table_width: int, other_cells: int) -> int:
    """Cells left for the free-text column of a list ``table_width`` cells wide."""
    return max(MIN_TEXT_CELLS, table_width - other_cells - 2)


class NoteSearchBar(Input):
    """The ``s`` search over note bodies (full-text, all statuses); ``escape`` closes it."""

    DEFAULT_CSS = """
    NoteSearchBar { dock: bottom; display: none; height: 3; }
    NoteSearchBar.-open { display: block; }
    """
    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("escape", "close", "Close search", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(
            placeholder="search notes (enter to search, empty to show all, esc to close)",
            id="note-search",
        )

    def open(self, value: str) -> None:
        """Show the bar with the current query and focus it."""
        self.value = value
        self.add_class("-open")
        self.focus()

    def action_close(self) -> None:
        """Hide the bar without changing the search in effect."""
        self.remove_class("-open")
        self.screen.focus_next()


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


HISTORY_DEPTH = 4
HISTORY_NOTES = 20
"""How far down the supersession chain the inspector follows (short reads, bounded)."""


async def load_links(memory: MemoryStore, note: Note) -> NoteLinks:
    """What the note supersedes, what supersedes it, and the older versions those replaced
    (the chain behind "why is this remembered"), bounded in depth and count."""
    supersedes = tuple(await memory.supersedes(note.id))
    history: list[tuple[int, Note]] = []
    seen = {note.id, *(target.id for target in supersedes)}
    frontier = list(supersedes)
    for depth in range(2, HISTORY_DEPTH + 1):
        following: list[Note] = []
        for current in frontier:
            for older in await memory.supersedes(current.id):
                if older.id not in seen and len(history) < HISTORY_NOTES:
                    seen.add(older.id)
                    history.append((depth, older))
                    following.append(older)
        frontier = following
    return NoteLinks(
        supersedes=supersedes,
        superseded_by=tuple(await memory.superseded_by(note.id)),
        history=tuple(history),
    )


class MemoryScreen(LiveScreen):
    """The Memory view: facts and notes lists on the left, an inspector on the right."""

    MODE: ClassVar[str] = "memory"
    FILTER_KEY: ClassVar[str] = "memory"
    HELP_TITLE: ClassVar[str] = "Memory"
    HELP_TEXT: ClassVar[str] = (
        "Facts (top) are grouped by namespace; notes (bottom) list pending proposals first. "
        "tab moves between the lists. Edits go through the same memory store as "
        "`tether memory` and `tether notes`."
    )
    DEFAULT_CSS = """
    MemoryScreen #memory-body { height: 1fr; }
    MemoryScreen #memory-lists { width: 3fr; }
    MemoryScreen #memory-lists KeyedTable { height: 1fr; border: round $panel-lighten-2; }
    MemoryScreen #memory-lists KeyedTable:focus-within { border: round $accent; }
    MemoryScreen #memory-detail {
        width: 2fr; border: round $panel-lighten-2; padding: 0 1;
    }
    MemoryScreen #memory-search-banner { display: none; height: 1; padding: 0 1;
        background: $boost; }
    MemoryScreen #memory-search-banner.-visible { display: block; }
    """

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("e", "edit_fact", "Edit value"),
        Binding("n", "new_fact", "New fact"),
        Binding("d", "delete_fact", "Delete fact"),
        Binding("a", "accept_note", "Accept"),
        Binding("r", "reject_note", "Reject"),
        Binding("space", "mark_note", "Mark"),
        Binding("shift+down", "mark_step(1)", "Mark and move down", show=False),
        Binding("shift+up", "mark_step(-1)", "Mark and move up", show=False),
        Binding("asterisk", "mark_all", "Mark all shown", show=False),
        Binding("v", "review_note", "Review"),
        Binding("s", "search_notes", "Search notes"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._facts: dict[str, Fact] = {}
        self._namespace_facts: dict[str, list[Fact]] = {}
        self._book = NoteBook()
        self._search = ""
        self._search_mode = ""  # which note search answered: all words or any word
        self._active = "facts"
        self._memory: MemoryStore | None = None
        self._problem: str | None = None
        self._detail_generation = 0
        self._read_version: int | None = None
        self._fact_list: list[Fact] = []
        self._refreshing = asyncio.Lock()
        self._last_read = 0.0
        self._drawn_at = 0
        self._reread_timer: Timer | None = None
        self._marked: set[str] = set()
        """Pending notes marked for one bulk accept or reject."""

    # -- layout ---------------------------------------------------------------------------

    def compose_view(self) -> ComposeResult:
        with Horizontal(id="memory-body"):
            with Vertical(id="memory-lists"):
                facts = KeyedTable(FACT_COLUMNS, id="facts-table")
                facts.border_title = "Facts"
                yield facts
                yield Static("", id="memory-search-banner")
                notes = KeyedTable(NOTE_COLUMNS, id="notes-table")
                notes.border_title = "Notes"
                yield notes
            with VerticalScroll(id="memory-detail"):
                yield Static("", id="memory-detail-body")
        yield NoteSearchBar()

    def crumb(self) -> Text:
        pending = sum(1 for note in self._book.notes if note.status == "pending")
        crumb = Text(plural(len(self._facts), "fact"))
        crumb.append(" · ")
        crumb.append(f"{pending} pending", style="bold yellow" if pending else "")
        if self._marked:
            crumb.append(f" · {len(self._marked)} marked", style="bold magenta")
        if self._search:
            crumb.append(" · search: ")
            crumb.append_text(literal(self._search, keep_newlines=False))
        if self.filter_text:
            crumb.append(" · filter: ", style="dim")
            crumb.append_text(literal(self.filter_text, keep_newlines=False))
        return crumb

    @property
    def facts_table(self) -> KeyedTable:
        """The facts list."""
        return self.query_one("#facts-table", KeyedTable)

    @property
    def notes_table(self) -> KeyedTable:
        """The notes list."""
        return self.query_one("#notes-table", KeyedTable)

    # -- data -----------------------------------------------------------------------------

    async def memory(self) -> MemoryStore:
        """The memory store on the dashboard's writable connection (opened on first use)."""
        if self._memory is None:
            self._memory = await host_for(self.app).memory()
        return self._memory

    async def refresh_data(self, batch: Batch | None = None) -> None:
        """Re-read facts and notes (bounded) and redraw, keeping the cursor on the same item.

        The app also calls this once a second so ages and TTLs move; then nothing is re-read
        unless another connection committed (``PRAGMA data_version``) or a shown fact expired.
        """
        async with self._refreshing:
            now = self.tether.now_ms()
            if batch is not None and not batch.first_read:
                if not await self._stale(now):
                    if self._cells_changed(now):
                        self._redraw(self._fact_list, self._book, now)
                    else:
                        self.update_chrome()
                    return
                wait = self._last_read + REREAD_MIN_INTERVAL_S - time.monotonic()
                if wait > 0:
                    # A busy writer commits many times a second: coalesce into one re-read.
                    if self._reread_timer is None:
                        self._reread_timer = self.set_timer(wait, self._deferred_reread)
                    return
            self._last_read = time.monotonic()
            try:
                memory = await self.memory()
                self._read_version = await memory.db.data_version()
                facts = await memory.list_facts(limit=FACTS_LIMIT)
                book = await self._read_notes(memory)
            except NotFoundError as error:
                self._problem = str(error)
                facts, book = [], NoteBook()
            else:
                self._problem = None
            self._redraw(facts, book, now)
            await self._show_detail()
            self.refresh_bindings()

    def on_resize(self) -> None:
        # The free-text columns take the width that is left; recompute them for the new size.
        if self.is_mounted:
            self._redraw(self._fact_list, self._book, self.tether.now_ms())

    async def _deferred_reread(self) -> None:
        self._reread_timer = None
        await self.refresh_data()

    async def _stale(self, now: int) -> bool:
        """True when what is shown may be out of date: a commit elsewhere, or an expiry."""
        if self._memory is None or self._problem:
            return True
        version = await self._memory.db.data_version()
        if version != self._read_version:
            return True
        return any(
            fact.expires_at_ms is not None and fact.expires_at_ms <= now
            for fact in self._fact_list
        )

    def _cells_changed(self, now: int) -> bool:
        """Whether time alone changed a list cell since the last redraw: ages and TTLs show
        minutes, except a TTL in its last minute (shown to the second)."""
        if now // 60_000 != self._drawn_at // 60_000:
            return True
        return any(
            fact.expires_at_ms is not None and fact.expires_at_ms - now < 61_000
            for fact in self._fact_list
        )

    def _redraw(self, facts: list[Fact], book: NoteBook, now: int) -> None:
        self._drawn_at = now
        needle = self.filter_text
        self._fact_list = facts
        self._facts = {}
        self._namespace_facts = {}
        for fact in facts:
            self._facts[fact_row_key(fact.namespace, fact.key)] = fact
            self._namespace_facts.setdefault(fact.namespace, []).append(fact)
        self._book = book
        # The lists take 3/5 of the screen (see DEFAULT_CSS) minus their borders; computed
        # from the screen so it is right before the tables are first laid out.
        list_width = self.size.width * 3 // 5 - 4
        value_width = text_width(list_width, FACT_OTHER_CELLS)
        # The namespace column gives way to the note body on narrow terminals.
        namespace_width = max(10, min(NOTE_NAMESPACE_CELLS,
                                      list_width - NOTE_OTHER_CELLS - MIN_NOTE_BODY_CELLS))
        body_width = text_width(list_width, NOTE_OTHER_CELLS + namespace_width)
        fact_list = fact_rows(facts, needle, now, value_width)
        self.facts_table.sync(fact_list)
        self._marked &= {note.id for note in book.notes if note.status == "pending"}
        note_list = note_rows(book, needle, now, body_width, self._marked, namespace_width)
        self.notes_table.sync(note_list)
        # Titles count what is shown (after the / filter), and say when a filter narrows it.
        shown_facts = sum(1 for key, _ in fact_list if key in self._facts)
        namespaces = len(fact_list) - shown_facts
        first = "first " if len(facts) >= FACTS_LIMIT else ""
        title = f"Facts ({first}{plural(shown_facts, 'fact')} in {plural(namespaces, 'namespace')}"
        if needle:
            title += f" matching the filter, of {len(facts)}"
        self.facts_table.border_title = title + ")"
        shown_notes = [parse_row_key(key)[1] for key, _ in note_list]
        status_of = {note.id: note.status for note in book.notes}
        pending = sum(1 for note_id in shown_notes if status_of.get(note_id) == "pending")
        heading = "Search results" if self._search else "Notes"
        title = f"{heading} ({pending} pending, {len(shown_notes)} shown"
        if needle:
            title += f" matching the filter, of {len(book.notes)}"
        if self._marked:
            title += f"; {len(self._marked)} marked"
        self.notes_table.border_title = title + ")"
        banner = self.query_one("#memory-search-banner", Static)
        banner.set_class(bool(self._search), "-visible")
        banner.update(Text.assemble("search: ", (self._search, "bold"),
                                    f" — {plural(len(book.notes), 'note')} "
                                    f"({self._search_mode}); {recall_line()}; "
                                    "s to change, empty to clear"))
        self.update_chrome()

    async def _read_notes(self, memory: MemoryStore) -> NoteBook:
        if self._search:
            found = await memory.search_notes_with_mode(
                self._search, status="any", include_superseded=True, limit=SEARCH_LIMIT
            )
            self._search_mode = found.mode
            notes = [hit.note for hit in found.hits]
        else:
            pending = await memory.list_notes(
                status="pending", include_superseded=True, limit=PENDING_LIMIT
            )
            decided = await memory.list_notes(
                status=["accepted", "rejected"], include_superseded=True, limit=DECIDED_LIMIT,
                newest_first=True,
            )
            # A decision committed between the two reads shows the note in both: the second
            # read is the newer one.
            decided_ids = {note.id for note in decided}
            notes = [note for note in pending if note.id not in decided_ids] + decided
        edges = await memory.supersession_edges([note.id for note in notes])
        shown = {note.id: note for note in notes}
        retired = {
            edge.supersedes_id for edge in edges
            if edge.note_status == "accepted" and edge.target_status == "accepted"
        }
        links: dict[str, NoteLinks] = {}
        for edge in edges:
            if edge.note_id in shown and edge.supersedes_id in shown:
                current = links.get(edge.note_id, NoteLinks())
                links[edge.note_id] = NoteLinks(
                    current.supersedes + (shown[edge.supersedes_id],), current.superseded_by
                )
            elif edge.note_id in shown:
                # The target is outside the window of shown notes: read it on its own.
                target = await memory.get_note(edge.supersedes_id)
                if target is not None:
                    current = links.get(edge.note_id, NoteLinks())
                    links[edge.note_id] = NoteLinks(
                        current.supersedes + (target,), current.superseded_by
                    )
        return NoteBook(notes=notes, retired=retired, links=links)

    # -- selection ------------------------------------------------------------------------

    def selected_fact(self) -> Fact | None:
        """The fact under the cursor of the facts list (None on a namespace heading)."""
        return self._facts.get(self.facts_table.cursor_key or "")

    def selected_namespace(self) -> str | None:
        """The namespace of the facts-list row under the cursor."""
        parts = parse_row_key(self.facts_table.cursor_key)
        return parts[1] if len(parts) >= 2 else None

    def selected_note(self) -> Note | None:
        """The note under the cursor of the notes list."""
        parts = parse_row_key(self.notes_table.cursor_key)
        return self._book.by_id(parts[1]) if len(parts) == 2 else None

    def on_descendant_focus(self) -> None:
        focused = self.focused
        if focused is self.query_one("#facts-table"):
            self._active = "facts"
        elif focused is self.query_one("#notes-table"):
            self._active = "notes"
        else:
            return
        self.refresh_bindings()
        self.run_worker(self._show_detail(), group="memory-detail", exclusive=True)

    @on(DataTable.RowHighlighted)
    async def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == ("facts-table" if self._active == "facts" else "notes-table"):
            self.refresh_bindings()
            await self._show_detail()

    @on(DataTable.RowSelected, "#notes-table")
    def _note_chosen(self) -> None:
        self.action_review_note()

    async def _show_detail(self) -> None:
        """Fill the inspector for the selected row of the active list."""
        self._detail_generation += 1
        generation = self._detail_generation
        now = self.tether.now_ms()
        body: RenderableType
        if self._problem:
            body = Text(self._problem)
        elif self._active == "facts":
            fact = self.selected_fact()
            namespace = self.selected_namespace()
            if fact is not None:
                body = fact_detail(fact, now)
            elif namespace is not None:
                body = namespace_detail(namespace, self._namespace_facts.get(namespace, []))
            else:
                body = EMPTY_FACTS
        else:
            note = self.selected_note()
            if note is None:
                body = EMPTY_NOTES if not self.filter_text else Text(
                    "No note matches the filter; press / and clear it.", style="dim")
            else:
                links = await load_links(await self.memory(), note)
                if generation != self._detail_generation:
                    return  # a newer selection is already being shown
                body = note_detail(note, links, self._book.retired, now)
        self.query_one("#memory-detail-body", Static).update(body)

    KEY_NOTES: ClassVar[dict[str, str]] = {
        "edit_fact": "on a fact (facts list)",
        "delete_fact": "on a fact (facts list)",
        "accept_note": "on a pending note, or on every marked note at once",
        "reject_note": "on a pending note, or on every marked note at once (one reason)",
        "mark_note": "on a pending note: mark or unmark it for one bulk decision",
        "mark_step": "on pending notes: mark and move (shift+up / shift+down)",
        "mark_all": "notes list: mark every pending note shown (the / filter applies); "
                    "again to unmark",
        "review_note": "on a note (notes list)",
    }
    """When each key applies (the ? help lists every key with this note)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that do not apply to the selected row (they also do nothing)."""
        if write_refused(self.app, action):
            return False
        if action in ("edit_fact", "delete_fact"):
            return self._active == "facts" and self.selected_fact() is not None
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

    # -- fact actions ---------------------------------------------------------------------

    @work(group="memory-action", exclusive=True)
    async def action_edit_fact(self) -> None:
        """Edit the selected fact's JSON value and TTL."""
        fact = self.selected_fact()
        if fact is None or not self.check_action("edit_fact", ()):
            return
        text, ttl_ms = fact.value_json, fact.ttl_ms
        while True:
            edit = await self.app.push_screen_wait(
                FactEditor(fact.namespace, fact.key, text, ttl_ms)
            )
            if edit is None:
                return
            saved = await write_safely(self, partial(self._store_fact, edit))
            if saved is not None:
                break
            # The write failed (told in a toast): reopen the editor with what was typed.
            text, ttl_ms = edit.value_json, edit.ttl_ms
        self.app.notify(visible(f"Saved {saved.namespace} / {saved.key}."), markup=False)
        embed_in_background(self.tether.workspace)  # semantic vector, when installed
        await self.refresh_data()

    async def _store_fact(self, edit: FactEdit) -> Fact:
        memory = await self.memory()
        return await memory.set_fact(edit.namespace, edit.key, edit.value, ttl_ms=edit.ttl_ms)

    @work(group="memory-action", exclusive=True)
    async def action_new_fact(self) -> None:
        """Add a fact (namespace and key validated like ``tether memory set``)."""
        edit = await self.app.push_screen_wait(NewFactForm(self.selected_namespace() or ""))
        if edit is None:
            return
        memory = await host_for(self.app).memory(create=True)
        self._memory = memory
        saved = await write_safely(
            self, lambda: memory.set_fact(edit.namespace, edit.key, edit.value, ttl_ms=edit.ttl_ms)
        )
        if saved is None:
            return
        self.app.notify(f"Saved {saved.namespace} / {saved.key}.", markup=False)
        embed_in_background(memory.db.workspace)  # semantic vector, when installed
        self._active = "facts"
        await self.refresh_data()
        self.facts_table.select_key(fact_row_key(saved.namespace, saved.key))

    @work(group="memory-action", exclusive=True)
    async def action_delete_fact(self) -> None:
        """Delete the selected fact after a confirmation naming its namespace and key."""
        fact = self.selected_fact()
        if fact is None or not self.check_action("delete_fact", ()):
            return
        target = Text.assemble(("namespace ", "dim"), fact.namespace, ("   key ", "dim"), fact.key)
        confirmed = await self.app.push_screen_wait(
            ConfirmDialog("Delete this fact?", target,
                          detail="Recall stops seeing it at once; this cannot be undone.")
        )
        if not confirmed:
            return
        memory = await self.memory()
        deleted = await write_safely(self, lambda: memory.delete_fact(fact.namespace, fact.key))
        if deleted is not None:
            message = "Deleted" if deleted else "Already gone:"
            self.app.notify(f"{message} {fact.namespace} / {fact.key}.", markup=False)
        await self.refresh_data()

    # -- note actions ---------------------------------------------------------------------

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
        await accept_note(self, await self.memory(), note)
        await self.refresh_data()

    @work(group="memory-action", exclusive=True)
    async def action_reject_note(self) -> None:
        """Reject the selected pending note (or every marked note), with an optional reason."""
        if self._marked and self._active == "notes":
            await self._decide_marked("rejected")
            return
        note = self.selected_note()
        if note is None or not self.check_action("reject_note", ()):
            return
        await reject_note(self, await self.memory(), note)
        await self.refresh_data()

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


class NoteReviewScreen(QuitFirstFooter, Screen[None]):
    """A proposal beside the notes it would supersede, with its provenance; ``a``/``r`` decide.

    ``]`` and ``[`` step through the pending queue; after a decision the next pending note is
    shown, so a person can work through the queue from the keyboard.
    """

    DEFAULT_CSS = """
    NoteReviewScreen #review-title { height: 1; background: $panel; padding: 0 1; }
    NoteReviewScreen #review-columns { height: 1fr; }
    NoteReviewScreen .review-column {
        width: 1fr; border: round $panel-lighten-2; padding: 0 1;
    }
    NoteReviewScreen #review-proposal { border: round $warning; }
    NoteReviewScreen #review-verdict {
        height: auto; padding: 0 1; background: $boost; margin: 0 1;
    }
    """

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("a", "accept", "Accept"),
        Binding("r", "reject", "Reject"),
        Binding("right_square_bracket", "step(1)", "Next pending"),
        Binding("left_square_bracket", "step(-1)", "Previous pending"),
        Binding("escape", "close", "Back"),
    ]

    def __init__(self, memory_screen: MemoryScreen, note_id: str, queue: list[str]) -> None:
        super().__init__()
        self._memory_screen = memory_screen
        self.note_id = note_id
        self._queue = list(queue)
        self.note: Note | None = None
        self.links = NoteLinks()

    def compose(self) -> ComposeResult:
        yield Static("", id="review-title")
        with Horizontal(id="review-columns"):
            with VerticalScroll(id="review-proposal", classes="review-column"):
                yield Static("", id="review-proposal-body")
            with VerticalScroll(id="review-targets", classes="review-column"):
                yield Static("", id="review-targets-body")
        yield Static("", id="review-verdict")
        yield Footer()

    async def on_mount(self) -> None:
        await self.reload()

    async def reload(self) -> None:
        """Re-read the note and its neighbours and redraw both columns."""
        memory = await self._memory_screen.memory()
        self.note = await memory.get_note(self.note_id)
        if self.note is None:
            self.query_one("#review-title", Static).update(
                Text(f"Note {self.note_id} no longer exists.")
            )
            self.refresh_bindings()
            return
        self.links = await load_links(memory, self.note)
        # This note is retired when an accepted note supersedes it; its targets are retired
        # when it is itself accepted.
        superseded = any(n.status == "accepted" for n in self.links.superseded_by)
        retired = {self.note.id} if superseded else set()
        target_retired = (
            {t.id for t in self.links.supersedes} if self.note.status == "accepted" else set()
        )
        now = self._memory_screen.tether.now_ms()
        position = ""
        if self.note_id in self._queue:
            position = f"  ({self._queue.index(self.note_id) + 1} of {len(self._queue)} pending)"
        title = Text("Review note ", style="bold")
        title.append(self.note.id)
        title.append(position, style="dim")
        self.query_one("#review-title", Static).update(title)
        proposal = self.query_one("#review-proposal", VerticalScroll)
        proposal.border_title = "Proposal"
        self.query_one("#review-proposal-body", Static).update(
            _proposal_panel(self.note, self.links, retired, now)
        )
        targets = self.query_one("#review-targets", VerticalScroll)
        count = len(self.links.supersedes)
        targets.border_title = (
            f"Would supersede ({count})" if self.note.status != "accepted"
            else f"Supersedes ({count})"
        )
        self.query_one("#review-targets-body", Static).update(
            _targets_panel(self.links.supersedes, target_retired, now)
        )
        self.query_one("#review-verdict", Static).update(verdict_text(self.note, self.links))
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Accept/reject only on a pending note; stepping only when there is a queue."""
        if write_refused(self.app, action):
            return False
        if action in ("accept", "reject"):
            return self.note is not None and self.note.status == "pending"
        if action == "step":
            return len(self._queue) > 1 or (
                bool(self._queue) and self.note_id not in self._queue
            )
        return True

    @work(group="review-action", exclusive=True)
    async def action_accept(self) -> None:
        """Accept the proposal; its targets are retired in the same write."""
        if self.note is None or not self.check_action("accept", ()):
            return
        if await accept_note(self, await self._memory_screen.memory(), self.note):
            await self._after_decision()

    @work(group="review-action", exclusive=True)
    async def action_reject(self) -> None:
        """Reject the proposal (optional reason); its targets stay live."""
        if self.note is None or not self.check_action("reject", ()):
            return
        if await reject_note(self, await self._memory_screen.memory(), self.note):
            await self._after_decision()

    async def _after_decision(self) -> None:
        decided = self.note_id
        if decided in self._queue:
            index = self._queue.index(decided)
            self._queue.remove(decided)
            if self._queue:
                self.note_id = self._queue[min(index, len(self._queue) - 1)]
        await self.reload()

    async def action_step(self, delta: int) -> None:
        """Show the next (or previous) pending note."""
        if not self._queue:
            return
        if self.note_id in self._queue:
            index = (self._queue.index(self.note_id) + delta) % len(self._queue)
        else:
            index = 0
        self.note_id = self._queue[index]
        await self.reload()

    async def action_close(self) -> None:
        """Back to the Memory view (which re-reads what changed)."""
        self.dismiss(None)
        await self._memory_screen.refresh_data()
        self._memory_screen.notes_table.select_key(note_row_key(self.note_id))


def _proposal_panel(note: Note, links: NoteLinks, retired: set[str], now: int) -> RenderableType:
    return Group(
        status_cell(shown_status(note, retired)),
        Text(""),
        literal(note.body),
        Text(""),
        Text("Why is this remembered", style="bold"),
        provenance_table(note, now),
        *why_remembered(note, NoteLinks((), links.superseded_by, links.history), retired),
    )


def _targets_panel(targets: tuple[Note, ...], retired: set[str], now: int) -> RenderableType:
    if not targets:
        return Text("Supersedes nothing: accepting it only adds knowledge.", style="dim")
    parts: list[RenderableType] = []
    for target in targets:
        parts.extend([
            status_cell(shown_status(target, retired)),
            literal(target.body),
            provenance_table(target, now),
            Text("─" * 20, style="dim"),
        ])
    return Group(*parts)
