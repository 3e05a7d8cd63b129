"""HTTP agents over httpx: OpenAI-compatible chat completions and the Anthropic Messages API.

Both report every HTTP round trip as one call with its token lanes split correctly:

* OpenAI-compatible (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio): ``prompt_tokens``
  *includes* ``prompt_tokens_details.cached_tokens``, so fresh input = prompt − cached, and
  ``completion_tokens`` includes ``completion_tokens_details.reasoning_tokens``, so output =
  completion − reasoning (nothing is counted twice).
* Anthropic: ``input_tokens`` excludes ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``; they map to input, cache read and cache write directly.

Native structured output: OpenAI-compatible servers get ``response_format`` with a JSON Schema
(set ``structured_output = "prompt"`` for servers that lack it); Anthropic gets a forced
``final_output`` tool whose input schema is the output schema. Offered AgentTools become
function tools; tool calls run locally and the conversation continues (one call row per round).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.agents.base import AgentError, AgentRequest, AgentResult, ModelCall, tool_by_name
from store.run_records import TokenUsage

FINAL_TOOL = "final_output"


def _int(mapping: Any, key: str) -> int:
    if not isinstance(mapping, dict):
        return 0
    value = mapping.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def openai_usage(usage: Any) -> TokenUsage:
    """Split an OpenAI-style usage object into the five lanes (see the module docstring)."""
    cached = _int(
        usage.get("prompt_tokens_details") if isinstance(usage, dict) else {}, "cached_tokens"
    )
    reasoning = _int(
        usage.get("completion_tokens_details") if isinstance(usage, dict) else {},
        "reasoning_tokens",
    )
    return TokenUsage(
        input=max(0, _int(usage, "prompt_tokens") - cached),
        cache_read=cached,
        output=max(0, _int(usage, "completion_tokens") - reasoning),
        reasoning=reasoning,
    )


def anthropic_usage(usage: Any) -> TokenUsage:
    """Map an Anthropic usage object onto the five lanes."""
    return TokenUsage(
        input=_int(usage, "input_tokens"),
        cache_read=_int(usage, "cache_read_input_tokens"),
        cache_write=_int(usage, "cache_creation_input_tokens"),
        output=_int(usage, "output_tokens"),
    )


async def _run_tool(request: AgentRequest, name: str, arguments: Any) -> str:
    tool = tool_by_name(request.tools, name)
    if tool is None:
        return json.dumps({"error": f"unknown tool {name}"})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return json.dumps({"error": "arguments were not valid JSON"})
    request.stream(f"→ {name}({json.dumps(arguments, ensure_ascii=False)[:500]})\n")
    try:
        result = await tool.call(arguments if isinstance(arguments, dict) else {})
    except Exception as error:  # the model sees the failure, as it would from any tool
        result = {"error": str(error)}
    text = json.dumps(result, ensure_ascii=False)
    request.stream(f"← {text[:500]}\n")
    return text


class _HttpAgent:
    """Shared transport: one AsyncClient per request, clear errors, retryable 429/5xx."""

    name: str
    base_url: str
    timeout_s: float
    structured_output: str
    simulated = False

    def __post_init__(self) -> None:
        if self.structured_output not in ("native", "prompt"):
            raise ValueError("structured_output must be 'native' or 'prompt'")

    @property
    def native_structured_output(self) -> bool:
        return self.structured_output == "native"

    async def _post(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
        url = self.base_url.rstrip("/") + path
        try:
            response = await client.post(url, json=body, headers=self._headers())
        except httpx.HTTPError as error:
            raise AgentError(f"{self.name}: request to {url} failed: {error!r}") from error
        if response.status_code >= 400:
            retryable = response.status_code == 429 or response.status_code >= 500
            raise AgentError(
                f"{self.name}: {url} returned HTTP {response.status_code}: {response.text[:300]}",
                retryable=retryable,
            )
        try:
            return response.json()
        except ValueError as error:
            raise AgentError(f"{self.name}: {url} returned a body that is not JSON.") from error

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _key(self, api_key: str | None, env_name: str) -> str | None:
        return api_key or (os.environ.get(env_name) if env_name else None)


@dataclass
class OpenAIAgent(_HttpAgent):
    """OpenAI-compatible ``/chat/completions`` (``base_url`` ends at ``/v1``)."""

    name: str = "openai"
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    structured_output: str = "native"
    max_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = 600.0
    max_tool_rounds: int = 8
    headers: dict[str, str] = field(default_factory=dict)

    def _headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        key = self._key(self.api_key, self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def run(self, request: AgentRequest) -> AgentResult:
        """Chat until the model answers without tool calls (at most ``max_tool_rounds``)."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": request.prompt}]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if request.output_schema is not None and self.native_structured_output:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
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
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            for _ in range(self.max_tool_rounds + 1):
                started = request.clock.now_ms()
                data = await self._post(client, "/chat/completions", body)
                await request.on_call(
                    ModelCall(
                        openai_usage(data.get("usage")),
                        data.get("model") or self.model,
                        started,
                        request.clock.now_ms(),
                    )
                )
                try:
                    message = data["choices"][0]["message"]
                except (KeyError, IndexError, TypeError) as error:
                    raise AgentError(
                        f"{self.name}: the response has no choices[0].message."
                    ) from error
                content = message.get("content") or ""
                request.stream(content)
                tool_calls = message.get("tool_calls") or []
                if not tool_calls:
                    return AgentResult(text=content, model=data.get("model") or self.model)
                messages.append(message)
                for call in tool_calls:
                    function = call.get("function", {})
                    result = await _run_tool(
                        request, function.get("name", ""), function.get("arguments")
                    )
                    messages.append(
                        {"role": "tool", "tool_call_id": call.get("id"), "content": result}
                    )
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")


@dataclass
class AnthropicAgent(_HttpAgent):
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

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": self.version, **self.headers}
        key = self._key(self.api_key, self.api_key_env)
        if key:
            headers["x-api-key"] = key
        return headers

    async def run(self, request: AgentRequest) -> AgentResult:
        """Converse until the model answers (or calls ``final_output`` with the structured
        answer), running offered tools in between."""
        block: dict[str, Any] = {"type": "text", "text": request.prompt}
        if self.cache_prompt:
            block["cache_control"] = {"type": "ephemeral"}
        messages: list[dict[str, Any]] = [{"role": "user", "content": [block]}]
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
            "messages": messages,
        }
        if tools:
            body["tools"] = tools
        if structured:
            body["tool_choice"] = (
                {"type": "tool", "name": FINAL_TOOL} if len(tools) == 1 else {"type": "any"}
            )
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            for _ in range(self.max_tool_rounds + 1):
                started = request.clock.now_ms()
                data = await self._post(client, "/v1/messages", body)
                model = data.get("model") or self.model
                await request.on_call(
                    ModelCall(
                        anthropic_usage(data.get("usage")), model, started, request.clock.now_ms()
                    )
                )
                content = data.get("content") or []
                text = "".join(c.get("text", "") for c in content if c.get("type") == "text")
                request.stream(text)
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
                    output = await _run_tool(request, use.get("name", ""), use.get("input", {}))
                    results.append(
                        {"type": "tool_result", "tool_use_id": use.get("id"), "content": output}
                    )
                messages.append({"role": "user", "content": results})
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")
