"""Forking a run from a node with an edit (engine/fork.py), on both backends, with a real
subprocess agent that counts its invocations: what is upstream of the forked node is carried
over and never runs again, the node runs with the edit, the rest runs anew; every refusal is
one sentence and writes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine.fork import ForkEdit, plan_fork
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.loader import load_workflow
from store.db.backends import open_database
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.run_records import NodeRecord, RunRecord
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

WORKFLOW = Path(__file__).with_name("fork_workflow.py")


class Scored(BaseModel):
    """An output schema the counting agent's answers do not fit."""

    score: int


@pytest.fixture
def count_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "invocations.jsonl"
    monkeypatch.setenv("COUNT_FILE", str(path))
    return path


def invocations(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def per_node(path: Path) -> Counter[str]:
    return Counter(entry["node"] for entry in invocations(path))


async def origin_and_fork(db: Database, count_file: Path, edit: ForkEdit,
                          node: str = "draft") -> tuple[str, str]:
    workflow = load_workflow(WORKFLOW)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    origin = await engine.start(workflow, {"goal": "forks"}, workflow_path=str(WORKFLOW))
    assert origin.status == "finished", origin.error
    fork = await engine.fork(workflow, origin.run_id, node, edit)
    outcome = await engine.resume(workflow, fork.run_id)
    assert outcome.status == "finished", outcome.error
    return origin.run_id, fork.run_id


async def test_a_fork_carries_upstream_runs_the_edited_node_and_everything_else_anew(
    db: Database, count_file: Path
) -> None:
    origin, fork = await origin_and_fork(db, count_file, ForkEdit(prompt="Draft it boldly"))
    # Upstream (plan, both fan-out copies) ran once in all; the forked node and the rest twice.
    assert per_node(count_file) == Counter({"plan": 1, "sections[0]": 1, "sections[1]": 1,
                                            "draft": 2, "review": 2, "side": 2})
    store = RunStore(db)
    run = await store.get_run(fork)
    assert run.forked_from == origin and run.fork is not None
    assert run.fork["node"] == "draft" and run.fork["prompt"] == "Draft it boldly"
    assert sorted(map(tuple, run.fork["carried"])) == [
        ("plan", 0), ("sections[0]", 0), ("sections[1]", 0)]
    nodes = {n.node_id: n for n in await store.list_nodes(fork)}
    before = {n.node_id: n for n in await store.list_nodes(origin)}
    for carried in ("plan", "sections[0]", "sections[1]"):
        assert nodes[carried].carried_from == origin and nodes[carried].attempts == 0
        assert nodes[carried].output == before[carried].output
    assert nodes["draft"].carried_from is None and nodes["draft"].attempts == 1
    prompts = [e["prompt"] for e in invocations(count_file) if e["node"] == "draft"]
    assert prompts == ["Draft from 2 sections", "Draft it boldly"]
    assert nodes["review"].output != before["review"].output  # it read the edited draft
    assert "Draft it boldly" in json.dumps(nodes["review"].output)
    assert run.status == "finished" and run.nodes_done == 6


async def test_the_agent_and_memory_block_edits_reach_the_node(
    db: Database, count_file: Path
) -> None:
    edit = ForkEdit(memory_block="Remember: the audience is new.", agent="simulated")
    origin, fork = await origin_and_fork(db, count_file, edit, node="review")
    # review ran on the simulated agent in the fork: the counting agent saw it once only.
    assert per_node(count_file)["review"] == 1 and per_node(count_file)["draft"] == 1
    store = RunStore(db)
    (attempt,) = await store.list_attempts(fork, "review")
    assert attempt.agent == "simulated"
    assert (attempt.prompt or "").startswith("Remember: the audience is new.")
    assert (await store.get_node(fork, "draft")).carried_from == origin
    # The edited block is the attempt's memory block: what the Memory tab and tether node show.
    block = await store.get_memory_block(fork, "review", 0)
    assert block is not None and block.text == "Remember: the audience is new."
    assert block.attempt == 1 and block.bytes_used == len(block.text)
    assert block.warning is not None and f"edited in the fork of {origin}" in block.warning
    assert await store.get_memory_block(origin, "review", 0) is None


async def test_refusals_are_one_sentence_and_write_nothing(
    db: Database, count_file: Path, tmp_path: Path
) -> None:
    workflow = load_workflow(WORKFLOW)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
    Path(f"{count_file}.fail-draft").touch()
    origin = await engine.start(workflow, {"goal": "forks"}, workflow_path=str(WORKFLOW))
    assert origin.status == "failed"
    store = RunStore(db)
    before = len(await store.list_runs())
    cases = [
        ("nope", ForkEdit(), "has no task 'nope'"),
        ("review", ForkEdit(), "Node 'review' never ran in run"),
        ("draft", ForkEdit(agent="ghost"), "There is no agent 'ghost'"),
        ("draft", ForkEdit(prompt="  "), "prompt is empty"),
        ("draft", ForkEdit(input={"goal": 5}, input_given=True), "is invalid at goal"),
    ]
    for node, edit, sentence in cases:
        with pytest.raises(InvalidInputError, match=sentence) as refused:
            await engine.fork(workflow, origin.run_id, node, edit)
        assert str(refused.value).count(". ") <= 1
    # The workflow changed since: plan's recorded output no longer fits its output schema.
    stricter = load_workflow(WORKFLOW)
    stricter.tasks["plan"].output = Scored
    with pytest.raises(InvalidInputError) as refused:
        await engine.fork(stricter, origin.run_id, "draft", ForkEdit(prompt="Draft"))
    assert str(refused.value) == (
        "Node 'plan' would be carried over with an output that no longer fits task 'plan''s "
        "output schema (it does not match the schema at score: Field required); fork with the "
        "workflow the run ran with, or from that node.")
    assert len(await store.list_runs()) == before
    # The failed node itself may be forked (its upstream finished): the fix runs, once.
    Path(f"{count_file}.fail-draft").unlink()
    fork = await engine.fork(workflow, origin.run_id, "draft", ForkEdit(prompt="Draft again"))
    assert (await engine.resume(workflow, fork.run_id)).status == "finished"
    assert per_node(count_file)["plan"] == 1 and per_node(count_file)["draft"] == 2


def test_an_upstream_node_still_running_refuses_the_fork() -> None:
    """The plan itself (pure): a run still executing upstream of the node would race it."""
    workflow = load_workflow(WORKFLOW)
    origin = RunRecord("r-000000000001", "fork-demo", status="running")
    nodes = [NodeRecord(origin.run_id, "plan", 0, "finished"),
             NodeRecord(origin.run_id, "sections[0]", 0, "finished"),
             NodeRecord(origin.run_id, "sections[1]", 0, "running"),
             NodeRecord(origin.run_id, "draft", 0, "failed")]
    with pytest.raises(InvalidInputError, match="'sections', upstream of 'draft', is running"):
        plan_fork(workflow, origin, nodes, "draft")
    nodes[2] = nodes[2]._replace(state="finished")
    plan = plan_fork(workflow, origin, nodes, "sections[1]")
    assert plan.task == "sections" and [n.node_id for n in plan.carried] == ["plan"]


async def test_a_fork_racing_a_run_another_process_executes_is_refused(
    any_workspace: Workspace, count_file: Path
) -> None:
    """The origin runs in a real ``tether run`` process, held in ``draft``: a fork from
    ``review`` would race it (``draft`` is not final there, ``review`` has not run), so it is
    refused (one sentence, nothing written); ``draft`` itself may be forked, what it carries
    being final. (A node that ran with an upstream node running again: the pure test below.)"""
    hold = Path(f"{count_file}.hold-draft")
    hold.touch()
    env = {**os.environ, "COUNT_FILE": str(count_file)}
    if any_workspace.database_url:
        env["TETHER_DATABASE_URL"] = any_workspace.database_url
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli.entry", "run", str(WORKFLOW), "--input",
        '{"goal": "race"}', "--workspace", str(any_workspace.root),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        for _ in range(6000):
            if Path(f"{count_file}.held-draft").exists():
                break
            await asyncio.sleep(0.02)
        workflow = load_workflow(WORKFLOW)
        async with await open_database(any_workspace) as db:
            engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
            store = RunStore(db)
            (origin,) = await store.list_runs()
            assert origin.status == "running"
            with pytest.raises(InvalidInputError) as refused:
                await engine.fork(workflow, origin.run_id, "review", ForkEdit(prompt="Now"))
            assert str(refused.value) == (
                f"Node 'review' has not run yet in run {origin.run_id}, which is still "
                "running; fork from it once it has run, or from a node that ran.")
            assert [r.run_id for r in await store.list_runs()] == [origin.run_id]
            fork = await engine.fork(workflow, origin.run_id, "draft",
                                     ForkEdit(prompt="Draft it while it runs"))
            hold.unlink()
            _, err = await asyncio.wait_for(process.communicate(), 180)
            assert process.returncode == 0, err.decode()
            assert (await engine.resume(workflow, fork.run_id)).status == "finished"
    finally:
        hold.unlink(missing_ok=True)
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert per_node(count_file) == Counter({"plan": 1, "sections[0]": 1, "sections[1]": 1,
                                            "draft": 2, "review": 2, "side": 2})
