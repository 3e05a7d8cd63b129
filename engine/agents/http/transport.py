"""What the HTTP agents share: one httpx client per attempt, a POST retried per policy with
every retry recorded, offered tools run locally, and the answers that end an attempt for good.

Every request has a deadline, ``timeout_s`` for the whole exchange (connecting, the answer's
first byte and its last), so a server that sends a byte every few seconds cannot hold a node;
and a size bound, ``max_response_bytes`` for the body or the whole stream, so an endless body
cannot fill memory (:mod:`engine.agents.http.http_exchange`). A streamed answer's text goes to
the attempt's log as it arrives; a stream cut short (an error event, a dropped connection, the
deadline, a cancel such as a budget's) still records what the server had said it cost.

Retries inside one call follow the official SDKs (:mod:`engine.agents.http.http_retry`); every retry
is recorded as a ``retry`` row in the node's calls (status, error, wait) and noted in the log.
A deadline missed and a stream that fails after HTTP 200 are retried like a dropped connection
(an error event by the status its type stands for); a body over the bound is not retried.
The clock and the sleep are injectable, so tests do not wait.

A truncated answer (``finish_reason: "length"``, ``stop_reason: "max_tokens"``) or a refusal
(``message.refusal``, ``stop_reason: "refusal"``, ``finish_reason: "content_filter"``) fails
the attempt, saying which, with the partial text kept as ``partial-output.txt`` in the
attempt's artifact folder; they are not retried (the same request would end the same way:
raise ``max_completion_tokens`` / ``max_tokens``).

The agents: :mod:`engine.agents.http.openai` and :mod:`engine.agents.http.anthropic`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx

from engine.agents.agent import AgentError, AgentRequest, ModelCall, tool_by_name
from engine.agents.http.http_exchange import (
    Accumulator,
    EmptyStream,
    Reply,
    ResponseTooLarge,
    exchange,
)
from engine.agents.http.http_retry import (
    RetryPolicy,
    header_wait,
    limit_reset_ms,
    retry_wait,
    should_retry,
)
from engine.agents.http.sse import StreamError
from store.model.token_lanes import TokenUsage

PARTIAL_OUTPUT = "partial-output.txt"
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""The most an HTTP agent reads of one answer (``max_response_bytes``): a JSON body or a whole
stream. A long answer of 100k output tokens streams in a few megabytes."""
Sleep = Callable[[float], Awaitable[None]]


async def run_tool(request: AgentRequest, name: str, arguments: Any) -> str:
    """Run the offered tool a model called (its arguments as JSON text or parsed), noting the
    call and its result in the log; an unknown tool or a failure is the result the model sees."""
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


def keep_partial(request: AgentRequest, text: str) -> Path | None:
    """Write a cut-off or refused answer's text beside the attempt's log."""
    folder = request.ensure_folder()
    if folder is None:
        return None
    path = folder / PARTIAL_OUTPUT
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def unfinished(name: str, request: AgentRequest, what: str, text: str) -> AgentError:
    """A truncation or refusal: a permanent failure that names itself and keeps the text."""
    kept = keep_partial(request, text) if text else None
    where = f" (partial answer kept in {kept})" if kept else " (no partial answer)"
    return AgentError(f"{name}: {what}{where}.", retryable=False)


class HttpFailure(AgentError):
    """A request that failed for good (after the retries the policy allows); ``empty`` marks
    a streamed request answered with no event at all."""

    def __init__(
        self, message: str, status: int | None, body: str, *, empty: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.status = status
        self.body = body
        self.empty = empty


class HttpAgent:
    """The HTTP agents' shared transport: one AsyncClient per attempt, one deadline and one
    size bound per request, streaming when the agent asks for it, retries per policy, clear
    errors."""

    takes_steers: ClassVar[bool] = True
    """A person's message (``tether steer``) goes in before the tool loop's next turn."""
    name: str
    base_url: str
    timeout_s: float
    structured_output: str
    retry: Any
    sleep: Sleep
    rng: random.Random
    wall_clock: Callable[[], float]
    max_response_bytes: int
    simulated = False
    supports_tools = True

    def __post_init__(self) -> None:
        if self.structured_output not in self._modes():
            raise ValueError(f"structured_output must be one of {', '.join(self._modes())}")
        self.retry = RetryPolicy.from_setting(self.retry)
        self._mode = self.structured_output
        for key in ("timeout_s", "max_response_bytes"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"{key} must be a positive number")

    def _modes(self) -> tuple[str, ...]:
        return ("native", "prompt")

    @property
    def native_structured_output(self) -> bool:
        return self._mode == "native"

    def client(self) -> httpx.AsyncClient:
        """The attempt's HTTP client (``timeout_s`` also bounds each connect and read)."""
        return httpx.AsyncClient(timeout=self.timeout_s)

    def _accumulator(self) -> Accumulator | None:
        """What a streamed answer of this agent is fed to (None: ask without streaming)."""
        return None

    def _interrupted(self, accumulator: Accumulator, started: int, now: int) -> ModelCall | None:
        """The call a stream cut short still cost, when the server had said (None: unknown)."""
        return None

    async def _post(
        self,
        client: httpx.AsyncClient,
        path: str,
        body: dict[str, Any],
        request: AgentRequest,
        refuses: Callable[[int | None, str], bool] | None = None,
        *,
        stream: bool = False,
    ) -> Reply:
        """POST ``body`` (streamed when ``stream``) under the ``timeout_s`` deadline; retries
        per policy, recording each retry. ``refuses`` marks error answers to hand back at once
        (no retry) as HttpFailure."""
        url = self.base_url.rstrip("/") + path
        policy: RetryPolicy = self.retry
        retries, waited = 0, 0.0
        while True:
            started = request.clock.now_ms()
            accumulator = self._accumulator() if stream else None
            status: int | None
            headers = httpx.Headers()
            cut = True  # unless the server answered with an error status
            try:
                async with asyncio.timeout(self.timeout_s):
                    answer = await exchange(
                        client, url, {**body, **({"stream": True} if stream else {})},
                        self._headers(), accumulator=accumulator,
                        max_bytes=self.max_response_bytes, on_text=request.stream,
                    )  # fmt: skip
            except asyncio.CancelledError:
                await self._record_cut(accumulator, started, request)
                raise
            except TimeoutError:
                status = None
                text = f"no complete answer within timeout_s ({self.timeout_s:g} s for the request)"
            except EmptyStream as error:
                raise HttpFailure(f"{self.name}: {url}: {error}", 200, "", empty=True) from None
            except StreamError as error:
                status, text = error.status, f"stream failed: {error}"
            except httpx.HTTPError as error:
                status, text = None, f"request failed: {error!r}"
            except ResponseTooLarge as error:
                raise HttpFailure(
                    f"{self.name}: {url}: {error} (max_response_bytes); stopped reading",
                    None, "", retryable=False,
                ) from None  # fmt: skip
            except (ValueError, RecursionError) as error:
                raise AgentError(f"{self.name}: {url} returned a body that is not JSON.") from error
            else:
                if isinstance(answer, Reply):
                    return answer
                status, text, headers = answer.status, answer.text, answer.headers
                cut = False
            if cut:
                await self._record_cut(accumulator, started, request)
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
                        f"\n[retry {retries}/{policy.max_retries} in {wait:.2f}s] {said}\n"
                    )
                    await self.sleep(wait)
                    continue
            after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
            # The engine's clock: the reset is compared with it (the same clock in real use).
            kind, resets = limit_reset_ms(status, text, headers, request.clock.now_ms() / 1000)
            raise HttpFailure(
                f"{self.name}: {url} returned {said}{after}",
                status,
                text,
                retryable=retryable and kind == "transient",
                retry_after_s=header_wait(headers, self.wall_clock()),
                limit=kind == "limit",
                resets_at_ms=resets,
            )

    async def _record_cut(
        self, accumulator: Accumulator | None, started: int, request: AgentRequest
    ) -> None:
        """Record what a stream cut short (by an error, the deadline or a cancel) had cost,
        when the server had said; shielded, as the attempt may be being cancelled."""
        if accumulator is None:
            return
        call = self._interrupted(accumulator, started, request.clock.now_ms())
        if call is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(request.on_call(call))

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _key(self, api_key: str | None, env_name: str) -> str | None:
        return api_key or (os.environ.get(env_name) if env_name else None)


def default_rng() -> random.Random:
    """A fresh random source for retry jitter (an agent setting tests replace)."""
    return random.Random()
