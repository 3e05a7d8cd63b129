"""Server-sent events, decoded with bounded memory (pure, no I/O).

The format (WHATWG HTML, "Server-sent events"): lines ``field: value``; ``data`` lines of one
event are joined with newlines, ``event`` names it, a blank line dispatches it, a line starting
with ``:`` is a comment (keep-alive); a line may end in CR, LF or CRLF. OpenAI-compatible
servers send ``data: {json}`` events and ``data: [DONE]`` at the end; Anthropic names each
event (``event: message_start`` …). Lines come from :class:`~engine.agents.cli.lines.LineSplitter`
so a line, and therefore an event, never holds more than its limit in memory; a longer one is
reported, never parsed. (``httpx-sse`` reads lines without a bound, which is why this exists.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from engine.agents.cli.lines import LineSplitter

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""The largest event kept (a whole non-streamed answer in one event fits)."""


@dataclass(frozen=True)
class ServerEvent:
    """One dispatched event: its name (``message`` when unnamed) and its data."""

    event: str
    data: str


class EventTooLarge(ValueError):
    """A line or event exceeded the decoder's limit."""


class SseDecoder:
    """Feed response bytes, get :class:`ServerEvent` values (see the module docstring)."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self._lines = LineSplitter(max_event_bytes)
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._pending_cr = False

    def feed(self, chunk: bytes) -> Iterator[ServerEvent]:
        """The events that ``chunk`` completes. Raises EventTooLarge."""
        # LineSplitter splits on LF; a bare CR also ends a line in SSE.
        if b"\r" in chunk or self._pending_cr:
            chunk = self._normalise(chunk)
        for line in self._lines.feed(chunk):
            if line.truncated:
                raise EventTooLarge(f"an event line over {self.max_event_bytes:,} bytes")
            event = self._line(line.text)
            if event is not None:
                yield event

    def finish(self) -> Iterator[ServerEvent]:
        """The last event when the body ended without its blank line."""
        for line in self._lines.finish():
            event = self._line(line.text)
            if event is not None:
                yield event
        if self._data:
            yield self._dispatch()

    def _normalise(self, chunk: bytes) -> bytes:
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = chunk.endswith(b"\r")
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _line(self, text: str) -> ServerEvent | None:
        if not text:
            if not self._data:
                self._event = ""  # an event without data is dropped, as browsers do
                return None
            return self._dispatch()
        if text.startswith(":"):
            return None  # a comment (keep-alive)
        field, _, value = text.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            self._size += len(value) + 1
            if self._size > self.max_event_bytes:
                raise EventTooLarge(f"an event over {self.max_event_bytes:,} bytes")
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None  # id, retry and unknown fields: not used by the model APIs

    def _dispatch(self) -> ServerEvent:
        event = ServerEvent(self._event or "message", "\n".join(self._data))
        self._event, self._data, self._size = "", [], 0
        return event


class StreamError(Exception):
    """An error the server reported inside a stream that had started with HTTP 200 (an
    ``error`` event), with the HTTP status its type stands for (None when it names none)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""Anthropic's error types and their HTTP statuses (docs "Errors"), for an error event."""
