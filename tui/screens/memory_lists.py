"""The Memory view's two lists and its inspector: facts grouped by namespace and notes with
pending proposals first, read in bounded windows and redrawn with the cursor kept on the same
item; the inspector says why the selected item is remembered.

:class:`MemoryListsScreen` holds what the view shows; the keys that change it live in
:mod:`tui.actions.fact_actions` and :mod:`tui.actions.note_actions`, and
:class:`tui.screens.memory_view.MemoryScreen` puts the three together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import ColumnKey

from store.errors import NotFoundError
from store.memory.facts import Fact
from store.memory.memory_store import MemoryStore
from store.memory.note_values import Note
from tui.format import literal, plural
from tui.run_control import host_for
from tui.screens.live_screen import LiveScreen
from tui.screens.memory_reads import load_links, read_note_book
from tui.screens.memory_render import (
    NOTE_NAMESPACE_CELLS,
    NoteBook,
    fact_detail,
    fact_row_key,
    fact_rows,
    namespace_detail,
    note_detail,
    note_rows,
    parse_row_key,
)
from tui.tailing import Batch
from tui.widgets.keyed_table import KeyedTable


def recall_line(config_path: Path) -> str:
    """Which recall tasks get (hybrid, semantic or keyword) and why, without loading the
    model; a config that cannot be read says so."""
    from engine.memory.recall_mode import recall_status
    from engine.run.engine_config import load_config
    from store.errors import TetherError

    try:
        settings = load_config(config_path).memory
    except TetherError as error:
        return f"recall settings unreadable: {error}"
    return str(recall_status(settings)["line"])


FACTS_LIMIT = 1_000
"""Facts read per refresh (the view is a window; ``tether memory list`` shows everything)."""
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
NOTE_FIXED_CELLS = 11 + 3 + 8 + 2 * len(NOTE_COLUMNS)
"""The notes list's status, edge and age columns with every column's padding."""
MAX_AUTHOR_CELLS = 14
MIN_NOTE_BODY_CELLS = 30
MIN_TEXT_CELLS = 16
STACK_BELOW = 140
"""Narrower than this, the inspector goes under the lists (the lists get the whole width)."""


def note_widths(list_width: int, notes: list[Note]) -> tuple[int, int, int]:
    """(namespace, author, body) cells for the notes list: the namespace and author as wide as
    their longest value (capped), the body everything else; the namespace gives way first
    when the body would get less than :data:`MIN_NOTE_BODY_CELLS`."""
    longest_ns = max((len(n.namespace) for n in notes), default=9)
    author = min(MAX_AUTHOR_CELLS, max((len(n.author or "–") for n in notes), default=1))
    others = NOTE_FIXED_CELLS + author
    namespace = min(NOTE_NAMESPACE_CELLS, max(9, longest_ns))
    if list_width - others - namespace < MIN_NOTE_BODY_CELLS:
        namespace = max(10, list_width - others - MIN_NOTE_BODY_CELLS)
    return namespace, author, text_width(list_width, others + namespace)


def fact_other_cells(rows: list[tuple[str, Sequence[Text]]]) -> int:
    """Cells the facts list's columns other than the value take with ``rows`` (each as wide
    as its widest cell or label), with every column's padding."""
    widths = [len(label) for _, label in FACT_COLUMNS]
    for _, cells in rows:
        widths = [max(width, cell.cell_len) for width, cell in zip(widths, cells, strict=False)]
    return sum(widths) - widths[1] + 2 * len(FACT_COLUMNS)


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


class MemoryListsScreen(LiveScreen):
    """The facts and notes lists on the left, the inspector on the right, and what they show."""

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
                facts = KeyedTable(FACT_COLUMNS, id="facts-table", stretch="value")
                facts.border_title = "Facts"
                yield facts
                yield Static("", id="memory-search-banner")
                notes = KeyedTable(NOTE_COLUMNS, id="notes-table", stretch="body")
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
        # The lists take 2/3 of the screen beside the inspector, all of it above the inspector
        # on a narrow terminal (see DEFAULT_CSS), minus their borders; computed from the
        # screen so it is right before the tables are first laid out.
        stacked = self.size.width < STACK_BELOW
        self.query_one("#memory-body").set_class(stacked, "-stacked")
        list_width = (self.size.width if stacked else self.size.width * 2 // 3) - 4
        value_width = text_width(list_width, FACT_OTHER_CELLS)
        namespace_width, author_width, body_width = note_widths(list_width, book.notes)
        fact_list = fact_rows(facts, needle, now, value_width)
        # FACT_OTHER_CELLS allows for the widest keys and writers: when the rows' own are
        # narrower, the values take the room left instead of being cut beside empty cells.
        wider = text_width(list_width, fact_other_cells(fact_list))
        if wider > value_width:
            fact_list = fact_rows(facts, needle, now, wider)
        self.facts_table.sync(fact_list)
        self._marked &= {note.id for note in book.notes if note.status == "pending"}
        note_list = note_rows(book, needle, now, body_width, self._marked, namespace_width,
                              author_width)
        self.notes_table.sync(note_list)
        # The body column takes what the others leave (stretch): cut the bodies to that.
        stretched = self.notes_table.columns.get(ColumnKey("body"))
        if stretched is not None and not stretched.auto_width and stretched.width != body_width:
            note_list = note_rows(book, needle, now, max(MIN_TEXT_CELLS, stretched.width),
                                  self._marked, namespace_width, author_width)
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
                                    f"({self._search_mode}); "
                                    f"{recall_line(self.tether.workspace.config_path)}; "
                                    "s to change, empty to clear"))
        self.update_chrome()

    async def _read_notes(self, memory: MemoryStore) -> NoteBook:
        book, mode = await read_note_book(memory, self._search)
        if mode is not None:
            self._search_mode = mode
        return book

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back" and self._search:
            return True
        return super().check_action(action, parameters)

    def action_back(self) -> None:
        """From search results back to the list (then, as everywhere, to the previous view)."""
        if not self._search:
            super().action_back()
            return
        self._search = ""
        self.run_worker(self._back_to_list(), group="memory-search", exclusive=True)

    async def _back_to_list(self) -> None:
        await self.refresh_data()
        self.notes_table.focus()
        self.refresh_bindings()

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
            elif self.filter_text and self._fact_list:
                body = Text.assemble(
                    f"No fact matches the filter ({plural(len(self._fact_list), 'fact')} "
                    "hidden); press ", ("/", "bold"), " and clear it to see them.")
            else:
                body = EMPTY_FACTS
        else:
            note = self.selected_note()
            if note is None and self._search:
                body = Text.assemble(f"No note matches the search {self._search!r}; ",
                                     ("escape", "bold"), " goes back to the list.")
            elif note is None:
                body = EMPTY_NOTES if not self.filter_text else Text.assemble(
                    f"No note matches the filter ({plural(len(self._book.notes), 'note')} "
                    "hidden); press ", ("/", "bold"), " and clear it to see them.")
            else:
                links = await load_links(await self.memory(), note)
                if generation != self._detail_generation:
                    return  # a newer selection is already being shown
                body = note_detail(note, links, self._book.retired, now)
        self.query_one("#memory-detail-body", Static).update(body)
