"""The workspace's shared encoder process: started on demand by a client, one per workspace
(a second start exits at once), the same vectors as the model in-process, stopped when idle;
and an engine opened as the dashboard opens it recalls by meaning without the model ever
loading into its own process."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from semantic_support import require_semantic

from engine.memory.encoder_service import IDLE_ENV, RemoteEncoder, service_paths
from engine.memory.encoders import load_encoder
from store.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]


def wait_for_exit(pid: int, timeout_s: float) -> bool:
    """True when process ``pid`` (not our child) exits within ``timeout_s`` (a pidfd: no
    polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return bool(ready)
    finally:
        os.close(fd)


def test_one_shared_encoder_per_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_semantic()
    monkeypatch.setenv(IDLE_ENV, "2")
    workspace = Workspace(tmp_path / "ws")
    workspace.root.mkdir()
    first = RemoteEncoder(workspace, "auto")
    second = RemoteEncoder(workspace, "auto")
    assert first.service_pid == second.service_pid != os.getpid()
    local = load_encoder()
    assert local is not None and first.model_id == local.model_id
    texts = ["Sam picks up the kids on Tuesdays.", "The boiler is serviced in March."]
    assert np.allclose(first.embed(texts), local.embed(texts), atol=1e-5)
    query = second.embed_query("Who collects the children?")
    assert np.allclose(query, local.embed_query("Who collects the children?"), atol=1e-5)
    assert second.embed_query("Who collects   the children?") is query  # cached client-side
    # A second service for the same workspace exits at once: the first holds the lock.
    again = subprocess.run(
        [sys.executable, "-m", "tui.cli.main", "memory", "encoder", "--workspace",
         str(workspace.root)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stderr == ""
    first.close()
    second.close()
    assert wait_for_exit(first.service_pid, 60)  # idle for 2 s: it stopped
    socket_path, _ = service_paths(workspace, "auto")
    assert not socket_path.exists()
    # The process that started it reaped it: no zombie is left under a long-lived dashboard.
    for thread in threading.enumerate():
        if thread.name == "reap-detached":
            thread.join(30)
    assert not Path(f"/proc/{first.service_pid}").exists()


DASHBOARD_ENGINE = '''
import asyncio, sys
from engine import MemoryConfig, TaskContext, Workflow
from engine.run.wiring import open_engine
from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from store.workspace.layout import Workspace

workflow = Workflow("ask", agents={"sim": {"type": "simulated", "latency_ms": 0}},
                    default_agent="sim")

@workflow.task(id="ask", memory=MemoryConfig(bank="household",
                                             recall="Who collects the children after class?"))
def ask(ctx: TaskContext) -> str:
    return "Plan the week."

async def main() -> None:
    from pathlib import Path
    db = await open_database(Workspace(Path(sys.argv[1])), create=True)
    memory = MemoryStore(db)
    await memory.save_note("workflow:household", "Sam picks up the kids from school on Tuesdays.")
    engine = open_engine(db, shared_encoder=True)
    engine.hooks.memory.written()  # as after a write: the service embeds the note
    await engine.hooks.memory.drain()
    outcome = await engine.start(workflow)
    block = await engine.hooks.memory.runs.get_memory_block(outcome.run_id, "ask", 0)
    print(outcome.status, "onnxruntime" in sys.modules, "tokenizers" in sys.modules)
    print(block.text)
    await db.close()

asyncio.run(main())
'''


def test_the_dashboards_engine_recalls_through_the_shared_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_semantic()
    monkeypatch.setenv(IDLE_ENV, "2")
    script = tmp_path / "dashboard_engine.py"
    script.write_text(DASHBOARD_ENGINE)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "ws")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    status, *block = done.stdout.splitlines()
    assert status == "finished False False"  # no model library in this process
    assert "Sam picks up the kids" in "\n".join(block)


def test_a_writes_background_embedding_uses_the_running_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the workspace's encoder service up (the dashboard open), the detached embedding a
    write starts hands the work to it: no second model loads for a `notes add`."""
    require_semantic()
    monkeypatch.setenv(IDLE_ENV, "30")
    workspace = Workspace(tmp_path / "ws")
    env = {**os.environ, "TETHER_NO_BACKGROUND_EMBED": "1"}
    tether = [sys.executable, "-m", "tui.cli.main"]
    added = subprocess.run([*tether, "notes", "add", "--workspace", str(workspace.root),
                            "workflow:household", "Sam picks up the kids on Tuesdays."],
                           cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert added.returncode == 0, added.stderr
    service = RemoteEncoder(workspace, "auto")
    assert service._ask({"op": "hello"})["catch_up_requests"] == 0
    reindex = subprocess.run([*tether, "memory", "reindex", "--quiet", "--workspace",
                              str(workspace.root)], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, env=env)
    assert reindex.returncode == 0 and reindex.stderr == ""
    assert service._ask({"op": "hello"})["catch_up_requests"] == 1
    service._ask({"op": "settle"})
    status = subprocess.run([*tether, "memory", "status", "--format", "json", "--workspace",
                             str(workspace.root)], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, env=env)
    assert '"vectors": 1' in status.stdout, status.stdout
    service.close()
