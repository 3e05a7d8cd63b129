"""What the HTTP agents share: one httpx client per attempt, a POST retried per policy with
every retry recorded, offered tools run locally, and the answers that end an attempt for good.

Retries inside one call follow the official SDKs (:mod:`engine.agents.http.http_retry`); every retry
is recorded as a ``retry`` row in the node's calls (status, error, wait) and noted in the log.
The clock and the sleep are injectable, so tests do not wait.

A truncated answer (``finish_reason: "length"``, ``stop_reason: "max_tokens"``) or a refusal
(``message.refusal``, ``stop_reason: "refusal"``, ``finish_reason: "content_filter"``) fails
the attempt, saying which, with the partial text kept as ``partial-output.txt`` in the
attempt's artifact folder; they are not retried (the same request would end the same way:
raise ``max_completion_tokens`` / ``max_tokens``).

The agents: :mod:`engine.agents.http.openai` and :mod:`engine.agents.http.anthropic`.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from engine.agents.agent import AgentError, AgentRequest, ModelCall, tool_by_name
from engine.agents.http.http_retry import (
    RetryPolicy,
    header_wait,
    limit_reset_ms,
    retry_wait,
    should_retry,
)
from store.model.token_lanes import TokenUsage

PARTIAL_OUTPUT = "partial-output.txt"
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
    """A request that failed for good (after the retries the policy allows)."""

    def __init__(self, message: str, status: int | None, body: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.status = status
        self.body = body


class HttpAgent:
    """The HTTP agents' shared transport: one AsyncClient per attempt, retries per policy,
    clear errors."""

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

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _key(self, api_key: str | None, env_name: str) -> str | None:
        return api_key or (os.environ.get(env_name) if env_name else None)


def default_rng() -> random.Random:
    """A fresh random source for retry jitter (an agent setting tests replace)."""
    return random.Random()
