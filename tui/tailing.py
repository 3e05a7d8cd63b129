"""Keeping the dashboard up to date: change detection on the database, and log-file tails.

Design (``reference/textual-and-tailing.md`` §3.4):

- one read-only connection (:class:`store.read.dashboard_reader.DashboardReader`); a poll first asks
  ``PRAGMA data_version`` (tens of microseconds) and only reads when another connection
  committed; then it reads the events after the last sequence number it has seen, in pages;
- :func:`wake_ups` watches the workspace *folder* (non-recursive, the database and its WAL only,
  debounced) and wakes the poller as soon as a commit lands; a slow timer keeps polling in case
  the file system does not report WAL writes (macOS);
- :class:`FileTail` follows an artifact log by byte offset, reading only what was appended.

On a PostgreSQL workspace there is no file to watch: :meth:`WorkspaceTailer.wake_ups` listens on
the workspace's channel (``store/db/postgres/pg_listen.py``, one notification per committed write),
and a poll
only queries when a notification arrived; while the listening connection is down the status
says "reconnecting" and polls fall back to querying on the slow timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.artifact_files import stream_log_path
from store.db.backends import open_reader
from store.errors import NotFoundError, TetherError
from store.model.history_records import EventRecord
from store.model.run_records import NodeRecord
from store.read.dashboard_reader import DashboardReader
from store.workspace.layout import DATABASE_FILENAME, Workspace
from tui.budget_alerts import BudgetAlerts
from tui.clear_follow import ClearFollowUps

EVENT_PAGE = 1000
"""Events read per query; a poll reads at most :data:`EVENT_PAGES_PER_POLL` pages."""
EVENT_PAGES_PER_POLL = 5


@dataclass
class Batch:
    """What one poll found: the new events (possibly none: facts and notes write no events)."""

    events: list[EventRecord] = field(default_factory=list)
    first_read: bool = False

    @property
    def run_ids(self) -> set[str]:
        """Runs the new events touch."""
        return {e.run_id for e in self.events if e.run_id}

    def touches(self, run_id: str, node_id: str | None = None) -> bool:
        """True when an event concerns this run (and node, when given)."""
        return any(
            e.run_id == run_id and (node_id is None or e.node_id in (None, node_id))
            for e in self.events
        )


class WorkspaceTailer:
    """Owns the read-only connection and turns commits by anyone into :class:`Batch` es."""

    def __init__(self, workspace: Workspace, ring: Callable[[], None] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.workspace = workspace
        self.budget_alerts = BudgetAlerts(ring)
        """The budget alerts read so far (``ring`` rings the bell for each, paused or not)."""
        self.clear_follow_ups = ClearFollowUps(say)
        """The clears this dashboard requested, followed to the run's end (``say`` tells how
        it ended, paused or not)."""
        self.reader: DashboardReader | None = None
        self.last_seq = 0
        self.problem: str | None = None
        self._inode: int | None = None
        self._finished = False
        self.link_state = ""
        """For a PostgreSQL workspace: "live" while listening, "reconnecting" while the
        listening connection is down (polls then query on every tick); empty otherwise."""
        self._notified = True

    async def open(self) -> bool:
        """Open the reader if the database exists; False while it does not (yet)."""
        if self.reader is not None:
            return True
        if self._finished:
            return False  # the app is shutting down: a late poll must not open a connection
        try:
            self.reader = await open_reader(self.workspace)
        except NotFoundError:
            self.problem = f"waiting for a workspace at {self.workspace.describe()}"
            return False
        except TetherError as error:
            self.problem = str(error)
            return False
        self.problem = None
        self._inode = None
        self._replaced()  # remember which file this reader opened
        if self.reader.journal_mode != "wal":
            self.problem = (
                f"the workspace database is in {self.reader.journal_mode} mode, not WAL; "
                "writers may see 'database is locked'"
            )
        # Start at the end of the log: the views read current state, events only say what moved.
        self.last_seq = await self.reader.max_event_seq()
        return True

    async def close(self, *, final: bool = False) -> None:
        """Close the reader (safe to call twice); ``final`` also keeps it from reopening."""
        self._finished = self._finished or final
        if self.reader is not None:
            reader, self.reader = self.reader, None
            await reader.close()

    def _replaced(self) -> bool:
        """True when the database file was swapped for another one (restored, re-created)."""
        try:
            inode = self.workspace.database_path.stat().st_ino
        except OSError:
            return False
        if self._inode is None:
            self._inode = inode
        return inode != self._inode

    async def wake_ups(self, stop: asyncio.Event) -> AsyncIterator[None]:
        """Yield once per burst of commits: file events for SQLite, notifications for a
        PostgreSQL workspace."""
        if not self.workspace.is_shared:
            async for _ in wake_ups(self.workspace, stop):
                yield None
            return
        from store.db.postgres.pg_database import channel_for
        from store.db.postgres.pg_listen import ChangeListener

        while self.reader is None and not stop.is_set():
            # The channel is named after the workspace's schema, known once the reader opened.
            try:
                await asyncio.wait_for(stop.wait(), timeout=0.5)
            except TimeoutError:
                continue
        schema = getattr(self.reader, "schema_name", None)
        if stop.is_set() or schema is None or self.workspace.database_url is None:
            return
        listener = ChangeListener(
            self.workspace.database_url, channel_for(schema), on_state=self._set_link_state
        )
        async for _payload in listener.payloads(stop):
            self._notified = True
            yield None
        self.link_state = ""

    def _set_link_state(self, state: str) -> None:
        self.link_state = state
        self._notified = True  # poll at once: catch up, or fall back to querying

    def _quiet(self) -> bool:
        """True when a listening PostgreSQL tail has heard of no commit since the last poll."""
        return self.link_state == "live" and not self._notified

    async def poll(self) -> Batch | None:
        """Return what changed since the last poll, or None when nothing was committed."""
        if self.reader is not None and self._quiet():
            return None
        # A notification already says a commit happened: no need to ask the database.
        heard = self.link_state == "live" and self._notified
        self._notified = False
        if self.reader is not None and self._replaced():
            await self.close()  # data_version belongs to the old file: start over
        first = self.reader is None
        if not await self.open():
            return None
        assert self.reader is not None
        if not heard and not await self.reader.changed() and not first:
            return None
        batch = Batch(first_read=first)
        for _ in range(EVENT_PAGES_PER_POLL):
            page = await self.reader.events_since(self.last_seq, EVENT_PAGE)
            if not page:
                break
            batch.events.extend(page)
            self.last_seq = page[-1].seq
            if len(page) < EVENT_PAGE:
                break
        self.budget_alerts.take(batch.events)
        self.clear_follow_ups.take(batch.events)
        return batch


def _database_files(workspace: Workspace) -> tuple[str, str]:
    return (DATABASE_FILENAME, f"{DATABASE_FILENAME}-wal")


async def wake_ups(
    workspace: Workspace, stop: asyncio.Event, *, debounce_ms: int = 30, step_ms: int = 5
) -> AsyncIterator[None]:
    """Yield once per burst of writes to the workspace database (a hint, not a guarantee).

    Watches the workspace folder non-recursively (watching the ``-wal`` file itself stops after
    it is deleted and recreated) and ignores ``-shm``, which readers touch too.
    """
    from watchfiles import awatch

    names = _database_files(workspace)

    def only_database(_change: object, path: str) -> bool:
        return Path(path).name in names

    root = workspace.root
    while not stop.is_set() and not root.is_dir():
        try:
            await asyncio.wait_for(stop.wait(), timeout=1.0)
        except TimeoutError:
            continue
    if stop.is_set():
        return
    async for _changes in awatch(
        root,
        recursive=False,
        debounce=debounce_ms,
        step=step_ms,
        watch_filter=only_database,
        stop_event=stop,
        yield_on_timeout=False,
    ):
        yield None


class FileTail:
    """Follow a growing text file by byte offset (artifact logs), keeping the last lines.

    Only whole lines are returned; a partial last line waits for its newline. A file that
    shrinks (rewritten) is read again from the start. Memory stays bounded however fast the
    file grows: a read never takes more than ``window_bytes`` (256 KiB, more than the viewer's
    5 000 lines of a typical log); when the file has grown further than that since the last
    read, the tail skips ahead to its last ``window_bytes`` and says how much it skipped.
    """

    def __init__(self, path: Path, *, window_bytes: int = 256 * 1024) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self._window = window_bytes
        self._started = False
        self._resync = False

    def read_new_lines(self) -> list[str]:
        """Lines appended since the last call (the tail of the file on the first call)."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return []
        notes = self._plan(size)
        if size == self._offset:
            return notes
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read(size - self._offset)
        return notes + self._take(data)

    def _plan(self, size: int) -> list[str]:
        """Place the offset for a read up to ``size``: from the start when the file shrank,
        at its last window when it is that far ahead (saying how much was skipped)."""
        if size < self._offset:
            self._offset, self._partial = 0, b""
        notes: list[str] = []
        behind = size - self._offset
        if behind > self._window:
            if self._started:
                notes.append(
                    f"── {behind - self._window:,} bytes skipped to keep up with the log ──"
                )
            self._offset, self._partial, self._resync = size - self._window, b"", True
        self._started = True
        return notes

    def _take(self, data: bytes) -> list[str]:
        """The whole lines ``data`` completes (a partial last line waits for its newline)."""
        self._offset += len(data)
        data = self._partial + data
        if self._resync:
            # Landed in the middle of a line: start at the next whole one.
            cut = data.find(b"\n")
            if cut < 0:
                self._partial = data
                return []
            data, self._resync = data[cut + 1:], False
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [line.decode("utf-8", errors="replace").rstrip("\r") for line in lines]


class DatabaseLogTail(FileTail):
    """Follow an artifact log kept in a PostgreSQL workspace (``store/runs/artifact_chunks.py``) by
    offset, like :class:`FileTail` follows a file: another host's log, live, with the same
    bounded window.

    ``path`` is the log's place relative to the workspace's artifact folder.
    """

    def __init__(self, chunks: Any, path: Path, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self._chunks = chunks

    async def read_new_lines_async(self) -> list[str]:
        """Lines appended since the last call (the tail of the log on the first call)."""
        name = self.path.as_posix()
        size = await self._chunks.size(name)
        notes = self._plan(size)
        if size == self._offset:
            return notes
        data = await self._chunks.read(name, self._offset, size - self._offset)
        return notes + self._take(data)


def find_node_log(workspace: Workspace, node: NodeRecord) -> Path | None:
    """The stream log of the node iteration's latest attempt that has one (engine layout)."""
    for attempt in range(max(node.attempts, 1), 0, -1):
        path = stream_log_path(
            workspace.artifacts_dir, node.run_id, node.node_id, node.iteration, attempt
        )
        if path.exists():
            return path
    return None


async def find_stored_log(chunks: Any, node: NodeRecord) -> Path | None:
    """The stream log (relative to the artifact folder) of the node iteration's latest attempt
    that has one in the database of a PostgreSQL workspace."""
    for attempt in range(max(node.attempts, 1), 0, -1):
        path = stream_log_path(Path(""), node.run_id, node.node_id, node.iteration, attempt)
        if await chunks.size(path.as_posix()) > 0:
            return path
    return None
