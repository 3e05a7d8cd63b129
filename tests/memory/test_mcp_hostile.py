"""``tether mcp`` fed what a careless or hostile client sends, over raw JSON-RPC lines on a
real subprocess's stdin: a ``remember`` whose text holds an escaped lone surrogate is
answered (the note is saved with the replacement character), and the server keeps serving."""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from engine.agents.cli.mcp_wiring import tether_program
from store.db.seam import Database
from store.memory.memory_store import MemoryStore

DEADLINE_S = 60.0


class _Client:
    def __init__(self, workspace: Path, database_url: str | None) -> None:
        argv = [*tether_program(), "mcp", "--workspace", str(workspace), "--bank", "hostile"]
        if database_url:
            from store.db.database_url import for_child_process

            argv += ["--database-url", for_child_process(database_url)]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.ids = 0

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def call(self, method: str, params: dict[str, Any], raw: str | None = None) -> Any:
        self.ids += 1
        self.send(raw or json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method,
                                     "params": params}))
        return self.answer(self.ids)

    def answer(self, wanted: int) -> Any:
        assert self.process.stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                message = json.loads(self.process.stdout.readline())
                if message.get("id") == wanted:
                    return message
        raise AssertionError(f"request {wanted} was never answered")

    def close(self) -> str:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        return self.process.stderr.read().decode()


async def test_remember_with_a_lone_surrogate_is_answered(db: Database) -> None:
    client = _Client(db.workspace.root, db.workspace.database_url)
    try:
        client.call("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                   "clientInfo": {"name": "hostile", "version": "1"}})
        client.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        # json.dumps writes the lone surrogate as the escape "\ud800", as a client would.
        saved = client.call("tools/call", {"name": "remember",
                                           "arguments": {"content": "half \ud800 pair"}})
        assert saved["result"]["isError"] is False, saved
        recalled = client.call("tools/call", {"name": "recall", "arguments": {"query": "pair"}})
        assert recalled["result"]["isError"] is False
    finally:
        stderr = client.close()
    assert "Traceback" not in stderr
    (note,) = await MemoryStore(db).list_notes("workflow:hostile", status="any")
    assert note.body == "half \ufffd pair"
