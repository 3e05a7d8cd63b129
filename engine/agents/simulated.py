"""The simulated agent: offline, deterministic for a seed, schema-valid answers for any output
model, realistic token usage, configurable latency and failure rate.

It powers the demo and the tests. Its calls are recorded with ``simulated = 1`` so the
dashboard can label them. Token usage follows how real coding agents look: a large cached
system/tool context (written to the cache on a node's first call, read afterwards), a cached
context that grows with each loop iteration, fresh input proportional to the prompt, and output
proportional to the answer. When offered ``remember``/``recall`` tools it calls them (one extra
model call each), like a real agent using memory.

Environment overrides (handy for the demo): ``TETHER_SIM_LATENCY_MS``,
``TETHER_SIM_FAILURE_RATE``, ``TETHER_SIM_SEED``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall, tool_by_name
from engine.agents.fake_data import example_for, topics_from
from engine.env_settings import env_number
from store.model.token_lanes import TokenUsage

_DONE_FLAGS = ("done", "finished", "complete", "completed", "approved", "stop", "converged")


@dataclass
class SimulatedAgent:
    """Offline agent. ``latency_ms`` is the mean duration of one model call (jittered ±50%),
    ``failure_rate`` the chance an attempt fails, ``invalid_rate`` the chance its first answer
    is not valid JSON (exercising the repair path)."""

    name: str = "simulated"
    seed: int = 0
    latency_ms: float = 150.0
    failure_rate: float = 0.0
    invalid_rate: float = 0.0
    base_context_tokens: int = 18_000
    growth_per_iteration: int = 35_000
    model: str = "sim-1"
    use_tools: bool = True
    native_structured_output: bool = False
    simulated: bool = True

    def __post_init__(self) -> None:
        self.latency_ms = env_number("TETHER_SIM_LATENCY_MS", self.latency_ms, minimum=0)
        self.failure_rate = env_number("TETHER_SIM_FAILURE_RATE", self.failure_rate,
                                       minimum=0, maximum=1)
        self.seed = int(env_number("TETHER_SIM_SEED", self.seed, whole=True))
        if not 0.0 <= self.failure_rate <= 1.0 or not 0.0 <= self.invalid_rate <= 1.0:
            raise ValueError("failure_rate and invalid_rate must be between 0 and 1")

    def _rng(self, request: AgentRequest) -> random.Random:
        digest = hashlib.sha256(
            f"{self.seed}|{request.node_id}|{request.iteration}|{request.attempt}|"
            f"{request.repair}|{request.prompt}".encode()
        ).hexdigest()
        return random.Random(int(digest[:16], 16))

    async def _pause(self, rng: random.Random, fraction: float) -> None:
        if self.latency_ms <= 0:
            await asyncio.sleep(0)
            return
        await asyncio.sleep(self.latency_ms * fraction * rng.uniform(0.5, 1.5) / 1000)

    async def _call(
        self,
        request: AgentRequest,
        rng: random.Random,
        context_before: int,
        fresh_input: int,
        output_text: str,
        first: bool,
        extra_output: int = 0,
    ) -> int:
        """Simulate one model call; report its usage; return the context it ended with."""
        started = request.clock.now_ms()
        for chunk in _chunks(output_text, 4):
            await self._pause(rng, 0.25)
            request.stream(chunk)
        output = max(1, len(output_text) // 4) + extra_output
        reasoning = output * rng.randint(0, 3) if rng.random() < 0.4 else 0
        if first:
            # The shared system/tool prefix is mostly cached already; the rest is written now.
            written = context_before // 10
            usage = TokenUsage(
                input=fresh_input,
                cache_read=context_before - written,
                cache_write=written,
                output=output,
                reasoning=reasoning,
            )
        else:
            usage = TokenUsage(
                input=fresh_input,
                cache_read=context_before,
                cache_write=min(fresh_input, 2048),
                output=output,
                reasoning=reasoning,
            )
        await request.on_call(ModelCall(usage, self.model, started, request.clock.now_ms()))
        return usage.context_tokens + output

    async def run(self, request: AgentRequest) -> AgentResult:
        """Answer ``request`` deterministically (see the class docstring)."""
        rng = self._rng(request)
        jitter = rng.randint(-1500, 1500)
        context = max(1000, self.base_context_tokens + jitter) + (
            self.growth_per_iteration * request.iteration
        )
        fresh = max(1, len(request.prompt) // 4)
        request.stream(
            f"[simulated {self.model}] node {request.node_id} attempt {request.attempt}\n"
        )
        first = True
        if self.use_tools and not request.repair:
            for tool_name in ("recall", "remember"):
                tool = tool_by_name(request.tools, tool_name)
                if tool is None:
                    continue
                arguments = self._tool_arguments(
                    tool.parameters, rng, request, tool.metadata.get("simulated_hints")
                )
                line = f"→ {tool_name}({json.dumps(arguments, ensure_ascii=False)})\n"
                context = await self._call(request, rng, context, fresh, line, first)
                first = False
                fresh = 200
                try:
                    result = await tool.call(arguments)
                    request.stream(f"← {json.dumps(result, ensure_ascii=False)[:500]}\n")
                except Exception as error:  # a tool failure is reported back, as real agents see it
                    request.stream(f"← tool error: {error}\n")
        if rng.random() < self.failure_rate:
            await self._pause(rng, 0.5)
            request.stream("simulated failure\n")
            raise AgentError(f"simulated failure (failure_rate={self.failure_rate})")
        # Working notes streamed before the answer, as a real agent narrates its steps; they
        # count as output of the answering call.
        topics = topics_from(request.prompt)
        notes = [
            "· "
            + example_for({"type": "string", "minLength": 30}, rng, name="progress", topics=topics)
            + "\n"
            for _ in range(rng.randint(1, 3))
        ]
        for note in notes:
            request.stream(note)
        text = self._answer(request, rng)
        extra = sum(len(n) for n in notes) // 4 + rng.randint(40, 400)
        await self._call(request, rng, context, fresh, text, first, extra)
        request.stream("\n")
        return AgentResult(text=text, model=self.model)

    def _answer(self, request: AgentRequest, rng: random.Random) -> str:
        if request.output_schema is None:
            return example_for(
                {"type": "string", "minLength": 40}, rng, topics=topics_from(request.prompt)
            )
        if not request.repair and rng.random() < self.invalid_rate:
            return "Sure! Here is what I found: the change looks fine overall."
        chance = min(1.0, 0.15 + 0.35 * request.iteration)
        hints = {flag: rng.random() < chance for flag in _DONE_FLAGS}
        value = example_for(
            request.output_schema, rng, hints=hints, topics=topics_from(request.prompt)
        )
        return json.dumps(value, ensure_ascii=False)

    @staticmethod
    def _tool_arguments(
        parameters: dict[str, Any],
        rng: random.Random,
        request: AgentRequest,
        tool_hints: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        words = " ".join(request.prompt.split()[:12])
        hints = {
            "text": f"Learned while working on {request.node_id}: {words}",
            "query": words,
            "body": f"Learned while working on {request.node_id}: {words}",
            # A tool may suggest values (memory tools: which bank, what to supersede).
            **(tool_hints or {}),
        }
        value = example_for(parameters or {"type": "object"}, rng, hints=hints)
        return value if isinstance(value, dict) else {}


def _chunks(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
