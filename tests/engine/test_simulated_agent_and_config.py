"""The simulated agent (deterministic, schema-valid for any model, realistic usage, failure
rate, tools, stream log) and agents configured in .tether/config.toml."""

from __future__ import annotations

import json
import random
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import pytest
from engine_test_support import run_workflow
from pydantic import BaseModel, Field

from engine.agents.agent import AgentError, AgentRequest, ModelCall
from engine.agents.agent_tool import AgentTool
from engine.agents.fake_data import example_for
from engine.agents.registry import AgentRegistry
from engine.agents.simulated import SimulatedAgent
from engine.run.engine import Engine
from engine.run.engine_config import load_config, parse_config
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.errors import InvalidInputError
from store.runs.run_store import RunStore


class Colour(StrEnum):
    red = "red"
    blue = "blue"


class Inner(BaseModel):
    when: datetime
    ratio: float = Field(gt=0, lt=1)
    tags: list[str] = Field(min_length=2, max_length=4)


class Everything(BaseModel):
    title: str = Field(min_length=5, max_length=40)
    count: int = Field(ge=10, le=20, multiple_of=5)
    colour: Colour
    mode: Literal["fast", "slow"]
    inner: Inner
    maybe: Inner | None
    scores: dict[str, int]
    pair: tuple[int, str]
    done: bool


@pytest.mark.parametrize("seed", range(40))
def test_examples_validate_for_a_demanding_model(seed: int) -> None:
    value = example_for(Everything.model_json_schema(), random.Random(seed))
    Everything.model_validate(value)


async def _answer(agent: SimulatedAgent, request: AgentRequest) -> tuple[str, list[ModelCall]]:
    calls: list[ModelCall] = []

    async def on_call(call: ModelCall) -> None:
        calls.append(call)

    request.on_call = on_call
    result = await agent.run(request)
    return result.text, calls


async def test_deterministic_for_a_seed_and_cache_reads_grow_over_a_loop() -> None:
    schema = Everything.model_json_schema()
    agent = SimulatedAgent(latency_ms=0, seed=5)
    one = await _answer(agent, AgentRequest(prompt="p", node_id="n", output_schema=schema))
    two = await _answer(agent, AgentRequest(prompt="p", node_id="n", output_schema=schema))
    assert one[0] == two[0] and one[1][0].usage == two[1][0].usage
    Everything.model_validate_json(one[0])
    other = await _answer(
        SimulatedAgent(latency_ms=0, seed=6),
        AgentRequest(prompt="p", node_id="n", output_schema=schema),
    )
    assert other[0] != one[0]
    reads = []
    for iteration in range(4):
        _, calls = await _answer(agent, AgentRequest(prompt="p", node_id="n", iteration=iteration))
        reads.append(calls[0].usage.cache_read)
    assert reads == sorted(reads) and reads[-1] - reads[0] > 90_000


async def test_failure_rate_tools_and_stream_log(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="simulated failure"):
        await SimulatedAgent(latency_ms=0, failure_rate=1.0).run(AgentRequest(prompt="p"))
    saved: list[dict[str, Any]] = []

    async def remember(arguments: dict[str, Any]) -> dict[str, Any]:
        saved.append(arguments)
        return {"ok": True}

    tool = AgentTool(
        "remember",
        "save",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        remember,
    )
    log = tmp_path / "run" / "node" / "1" / "stream.log"
    text, calls = await _answer(
        SimulatedAgent(latency_ms=0),
        AgentRequest(prompt="Fix the flaky test", node_id="n", tools=[tool], stream_path=log),
    )
    assert saved and saved[0]["text"].startswith("Learned while working on n")
    assert len(calls) == 2  # the tool round and the answer are two model calls
    content = log.read_text()
    assert "→ remember(" in content and text in content


async def test_agents_from_config_toml(db: Database) -> None:
    db.workspace.config_path.write_text(
        '[engine]\nconcurrency = 2\n\n[agents.quick]\ntype = "simulated"\nlatency_ms = 0\n'
        'seed = 11\nmodel = "sim-quick"\n'
    )
    config = load_config(db.workspace.config_path)
    assert config.concurrency == 2
    wf = Workflow("configured")
    wf.add_task("a", "hello", agent="quick")
    outcome = await Engine(db, config=config).start(wf)
    assert outcome.status == "finished"
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.model == "sim-quick" and call.simulated
    with pytest.raises(InvalidInputError, match="No agent named 'ghost'"):
        AgentRegistry({}, config.agents).get("ghost")
    bad = Workflow("bad")
    bad.add_task("a", "x", agent="ghost")
    with pytest.raises(InvalidInputError, match="ghost"):
        await run_workflow(db, bad)
    assert len(await RunStore(db).list_runs()) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[engine]\nconcurrency = 0\n", "concurrency"),
        ("[engine]\nspeed = 1\n", r"unknown \[engine\] setting 'speed'"),
        ("[agents.x]\nlatency_ms = 1\n", "with a type"),
        # a misspelt table or key is refused, not ignored (a [budgets] holds no budget)
        ("[budgets]\nday_usd = 5\n", r"unknown setting 'budgets' \(did you mean 'budget'\?"),
        ("colour = 'blue'\n", r"unknown setting 'colour' \(known: agents, budget, "),
        ("[workspace]\ndurabilty = 'full'\n",
         r"unknown \[workspace\] setting 'durabilty' \(did you mean 'durability'\?"),
    ],
)
def test_bad_config_is_one_sentence(text: str, message: str) -> None:
    import tomllib

    with pytest.raises(InvalidInputError, match=message):
        parse_config(tomllib.loads(text))


def test_bad_agent_settings_are_reported() -> None:
    registry = AgentRegistry(
        {}, {"x": {"type": "simulated", "colour": "red"}, "y": {"type": "telepathy"}}
    )
    with pytest.raises(InvalidInputError, match="Agent 'x' has an unknown"):
        registry.get("x")
    with pytest.raises(InvalidInputError, match="use one of"):
        registry.get("y")
    assert json.dumps(registry.names()) == '["simulated", "x", "y"]'
