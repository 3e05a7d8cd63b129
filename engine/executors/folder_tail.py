"""New bytes of the files in a folder since the last look: how a remote attempt ships its
stream log, stderr log and other artifact files to the orchestrator while it runs (the agent
writes them on the Ray node's disk; the orchestrator appends the bytes to the real ones)."""

from __future__ import annotations

import os
from pathlib import Path

MAX_CHUNK = 256 * 1024
"""At most this many bytes of one file per look (a fast writer is shipped in pieces)."""


class FolderTail:
    """Remembers how far each file under ``folder`` was read."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offsets: dict[str, int] = {}

    def read(self) -> list[tuple[str, bytes]]:
        """Bytes written since the last call, per file (relative name), files in name order."""
        chunks: list[tuple[str, bytes]] = []
        for path in sorted(self._files()):
            name = path.relative_to(self.folder).as_posix()
            offset = self.offsets.get(name, 0)
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size <= offset:
                continue
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read(min(size - offset, MAX_CHUNK))
            if data:
                self.offsets[name] = offset + len(data)
                chunks.append((name, data))
        return chunks

    def drain(self) -> list[tuple[str, bytes]]:
        """Everything not read yet (called once the agent has ended)."""
        out: list[tuple[str, bytes]] = []
        while chunk := self.read():
            out.extend(chunk)
        return out

    def _files(self) -> list[Path]:
        found: list[Path] = []
        for root, _dirs, files in os.walk(self.folder):
            found.extend(Path(root, name) for name in files)
        return found


def safe_name(name: str) -> bool:
    """True for a relative name that stays inside the attempt folder (what the orchestrator
    accepts from a remote node before writing there)."""
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts
