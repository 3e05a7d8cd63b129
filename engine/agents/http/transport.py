"""HTTP agents over httpx: OpenAI-compatible chat completions and the Anthropic Messages API.

Both report every HTTP round trip as one call with its token lanes split correctly:

* OpenAI-compatible (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio): ``prompt_tokens``
  *includes* ``prompt_tokens_details.cached_tokens``, so fresh input = prompt − cached, and
  ``completion_tokens`` includes ``completion_tokens_details.reasoning_tokens``, so output =
  completion − reasoning (nothing is counted twice).
* Anthropic: ``input_tokens`` excludes ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``; they map to input, cache read and cache write directly.

Retries inside one call follow the official SDKs (:mod:`engine.agents.http_retry`); every retry
is recorded as a ``retry`` row in the node's calls (status, error, wait) and noted in the log.
The clock and the sleep are injectable, so tests do not wait.

A truncated answer (``finish_reason: "length"``, ``stop_reason: "max_tokens"``) or a refusal
(``message.refusal``, ``stop_reason: "refusal"``, ``finish_reason: "content_filter"``) fails
the attempt, saying which, with the partial text kept as ``partial-output.txt`` in the
attempt's artifact folder; they are not retried (the same request would end the same way:
raise ``max_completion_tokens`` / ``max_tokens``).

Structured output: OpenAI-compatible servers get ``response_format`` ``json_schema`` (with
``strict: true`` when the schema allows it, see :func:`engine.structured.strict_schema`). A
server that rejects json_schema (llama-cpp-python answers HTTP 500 "Input should be 'text' or
'json_object'") is asked again at once with ``json_object`` (carrying the schema as
llama.cpp's ``schema`` extension) and the schema in the prompt, then
with the prompt alone if that is rejected too; the agent remembers the mode that worked.
``structured_output = "json_object"`` or ``"prompt"`` starts there. Anthropic gets a forced
``final_output`` tool whose input schema is the output schema. Offered AgentTools become
function tools (with ``tool_choice: "auto"``; llama-cpp-python ignores tools without it); tool
calls run locally and the conversation continues (one call row per round); after
``max_tool_rounds`` rounds of tool calls, one last request sets ``tool_choice`` to ``none``
(Anthropic: the ``final_output`` tool when the task has an output schema) to get the answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from engine.agents.base import AgentError, AgentRequest, AgentResult, ModelCall, tool_by_name
from engine.agents.http_retry import RetryPolicy, header_wait, retry_wait, should_retry
from engine.agents.usage import token_count
from engine.prompting import json_instructions
from engine.structured import strict_schema
from store.run_records import TokenUsage

FINAL_TOOL = "final_output"
PARTIAL_OUTPUT = "partial-output.txt"
STRUCTURED_MODES = ("native", "json_object", "prompt")
Sleep = Callable[[float], Awaitable[None]]


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


def anthropic_usage(usage: Any) -> TokenUsage:
    """Map an Anthropic usage object onto the five lanes."""
    source = "The server"
    return TokenUsage(
        input=token_count(usage, "input_tokens", source),
        cache_read=token_count(usage, "cache_read_input_tokens", source),
        cache_write=token_count(usage, "cache_creation_input_tokens", source),
        output=token_count(usage, "output_tokens", source),
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


def _keep_partial(request: AgentRequest, text: str) -> Path | None:
    """Write a cut-off or refused answer's text beside the attempt's log."""
    folder = request.ensure_folder()
    if folder is None:
        return None
    path = folder / PARTIAL_OUTPUT
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _unfinished(name: str, request: AgentRequest, what: str, text: str) -> AgentError:
    """A truncation or refusal: a permanent failure that names itself and keeps the text."""
    kept = _keep_partial(request, text) if text else None
    where = f" (partial answer kept in {kept})" if kept else " (no partial answer)"
    return AgentError(f"{name}: {what}{where}.", retryable=False)


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


class HttpFailure(AgentError):
    """A request that failed for good (after the retries the policy allows)."""

    def __init__(self, message: str, status: int | None, body: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.status = status
        self.body = body


class _HttpAgent:
    """Shared transport: one AsyncClient per attempt, retries per policy, clear errors."""

    name: str
    base_url: str
    timeout_s: float
    structured_output: str
    retry: Any
    sleep: Sleep
    rng: random.Random
    wall_clock: Callable[[], float]
    simulated = False
    supports_tools = True

    def __post_init__(self) -> None:
        if self.structured_output not in self._modes():
            raise ValueError(f"structured_output must be one of {', '.join(self._modes())}")
        self.retry = RetryPolicy.from_setting(self.retry)
        self._mode = self.structured_output

    def _modes(self) -> tuple[str, ...]:
        return ("native", "prompt")

    @property
    def native_structured_output(self) -> bool:
        return self._mode == "native"

    async def _post(
        self,
        client: httpx.AsyncClient,
        path: str,
        body: dict[str, Any],
        request: AgentRequest,
        refuses: Callable[[int | None, str], bool] | None = None,
    ) -> Any:
        """POST ``body``; retries per policy, recording each retry. ``refuses`` marks error
        answers to hand back at once (no retry) as HttpFailure."""
        url = self.base_url.rstrip("/") + path
        policy: RetryPolicy = self.retry
        retries, waited = 0, 0.0
        while True:
            started = request.clock.now_ms()
            status: int | None
            try:
                response = await client.post(url, json=body, headers=self._headers())
            except httpx.HTTPError as error:
                status, text, headers = None, f"request failed: {error!r}", httpx.Headers()
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError as error:
                        raise AgentError(
                            f"{self.name}: {url} returned a body that is not JSON."
                        ) from error
                status, text, headers = response.status_code, response.text, response.headers
            said = f"HTTP {status}: {text[:300]}" if status is not None else text[:300]
            if refuses is not None and refuses(status, text):
                raise HttpFailure(f"{self.name}: {url} returned {said}", status, text)
            retryable = should_retry(status, text, headers)
            if retryable and retries < policy.max_retries:
                wait = retry_wait(policy, retries + 1, headers, self.wall_clock(), self.rng)
                if waited + wait <= policy.max_total_wait_s:
                    retries += 1
                    waited += wait
                    await request.on_call(
                        ModelCall(
                            TokenUsage(),
                            body.get("model"),
                            started,
                            request.clock.now_ms(),
                            kind="retry",
                            detail={
                                "status": status,
                                "error": text[:300],
                                "wait_s": wait,
                                "retry": retries,
                            },
                        )
                    )
                    request.stream(
                        f"[retry {retries}/{policy.max_retries} in {wait:.2f}s] {said}\n"
                    )
                    await self.sleep(wait)
                    continue
            after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
            raise HttpFailure(
                f"{self.name}: {url} returned {said}{after}",
                status,
                text,
                retryable=retryable,
                retry_after_s=header_wait(headers, self.wall_clock()),
            )

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _key(self, api_key: str | None, env_name: str) -> str | None:
        return api_key or (os.environ.get(env_name) if env_name else None)


def _default_rng() -> random.Random:
    return random.Random()


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
    max_completion_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = 600.0
    max_tool_rounds: int = 8
    headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    retry: Any = None
    sleep: Sleep = field(default=asyncio.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=_default_rng, repr=False, compare=False)
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
                    raise _unfinished(
                        self.name, request, f"the model refused: {message['refusal']}", content
                    )
                if finish == "content_filter":
                    raise _unfinished(
                        self.name,
                        request,
                        "the answer was stopped by the content filter",
                        content,
                    )
                if finish == "length":
                    limit = self.max_completion_tokens or self.max_tokens
                    raise _unfinished(
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
                    result = await _run_tool(
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
    retry: Any = None
    sleep: Sleep = field(default=asyncio.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=_default_rng, repr=False, compare=False)
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
                        anthropic_usage(data.get("usage")), model, started, request.clock.now_ms()
                    )
                )
                content = data.get("content") or []
                text = "".join(c.get("text", "") for c in content if c.get("type") == "text")
                request.stream(text)
                stop = data.get("stop_reason")
                if stop == "refusal":
                    raise _unfinished(
                        self.name, request, "the model refused (stop_reason 'refusal')", text
                    )
                if stop == "max_tokens":
                    raise _unfinished(
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
                    output = await _run_tool(request, use.get("name", ""), use.get("input", {}))
                    results.append(
                        {"type": "tool_result", "tool_use_id": use.get("id"), "content": output}
                    )
                messages.append({"role": "user", "content": results})
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")
