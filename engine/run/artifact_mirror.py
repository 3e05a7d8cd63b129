"""Copying a run's artifact files into the database of a PostgreSQL workspace as they grow.

Agents write their stream logs (and tasks their files) to the local artifact folder, as on a
SQLite workspace. On a PostgreSQL workspace a :class:`ArtifactMirror` runs beside each run
execution and, every :data:`SYNC_INTERVAL_S` and once more when the run ends, sends what each
file gained since the last look (an append at the stored offset), or the whole file when it was
rewritten (a new inode or a smaller size). A dashboard on any host then follows a log from the
database by offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from store.runs.artifact_chunks import ArtifactChunks

SYNC_INTERVAL_S = 0.25
READ_BYTES = 256 * 1024
"""What one read (and one append) of a growing file holds at most."""


@dataclass(frozen=True)
class Sent:
    """What the database holds of one local file."""

    inode: int
    size: int
    mtime_ns: int


def local_files(folder: Path) -> list[tuple[Path, os.stat_result]]:
    """Every regular file below ``folder`` with its stat (nothing when it does not exist)."""
    found: list[tuple[Path, os.stat_result]] = []
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    found.append((Path(entry.path), entry.stat(follow_symlinks=False)))
    return found


class ArtifactMirror:
    """Keeps the database's copy of one run's artifact folder up to date."""

    def __init__(self, chunks: ArtifactChunks, artifacts_root: Path, run_folder: Path) -> None:
        self.chunks = chunks
        self.root = artifacts_root
        self.folder = run_folder
        self.sent: dict[str, Sent] = {}

    async def sync(self) -> int:
        """Send what changed since the last call; returns how many files were written."""
        written = 0
        for path, stat in await asyncio.to_thread(local_files, self.folder):
            name = path.relative_to(self.root).as_posix()
            before = self.sent.get(name)
            now = Sent(stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if before == now:
                continue
            appended = before is not None and before.inode == now.inode and now.size >= before.size
            offset = before.size if appended and before is not None else 0
            if not appended:
                await self.chunks.replace(name, b"")
            # In bounded pieces: a log that grew by megabytes is never held whole in memory.
            while offset < now.size:
                try:
                    data = await asyncio.to_thread(
                        _read_from, path, offset, min(now.size, offset + READ_BYTES)
                    )
                except OSError:
                    break
                if not data:
                    break
                await self.chunks.append(name, data, offset)
                offset += len(data)
            self.sent[name] = Sent(now.inode, offset, now.mtime_ns)
            written += 1
        return written

    async def run(self) -> None:
        """Sync until cancelled."""
        while True:
            await asyncio.sleep(SYNC_INTERVAL_S)
            await self.sync()


def _read_from(path: Path, offset: int, end: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read(max(0, end - offset))
