"""Small agents and helpers shared by the engine tests (real engine, real database)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall
from engine.agents.fake_data import example_for
from engine.hooks import EngineHooks
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.run_end import RunOutcome
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.model.token_lanes import TokenUsage

Behaviour = Callable[[AgentRequest, int], Awaitable[str | None] | str | None]


@dataclass
class ScriptedAgent:
    """Answers with schema-valid JSON (or ``behaviour``'s text), records every invocation, and
    reports one call of ``usage`` per invocation. ``behaviour(request, n)`` may raise."""

    name: str = "scripted"
    behaviour: Behaviour | None = None
    usage: TokenUsage = field(
        default_factory=lambda: TokenUsage(input=100, cache_read=1000, output=20)
    )
    delay_s: float = 0.0
    native_structured_output: bool = False
    simulated: bool = False
    invocations: list[tuple[str, int, int]] = field(default_factory=list)
    running: int = 0
    max_running: int = 0

    async def run(self, request: AgentRequest) -> AgentResult:
        self.invocations.append((request.node_id, request.iteration, request.attempt))
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            text: str | None = None
            if self.behaviour is not None:
                produced = self.behaviour(request, len(self.invocations))
                text = await produced if isinstance(produced, Awaitable) else produced
            await request.on_call(ModelCall(self.usage, "test-model"))
            if text is None:
                schema = request.output_schema or {"type": "string"}
                import random

                value = example_for(schema, random.Random(len(self.invocations)))
                text = json.dumps(value) if request.output_schema else str(value)
            request.stream(text)
            return AgentResult(text=text, model="test-model")
        finally:
            self.running -= 1

    def count(self, node_id: str) -> int:
        return sum(1 for n, _, _ in self.invocations if n == node_id)


def fail_first(times: int, node: str | None = None, retryable: bool = True) -> Behaviour:
    """A behaviour failing the first ``times`` invocations (of ``node`` when given)."""
    seen: dict[str, int] = {}

    def behave(request: AgentRequest, n: int) -> str | None:
        if node is None or request.node_id == node:
            seen[request.node_id] = seen.get(request.node_id, 0) + 1
            if seen[request.node_id] <= times:
                raise AgentError(f"planned failure {seen[request.node_id]}", retryable=retryable)
        return None

    return behave


async def run_workflow(
    db: Database, workflow: Workflow, raw_input: Any = None, **engine_kw: Any
) -> RunOutcome:
    """Start a run with a fast-polling engine."""
    engine = Engine(
        db,
        config=EngineConfig(poll_interval_s=0.02),
        hooks=engine_kw.pop("hooks", None) or EngineHooks(),
        **engine_kw,
    )
    return await engine.start(workflow, raw_input)


def agent_script(tmp_path: Path, body: str) -> list[str]:
    """The command line of a Python program written from ``body`` (a command agent's CLI)."""
    import sys
    import textwrap

    path = tmp_path / "agent.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def trace_sqlite(
    monkeypatch: pytest.MonkeyPatch, keep: Callable[[str], bool] = lambda text: True
) -> list[str]:
    """The statements SQLite runs (its own trace, one line per statement executed) on every
    connection opened from now on that ``keep`` accepts; the list fills as they run."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(lambda text: seen.append(text) if keep(text) else None)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen


def process_gone(pid: int) -> bool:
    """True when process ``pid`` has ended (a zombie nobody reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] == "Z"
    except OSError:
        return True
