"""The Anthropic agent: the Messages API (``POST {base_url}/v1/messages``), one call per HTTP
round trip.

Usage lanes: ``input_tokens`` excludes ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; they map to input, cache read and cache write directly.

Structured output: a forced ``final_output`` tool whose input schema is the output schema.
Offered AgentTools become tools (``tool_choice`` ``auto``); tool calls run locally and the
conversation continues (one call row per round); after ``max_tool_rounds`` rounds of tool
calls, one last request sets ``tool_choice`` to ``none`` (the ``final_output`` tool when the
task has an output schema) to get the answer.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.agents.agent import AgentError, AgentRequest, AgentResult, ModelCall
from engine.agents.http.transport import HttpAgent, Sleep, default_rng, run_tool, unfinished
from engine.agents.reported_usage import one_hour_writes, token_count
from store.model.token_lanes import TokenUsage

FINAL_TOOL = "final_output"


def anthropic_usage(usage: Any) -> TokenUsage:
    """Map an Anthropic usage object onto the five lanes."""
    source = "The server"
    return TokenUsage(
        input=token_count(usage, "input_tokens", source),
        cache_read=token_count(usage, "cache_read_input_tokens", source),
        cache_write=token_count(usage, "cache_creation_input_tokens", source),
        output=token_count(usage, "output_tokens", source),
    )


@dataclass
class AnthropicAgent(HttpAgent):
    """Anthropic Messages API (``POST {base_url}/v1/messages``)."""

    name: str = "anthropic"
    base_url: str = "https://api.anthropic.com"
    model: str = "claude-sonnet-4-5"
    api_key: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    structured_output: str = "native"
    max_tokens: int = 4096
    cache_prompt: bool = True
    timeout_s: float = 600.0
    max_tool_rounds: int = 8
    version: str = "2023-06-01"
    headers: dict[str, str] = field(default_factory=dict)
    retry: Any = None
    sleep: Sleep = field(default=asyncio.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=default_rng, repr=False, compare=False)
    wall_clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": self.version, **self.headers}
        key = self._key(self.api_key, self.api_key_env)
        if key:
            headers["x-api-key"] = key
        return headers

    def _body(self, request: AgentRequest) -> tuple[dict[str, Any], bool]:
        block: dict[str, Any] = {"type": "text", "text": request.prompt}
        if self.cache_prompt:
            block["cache_control"] = {"type": "ephemeral"}
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        structured = request.output_schema is not None and self.native_structured_output
        if structured:
            tools.append(
                {
                    "name": FINAL_TOOL,
                    "description": "Return the final answer.",
                    "input_schema": request.output_schema,
                }
            )
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": [block]}],
        }
        if tools:
            body["tools"] = tools
            if structured:
                body["tool_choice"] = (
                    {"type": "tool", "name": FINAL_TOOL} if len(tools) == 1 else {"type": "any"}
                )
            else:
                body["tool_choice"] = {"type": "auto"}
        return body, structured

    async def run(self, request: AgentRequest) -> AgentResult:
        """Converse until the model answers (or calls ``final_output`` with the structured
        answer), running offered tools in between."""
        body, structured = self._body(request)
        messages = body["messages"]
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            for round_number in range(1, self.max_tool_rounds + 2):
                if round_number == self.max_tool_rounds + 1 and "tools" in body:
                    # The tool-round budget is spent: ask for the answer (the final_output
                    # tool when the task has an output schema).
                    body["tool_choice"] = (
                        {"type": "tool", "name": FINAL_TOOL} if structured else {"type": "none"}
                    )
                started = request.clock.now_ms()
                data = await self._post(client, "/v1/messages", body, request)
                model = data.get("model") or self.model
                await request.on_call(
                    ModelCall(
                        anthropic_usage(data.get("usage")),
                        model,
                        started,
                        request.clock.now_ms(),
                        cache_write_1h=one_hour_writes(data.get("usage"), "The server"),
                    )
                )
                content = data.get("content") or []
                text = "".join(c.get("text", "") for c in content if c.get("type") == "text")
                request.stream(text)
                stop = data.get("stop_reason")
                if stop == "refusal":
                    raise unfinished(
                        self.name, request, "the model refused (stop_reason 'refusal')", text
                    )
                if stop == "max_tokens":
                    raise unfinished(
                        self.name,
                        request,
                        "the answer was cut off at the token limit (stop_reason 'max_tokens', "
                        f"limit {self.max_tokens}); raise max_tokens",
                        text or json.dumps(content, ensure_ascii=False),
                    )
                uses = [c for c in content if c.get("type") == "tool_use"]
                final = next((u for u in uses if u.get("name") == FINAL_TOOL), None)
                if final is not None:
                    value = final.get("input")
                    request.stream(json.dumps(value, ensure_ascii=False))
                    return AgentResult(
                        text=json.dumps(value, ensure_ascii=False), output=value, model=model
                    )
                if not uses:
                    return AgentResult(text=text, model=model)
                messages.append({"role": "assistant", "content": content})
                results = []
                for use in uses:
                    output = await run_tool(request, use.get("name", ""), use.get("input", {}))
                    results.append(
                        {"type": "tool_result", "tool_use_id": use.get("id"), "content": output}
                    )
                messages.append({"role": "user", "content": results})
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")
