"""A steer for the next attempt sent by another process (a real ``tether steer --next-attempt``)
at the worst moments, on both backends: after the run's steer watch last looked (its monitor
does not poll during these runs) and right before an attempt's start, or while an attempt
runs. Each lands exactly once: in the next attempt's prompt (marked delivered by that
attempt's start), or refused in the transaction that finishes the node."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.steering import SteerWatch
from store.db.seam import Database
from store.runs.run_store import RunStore
from store.workspace.layout import DATABASE_URL_ENV_VAR, Workspace
from tests.cli.test_steer_cli import tether
from tests.engine.test_steer import files, until
from tests.engine.test_steer_next_attempt import MESSAGE, PREFIX, prompts, workflow

__all__ = ["files"]  # the fixture, shared with the other steer tests

NO_POLL = EngineConfig(poll_interval_s=600)
"""The run's watch reads its steers before it dispatches anything and as it ends, never
between: only the attempts' own statements can learn of a steer sent meanwhile."""


async def steer_from_another_process(workspace: Workspace, run_id: str) -> None:
    code, _, err = await tether(workspace, "steer", run_id, "work", MESSAGE, "--as", "alice",
                                "--next-attempt")
    assert code == 0, err


@pytest.fixture
def cli_env(any_workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """The workspace, with the database a ``tether`` process opens (PostgreSQL: by URL)."""
    if any_workspace.database_url:
        monkeypatch.setenv(DATABASE_URL_ENV_VAR, any_workspace.database_url)
    return any_workspace


def right_before_the_first_start(monkeypatch: pytest.MonkeyPatch, workspace: Workspace,
                                 run_ids: list[str]) -> None:
    """Send the steer once the first attempt has asked the watch (which knew of none) and
    before its start is written: too late for its prompt."""
    looked = SteerWatch.next_attempt_steers

    async def then_steer(self: SteerWatch, unit: Any) -> Any:
        steers = await looked(self, unit)
        if not run_ids:
            run_ids.append(self.run_id)
            await steer_from_another_process(workspace, self.run_id)
        return steers

    monkeypatch.setattr(SteerWatch, "next_attempt_steers", then_steer)


async def delivered_once(store: RunStore, run_id: str, attempt: int) -> None:
    (steer,) = await store.list_steers(run_id)
    assert (steer.state, steer.attempt, steer.deliver) == ("delivered", attempt, "next-attempt")
    events = await store.recent_events(500, run_id=run_id)
    assert [e.attempt for e in events if e.type == "steer.delivered"] == [attempt]
    assert not [e for e in events if e.type == "steer.refused"]
    (*_, last) = await store.list_attempts(run_id, "work")
    assert (last.attempt, (last.prompt or "").startswith(PREFIX)) == (attempt, True)


async def test_sent_right_before_an_attempt_starts_it_goes_to_the_retry(
    db: Database, cli_env: Workspace, files: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ready, record = files
    run_ids: list[str] = []
    right_before_the_first_start(monkeypatch, cli_env, run_ids)
    task = asyncio.ensure_future(Engine(db, config=NO_POLL).start(workflow(retries=2), {}))

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the first attempt to run")
    ready.with_name("ready.go").touch()  # attempt 1 fails (transient): attempt 2 runs
    assert (await task).status == "finished"
    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
    await delivered_once(RunStore(db), run_ids[0], attempt=2)


async def test_sent_while_an_attempt_runs_it_goes_to_the_retry(
    db: Database, cli_env: Workspace, files: tuple[Path, Path]
) -> None:
    ready, record = files
    task = asyncio.ensure_future(Engine(db, config=NO_POLL).start(workflow(retries=2), {}))

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the first attempt to run")
    store = RunStore(db)
    (run,) = await store.list_runs()
    await steer_from_another_process(cli_env, run.run_id)
    ready.with_name("ready.go").touch()
    assert (await task).status == "finished"
    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
    await delivered_once(store, run.run_id, attempt=2)


async def test_sent_right_before_the_last_attempt_the_node_end_refuses_it(
    db: Database, cli_env: Workspace, files: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, record = files
    record.write_text(json.dumps({"prompt": "(an earlier run)"}) + "\n")  # no failure now
    run_ids: list[str] = []
    right_before_the_first_start(monkeypatch, cli_env, run_ids)
    polled_refusals: list[Any] = []
    decide = RunStore.decide_steer

    async def counted(self: RunStore, steer: Any, attempt: int, **kw: Any) -> bool:
        polled_refusals.append(steer)  # the watch's poll refuses through here, not the end
        return await decide(self, steer, attempt, **kw)

    monkeypatch.setattr(RunStore, "decide_steer", counted)
    assert (await Engine(db, config=NO_POLL).start(workflow(retries=2), {})).status == "finished"
    assert prompts(record)[1:] == ["Write the report."]  # too late for attempt 1's prompt
    store = RunStore(db)
    (steer,) = await store.list_steers(run_ids[0])
    assert (steer.state, steer.attempt) == ("refused", 1)
    assert steer.refusal == ("Node work finished at attempt 1, so no next attempt came to read "
                             "the message; nothing was delivered.")
    assert polled_refusals == []  # refused in the transaction that finished the node
    events = await store.recent_events(500, run_id=run_ids[0])
    assert [e.type for e in events if e.type.startswith("steer.")] == [
        "steer.queued", "steer.refused"]


async def test_an_attempt_the_run_stops_before_its_agent_runs_gives_the_message_back(
    db: Database, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 2's start takes the message; a cancel arrives while that start is committed, so
    its agent never runs: the message waits again, and the resumed run's attempt 3 gets it."""
    from engine.run.execution import RunExecution

    ready, record = files
    started, halting = RunStore.start_attempt, RunExecution.halting
    cancel_now = [False]

    async def start(self: RunStore, *args: Any, **kw: Any) -> int:
        left = await started(self, *args, **kw)
        cancel_now[0] = cancel_now[0] or bool(kw.get("steers"))
        return left

    def stopped(self: RunExecution) -> bool:
        if cancel_now[0]:
            self.cancelled = True  # as a cancel request read by the start's group would
        return halting(self)

    polled, seen = SteerWatch.poll, [False]

    async def poll(self: SteerWatch) -> None:
        await polled(self)
        seen[0] = seen[0] or bool(self.next_attempt)

    monkeypatch.setattr(RunStore, "start_attempt", start)
    monkeypatch.setattr(RunExecution, "halting", stopped)
    monkeypatch.setattr(SteerWatch, "poll", poll)
    wf = workflow(retries=2)
    task = asyncio.ensure_future(
        Engine(db, config=EngineConfig(poll_interval_s=0.02)).start(wf, {}))

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the first attempt to run")
    store = RunStore(db)
    (run,) = await store.list_runs()
    await store.queue_steer(run.run_id, "work", 0, MESSAGE, "alice", next_attempt=True)

    async def watched() -> bool:  # the run's watch has seen it: attempt 2 will take it
        return seen[0]

    await until(watched, "the run's watch to see the steer")
    ready.with_name("ready.go").touch()
    assert (await task).status == "cancelled"
    assert prompts(record) == ["Write the report."]  # attempt 2's agent never ran
    (steer,) = await store.list_steers(run.run_id)
    assert (steer.state, steer.attempt) == ("queued", None)
    events = await store.recent_events(500, run_id=run.run_id)
    assert [(e.type, e.attempt) for e in events if e.type.startswith("steer.")] == [
        ("steer.queued", None), ("steer.delivered", 2), ("steer.queued", 2)]

    cancel_now[0] = False
    monkeypatch.setattr(RunStore, "start_attempt", started)
    assert (await Engine(db, config=NO_POLL).resume(wf, run.run_id)).status == "finished"
    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
    (steer,) = await store.list_steers(run.run_id)
    assert (steer.state, steer.attempt) == ("delivered", 3)
    events = await store.recent_events(500, run_id=run.run_id)
    assert [(e.type, e.attempt) for e in events if e.type.startswith("steer.")][3:] == [
        ("steer.delivered", 3)]
    (*_, last) = await store.list_attempts(run.run_id, "work")
    assert (last.attempt, (last.prompt or "").startswith(PREFIX)) == (3, True)
