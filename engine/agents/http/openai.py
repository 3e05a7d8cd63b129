"""The OpenAI-compatible agent: ``/chat/completions`` (OpenAI, vLLM, Ollama, llama.cpp server,
LM Studio), one call per HTTP round trip.

Usage lanes: ``prompt_tokens`` *includes* ``prompt_tokens_details.cached_tokens``, so fresh
input = prompt − cached, and ``completion_tokens`` includes
``completion_tokens_details.reasoning_tokens``, so output = completion − reasoning (nothing is
counted twice).

Structured output: OpenAI-compatible servers get ``response_format`` ``json_schema`` (with
``strict: true`` when the schema allows it, see :func:`engine.structured.strict_schema`). A
server that rejects json_schema (llama-cpp-python answers HTTP 500 "Input should be 'text' or
'json_object'") is asked again at once with ``json_object`` (carrying the schema as
llama.cpp's ``schema`` extension) and the schema in the prompt, then with the prompt alone if
that is rejected too; the agent remembers the mode that worked. ``structured_output =
"json_object"`` or ``"prompt"`` starts there.

Offered AgentTools become function tools (with ``tool_choice: "auto"``; llama-cpp-python
ignores tools without it); tool calls run locally and the conversation continues (one call row
per round); after ``max_tool_rounds`` rounds of tool calls, one last request sets
``tool_choice`` to ``none`` to get the answer.
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
from engine.agents.http.transport import (
    HttpAgent,
    HttpFailure,
    Sleep,
    default_rng,
    run_tool,
    unfinished,
)
from engine.agents.reported_usage import token_count
from engine.prompting import json_instructions
from engine.structured import strict_schema
from store.model.token_lanes import TokenUsage

STRUCTURED_MODES = ("native", "json_object", "prompt")


def openai_usage(usage: Any) -> TokenUsage:
    """Split an OpenAI-style usage object into the five lanes (see the module docstring)."""
    source = "The server"
    prompt = token_count(usage, "prompt_tokens", source)
    completion = token_count(usage, "completion_tokens", source)
    prompt_details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    completion_details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    cached = min(prompt, token_count(prompt_details, "cached_tokens", source))
    reasoning = min(completion, token_count(completion_details, "reasoning_tokens", source))
    return TokenUsage(
        input=prompt - cached,
        cache_read=cached,
        output=completion - reasoning,
        reasoning=reasoning,
    )


def rejects_json_schema(status: int | None, body: str) -> bool:
    """Whether an error answer says the server does not take ``json_schema`` output."""
    text = body.lower()
    return status in (400, 422, 500) and (
        "json_schema" in text or "response_format" in text or "'json_object'" in text
    )


def rejects_json_object(status: int | None, body: str) -> bool:
    """Whether an error answer says the server does not take ``json_object`` output either."""
    text = body.lower()
    return status in (400, 422, 500) and ("response_format" in text or "json_object" in text)


def _assistant_turn(content: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message sent back with the tool results, rebuilt from the documented
    fields only: servers add their own (llama-cpp-python a legacy ``function_call`` with a
    mangled name) and then refuse them in the next request."""
    calls = []
    for call in tool_calls:
        raw = call.get("function")
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        calls.append(
            {
                "id": str(call.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str(function.get("name") or ""),
                    "arguments": function.get("arguments")
                    if isinstance(function.get("arguments"), str)
                    else json.dumps(function.get("arguments") or {}),
                },
            }
        )
    # A string, never null: llama-cpp-python refuses a null content.
    return {"role": "assistant", "content": content, "tool_calls": calls}


@dataclass
class OpenAIAgent(HttpAgent):
    """OpenAI-compatible ``/chat/completions`` (``base_url`` ends at ``/v1``)."""

    name: str = "openai"
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    structured_output: str = "native"
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = 600.0
    max_tool_rounds: int = 8
    headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    retry: Any = None
    sleep: Sleep = field(default=asyncio.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=default_rng, repr=False, compare=False)
    wall_clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("set max_tokens or max_completion_tokens, not both")

    def _modes(self) -> tuple[str, ...]:
        return STRUCTURED_MODES

    def _headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        key = self._key(self.api_key, self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        if self._mode == "json_object":
            # "schema" is the llama.cpp / llama-cpp-python extension that constrains the JSON
            # to the schema; servers without it ignore it or refuse (then: prompt mode).
            return {"type": "json_object", "schema": schema}
        if self._mode == "prompt":
            return None
        strict = strict_schema(schema)
        spec: dict[str, Any] = {"name": "output", "schema": strict or schema}
        if strict is not None:
            spec["strict"] = True
        return {"type": "json_schema", "json_schema": spec}

    def _body(self, request: AgentRequest, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self.extra_body,  # server-specific parameters (seed, top_k, ...)
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.max_completion_tokens is not None:
            body["max_completion_tokens"] = self.max_completion_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if request.output_schema is not None:
            response_format = self._response_format(request.output_schema)
            if response_format is not None:
                body["response_format"] = response_format
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            body["tool_choice"] = "auto"
        return body

    async def _first_answer(
        self, client: httpx.AsyncClient, request: AgentRequest
    ) -> tuple[dict[str, Any], Any]:
        """The first round, falling back from json_schema once when the server rejects it."""
        had_instructions = not self.native_structured_output
        while True:
            prompt = request.prompt
            schema = request.output_schema
            if schema is not None and self._mode != "native" and not had_instructions:
                prompt += "\n\n" + json_instructions(schema)
            body = self._body(request, prompt)
            refuses = None
            if "response_format" in body:
                refuses = rejects_json_schema if self._mode == "native" else rejects_json_object
            try:
                return body, await self._post(client, "/chat/completions", body, request, refuses)
            except HttpFailure as failure:
                if refuses is None or not refuses(failure.status, failure.body):
                    raise
                previous = self._mode
                self._mode = "json_object" if previous == "native" else "prompt"
                await request.on_call(
                    ModelCall(
                        TokenUsage(),
                        self.model,
                        request.clock.now_ms(),
                        request.clock.now_ms(),
                        kind="retry",
                        detail={
                            "status": failure.status,
                            "error": failure.body[:300],
                            "fallback": f"{previous} -> {self._mode}",
                        },
                    )
                )
                request.stream(
                    f"[{self.name} does not take {previous} structured output; "
                    f"using {self._mode} from now on]\n"
                )

    async def run(self, request: AgentRequest) -> AgentResult:
        """Chat until the model answers without tool calls (at most ``max_tool_rounds``)."""
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            started = request.clock.now_ms()
            body, data = await self._first_answer(client, request)
            messages = body["messages"]
            for round_number in range(1, self.max_tool_rounds + 2):
                model = data.get("model") or self.model
                await request.on_call(
                    ModelCall(
                        openai_usage(data.get("usage")), model, started, request.clock.now_ms()
                    )
                )
                try:
                    choice = data["choices"][0]
                    message = choice["message"]
                except (KeyError, IndexError, TypeError) as error:
                    raise AgentError(
                        f"{self.name}: the response has no choices[0].message."
                    ) from error
                content = message.get("content") or ""
                request.stream(content)
                finish = choice.get("finish_reason")
                if message.get("refusal"):
                    raise unfinished(
                        self.name, request, f"the model refused: {message['refusal']}", content
                    )
                if finish == "content_filter":
                    raise unfinished(
                        self.name,
                        request,
                        "the answer was stopped by the content filter",
                        content,
                    )
                if finish == "length":
                    limit = self.max_completion_tokens or self.max_tokens
                    raise unfinished(
                        self.name,
                        request,
                        "the answer was cut off at the token limit (finish_reason 'length'"
                        + (f", limit {limit}" if limit else "")
                        + "); raise max_completion_tokens or max_tokens",
                        content,
                    )
                tool_calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
                if not tool_calls:
                    return AgentResult(text=content, model=model)
                messages.append(_assistant_turn(content, tool_calls))
                for call in tool_calls:
                    function = call.get("function", {})
                    result = await run_tool(
                        request, function.get("name", ""), function.get("arguments")
                    )
                    messages.append(
                        {"role": "tool", "tool_call_id": call.get("id"), "content": result}
                    )
                if round_number == self.max_tool_rounds:
                    # The tool-round budget is spent: the last request asks for the answer.
                    body["tool_choice"] = "none"
                started = request.clock.now_ms()
                data = await self._post(client, "/chat/completions", body, request)
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")
