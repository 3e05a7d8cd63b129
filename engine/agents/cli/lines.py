"""Splitting a subprocess's output into lines with bounded memory (pure, no I/O).

asyncio's line reader fails on a line over 64 KiB ("Separator is not found, and chunk exceed
the limit"); agent CLIs print single JSON lines far longer than that (a tool result, a long
answer). :class:`LineSplitter` takes byte chunks of any size and yields complete lines; a line
longer than ``max_line_bytes`` is not kept whole: its first ``max_line_bytes`` bytes are
yielded with ``truncated=True`` once the line ends, so memory stays bounded however long a line
is. The full bytes are in the attempt's stream log, which is written chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Line:
    """One line of output, decoded as UTF-8 (invalid bytes replaced), without its newline."""

    text: str
    truncated: bool = False
    size: int = 0


class LineSplitter:
    """Feed bytes, get lines; see the module docstring."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._parts: list[bytes] = []
        self._kept = 0
        self._size = 0

    def _take(self, piece: bytes) -> None:
        self._size += len(piece)
        room = self.max_line_bytes - self._kept
        if room > 0:
            kept = piece[:room]
            self._parts.append(kept)
            self._kept += len(kept)

    def _emit(self) -> Line:
        data = b"".join(self._parts)
        line = Line(
            data.decode("utf-8", errors="replace").rstrip("\r"),
            truncated=self._size > self._kept,
            size=self._size,
        )
        self._parts, self._kept, self._size = [], 0, 0
        return line

    def feed(self, chunk: bytes) -> Iterator[Line]:
        """The lines that ``chunk`` completes."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end == -1:
                if start < len(chunk):
                    self._take(chunk[start:])
                return
            self._take(chunk[start:end])
            yield self._emit()
            start = end + 1

    def finish(self) -> Iterator[Line]:
        """The last line when the output did not end with a newline."""
        if self._size:
            yield self._emit()


class TailBuffer:
    """The last ``limit`` characters of a text stream (for an error message's stderr tail)."""

    def __init__(self, limit: int = 8192) -> None:
        self.limit = limit
        self._text = ""

    def add(self, text: str) -> None:
        """Append text, keeping only the tail."""
        self._text = (self._text + text)[-self.limit :]

    @property
    def text(self) -> str:
        """What is kept."""
        return self._text

    def last_lines(self, count: int = 3, max_chars: int = 400) -> str:
        """The last non-empty lines joined with ' | ', at most ``max_chars``."""
        lines = [line.strip() for line in self._text.splitlines() if line.strip()]
        return " | ".join(lines[-count:])[-max_chars:]
