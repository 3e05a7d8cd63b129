"""One HTTP round trip of an HTTP agent, read with bounded memory: a JSON answer, or a stream of
server-sent events fed to an accumulator as they arrive (:mod:`engine.agents.http.openai_stream`,
:mod:`engine.agents.http.anthropic_stream`), each piece of answer text handed on at once so the
attempt's log moves while the model writes.

Nothing a server sends can make it unbounded: a body (JSON or the whole stream) stops being
read past ``max_bytes`` (:class:`ResponseTooLarge`), an event past the SSE decoder's limit,
and an error body past :data:`ERROR_BODY_BYTES`. The deadline for the whole exchange is the
caller's (``asyncio.timeout`` around it), so a server that trickles bytes cannot hold it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from engine.agents.http.sse import EventTooLarge, ServerEvent, SseDecoder, StreamError

ERROR_BODY_BYTES = 64 * 1024
"""How much of an error answer is read (its message is in the first bytes)."""


class Accumulator(Protocol):
    """What a streamed answer is fed to (one per request)."""

    events: int
    done: bool

    def feed(self, event: ServerEvent) -> str: ...

    def response(self) -> dict[str, Any]: ...


@dataclass
class Reply:
    """A successful answer, as the non-streamed response shape, and whether it streamed."""

    data: dict[str, Any]
    streamed: bool = False


@dataclass
class Refused:
    """An error answer: its status, the start of its body and its headers."""

    status: int
    text: str
    headers: httpx.Headers


class ResponseTooLarge(Exception):
    """The server sent more than the agent reads."""


class EmptyStream(StreamError):
    """HTTP 200 for a streamed request, then no event at all."""


class CutStream(StreamError):
    """The stream ended (or broke) before the answer was complete."""


async def _bounded(response: httpx.Response, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(f"the response is larger than {limit:,} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def _error_text(response: httpx.Response) -> str:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk[: ERROR_BODY_BYTES - size])
        size += len(chunk)
        if size >= ERROR_BODY_BYTES:
            break  # the rest is not read
    return b"".join(parts).decode("utf-8", errors="replace")


async def _events(
    response: httpx.Response, accumulator: Accumulator, limit: int, on_text: Callable[[str], None]
) -> None:
    decoder = SseDecoder()
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"the stream is larger than {limit:,} bytes")
            for event in decoder.feed(chunk):
                text = accumulator.feed(event)
                if text:
                    on_text(text)
                if accumulator.done:
                    return
        for event in decoder.finish():
            text = accumulator.feed(event)
            if text:
                on_text(text)
    except EventTooLarge as error:
        raise ResponseTooLarge(str(error)) from error
    if accumulator.events == 0:
        raise EmptyStream("the server answered HTTP 200 and then sent no event")
    if not accumulator.done:
        raise CutStream("the stream ended before the answer was complete")


async def exchange(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    *,
    accumulator: Accumulator | None,
    max_bytes: int,
    on_text: Callable[[str], None],
) -> Reply | Refused:
    """POST ``body``; the answer, or the refusal to retry or report. Raises httpx.HTTPError
    (no answer), StreamError (the stream failed after HTTP 200), ResponseTooLarge, and
    ValueError for a body that is not JSON."""
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code >= 400:
            return Refused(response.status_code, await _error_text(response), response.headers)
        streamed = "text/event-stream" in response.headers.get("content-type", "")
        if accumulator is not None and streamed:
            await _events(response, accumulator, max_bytes, on_text)
            return Reply(accumulator.response(), streamed=True)
        data = json.loads(await _bounded(response, max_bytes))
        if not isinstance(data, dict):
            raise ValueError("the body is not a JSON object")
        return Reply(data)
