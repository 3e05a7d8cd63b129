"""``tether steer`` as a person runs it: a real ``tether`` process steers a node that a real
engine runs on the fake stream-json Claude Code (a subprocess recording what it received);
``--wait`` prints the delivery, ``tether node`` lists the steer, and a steer for a node that
finished is refused with one sentence (exit 2) and writes nothing."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.engine.test_steer import claude, until, workflow

ROOT = Path(__file__).resolve().parents[2]


async def tether(workspace: Workspace, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace.root),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_steer_from_the_command_line(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready, record = tmp_path / "ready", tmp_path / "record.jsonl"
    monkeypatch.setenv("STEER_READY", str(ready))
    monkeypatch.setenv("STEER_RECORD", str(record))
    async with await open_database(workspace, create=True) as db:
        engine = Engine(db, config=EngineConfig(poll_interval_s=0.05))
        task = asyncio.ensure_future(engine.start(workflow(claude()), {}))

        async def is_ready() -> bool:
            return ready.exists()

        await until(is_ready, "the first turn to be under way")
        (run,) = await RunStore(db).list_runs()
        code, out, err = await tether(workspace, "steer", run.run_id, "work",
                                      "Cite the source.", "--as", "alice", "--wait", "60")
        assert code == 0, err
        assert "from alice: 'Cite the source.' — delivered to attempt 1" in out
        assert (await task).status == "finished"
    messages = [json.loads(line)["message"] for line in record.read_text().splitlines()]
    assert messages == ["Write the summary.", "Cite the source."]
    code, out, _ = await tether(workspace, "node", "work", "--run", run.run_id)
    assert "Steers:" in out and "delivered to attempt 1" in out
    code, _, err = await tether(workspace, "steer", run.run_id, "work", "Again?")
    assert code == 2
    assert err.strip() == (f"tether: Node work already finished, so it cannot take a message; "
                           f"fork the run from it instead (tether fork {run.run_id} work).")


async def test_steer_for_the_next_attempt_from_the_command_line(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot CLI failed the node: ``--next-attempt`` queues the message for the node's
    next attempt, the resumed run's attempt 2 reads it first, ``tether node`` says so."""
    from tests.engine.test_steer_next_attempt import MESSAGE, PREFIX, prompts
    from tests.engine.test_steer_next_attempt import workflow as one_shot

    ready, record = tmp_path / "ready", tmp_path / "record.jsonl"
    monkeypatch.setenv("STEER_READY", str(ready))
    monkeypatch.setenv("STEER_RECORD", str(record))
    ready.with_name("ready.go").touch()  # attempt 1 fails at once
    wf = one_shot(retries=0)
    async with await open_database(workspace, create=True) as db:
        assert (await Engine(db).start(wf, {})).status == "failed"
        (run,) = await RunStore(db).list_runs()
    code, _, err = await tether(workspace, "steer", run.run_id, "work", MESSAGE)
    assert code == 2 and err.strip().startswith("tether: Node work already failed, so it")
    code, out, err = await tether(workspace, "steer", run.run_id, "work", MESSAGE,
                                  "--as", "alice", "--next-attempt")
    assert code == 0, err
    assert "delivered at the node's next attempt, first in its prompt" in out
    _, out, _ = await tether(workspace, "node", "work", "--run", run.run_id)
    assert f"from alice: {MESSAGE!r} — queued for the next attempt" in out
    async with await open_database(workspace) as db:
        assert (await Engine(db).resume(wf, run.run_id)).status == "finished"
    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
    _, out, _ = await tether(workspace, "node", "work", "--run", run.run_id)
    assert f"{MESSAGE!r} — delivered to attempt 2 (first in its prompt)" in out
    code, out, _ = await tether(workspace, "node", "work", "--run", run.run_id,
                                "--format", "json")
    (steer,) = json.loads(out)["steers"]
    assert (steer["state"], steer["attempt"], steer["deliver"]) == ("delivered", 2,
                                                                   "next-attempt")
