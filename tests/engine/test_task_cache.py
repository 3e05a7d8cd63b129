"""Task-output cache: the pure key/freshness rules, and hits, misses, TTL and invalidated
payloads through the engine."""

from __future__ import annotations

from engine_test_support import ScriptedAgent, run_workflow
from pydantic import BaseModel

from engine.hooks import EngineHooks
from engine.memory.memory_config import MemoryConfig
from engine.memory.runtime import MemoryRuntime
from engine.run.cache_key import cache_key, is_fresh
from engine.workflow.definition import Workflow
from engine.workflow.policies import CachePolicy
from store.clock import ManualClock
from store.db.seam import Database
from store.runs.run_store import RunStore


class Answer(BaseModel):
    text: str


class AnswerV2(BaseModel):
    text: str
    score: int


BASE = dict(workflow="w", run_id="r1", node_id="a", iteration=0, agent="sim", output_schema=None)


def test_key_includes_prompt_input_iteration_and_scope_identity() -> None:
    key = cache_key(scope="workflow", prompt="p", input={"x": 1}, **BASE)  # type: ignore[arg-type]
    assert key == cache_key(scope="workflow", prompt="p", input={"x": 1}, **BASE)  # type: ignore[arg-type]
    assert key != cache_key(scope="workflow", prompt="q", input={"x": 1}, **BASE)  # type: ignore[arg-type]
    assert key != cache_key(scope="workflow", prompt="p", input={"x": 2}, **BASE)  # type: ignore[arg-type]
    assert key != cache_key(scope="workflow", prompt="p", input={"x": 1}, version=2, **BASE)  # type: ignore[arg-type]
    other_iteration = {**BASE, "iteration": 1}
    assert key != cache_key(scope="workflow", prompt="p", input={"x": 1}, **other_iteration)  # type: ignore[arg-type]
    run_scoped = cache_key(scope="run", prompt="p", **BASE)  # type: ignore[arg-type]
    assert run_scoped != cache_key(scope="run", prompt="p", **{**BASE, "run_id": "r2"})  # type: ignore[arg-type]
    # Workflow and global scope ignore the run id; global also ignores the workflow name.
    assert cache_key(scope="workflow", **BASE) == cache_key(
        scope="workflow", **{**BASE, "run_id": "r9"}
    )  # type: ignore[arg-type]
    assert cache_key(scope="global", **BASE) == cache_key(
        scope="global", **{**BASE, "workflow": "z"}
    )  # type: ignore[arg-type]


def test_freshness_boundary() -> None:
    assert is_fresh(1000, None, 10**12)
    assert is_fresh(1000, 500, 1499)
    assert not is_fresh(1000, 500, 1500)


def _cached_workflow(agent: ScriptedAgent, output: type[BaseModel], **policy: object) -> Workflow:
    wf = Workflow("cached", agents={"simulated": agent})
    wf.add_task(
        "a", lambda ctx: f"answer {ctx.input['q']}", output=output, cache=CachePolicy(**policy)
    )  # type: ignore[arg-type]
    return wf


async def test_hit_miss_ttl_and_scope(db: Database, clock: ManualClock) -> None:
    agent = ScriptedAgent()
    wf = _cached_workflow(agent, Answer, ttl_ms=60_000)
    first = await run_workflow(db, wf, {"q": 1})
    second = await run_workflow(db, wf, {"q": 1})
    assert agent.count("a") == 1
    store = RunStore(db)
    node = await store.get_node(second.run_id, "a")
    assert node.cached and node.state == "finished"
    assert node.output == (await store.get_node(first.run_id, "a")).output
    (attempt,) = await store.list_attempts(second.run_id, "a")
    assert attempt.cached and attempt.tokens.total == 0
    assert any(e.type == "cache.hit" for e in await store.events_since(0, run_id=second.run_id))
    await run_workflow(db, wf, {"q": 2})  # another input: a miss
    assert agent.count("a") == 2
    clock.advance(60_000)  # exactly the TTL: expired
    await run_workflow(db, wf, {"q": 1})
    assert agent.count("a") == 3
    run_scope = _cached_workflow(agent, Answer, scope="run")
    await run_workflow(db, run_scope, {"q": 1})
    await run_workflow(db, run_scope, {"q": 1})
    assert agent.count("a") == 5


async def test_payload_that_no_longer_validates_is_a_miss(db: Database) -> None:
    agent = ScriptedAgent()
    await run_workflow(db, _cached_workflow(agent, Answer, include_prompt=False), {"q": 1})
    # Same key material except the schema would change the key, so simulate a model whose
    # schema is identical but whose validation got stricter: a validator rejecting old data.
    from pydantic import field_validator

    class Strict(Answer):
        @field_validator("text")
        @classmethod
        def long(cls, value: str) -> str:
            if len(value) < 10_000:
                raise ValueError("too short")
            return value

    Strict.__name__ = "Answer"
    strict = _cached_workflow(agent, Strict, include_prompt=False)
    strict.tasks["a"].output = Answer  # the key is computed from the schema, which is unchanged
    outcome_ok = await run_workflow(db, strict, {"q": 1})
    assert outcome_ok.status == "finished" and agent.count("a") == 1  # still a hit
    strict.tasks["a"].output = Strict
    agent.behaviour = lambda r, n: '{"text": "' + "x" * 10_000 + '"}'
    outcome = await run_workflow(db, strict, {"q": 1})
    assert outcome.status == "finished"
    assert agent.count("a") == 2  # the stale payload was a miss, not a failure
    events = await RunStore(db).events_since(0, run_id=outcome.run_id)
    assert any(e.type == "cache.invalid" for e in events)


async def test_tasks_with_active_memory_bypass_the_cache(db: Database) -> None:
    agent = ScriptedAgent()
    wf = Workflow("mem", agents={"simulated": agent})
    wf.add_task("a", "same prompt", cache=CachePolicy(), memory=MemoryConfig(bank="team"))
    hooks = EngineHooks(memory=MemoryRuntime(db))
    await run_workflow(db, wf, hooks=hooks)
    await run_workflow(db, wf, hooks=hooks)
    assert agent.count("a") == 2
