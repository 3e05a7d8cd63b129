"""The reads behind a replay (:mod:`store.read.replay`), for the dashboard's reader and a
workspace Database alike, on both backends: a run's events in pages by sequence number, its node
rows (for their dependencies), and the notes it wrote. Every read is an indexed range or a
primary-key lookup, run to its end before the next (no read transaction is held).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from store.errors import NotFoundError
from store.model.history_records import EventRecord
from store.model.run_records import NodeRecord, RunRecord
from store.read import replay_sql as sql
from store.read.replay import ReplayLog
from store.read.run_search import Rows
from store.read.timeline_reads import TIMELINE_RUN

MAX_REPLAY_EVENTS = 200_000
"""The most events of one run a replay reads (a run with more replays its first 200 000)."""
PAGE = 10_000
MAX_NODE_SHAPES = 20_000
MAX_NOTES = 500
"""The most notes of a run the replay names with their text (the others are counted)."""


class RunHistory(NamedTuple):
    """A run and its event log, ready to replay."""

    run: RunRecord
    log: ReplayLog
    cut: bool
    """The run has more events than :data:`MAX_REPLAY_EVENTS`; only the first were read."""


class NoteText(NamedTuple):
    """A note the run wrote, as stored (its body never changes after insert)."""

    note_id: str
    namespace: str
    body: str
    status: str
    """Its status now (the replay shows the one it was written with beside it)."""
    created_at_ms: int


async def run_events(
    rows: Rows, run_id: str, *, after: int = 0, limit: int = MAX_REPLAY_EVENTS
) -> list[EventRecord]:
    """The run's events after sequence number ``after``, oldest first, at most ``limit``."""
    events: list[EventRecord] = []
    while len(events) < limit:
        page = await rows.fetch_all(sql.RUN_EVENTS_PAGE,
                                    (run_id, after, min(PAGE, limit - len(events))))
        # The columns come in the record's field order (replay_sql): no dict per row.
        events.extend(map(EventRecord._make, page))
        if len(page) < PAGE:
            break
        after = events[-1].seq
    return events


async def run_last_event_seq(rows: Rows, run_id: str) -> int:
    """The sequence number of the run's newest event (0: none)."""
    found = await rows.fetch_all(sql.RUN_LAST_EVENT_SEQ, (run_id,))
    return int(found[0][0] or 0) if found else 0


async def read_history(rows: Rows, run_id: str) -> RunHistory:
    """The run, its events and its node rows' dependencies.

    Raises:
        NotFoundError: there is no such run.
        ValueError: the run has no events (nothing to replay).
    """
    found = await rows.fetch_all(TIMELINE_RUN, (run_id,))
    if not found:
        raise NotFoundError(f"There is no run {run_id!r} in this workspace.")
    run = RunRecord.from_row(found[0])
    events = await run_events(rows, run_id, limit=MAX_REPLAY_EVENTS + 1)
    cut = len(events) > MAX_REPLAY_EVENTS
    shapes = await rows.fetch_all(sql.RUN_NODE_SHAPES, (run_id, MAX_NODE_SHAPES))
    structure = {node.key: node for node in map(NodeRecord.from_row, shapes)}
    return RunHistory(run, ReplayLog(events[:MAX_REPLAY_EVENTS], structure), cut)


async def notes_text(rows: Rows, note_ids: Sequence[str]) -> dict[str, NoteText]:
    """The stored notes among ``note_ids`` (the first :data:`MAX_NOTES`), by id."""
    wanted = list(dict.fromkeys(note_ids))[:MAX_NOTES]
    out: dict[str, NoteText] = {}
    for start in range(0, len(wanted), 100):
        chunk = wanted[start:start + 100]
        for row in await rows.fetch_all(sql.notes_by_ids(len(chunk)), tuple(chunk)):
            note = _note(row)
            out[note.note_id] = note
    return out


def _note(row: Any) -> NoteText:
    return NoteText(str(row[0]), str(row[1]), str(row[2]), str(row[3]), int(row[4] or 0))
