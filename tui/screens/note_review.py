"""The note review screen: a proposal beside the notes it would supersede, with its
provenance; ``a``/``r`` decide, ``]``/``[`` walk the pending queue. Opened from the Memory view
(``enter`` or ``v`` on a note, or "Review pending notes" in the command palette)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from store.memory.note_values import Note
from tui.actions.note_decisions import accept_note, reject_note
from tui.actions.read_only import write_refused
from tui.screens.live_screen import QuitFirstFooter
from tui.screens.memory_lists import MemoryListsScreen
from tui.screens.memory_reads import load_links
from tui.screens.memory_render import (
    NoteLinks,
    note_row_key,
    provenance_table,
    shown_status,
    status_cell,
    verdict_text,
    why_remembered,
)
from tui.screens.note_text import readable_body, readable_text
from tui.widgets.footer import BoundedFooter
from tui.word_diff import diff_text, word_diff


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

    def __init__(self, memory_screen: MemoryListsScreen, note_id: str, queue: list[str]) -> None:
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
        yield BoundedFooter()

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
        target_retired = set(self.links.retired) | (
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
            _targets_panel(self.links.supersedes, target_retired, now, self.note)
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
        readable_text(note.body),
        Text(""),
        Text("Why is this remembered", style="bold"),
        provenance_table(note, now),
        *why_remembered(note, NoteLinks((), links.superseded_by, links.history), retired),
    )


def _targets_panel(
    targets: tuple[Note, ...], retired: set[str], now: int, proposal: Note
) -> RenderableType:
    if not targets:
        return Text("Supersedes nothing: accepting it only adds knowledge.", style="dim")
    parts: list[RenderableType] = []
    for target in targets:
        diff = word_diff(readable_body(target.body), readable_body(proposal.body))
        parts.extend([
            status_cell(shown_status(target, retired)),
            readable_text(target.body),
            Text(f"The proposal against it: {diff.summary()}", style="bold"),
            diff_text(diff),
            provenance_table(target, now),
            Text("─" * 20, style="dim"),
        ])
    return Group(*parts)
