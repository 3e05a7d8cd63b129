"""Steering a running node (store/runs/steer_log.py, engine/run/steering.py), on both
backends, with real subprocess agents: a fake Claude Code that reads stream-json input and
records every message it received and whether a turn was under way; a one-shot CLI that
cannot take input. Each steer is delivered exactly once or refused with a sentence."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.agents.cli.command import CommandAgent
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.run_end import RunOutcome
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.errors import InvalidInputError
from store.runs.run_store import RunStore

FAKE_CLAUDE = Path(__file__).with_name("steer_claude_cli.py")


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    ready, record = tmp_path / "ready", tmp_path / "record.jsonl"
    monkeypatch.setenv("STEER_READY", str(ready))
    monkeypatch.setenv("STEER_RECORD", str(record))
    return ready, record


def workflow(agent: CommandAgent) -> Workflow:
    wf = Workflow("steered", agents={"claude": agent}, default_agent="claude")
    wf.add_task("work", "Write the summary.")
    return wf


def claude(steerable: bool = True) -> CommandAgent:
    return CommandAgent(command=[sys.executable, str(FAKE_CLAUDE)], preset="claude-code",
                        steerable=steerable,
                        pass_env=["STEER_READY", "STEER_RECORD", "STEER_EXPECT"])


async def until(condition: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Await ``condition()`` until it is truthy (bounded; no wall-clock assertion)."""
    for _ in range(3000):
        value = await condition()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def started(db: Database, wf: Workflow) -> tuple[asyncio.Task[RunOutcome], str]:
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    task = asyncio.ensure_future(engine.start(wf, {}))
    store = RunStore(db)

    async def running_node() -> str | None:
        runs = await store.list_runs(limit=5)
        nodes = await store.list_nodes(runs[0].run_id) if runs else []
        if any(n.node_id == "work" and n.state == "running" for n in nodes):
            return runs[0].run_id
        return None  # not created yet, or its node not yet running

    return task, await until(running_node, "the node to run")


def received(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


async def test_steers_reach_claude_code_mid_turn_each_exactly_once(
    db: Database, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ready, record = files
    monkeypatch.setenv("STEER_EXPECT", "2")  # the first turn stays open until both arrive
    task, run_id = await started(db, workflow(claude()))

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the first turn to be under way")
    store = RunStore(db)
    first = await store.queue_steer(run_id, "work", 0, "Use British spelling.", "alice")
    second = await store.queue_steer(run_id, "work", 0, "Keep it under 50 words.", "bob")
    outcome = await task
    assert outcome.status == "finished", outcome.error
    messages = received(record)
    assert [m["message"] for m in messages][1:] == ["Use British spelling.",
                                                    "Keep it under 50 words."]
    # Both arrived while the first turn was under way; each became a turn of its own.
    assert messages[1]["turn_open"] and messages[2]["turn_open"]
    steers = {s.steer_id: s for s in await store.list_steers(run_id, "work")}
    assert {s.state for s in steers.values()} == {"delivered"}
    assert steers[first.steer_id].attempt == 1 and steers[second.steer_id].sent_by == "bob"
    node = await store.get_node(run_id, "work")
    assert node.output == "turn 3 answered: Keep it under 50 words."
    (attempt,) = await store.list_attempts(run_id, "work")
    assert attempt.details["steers_delivered"] == [first.steer_id,
                                                   second.steer_id]
    events = [e.type for e in await store.recent_events(100, run_id=run_id)]
    assert events.count("steer.queued") == 2 and events.count("steer.delivered") == 2
    with pytest.raises(InvalidInputError, match="Node work already finished"):
        await store.queue_steer(run_id, "work", 0, "Too late.", "alice")
    assert len(await store.list_steers(run_id)) == 2


async def test_a_turn_that_ends_without_a_steer_closes_the_session(
    db: Database, files: tuple[Path, Path]
) -> None:
    ready, record = files
    (ready.with_name("ready.go")).touch()
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    outcome = await engine.start(workflow(claude()), {})
    assert outcome.status == "finished", outcome.error
    assert len(received(record)) == 1
    node = await RunStore(db).get_node(outcome.run_id, "work")
    assert node.output == "turn 1 answered: Write the summary."


ONE_SHOT = """
import json, os, sys, time
from pathlib import Path
sys.stdin.read()
ready = Path(os.environ["STEER_READY"])
ready.touch()
while not ready.with_name("ready.go").exists():
    time.sleep(0.02)
print(json.dumps({"output": "done", "usage": {"input_tokens": 3, "output_tokens": 1}}))
"""


async def test_a_one_shot_cli_refuses_the_steer_with_a_sentence(
    db: Database, files: tuple[Path, Path], tmp_path: Path
) -> None:
    ready, _ = files
    script = tmp_path / "one_shot.py"
    script.write_text(ONE_SHOT)
    agent = CommandAgent(command=[sys.executable, str(script)], preset="json",
                         pass_env=["STEER_READY", "STEER_RECORD"])
    task, run_id = await started(db, workflow(agent))
    store = RunStore(db)

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the one-shot CLI to run")
    steer = await store.queue_steer(run_id, "work", 0, "Stop and summarise.", "alice")

    async def refused() -> Any:
        (found,) = await store.list_steers(run_id)
        return found if found.state == "refused" else None

    decided = await until(refused, "the refusal")
    assert decided.steer_id == steer.steer_id
    assert decided.refusal == ("Agent 'claude' (json) runs one shot and cannot take a message "
                               "while it works; nothing was delivered (send it with "
                               "--next-attempt for the node's next attempt to read).")
    ready.with_name("ready.go").touch()
    assert (await task).status == "finished"


def test_steerable_needs_claude_code() -> None:
    with pytest.raises(ValueError, match="steerable needs the claude-code preset"):
        CommandAgent(command=["x"], preset="json", steerable=True)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_http_agent_takes_the_steer_before_its_next_tool_turn(
    db: Database, kind: str
) -> None:
    """A real local HTTP server plays the model: its first answer calls ``remember``; while
    that tool runs a person steers the node; the next request carries the message, once."""
    import threading
    from http.server import ThreadingHTTPServer

    from test_http_agents import FakeProvider, RememberHook, Verdict

    from engine.agents.agent_tool import AgentTool
    from engine.agents.http.anthropic import AnthropicAgent
    from engine.agents.http.openai import OpenAIAgent
    from engine.hooks import EngineHooks
    from engine.memory.memory_config import MemoryConfig

    store = RunStore(db)

    class SteeringHook(RememberHook):
        """``remember`` that steers the node while it runs (a person typing meanwhile)."""

        def tools_for(self, *args: Any) -> list[AgentTool]:
            (tool,) = super().tools_for(*args)

            async def remember(arguments: dict[str, Any]) -> dict[str, Any]:
                (run,) = await store.list_runs(limit=1)
                await store.queue_steer(run.run_id, "judge", 0, "Say why.", "alice")
                return await tool.handler(arguments)

            return [AgentTool(tool.name, tool.description, tool.parameters, remember)]

    FakeProvider.requests, FakeProvider.fail_with, FakeProvider.script = [], None, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        agent: Any = (OpenAIAgent(base_url=url + "/v1", model="m", api_key="k")
                      if kind == "openai" else AnthropicAgent(base_url=url, model="claude-x",
                                                               api_key="k"))
        wf = Workflow("http-steer", agents={"model": agent}, default_agent="model")
        wf.add_task("judge", "Is the change safe?", output=Verdict,
                    memory=MemoryConfig(bank="team", tools=True))
        engine = Engine(db, config=EngineConfig(poll_interval_s=0.02),
                        hooks=EngineHooks(memory=SteeringHook()))
        outcome = await engine.start(wf, {})
    finally:
        server.shutdown()
    assert outcome.status == "finished", outcome.error
    bodies = [json.dumps(body) for _, body, _ in FakeProvider.requests]
    assert len(bodies) == 2 and "Say why." not in bodies[0]
    assert bodies[1].count("Say why.") == 1  # the next turn carries it, once
    (steer,) = await store.list_steers(outcome.run_id)
    assert steer.state == "delivered" and steer.attempt == 1


async def test_the_timeline_shows_each_steer_under_its_attempt(
    db: Database, files: tuple[Path, Path]
) -> None:
    """``tether node --timeline`` and the Timeline tab read the same rows: a delivered steer is
    a row under the attempt that took it, with who sent it and what it said."""
    from store.read.timeline import flatten, with_details
    from store.read.timeline_reads import read_details, read_timeline

    ready, _ = files
    task, run_id = await started(db, workflow(claude()))

    async def is_ready() -> bool:
        return ready.exists()

    await until(is_ready, "the first turn to be under way")
    await RunStore(db).queue_steer(run_id, "work", 0, "Mind the tests.", "carol")
    assert (await task).status == "finished"
    timeline = await read_timeline(db, run_id, db.clock.now_ms())
    details = await read_details(db, run_id, ["work#0"])
    rows = flatten(with_details(timeline, details), {"work#0"})
    steers = [row for row in rows if row.kind == "steer"]
    assert [row.label for row in steers] == ["steer from carol: Mind the tests."]
    assert steers[0].attempt == 1 and steers[0].key == "work#0/1/s0"


async def test_a_steer_its_attempt_ended_before_reading_is_refused_by_the_runs_watch(
    db: Database,
) -> None:
    """A steer queued after the watch's last poll for a node whose attempt then ended is
    refused by the next poll with a sentence; one for a node not yet started, or waiting to
    retry, stays queued for the attempt to come."""
    from engine.run.steering import SteerWatch

    store = RunStore(db)
    run = await store.create_run("steered")
    await store.upsert_nodes(run.run_id, [("work", 0, "pending", []), ("later", 0, "pending", []),
                                          ("again", 0, "pending", [])])
    await store.upsert_node(run.run_id, "work", 0, "running", attempts=1)
    await store.upsert_node(run.run_id, "again", 0, "running", attempts=1)
    late = await store.queue_steer(run.run_id, "work", 0, "Too late for attempt 1.", "alice")
    early = await store.queue_steer(run.run_id, "later", 0, "For when you start.", "bob")
    retry = await store.queue_steer(run.run_id, "again", 0, "For your next try.", "carol")
    await store.upsert_node(run.run_id, "work", 0, "finished", attempts=1)
    await store.upsert_node(run.run_id, "again", 0, "retrying", attempts=1)
    watch = SteerWatch(store, run.run_id)
    await watch.poll()
    steers = {s.steer_id: s for s in await store.list_steers(run.run_id)}
    assert steers[late.steer_id].state == "refused"
    assert steers[late.steer_id].refusal == (
        "Attempt 1 of work ended before the message could be delivered.")
    assert steers[early.steer_id].state == "queued" and watch.waiting
    assert steers[retry.steer_id].state == "queued"  # its next attempt takes it
    events = [e.type for e in await store.recent_events(100, run_id=run.run_id)]
    assert events.count("steer.refused") == 1


async def test_dispatching_nodes_reads_no_steers_while_none_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each attempt reads the node's steers only while a steer waits in the run, for now or
    for its next attempt: a 40-node chain with none reads the run's steers twice (the run's
    poll before it dispatches anything, and its last), not once or twice per node (an
    attempt's start counts those for its next attempt as a column of its insert, which is no
    read of its own). Counted on SQLite's own statement trace of every connection the
    workspace opens."""
    from engine_test_support import trace_sqlite

    from engine.agents.simulated import SimulatedAgent
    from store.db.sqlite.sqlite_database import SqliteDatabase
    from store.workspace.layout import Workspace

    reads = trace_sqlite(
        monkeypatch, lambda text: text.lstrip().startswith("SELECT") and "FROM steers" in text)
    db = await SqliteDatabase.open(Workspace(tmp_path / ".tether"))
    try:
        wf = Workflow("chain", agents={"sim": SimulatedAgent(latency_ms=0, use_tools=False)},
                      default_agent="sim")
        for index in range(40):
            wf.add_task(f"n{index}", f"step {index}",
                        depends_on=[f"n{index - 1}"] if index else [])
        # The monitor does not poll during the run: what is left is per node, or the last poll.
        outcome = await Engine(db, config=EngineConfig(poll_interval_s=600)).start(wf, {})
    finally:
        await db.close()
    assert outcome.status == "finished", outcome.error
    assert len(reads) == 2, reads[:3]
