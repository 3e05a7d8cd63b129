"""Structured output (JSON instructions, one repair, raw text kept) and metering (one call row
per model call, authoritative attempt totals, rollups, buckets with inclusive lower edges)."""

from __future__ import annotations

from engine_test_support import ScriptedAgent, run_workflow
from pydantic import BaseModel

from engine.agents.agent import AgentRequest
from engine.artifact_files import RAW_OUTPUT, attempt_dir
from engine.prompting import ISOLATION_MARKER, assemble_prompt
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore


class Verdict(BaseModel):
    ok: bool
    reason: str


def test_prompt_assembly_order() -> None:
    schema = Verdict.model_json_schema()
    text = assemble_prompt(
        "TASK", memory_block="MEMORY", isolation_path="/wt", output_schema=schema
    )
    assert text.index("MEMORY") < text.index(ISOLATION_MARKER) < text.index("TASK")
    assert text.index("TASK") < text.index("REQUIRED OUTPUT")
    native = assemble_prompt("TASK", output_schema=schema, native_structured_output=True)
    assert native == "TASK"
    assert (
        assemble_prompt(f"{ISOLATION_MARKER} already", isolation_path="/wt").count(ISOLATION_MARKER)
        == 1
    )


async def test_invalid_answer_is_repaired_once(db: Database) -> None:
    def behave(request: AgentRequest, n: int) -> str:
        if request.repair:
            assert "I think it is fine." in request.prompt  # the repair shows the answer
            return '{"ok": true, "reason": "fixed"}'
        return "I think it is fine."

    agent = ScriptedAgent(behaviour=behave)
    wf = Workflow("repair", agents={"simulated": agent})
    wf.add_task("judge", "judge it", output=Verdict)
    outcome = await run_workflow(db, wf)
    assert outcome.status == "finished"
    store = RunStore(db)
    node = await store.get_node(outcome.run_id, "judge")
    assert node.output == {"ok": True, "reason": "fixed"}
    (attempt,) = await store.list_attempts(outcome.run_id, "judge")
    assert "REQUIRED OUTPUT" in (attempt.prompt or "")
    calls = await store.list_calls(outcome.run_id, "judge")
    assert len(calls) == 2  # the answer and the repair are two model calls
    assert attempt.tokens == agent.usage + agent.usage


async def test_still_invalid_after_repair_fails_and_keeps_raw_text(db: Database) -> None:
    agent = ScriptedAgent(behaviour=lambda r, n: '{"ok": "maybe"}')
    wf = Workflow("norepair", agents={"simulated": agent})
    wf.add_task("judge", "judge it", output=Verdict)
    outcome = await run_workflow(db, wf)
    assert outcome.status == "failed"
    assert "did not match Verdict after one repair" in (outcome.error or "")
    raw = attempt_dir(db.workspace.artifacts_dir, outcome.run_id, "judge", 0, 1) / RAW_OUTPUT
    assert '{"ok": "maybe"}' in raw.read_text()
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "judge")
    assert attempt.state == "failed" and attempt.response_text == '{"ok": "maybe"}'


async def test_metering_calls_attempt_totals_rollups_and_buckets(db: Database) -> None:
    # 30 000 fresh + 20 000 cache read = exactly 50 000: the lower edge belongs to 50k–100k.
    edge = TokenUsage(input=30_000, cache_read=20_000, cache_write=0, output=500, reasoning=100)
    below = TokenUsage(input=49_999, output=1)
    agents = {"edge": ScriptedAgent(usage=edge), "below": ScriptedAgent(usage=below)}
    wf = Workflow("meter", agents=agents)
    wf.add_task("a", "x", agent="edge")
    wf.add_task("b", "y", agent="below")
    outcome = await run_workflow(db, wf)
    store = RunStore(db)
    calls = await store.list_calls(outcome.run_id)
    by_node = {c.node_id: c for c in calls}
    assert by_node["a"].context_tokens == 50_000 and by_node["a"].bucket == "50k–100k"
    assert by_node["b"].context_tokens == 49_999 and by_node["b"].bucket == "<50k"
    for node_id, usage in (("a", edge), ("b", below)):
        (attempt,) = await store.list_attempts(outcome.run_id, node_id)
        assert attempt.tokens == usage
    run = await store.get_run(outcome.run_id)
    assert run.tokens == edge + below
    rollup = await store.usage_by_bucket(outcome.run_id)
    assert rollup == {"50k–100k": (1, edge), "<50k": (1, below)}
    workspace = await store.usage_by_bucket("")
    assert workspace == rollup
    types = [e.type for e in await store.events_since(0, run_id=outcome.run_id)]
    assert types.count("call") == 2 and types.count("attempt.finished") == 2
    assert types[0] == "run.created" and types[-1] == "run.status"
