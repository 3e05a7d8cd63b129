"""An agent CLI's output log (``stream.log``, ``stderr.log``): append-only, owner-only, with
secrets masked, and bounded.

An agent that prints without end must not fill the disk: once a log holds ``limit`` bytes,
one marker line says so and nothing more is written to it (the output is still read, parsed
and counted; the command agent stops the program itself at its output limit). When the log
closes, a last line says how much was left out. A log is created by its first write, so a
silent program costs no file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from store.model.secret_mask import StreamMask

DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024


def cap_marker(limit: int) -> bytes:
    """The line written where a log reaches its cap."""
    return (
        f"\n[tether: this log reached its limit of {limit:,} bytes; what the program printed "
        "after this point was read but not kept]\n"
    ).encode()


def dropped_marker(dropped: int) -> bytes:
    """The last line of a capped log: how much was left out."""
    return f"[tether: {dropped:,} more bytes were not kept]\n".encode()


class BoundedLog:
    """One log file of an attempt (see the module docstring)."""

    def __init__(self, path: Path | None, limit: int = DEFAULT_MAX_LOG_BYTES) -> None:
        self.path = path
        self.limit = limit
        self.written = 0
        self.dropped = 0
        self._mask = StreamMask()
        self._handle: IO[bytes] | None = None

    @property
    def capped(self) -> bool:
        """True once the log reached its limit."""
        return self.dropped > 0 or self.written >= self.limit

    def write(self, chunk: bytes) -> None:
        """Append ``chunk`` (masked; dropped and counted once the log is full)."""
        if self.path is None or not chunk:
            return
        self._put(self._mask.feed(chunk))

    def close(self) -> None:
        """Write what is still held back and, for a capped log, how much was left out."""
        if self.path is not None:
            self._put(self._mask.finish())
            if self.dropped:
                self._raw(dropped_marker(self.dropped))
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _put(self, data: bytes) -> None:
        if not data:
            return
        room = self.limit - self.written
        if room <= 0:
            self.dropped += len(data)
            return
        kept = data[:room]
        self._raw(kept)
        self.written += len(kept)
        if len(data) > room:
            self.dropped += len(data) - room
            self._raw(cap_marker(self.limit))

    def _raw(self, data: bytes) -> None:
        if self._handle is None:
            assert self.path is not None
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._handle = os.fdopen(fd, "ab", buffering=0)
        self._handle.write(data)
