"""Helpers for the memory tests: a recording agent, test recall backends, an engine with the
standard hooks (memory runtime, ceiling guard, handoff manager) on a fast poll."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import Any

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall
from engine.agents.fake_data import example_for
from engine.memory.recall_items import RecallRequest, RecallResult
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.wiring import build_hooks
from store.db.seam import Database
from store.model.token_lanes import TokenUsage


@dataclass
class RecordingAgent:
    """Answers schema-valid JSON, records every prompt and tool list, can fail first attempts,
    reports ``usage`` per call and can call offered tools with fixed arguments."""

    name: str = "recording"
    usage: TokenUsage = field(default_factory=lambda: TokenUsage(input=100, output=10))
    fail_attempts: int = 0
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    native_structured_output: bool = False
    simulated: bool = False
    prompts: list[str] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)

    async def run(self, request: AgentRequest) -> AgentResult:
        self.prompts.append(request.prompt)
        self.offered.append([t.name for t in request.tools])
        for name, arguments in self.tool_calls:
            tool = next((t for t in request.tools if t.name == name), None)
            if tool is not None:
                self.tool_results.append(await tool.call(dict(arguments)))
        await request.on_call(ModelCall(self.usage, "test-model"))
        if request.attempt <= self.fail_attempts:
            raise AgentError("planned failure")
        schema = request.output_schema or {"type": "string"}
        value = example_for(schema, random.Random(len(self.prompts)))
        return AgentResult(text=json.dumps(value) if request.output_schema else str(value))


class HangingBackend:
    """A recall backend that never answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def recall(self, request: RecallRequest) -> RecallResult:
        self.calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class RaisingBackend:
    """A recall backend that fails."""

    async def recall(self, request: RecallRequest) -> RecallResult:
        raise RuntimeError("index unavailable")


def engine_with_hooks(db: Database, **runtime_options: Any) -> Engine:
    """An engine with the standard hooks; ``runtime_options`` replace MemoryRuntime settings."""
    hooks = build_hooks(db)
    runtime = hooks.memory
    for name, value in runtime_options.items():
        setattr(runtime, name, value)
    return Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=hooks)
