"""A steer for the node's next attempt (``tether steer --next-attempt``), on both backends,
with a real one-shot CLI subprocess that cannot take input and records every prompt it read:
the message waits while the attempt runs, the next attempt (a retry, or the run resumed)
gets it first in its prompt exactly once, and it is recorded as delivered to that attempt;
a node that finishes first refuses it; every refusal is one sentence and writes nothing."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.agents.cli.command import CommandAgent
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.steering import steered_prompt
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.errors import InvalidInputError
from store.read.timeline_reads import read_details
from store.runs.run_store import RunStore
from store.runs.steer_log import SteerRecord
from tests.engine.test_steer import files, until

__all__ = ["files"]  # the fixture, shared with the other steer tests

ONE_SHOT = Path(__file__).with_name("next_attempt_cli.py")
MESSAGE = "Use the metric system."
PREFIX = f"A message from alice for this attempt:\n{MESSAGE}\n\n"


def workflow(retries: int) -> Workflow:
    agent = CommandAgent(command=[sys.executable, str(ONE_SHOT)], preset="json",
                         pass_env=["STEER_READY", "STEER_RECORD"])
    wf = Workflow("one-shot", agents={"cli": agent}, default_agent="cli")
    wf.add_task("work", "Write the report.", retries=retries, backoff=0.0)
    return wf


def prompts(record: Path) -> list[str]:
    return [json.loads(line)["prompt"] for line in record.read_text().splitlines()]


async def first_attempt_running(db: Database, wf: Workflow, ready: Path) -> tuple[Any, str]:
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    task = asyncio.ensure_future(engine.start(wf, {}))

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the first attempt to run")
    (run,) = await RunStore(db).list_runs()
    return task, run.run_id


async def test_the_next_attempt_of_a_retry_reads_the_message_first_exactly_once(
    db: Database, files: tuple[Path, Path]
) -> None:
    ready, record = files
    task, run_id = await first_attempt_running(db, workflow(retries=2), ready)
    store = RunStore(db)
    later = await store.queue_steer(run_id, "work", 0, MESSAGE, "alice", next_attempt=True)
    now = await store.queue_steer(run_id, "work", 0, "Stop now.", "bob")

    async def refused() -> Any:
        return next((s for s in await store.list_steers(run_id) if s.state == "refused"), None)

    decided: SteerRecord = await until(refused, "the one-shot CLI to refuse the steer for now")
    assert decided.steer_id == now.steer_id and "--next-attempt" in (decided.refusal or "")
    ready.with_name("ready.go").touch()  # attempt 1 fails (transient): attempt 2 runs
    assert (await task).status == "finished"

    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
    steers = {s.steer_id: s for s in await store.list_steers(run_id)}
    assert steers[later.steer_id].state == "delivered"
    assert steers[later.steer_id].attempt == 2
    assert steers[later.steer_id].deliver == "next-attempt"
    attempts = await store.list_attempts(run_id, "work")
    assert [a.attempt for a in attempts] == [1, 2]
    assert (attempts[-1].prompt or "").startswith(PREFIX)
    events = await store.recent_events(500, run_id=run_id)
    delivered = [e for e in events if e.type == "steer.delivered"]
    assert len(delivered) == 1 and delivered[0].attempt == 2
    assert delivered[0].payload["deliver"] == "next-attempt"
    marks = (await read_details(db, run_id, ["work#0"]))["work#0"].steers
    assert [(m.attempt, m.delivered, m.label) for m in marks] == [  # in the order sent
        (2, True, f"steer for the next attempt from alice: {MESSAGE}"),
        (1, False, "steer refused, from bob: Stop now.")]


async def test_a_resumed_run_reads_the_message_and_a_finished_node_refuses_it(
    db: Database, files: tuple[Path, Path]
) -> None:
    ready, record = files
    wf = workflow(retries=0)
    task, run_id = await first_attempt_running(db, wf, ready)
    ready.with_name("ready.go").touch()
    assert (await task).status == "failed"
    store = RunStore(db)
    before = await store.list_steers(run_id)
    with pytest.raises(InvalidInputError, match="Node work already failed, so it cannot take"):
        await store.queue_steer(run_id, "work", 0, "Now?", "alice")
    assert await store.list_steers(run_id) == before  # nothing written
    later = await store.queue_steer(run_id, "work", 0, MESSAGE, "alice", next_attempt=True)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    assert (await engine.resume(wf, run_id)).status == "finished"
    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
    (steer,) = await store.list_steers(run_id)
    assert (steer.steer_id, steer.state, steer.attempt) == (later.steer_id, "delivered", 2)

    # The node finished: no attempt of it will come, for now or for later.
    for next_attempt in (True, False):
        with pytest.raises(InvalidInputError, match="Node work already finished") as refusal:
            await store.queue_steer(run_id, "work", 0, "Again.", "alice",
                                    next_attempt=next_attempt)
        assert str(refusal.value).count(". ") <= 1
    assert len(await store.list_steers(run_id)) == 1
    assert len(prompts(record)) == 2  # nothing ran again


async def test_a_node_that_finishes_first_refuses_the_waiting_message(
    db: Database, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ready, record = files
    record.write_text(json.dumps({"prompt": "(an earlier run)"}) + "\n")  # no failure now
    wf = workflow(retries=2)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    store = RunStore(db)
    run = await store.create_run("one-shot", status="pending")
    await store.upsert_node(run.run_id, "work", 0, "pending")
    await store.queue_steer(run.run_id, "work", 0, MESSAGE, "alice", next_attempt=True)
    assert (await engine.resume(wf, run.run_id)).status == "finished"
    (steer,) = await store.list_steers(run.run_id)
    # Queued before attempt 1 started: attempt 1 is its next attempt.
    assert (steer.state, steer.attempt) == ("delivered", 1)
    assert prompts(record)[1] == PREFIX + "Write the report."


def test_steered_prompt_puts_each_message_first_in_order() -> None:
    one = SteerRecord("s-1", "r", "n", 0, "First.", "alice", "delivered", 0)
    two = one._replace(steer_id="s-2", message="Second.", sent_by="bob")
    assert steered_prompt("Task.", []) == "Task."
    assert steered_prompt("Task.", [one, two]) == (
        "A message from alice for this attempt:\nFirst.\n\n"
        "A message from bob for this attempt:\nSecond.\n\nTask.")
