"""The memory runtime inside the real engine: prompt order, recall timeout/error degradation,
persisted blocks reused across retries and resumes, retain, tools, cache bypass."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from memory_support import HangingBackend, RaisingBackend, RecordingAgent, engine_with_hooks
from pydantic import BaseModel

from engine.agents.agent import AgentError, AgentRequest, AgentResult
from engine.memory.memory_access import timeout_from_env
from engine.memory.memory_config import MemoryConfig
from engine.memory.prepared_block import retain_digest
from engine.memory.runtime import MemoryRuntime
from engine.prompting import ISOLATION_MARKER
from engine.workflow.definition import Workflow
from engine.workflow.policies import CachePolicy
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

BANK = "code-review"
NS = "workflow:code-review"


class Out(BaseModel):
    summary: str


def workflow_with(agent: RecordingAgent, memory: MemoryConfig, **task: object) -> Workflow:
    wf = Workflow("mem-test", agents={"rec": agent}, default_agent="rec")
    wf.add_task("review", "Review the pytest fixtures for flaky tests.", output=Out,
                memory=memory, **task)
    return wf


async def test_prompt_assembly_order_is_pinned(db: Database) -> None:
    await MemoryStore(db).save_note(NS, "Flaky pytest fixtures need a retry marker.")
    agent = RecordingAgent()
    wf = workflow_with(agent, MemoryConfig(bank=BANK), isolation="/tmp/lane")
    outcome = await engine_with_hooks(db).start(wf)
    assert outcome.status == "finished"
    prompt = agent.prompts[0]
    block = prompt.index("advisory context")
    notice = prompt.index(ISOLATION_MARKER)
    task = prompt.index("Review the pytest fixtures")
    schema = prompt.index("REQUIRED OUTPUT")
    assert block < notice < task < schema
    assert prompt.startswith("Background recalled from memory")
    assert "[workflow:code-review]\n- Flaky pytest fixtures need a retry marker." in prompt
    stored = (await RunStore(db).list_memory_blocks(outcome.run_id))[0]
    assert stored.text is not None and stored.text in prompt
    assert stored.items[0]["matched_terms"] and stored.bytes_used <= stored.budget_bytes


async def test_hanging_recall_times_out_and_the_task_still_runs(db: Database) -> None:
    agent = RecordingAgent()
    hanging = HangingBackend()
    engine = engine_with_hooks(db, backend=hanging, timeout_ms=50)
    outcome = await engine.start(workflow_with(agent, MemoryConfig(bank=BANK)))
    assert outcome.status == "finished" and hanging.calls == 1
    assert agent.prompts[0].startswith("Review the pytest fixtures")  # no block
    block = (await RunStore(db).list_memory_blocks(outcome.run_id))[0]
    assert block.degraded and block.text is None
    assert "timed out after 50 ms" in (block.warning or "")
    events = await RunStore(db).recent_events(50, run_id=outcome.run_id)
    assert any(e.type == "memory.warning" and "timed out" in e.payload["warning"] for e in events)


async def test_raising_recall_degrades_to_no_block(db: Database) -> None:
    agent = RecordingAgent()
    engine = engine_with_hooks(db, backend=RaisingBackend())
    outcome = await engine.start(workflow_with(agent, MemoryConfig(bank=BANK)))
    assert outcome.status == "finished"
    block = (await RunStore(db).list_memory_blocks(outcome.run_id))[0]
    assert block.degraded and "index unavailable" in (block.warning or "")


def test_timeout_comes_from_the_environment() -> None:
    assert timeout_from_env({}) == 2000
    assert timeout_from_env({"TETHER_MEMORY_TIMEOUT_MS": "25"}) == 25
    assert timeout_from_env({"TETHER_MEMORY_TIMEOUT_MS": ""}) == 2000


async def test_retries_and_resumes_reuse_the_persisted_block(db: Database) -> None:
    memory = MemoryStore(db)
    await memory.save_note(NS, "Pytest fixtures: prefer tmp_path over tmpdir.")
    agent = RecordingAgent(fail_attempts=1)
    outcome = await engine_with_hooks(db).start(
        workflow_with(agent, MemoryConfig(bank=BANK), retries=2, backoff=0.0))
    assert outcome.status == "finished" and len(agent.prompts) == 2
    assert agent.prompts[0] == agent.prompts[1]
    # Memory changes after the block was taken; a new process (resume) still sees the snapshot.
    await memory.save_note(NS, "Pytest fixtures: a brand new lesson about fixtures.")
    fresh = MemoryRuntime(db)
    config = MemoryConfig(bank=BANK)
    again = await fresh.block_for(outcome.run_id, "review", 0, 3, config, "Review pytest fixtures")
    assert again.reused and again.text is not None and again.text in agent.prompts[0]
    assert "brand new" not in again.text
    assert len(await RunStore(db).list_memory_blocks(outcome.run_id)) == 1


async def test_a_finished_run_leaves_nothing_in_the_runtime(db: Database) -> None:
    """A long-lived engine (the dashboard's) keeps no block, prompt or lock of a finished run:
    they are persisted, and they made the dashboard grow with every run."""
    await MemoryStore(db).save_note(NS, "Pytest fixtures: prefer tmp_path over tmpdir.")
    engine = engine_with_hooks(db)
    runtime = engine.hooks.memory
    assert isinstance(runtime, MemoryRuntime)
    agent = RecordingAgent(fail_attempts=1)
    for _ in range(3):
        outcome = await engine.start(
            workflow_with(agent, MemoryConfig(bank=BANK), retries=2, backoff=0.0))
        assert outcome.status == "finished"
    assert agent.prompts[0] == agent.prompts[1]  # the retry still reused its block
    assert runtime._blocks == {} and runtime._prompts == {} and runtime._locks == {}


async def test_retain_writes_a_bounded_note_with_provenance(db: Database) -> None:
    agent = RecordingAgent()
    config = MemoryConfig(bank=BANK, recall="off", retain="on-complete", retain_status="pending")
    outcome = await engine_with_hooks(db).start(workflow_with(agent, config))
    notes = await MemoryStore(db).list_notes(NS, status="pending")
    assert len(notes) == 1
    note = notes[0]
    assert (note.run_id, note.node_id, note.iteration) == (outcome.run_id, "review", 0)
    assert note.body.startswith("Task review succeeded with:") and "source:run" in note.tags
    long = retain_digest("n", {"text": "é" * 10_000}, max_bytes=500)
    assert len(long.encode()) <= 500 and long.endswith("…[truncated]")


async def test_retain_failure_is_a_warning_only(db: Database) -> None:
    agent = RecordingAgent()

    class BrokenMemory(MemoryStore):
        async def save_note(self, *args: object, **kwargs: object):  # type: ignore[override]
            raise RuntimeError("disk full")

    engine = engine_with_hooks(db, memory=BrokenMemory(db))
    outcome = await engine.start(
        workflow_with(agent, MemoryConfig(bank=BANK, recall="off", retain="on-complete")))
    assert outcome.status == "finished"
    events = await RunStore(db).recent_events(50, run_id=outcome.run_id)
    assert any(e.type == "memory.warning" and "disk full" in e.payload["warning"] for e in events)


async def test_tools_remember_and_recall(db: Database) -> None:
    memory = MemoryStore(db)
    old = await memory.save_note(NS, "Old flaky test lesson: rerun twice.")
    agent = RecordingAgent(tool_calls=[
        ("recall", {"query": "flaky test lesson", "budget_bytes": 100_000}),
        ("remember", {"content": "New lesson: quarantine flaky tests.", "propose": True,
                      "supersedes": [old.id], "tags": ["source:reflection"]}),
        ("remember", {"content": "x", "bank": "not-configured"}),
        ("remember", {"content": "y", "tags": ["run:r-1"]}),
    ])
    config = MemoryConfig(bank=BANK, recall="off", tools=True, budget_bytes=300)
    outcome = await engine_with_hooks(db).start(workflow_with(agent, config))
    assert outcome.status == "finished" and agent.offered[0] == ["remember", "recall"]
    recalled, saved, bad_bank, bad_tag = agent.tool_results
    assert recalled["ok"] and recalled["budget_bytes"] == 300  # never above the configured one
    assert recalled["items"][0]["id"] == f"note:{old.id}"
    assert saved["ok"] and saved["status"] == "pending"
    assert not bad_bank["ok"] and "not one of this task's banks" in bad_bank["error"]
    assert not bad_tag["ok"] and "not a stable tag" in bad_tag["error"]
    proposal = await memory.get_note(saved["note_id"])
    assert proposal is not None and proposal.run_id == outcome.run_id
    assert [n.id for n in await memory.supersedes(proposal.id)] == [old.id]
    assert (await memory.get_note(old.id)).status == "accepted"  # type: ignore[union-attr]


async def test_active_memory_bypasses_the_task_cache(db: Database) -> None:
    agent = RecordingAgent()
    wf = workflow_with(agent, MemoryConfig(bank=BANK), cache=CachePolicy())
    await engine_with_hooks(db).start(wf)
    await engine_with_hooks(db).start(wf)
    assert len(agent.prompts) == 2
    plain = RecordingAgent()
    cached = Workflow("plain", agents={"rec": plain}, default_agent="rec")
    cached.add_task("review", "Same prompt", output=Out, cache=CachePolicy())
    await engine_with_hooks(db).start(cached)
    await engine_with_hooks(db).start(cached)
    assert len(plain.prompts) == 1


async def test_a_block_that_cannot_be_recorded_never_fails_the_task(db: Database) -> None:
    agent = RecordingAgent()
    engine = engine_with_hooks(db)
    runtime = engine.hooks.memory

    async def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("disk I/O error")

    runtime.runs.save_memory_block = broken  # type: ignore[union-attr]
    outcome = await engine.start(workflow_with(agent, MemoryConfig(bank=BANK)))
    assert outcome.status == "finished"
    assert agent.prompts[0].startswith("Review the pytest fixtures")
    events = await RunStore(db).recent_events(50, run_id=outcome.run_id)
    assert any(e.type == "memory.warning" and "disk I/O error" in e.payload["warning"]
               for e in events)


async def test_retention_never_delays_the_next_task(db: Database) -> None:
    released = asyncio.Event()
    order: list[str] = []

    class SlowMemory(MemoryStore):
        async def save_note(self, *args: Any, **kwargs: Any) -> Any:
            await released.wait()  # the write cannot finish until task b has started
            order.append("retained")
            return await super().save_note(*args, **kwargs)

    class Releasing(RecordingAgent):
        async def run(self, request: AgentRequest) -> AgentResult:
            if request.node_id == "b":
                order.append("b started")
                released.set()
            return await super().run(request)

    agent = Releasing()
    wf = Workflow("slow-retain", agents={"rec": agent}, default_agent="rec")
    wf.add_task("a", "first", output=Out,
                memory=MemoryConfig(bank=BANK, recall="off", retain="on-complete"))
    wf.add_task("b", "second", output=Out, depends_on=["a"])
    outcome = await engine_with_hooks(db, memory=SlowMemory(db)).start(wf)
    assert outcome.status == "finished"
    assert order == ["b started", "retained"]  # and the run waited for the write before ending
    assert len(await MemoryStore(db).list_notes(NS)) == 1


def test_the_runtime_reads_its_timeout_from_the_environment(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_MEMORY_TIMEOUT_MS", "75")
    assert MemoryRuntime(db).timeout_ms == 75
    assert MemoryRuntime(db, timeout_ms=5).timeout_ms == 5


async def test_memory_without_a_runtime_is_refused_not_ignored(db: Database) -> None:
    from engine.run.engine import Engine
    from store.errors import InvalidInputError

    wf = workflow_with(RecordingAgent(), MemoryConfig(bank=BANK))
    with pytest.raises(InvalidInputError, match="no memory runtime"):
        await Engine(db).start(wf)
    assert await RunStore(db).list_runs() == []  # refused before anything was written


async def test_a_resumed_run_retains_what_its_killed_process_did_not(db: Database) -> None:
    """Retention is written after the node's end commits, so a process killed in between
    lost the note for good: the resumed run took the finished node's output and retained
    nothing (here the first process's note never lands, as in that kill). The resumed run
    now retains it, without running the node again, and a note that did land stays the only
    one."""

    class Killed(MemoryStore):
        async def save_note(self, *args: object, **kwargs: object):  # type: ignore[override]
            raise RuntimeError("the process was killed before this write")

    class FailsReportOnce(RecordingAgent):
        async def run(self, request: AgentRequest) -> AgentResult:
            if request.node_id == "report" and request.attempt == 1:
                raise AgentError("the report failed", retryable=False)
            return await super().run(request)

    config = MemoryConfig(bank=BANK, recall="off", retain="on-complete")
    for lost in (True, False):
        agent = FailsReportOnce()
        wf = Workflow("retain-resume", agents={"s": agent}, default_agent="s")
        wf.add_task("review", "Review the fixtures.", memory=config)
        wf.add_task("report", "Report on the review.", depends_on=["review"])
        first = await (engine_with_hooks(db, memory=Killed(db)) if lost
                       else engine_with_hooks(db)).start(wf)
        assert first.status == "failed"
        resumed = await engine_with_hooks(db).resume(wf, first.run_id)
        assert resumed.status == "finished", resumed.error
        assert agent.prompts.count("Review the fixtures.") == 1  # never run again
        mine = [n for n in await MemoryStore(db).list_notes(NS, status="any")
                if n.run_id == first.run_id]
        assert [(n.node_id, n.iteration, n.kind) for n in mine] == [("review", 0, "retained")]
