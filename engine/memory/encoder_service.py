"""One shared encoder process per workspace, so the model stays out of the processes that
should stay light (the dashboard and its embedded engine).

``tether memory encoder --workspace DIR`` (started on demand, detached) loads the workspace's
encoder once and answers on a Unix socket in a folder only its user can enter
(``$TMPDIR/tether-<uid>/``, named after the workspace and the encoder). It takes an exclusive
lock before the model loads, so a second one started at the same moment exits at once, and it
stops by itself once nobody has asked anything for :data:`IDLE_S` seconds (or its workspace
folder is gone).

:class:`RemoteEncoder` is the client: the same ``embed``/``embed_query`` as a local encoder
(one persistent connection, one request at a time), starting the service when it is not
running and waiting for it (:data:`START_WAIT_S`). Requests are one JSON line each; the
answer is a JSON line, vectors as base64 float32 (little-endian).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.detached_process import start_detached
from engine.env_settings import env_number
from engine.memory.query_text import QueryVectors, focus_query
from store.workspace.layout import Workspace

IDLE_ENV = "TETHER_ENCODER_IDLE_S"
IDLE_S = 120.0
START_WAIT_S = 60.0
MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_TEXTS = 4096


def service_paths(workspace: Workspace, encoder: str) -> tuple[Path, Path]:
    """The socket and the lock file of ``workspace``'s encoder service (short paths: a Unix
    socket path is limited to about 100 bytes)."""
    folder = Path(tempfile.gettempdir()) / f"tether-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    key = f"{workspace.root.resolve()}\n{workspace.database_url or ''}\n{encoder}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return folder / f"enc-{digest}.sock", folder / f"enc-{digest}.lock"


def _pack(vectors: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode()


def _unpack(text: str, dim: int) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").reshape(-1, dim).copy()


# -- the service -----------------------------------------------------------------------------


class EncoderService:
    """The service's state: the encoder, when it was last asked, the workspace's embedder."""

    def __init__(self, workspace: Workspace, encoder: Any, idle_s: float) -> None:
        self.workspace = workspace
        self.encoder = encoder
        self.idle_s = idle_s
        self.last = time.monotonic()
        self.lock = asyncio.Lock()
        self.catching_up: asyncio.Task[None] | None = None
        self.again = False
        self.catch_up_requests = 0

    async def encode(self, texts: list[str], query: bool) -> np.ndarray:
        async with self.lock:  # one forward pass at a time: the model runs on one thread
            if query:
                vectors = [self.encoder.inner.embed_query(t) for t in texts]
                return np.stack(vectors) if vectors else np.zeros((0, self.encoder.dim))
            return await asyncio.to_thread(self.encoder.embed, texts)

    def catch_up(self) -> None:
        """Embed what lacks a vector in the workspace (once more if asked while running)."""
        if self.catching_up is not None and not self.catching_up.done():
            self.again = True
            return
        self.catching_up = asyncio.ensure_future(self._catch_up())

    async def _catch_up(self) -> None:
        from engine.memory.semantic_recall import Embedder
        from store.db.backends import open_database

        with contextlib.suppress(Exception):  # keyword recall finds what stays unembedded
            async with await open_database(self.workspace, create=False) as db:
                embedder = Embedder(db, _Locked(self))
                self.again = True
                while self.again:
                    self.again = False
                    while await embedder.catch_up():
                        self.last = time.monotonic()

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        self.last = time.monotonic()
        op = request.get("op")
        if op == "hello":
            return {"ok": True, "model_id": self.encoder.model_id, "dim": self.encoder.dim,
                    "pid": os.getpid(), "catch_up_requests": self.catch_up_requests}
        if op == "catch_up":
            self.catch_up_requests += 1
            self.catch_up()
            return {"ok": True}
        if op == "settle":  # wait for a running catch-up without starting one
            while self.catching_up is not None and not self.catching_up.done():
                await asyncio.shield(self.catching_up)
            return {"ok": True}
        texts = request.get("texts")
        if op == "embed" and isinstance(texts, list) and len(texts) <= MAX_TEXTS and all(
                isinstance(t, str) for t in texts):
            vectors = await self.encode(texts, bool(request.get("query")))
            return {"ok": True, "vectors": _pack(vectors)}
        return {"ok": False, "error": "unknown or malformed request"}

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = await self.answer(json.loads(line))
                except (ValueError, TypeError) as error:
                    reply = {"ok": False, "error": f"bad request: {error}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    def idle(self) -> bool:
        busy = self.catching_up is not None and not self.catching_up.done()
        gone = not self.workspace.root.exists()
        return gone or (not busy and time.monotonic() - self.last > self.idle_s)


class _Locked:
    """The service's encoder as the embedder sees it (sharing the service's lock)."""

    def __init__(self, service: EncoderService) -> None:
        self.service = service
        self.model_id = service.encoder.model_id
        self.dim = service.encoder.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.service.encoder.embed(texts))

    def embed_query(self, query: str) -> np.ndarray:
        return np.asarray(self.service.encoder.embed_query(query))


async def serve(workspace: Workspace, encoder_name: str, *, catch_up: bool = False) -> int:
    """Run the service until idle; 0 also when another one already serves the workspace, 3
    when no encoder can load here."""
    from engine.memory.encoders import load_encoder

    idle_s = idle_from_env()
    path, lock_path = service_paths(workspace, encoder_name)
    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another service holds it (and answers on the socket)
        encoder = await asyncio.to_thread(load_encoder, encoder_name)
        if encoder is None:
            return 3
        service = EncoderService(workspace, encoder, idle_s)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale socket of a service that died: the lock is ours now
        server = await asyncio.start_unix_server(service.client, path=str(path),
                                                 limit=MAX_REQUEST_BYTES)
        os.chmod(path, 0o600)
        if catch_up:
            service.catch_up()
        try:
            while not service.idle():
                await asyncio.sleep(0.5)
        finally:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return 0


def idle_from_env() -> float:
    """``TETHER_ENCODER_IDLE_S`` (seconds above 0), :data:`IDLE_S` when unset.

    Raises:
        InvalidInputError: it is set to anything else.
    """
    return env_number(IDLE_ENV, IDLE_S, above=0)


# -- the client ------------------------------------------------------------------------------


def start_service(workspace: Workspace, encoder_name: str, *, catch_up: bool = False) -> None:
    """Start ``tether memory encoder`` for the workspace, detached (it exits at once when one
    is already running)."""
    # A PostgreSQL workspace's URL reaches the child through the environment or config.toml,
    # never on its command line (visible to every user).
    command = [sys.executable, "-m", "tui.cli.main", "memory", "encoder", "--workspace",
               str(workspace.root), "--encoder", encoder_name]
    if catch_up:
        command.append("--catch-up")
    start_detached(command)


def ask_catch_up(workspace: Workspace, encoder_name: str) -> bool:
    """Ask the workspace's running encoder service to embed what lacks a vector (a write's
    background embedding: its model is already loaded, so no second one loads). False when no
    service answers; nothing is started."""
    path, _ = service_paths(workspace, encoder_name)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        try:
            sock.connect(str(path))
            sock.sendall(b'{"op": "catch_up"}\n')
            with sock.makefile("rb") as answer:
                line = answer.readline()
        except OSError:
            return False
    try:
        return bool(json.loads(line).get("ok"))
    except ValueError:
        return False


class RemoteEncoder:
    """An encoder answered by the workspace's encoder service (see the module docstring)."""

    def __init__(self, workspace: Workspace, encoder_name: str,
                 start_wait_s: float = START_WAIT_S) -> None:
        idle_from_env()  # refused here, not by a detached service this waits a minute for
        self.workspace = workspace
        self.encoder_name = encoder_name
        self.path, _ = service_paths(workspace, encoder_name)
        self.start_wait_s = start_wait_s
        self._socket: socket.socket | None = None
        self._file: Any = None
        self._lock = threading.Lock()
        self.queries = QueryVectors()
        hello = self._ask({"op": "hello"})
        self.model_id: str = str(hello["model_id"])
        self.dim: int = int(hello["dim"])
        self.service_pid: int = int(hello["pid"])

    def _connect(self) -> None:
        deadline = time.monotonic() + self.start_wait_s
        started = False
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.path))
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise RuntimeError("the workspace's encoder service did not start") from None
                if not started:
                    start_service(self.workspace, self.encoder_name)
                    started = True
                time.sleep(0.05)  # the service is loading its model
                continue
            self._socket, self._file = sock, sock.makefile("rb")
            return

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            for retry in (False, True):
                if self._socket is None:
                    self._connect()
                assert self._socket is not None
                try:
                    self._socket.sendall(json.dumps(request).encode() + b"\n")
                    line = self._file.readline()
                    if not line:
                        raise ConnectionError("the encoder service closed the connection")
                    reply: dict[str, Any] = json.loads(line)
                    break
                except (OSError, ValueError):
                    self.close()  # it stopped when idle: start it again, once
                    if retry:
                        raise
            if not reply.get("ok"):
                raise RuntimeError(f"the encoder service refused: {reply.get('error')}")
            return reply

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of documents, one per text, in order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _unpack(self._ask({"op": "embed", "texts": list(texts)})["vectors"], self.dim)

    def embed_query(self, query: str) -> np.ndarray:
        """A query's unit vector (focused, cached here: a repeated query costs no request)."""
        def remote(text: str) -> np.ndarray:
            reply = self._ask({"op": "embed", "texts": [text], "query": True})
            return _unpack(reply["vectors"], self.dim)[0]

        return self.queries.get(focus_query(query), remote)

    def cached_query(self, query: str) -> np.ndarray | None:
        """The query's vector when it is cached here (None otherwise); asks nothing."""
        return self.queries.peek(focus_query(query))

    def close(self) -> None:
        """Drop the connection (the service keeps running until idle)."""
        for handle in (self._file, self._socket):
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()
        self._socket = self._file = None
