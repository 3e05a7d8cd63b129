"""The Anthropic agent: the Messages API (``POST {base_url}/v1/messages``), one call per HTTP
round trip.

Requests stream (``stream: true``; ``stream = false`` turns it off): the answer's text reaches
the attempt's log as it is written, and the call is recorded when ``message_delta`` brings the
final usage (:mod:`engine.agents.http.anthropic_stream`). A stream cut short after
``message_start`` still records the input it had cost.

Usage lanes: ``input_tokens`` excludes ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; they map to input, cache read and cache write directly.
``output_tokens`` includes thinking: ``output_tokens_details.thinking_tokens`` is the
reasoning lane, taken out of output, so nothing counts twice.

Structured output: a forced ``final_output`` tool whose input schema is the output schema.
Offered AgentTools become tools (``tool_choice`` ``auto``); tool calls run locally and the
conversation continues (one call row per round); after ``max_tool_rounds`` rounds of tool
calls, one last request sets ``tool_choice`` to ``none`` (the ``final_output`` tool when the
task has an output schema) to get the answer. ``pause_turn`` (a server-tool loop paused) sends
the assistant content back as it is, with no new user message, to continue the same turn, at
most ``max_pause_continues`` times; ``max_tokens`` and ``model_context_window_exceeded`` fail
as a cut-off answer, ``refusal`` with its ``stop_details``
(:mod:`engine.agents.http.stop_reasons`).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.agents.agent import (
    AgentError,
    AgentRequest,
    AgentResult,
    ModelCall,
    steers_for_next_turn,
)
from engine.agents.http.anthropic_stream import MessageStream
from engine.agents.http.http_exchange import Reply
from engine.agents.http.stop_reasons import anthropic_ending, refusal_reason
from engine.agents.http.transport import (
    MAX_RESPONSE_BYTES,
    HttpAgent,
    Sleep,
    default_rng,
    run_tool,
    unfinished,
)
from engine.agents.reported_usage import one_hour_writes, token_count
from store.model.token_lanes import TokenUsage

FINAL_TOOL = "final_output"
PATH = "/v1/messages"


def anthropic_usage(usage: Any) -> TokenUsage:
    """Map an Anthropic usage object onto the five lanes (thinking is part of output)."""
    source = "The server"
    output = token_count(usage, "output_tokens", source)
    details = usage.get("output_tokens_details") if isinstance(usage, dict) else None
    thinking = min(output, token_count(details, "thinking_tokens", source))
    return TokenUsage(
        input=token_count(usage, "input_tokens", source),
        cache_read=token_count(usage, "cache_read_input_tokens", source),
        cache_write=token_count(usage, "cache_creation_input_tokens", source),
        output=output - thinking,
        reasoning=thinking,
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
    max_response_bytes: int = MAX_RESPONSE_BYTES
    stream: bool = True
    max_tool_rounds: int = 8
    max_pause_continues: int = 8
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

    def _accumulator(self) -> MessageStream:
        return MessageStream()

    def _interrupted(self, accumulator: Any, started: int, now: int) -> ModelCall | None:
        if not isinstance(accumulator, MessageStream) or not accumulator.started:
            return None
        model = accumulator.message.get("model") or self.model
        detail = {"interrupted": "the stream was cut before it ended; its usage so far"}
        return ModelCall(anthropic_usage(accumulator.usage), model, started, now, detail=detail)

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
        answer), running offered tools in between and continuing paused turns."""
        body, structured = self._body(request)
        messages = body["messages"]
        rounds = pauses = 0
        said: list[str] = []  # the text of the turn so far (a paused turn continues it)
        async with self.client() as client:
            while True:
                if rounds == self.max_tool_rounds and "tools" in body:
                    # The tool-round budget is spent: ask for the answer (the final_output
                    # tool when the task has an output schema).
                    body["tool_choice"] = (
                        {"type": "tool", "name": FINAL_TOOL} if structured else {"type": "none"}
                    )
                started = request.clock.now_ms()
                reply = await self._post(client, PATH, body, request, stream=self.stream)
                data, model = reply.data, reply.data.get("model") or self.model
                await request.on_call(
                    ModelCall(
                        anthropic_usage(data.get("usage")),
                        model,
                        started,
                        request.clock.now_ms(),
                        cache_write_1h=one_hour_writes(data.get("usage"), "The server"),
                    )
                )
                content = [c for c in data.get("content") or [] if isinstance(c, dict)]
                text = "".join(str(c.get("text", "")) for c in content if c.get("type") == "text")
                if not reply.streamed:
                    request.stream(text)
                said.append(text)
                ending = self._ended(request, reply, "".join(said), content)
                if ending == "continue":
                    pauses += 1
                    if pauses > self.max_pause_continues:
                        raise AgentError(
                            f"{self.name}: the turn paused {pauses} times (pause_turn); "
                            f"max_pause_continues is {self.max_pause_continues}.",
                            retryable=False,
                        )
                    # Send the paused content back as it is: the model continues its turn.
                    messages.append({"role": "assistant", "content": content})
                    request.stream(f"\n[{self.name}: the turn paused; continuing it]\n")
                    continue
                uses = [c for c in content if c.get("type") == "tool_use"]
                final = next((u for u in uses if u.get("name") == FINAL_TOOL), None)
                if final is not None:
                    value = final.get("input")
                    request.stream(json.dumps(value, ensure_ascii=False))
                    return AgentResult(
                        text=json.dumps(value, ensure_ascii=False), output=value, model=model
                    )
                if not uses:
                    return AgentResult(text="".join(said), model=model)
                if rounds >= self.max_tool_rounds:
                    break
                rounds += 1
                said = []
                messages.append({"role": "assistant", "content": content})
                results = []
                for use in uses:
                    output = await run_tool(request, use.get("name", ""), use.get("input", {}))
                    results.append(
                        {"type": "tool_result", "tool_use_id": use.get("id"), "content": output}
                    )
                results += [{"type": "text", "text": text}  # a person's steer
                            for text in await steers_for_next_turn(request)]
                messages.append({"role": "user", "content": results})
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")

    def _ended(
        self, request: AgentRequest, reply: Reply, text: str, content: list[dict[str, Any]]
    ) -> str:
        """How the answer ended; fails one that was cut off or refused."""
        stop = reply.data.get("stop_reason")
        ending = anthropic_ending(stop)
        partial = text or (json.dumps(content, ensure_ascii=False) if content else "")
        if ending == "refused":
            why = refusal_reason(reply.data.get("stop_details"))
            raise unfinished(
                self.name,
                request,
                "the model refused (stop_reason 'refusal'" + (f": {why}" if why else "") + ")",
                partial,
            )
        if ending == "truncated":
            raise unfinished(
                self.name,
                request,
                "the answer was cut off at the token limit (stop_reason 'max_tokens', "
                f"limit {self.max_tokens}); raise max_tokens",
                partial,
            )
        if ending == "context_full":
            raise unfinished(
                self.name,
                request,
                "the answer was cut off: it filled the model's context window (stop_reason "
                "'model_context_window_exceeded'); shorten the prompt or use a larger model",
                partial,
            )
        if ending == "unknown":
            request.details.setdefault("notes", []).append(
                f"{self.name}: unknown stop_reason {str(stop)[:60]!r}; the answer is kept"
            )
        return ending
