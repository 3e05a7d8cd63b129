"""A real local HTTP server that plays a model API for the HTTP agents' tests: each request is
answered by the next step of a script (JSON, a stream of server-sent events in the documented
format, or a hostile answer), and every request body is kept for the test to inspect.

Steps (:class:`Step`): ``json`` (status, body, headers); ``sse`` (events as text, written one
by one and flushed; ``hold_after`` events, then wait until :attr:`ScriptServer.release` is set,
so a test can look at what the agent shows while the answer is still coming); ``raw`` (bytes
as they are, for a captured SSE file); ``endless`` (event-stream or JSON bytes without end, as
fast as the socket takes them); ``trickle`` (one keep-alive comment per tick, forever: a
slow-loris server); ``empty`` (HTTP 200, event-stream, no event). The server counts the bytes
it managed to send (``sent``), so a test can show the agent stopped reading.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engine.workflow.definition import Workflow


@dataclass
class Step:
    """One scripted answer (see the module docstring)."""

    kind: str
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    hold_after: int | None = None


def sse(*events: dict[str, Any] | str, named: bool = False) -> list[str]:
    """Events as SSE text: each dict is JSON ``data`` (named after its ``type`` when
    ``named``, as Anthropic sends them); a string is ``data`` as it is (``[DONE]``)."""
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(f"data: {event}\n\n")
        elif named:
            out.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
        else:
            out.append(f"data: {json.dumps(event)}\n\n")
    return out


class ScriptServer:
    """The server (see the module docstring); use as a context manager."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.release = threading.Event()
        self.stop = threading.Event()
        self.sent = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body))
                step = server.script.pop(0) if server.script else Step("json", 404, {})
                try:
                    server.answer(self, step)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the agent stopped reading: what a bounded client does

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def __enter__(self) -> ScriptServer:
        threading.Thread(
            target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.stop.set()
        self.http.shutdown()
        self.http.server_close()

    def _write(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(data)
        handler.wfile.flush()
        self.sent += len(data)

    def answer(self, handler: BaseHTTPRequestHandler, step: Step) -> None:
        if step.kind == "json":
            data = json.dumps(step.body).encode()
            handler.send_response(step.status)
            for name, value in step.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            self._write(handler, data)
            return
        content_type = "application/json" if step.body == "json" else "text/event-stream"
        handler.send_response(step.status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        for number, chunk in enumerate(self._chunks(step), start=1):
            self._write(handler, chunk)
            if step.hold_after == number:
                self.release.wait(60)

    def _chunks(self, step: Step) -> Iterator[bytes]:
        if step.kind == "sse":
            yield from (event.encode() for event in step.events)
        elif step.kind == "raw":
            yield step.body
        elif step.kind == "endless":
            piece = (
                b"[" * 65536 if step.body == "json"
                else b'data: {"choices":[{"delta":{"content":"' + b"x" * 4000 + b'"}}]}\n\n'
            )  # fmt: skip
            while not self.stop.is_set():
                yield piece
        elif step.kind == "trickle":
            while not self.stop.is_set():
                yield b": keep-alive\n"
                time.sleep(0.05)


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    """A running :class:`ScriptServer` (import this fixture into a test module)."""
    with ScriptServer() as running:
        yield running


def one_task(agent: Any, **task: Any) -> Workflow:
    """A workflow of one task ``a`` on ``agent`` (a short retry backoff)."""
    wf = Workflow("http", agents={"model": agent}, default_agent="model")
    wf.add_task("a", "Say hi.", **{"backoff": 0.01, **task})
    return wf
