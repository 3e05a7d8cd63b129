"""The OpenAI-compatible agent: ``/chat/completions`` (OpenAI, vLLM, Ollama, llama.cpp server,
llama-cpp-python, LM Studio), one call per HTTP round trip.

Requests stream (``stream: true`` with ``stream_options.include_usage``): the answer's text
reaches the attempt's log as it is written, and the call is recorded as soon as the final
usage chunk arrives (:mod:`engine.agents.http.openai_stream`). A server whose stream carries no
usage (llama-cpp-python) gets that call recorded with its usage unknown, said so in a warning,
and is asked without streaming from then on, so later calls are counted; one that answers a
streamed request with tools by HTTP 200 and no event (llama-cpp-python's
``chatml-function-calling``: "Automatic streaming tool choice is not supported") gets its tool
requests without streaming. ``stream = false`` never streams. How lanes, limits and ignored
settings are read: :mod:`engine.agents.http.openai_rules`.

Structured output: OpenAI-compatible servers get ``response_format`` ``json_schema`` (with
``strict: true`` when the schema allows it, see :func:`engine.structured.strict_schema`). A
server that rejects json_schema (llama-cpp-python answers HTTP 500 "Input should be 'text' or
'json_object'") is asked again at once with ``json_object`` (carrying the schema as
llama.cpp's ``schema`` extension) and the schema in the prompt, then with the prompt alone if
that is rejected too; the agent remembers the mode that worked. ``structured_output =
"json_object"`` or ``"prompt"`` starts there.

Offered AgentTools become function tools with ``tool_choice: "auto"``; tool calls run locally
and the conversation continues (one call row per round); after ``max_tool_rounds`` rounds of
tool calls, one last request sets ``tool_choice`` to ``none`` to get the answer. When the first
answer to a request with tools calls none, a server other than OpenAI's is checked once per
agent (``check_tools``): the same request with and without the tools, at most one output token
each; the same prompt size means the server never showed the model its tools, and the attempt
fails saying so instead of finishing as if the model had chosen not to use them.

How an answer ends (``finish_reason``): :mod:`engine.agents.http.stop_reasons`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.agents.agent import (
    AgentError,
    AgentRequest,
    AgentResult,
    ModelCall,
    steers_for_next_turn,
)
from engine.agents.http.http_exchange import Reply
from engine.agents.http.openai_rules import (
    assistant_turn,
    is_official,
    limit_fields,
    openai_usage,
    over_limit,
    rejects_json_object,
    rejects_json_schema,
    rejects_second_limit,
    tool_calls_of,
    tools_were_ignored,
)
from engine.agents.http.openai_stream import ChatStream
from engine.agents.http.stop_reasons import openai_ending
from engine.agents.http.transport import (
    MAX_RESPONSE_BYTES,
    HttpAgent,
    HttpFailure,
    Sleep,
    default_rng,
    run_tool,
    unfinished,
)
from engine.prompting import json_instructions
from engine.structured import strict_schema
from store.model.token_lanes import TokenUsage

STRUCTURED_MODES = ("native", "json_object", "prompt")
PATH = "/chat/completions"
PROBE = "does the server show the model its tools? (the same request without them)"


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
    max_response_bytes: int = MAX_RESPONSE_BYTES
    stream: bool = True
    check_tools: bool = True
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
        self._both_limits = not is_official(self.base_url)
        self._streams = bool(self.stream)
        self._streams_tools = True
        self._tools_checked = not self.check_tools or is_official(self.base_url)

    def _modes(self) -> tuple[str, ...]:
        return STRUCTURED_MODES

    def _headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        key = self._key(self.api_key, self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    @property
    def limit(self) -> int | None:
        """The configured output token limit."""
        return self.max_completion_tokens or self.max_tokens

    # -- streaming -------------------------------------------------------------------------

    def _accumulator(self) -> ChatStream:
        return ChatStream()

    def _interrupted(self, accumulator: Any, started: int, now: int) -> ModelCall | None:
        if not isinstance(accumulator, ChatStream) or accumulator.usage is None:
            return None  # the usage chunk comes last: a cut stream's cost is not known
        usage = openai_usage(accumulator.usage)
        detail = {"interrupted": "the stream was cut after its usage"}
        return ModelCall(usage, accumulator.model or self.model, started, now, detail=detail)

    # -- the request -----------------------------------------------------------------------

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
        body.update(limit_fields(self.max_tokens, self.max_completion_tokens, self._both_limits))
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

    async def _ask(
        self,
        client: httpx.AsyncClient,
        body: dict[str, Any],
        request: AgentRequest,
        refuses: Callable[[int | None, str], bool] | None = None,
    ) -> Reply:
        """One request, streamed when this server allows; falls back once when it refuses the
        second limit name or sends nothing for a streamed request with tools."""
        while True:
            stream = self._streams and (self._streams_tools or "tools" not in body)
            if stream:
                body = {**body, "stream_options": {"include_usage": True}}
            else:
                body = {k: v for k, v in body.items() if k != "stream_options"}
            second = self._both_limits and "max_tokens" in body

            def refused(status: int | None, text: str, second: bool = second) -> bool:
                if second and rejects_second_limit(status, text):
                    return True
                return refuses is not None and refuses(status, text)

            try:
                return await self._post(client, PATH, body, request, refused, stream=stream)
            except HttpFailure as failure:
                if failure.empty and "tools" in body:
                    self._streams_tools = False
                    change = "stream -> no stream for requests with tools"
                elif second and rejects_second_limit(failure.status, failure.body):
                    self._both_limits = False
                    body = {k: v for k, v in body.items() if k != "max_tokens"}
                    change = "max_completion_tokens and max_tokens -> max_completion_tokens"
                else:
                    raise
                await self._fallback(request, change, failure)

    async def _fallback(self, request: AgentRequest, change: str, failure: HttpFailure) -> None:
        now = request.clock.now_ms()
        detail = {"status": failure.status, "error": failure.body[:300] or str(failure)[:300],
                  "fallback": change}  # fmt: skip
        await request.on_call(ModelCall(TokenUsage(), self.model, now, now, kind="retry",
                                        detail=detail))  # fmt: skip
        request.stream(f"\n[{self.name}: {change} from now on]\n")

    async def _first_answer(
        self, client: httpx.AsyncClient, request: AgentRequest
    ) -> tuple[dict[str, Any], Reply]:
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
                return body, await self._ask(client, body, request, refuses)
            except HttpFailure as failure:
                if refuses is None or not refuses(failure.status, failure.body):
                    raise
                previous = self._mode
                self._mode = "json_object" if previous == "native" else "prompt"
                await self._fallback(request, f"{previous} -> {self._mode}", failure)

    # -- the conversation ------------------------------------------------------------------

    async def _record(
        self, reply: Reply, request: AgentRequest, started: int, detail: dict[str, Any] | None
    ) -> str:
        """Record one answer's call; the model it names."""
        data = reply.data
        model = data.get("model") or self.model
        usage = data.get("usage")
        now = request.clock.now_ms()
        if reply.streamed and not isinstance(usage, dict):
            self._streams = False
            request.warn(
                f"{self.name}: the server sent no usage in its stream, so this call's tokens "
                "are unknown; the agent asks without streaming from now on"
            )
            await request.on_call(
                ModelCall(TokenUsage(), model, started, now, detail={**(detail or {}),
                          "usage": "not reported"}, usage_known=False)  # fmt: skip
            )
            return str(model)
        await request.on_call(ModelCall(openai_usage(usage), model, started, now, detail=detail))
        spent = over_limit(usage, self.limit)
        if spent is not None:
            request.warn(
                f"{self.name}: the server wrote {spent:,} output tokens although the limit is "
                f"{self.limit:,}: it does not apply max_completion_tokens or max_tokens"
            )
        return str(model)

    async def _check_tools(
        self, client: httpx.AsyncClient, body: dict[str, Any], request: AgentRequest
    ) -> None:
        """Fail the attempt when the server never showed the model its tools (once per
        agent; see the module docstring)."""
        self._tools_checked = True
        probe = {k: v for k, v in body.items() if k not in ("response_format", "stream_options")}
        probe.update(limit_fields(None, 1, self._both_limits))
        answers = []
        for shape in (probe, {k: v for k, v in probe.items() if k not in ("tools", "tool_choice")}):
            started = request.clock.now_ms()
            reply = await self._post(client, PATH, shape, request)
            await self._record(reply, request, started, {"probe": PROBE})
            answers.append(reply.data.get("usage"))
        if tools_were_ignored(*answers):
            raise AgentError(
                f"{self.name}: the server ignored the offered tools: the request counts the same "
                "prompt tokens with them as without, so the model never saw them (for "
                "llama-cpp-python start the server with --chat_format chatml-function-calling, "
                "or use a chat template that renders tools)",
                retryable=False,
            )

    async def run(self, request: AgentRequest) -> AgentResult:
        """Chat until the model answers without tool calls (at most ``max_tool_rounds``)."""
        async with self.client() as client:
            started = request.clock.now_ms()
            body, reply = await self._first_answer(client, request)
            messages = body["messages"]
            for round_number in range(1, self.max_tool_rounds + 2):
                model = await self._record(reply, request, started, None)
                try:
                    choice = reply.data["choices"][0]
                    message = choice["message"]
                except (KeyError, IndexError, TypeError) as error:
                    raise AgentError(
                        f"{self.name}: the response has no choices[0].message."
                    ) from error
                content = message.get("content") or ""
                if not reply.streamed:
                    request.stream(content)
                self._ended(request, choice, reply.data, content)
                tool_calls = tool_calls_of(message)
                if not tool_calls:
                    if round_number == 1 and "tools" in body and not self._tools_checked:
                        await self._check_tools(client, body, request)
                    return AgentResult(text=content, model=model)
                if round_number > self.max_tool_rounds:
                    break  # it called tools even when told not to: no more tools, no request
                messages.append(assistant_turn(content, tool_calls))
                for call in tool_calls:
                    function = call.get("function", {})
                    result = await run_tool(
                        request, function.get("name", ""), function.get("arguments")
                    )
                    messages.append(
                        {"role": "tool", "tool_call_id": call.get("id"), "content": result}
                    )
                for text in await steers_for_next_turn(request):
                    messages.append({"role": "user", "content": text})  # a person's steer
                if round_number == self.max_tool_rounds:
                    # The tool-round budget is spent: the last request asks for the answer.
                    body["tool_choice"] = "none"
                started = request.clock.now_ms()
                reply = await self._ask(client, body, request)
        raise AgentError(f"{self.name}: still calling tools after {self.max_tool_rounds} rounds.")

    def _ended(
        self, request: AgentRequest, choice: dict[str, Any], data: dict[str, Any], content: str
    ) -> None:
        """Fail an answer that did not end as a finished one (see the stop reasons)."""
        message = choice.get("message") or {}
        finish = choice.get("finish_reason")
        ending = openai_ending(finish, data.get("incomplete_details"))
        if message.get("refusal"):
            raise unfinished(
                self.name, request, f"the model refused: {message['refusal']}", content
            )
        if ending == "refused":
            raise unfinished(
                self.name, request, "the answer was stopped by the content filter", content
            )
        if ending == "truncated":
            limit = self.limit
            raise unfinished(
                self.name,
                request,
                f"the answer was cut off at the token limit (finish_reason {finish!r}"
                + (f", limit {limit}" if limit else "")
                + "); raise max_completion_tokens or max_tokens",
                content,
            )
        if ending == "unknown":
            request.details.setdefault("notes", []).append(
                f"{self.name}: unknown finish_reason {str(finish)[:60]!r}; the answer is kept"
            )
