"""What the Memory view reads through :class:`store.memory.memory_store.MemoryStore`: the window of
notes it lists (with the supersession links between them) and the chain behind one note's "why is
this remembered", each in a few short, bounded reads."""

from __future__ import annotations

from store.memory.memory_store import MemoryStore
from store.memory.note_values import Note
from tui.screens.memory_render import NoteBook, NoteLinks

PENDING_LIMIT = 300
DECIDED_LIMIT = 300
SEARCH_LIMIT = 100
"""Notes read per refresh: the view is a window (``tether notes list`` pages through all)."""


async def read_note_book(memory: MemoryStore, search: str) -> tuple[NoteBook, str | None]:
    """The notes the view lists and how they supersede each other: the hits of ``search``
    (every status) when it is set, else the pending proposals and the newest decided notes;
    with the mode of the note search that answered (None without a search)."""
    mode: str | None = None
    if search:
        found = await memory.search_notes_with_mode(
            search, status="any", include_superseded=True, limit=SEARCH_LIMIT
        )
        mode = found.mode
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
    return NoteBook(notes=notes, retired=retired, links=links), mode


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
    # A target is retired already when another accepted note supersedes it: say so, never
    # show it as accepted and live.
    retired = set()
    for target in supersedes:
        if target.status == "accepted" and any(
            other.status == "accepted" and other.id != note.id
            for other in await memory.superseded_by(target.id)
        ):
            retired.add(target.id)
    return NoteLinks(
        supersedes=supersedes,
        superseded_by=tuple(await memory.superseded_by(note.id)),
        history=tuple(history),
        retired=frozenset(retired),
    )
