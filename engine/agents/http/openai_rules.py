"""What the OpenAI-compatible agent sends and how it reads the answer, as pure functions:
usage lanes, the token limit as each server takes it, error answers that ask for another
request shape, and the signs that a server ignored what it was sent.

* **Lanes.** ``prompt_tokens`` *includes* ``prompt_tokens_details.cached_tokens`` (fresh input
  = prompt − cached) and ``completion_tokens`` includes
  ``completion_tokens_details.reasoning_tokens`` (output = completion − reasoning).
* **The limit.** OpenAI names it ``max_completion_tokens`` ("``max_tokens`` … is not
  compatible with o-series models", openai-python ``completion_create_params.py``);
  llama-cpp-python knows only ``max_tokens`` and drops unknown keys silently (a 16-token limit
  produced 2,002 tokens). So the agent sends both names to every server but OpenAI's own, and
  only ``max_completion_tokens`` there (or only ``max_tokens`` when that is what the config
  names); a server that refuses the second name gets the first alone from then on.
* **Ignored settings.** An answer longer than the limit means the server did not apply it (a
  warning). A server may also ignore the offered tools: llama-cpp-python's default chat
  formats never render them into the prompt (SmolLM2's template has no ``tools``), and the
  model answers as if there were none. A request with tools then counts exactly the prompt
  tokens of the same request without them, which :func:`tools_were_ignored` checks.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from engine.agents.reported_usage import token_count
from store.model.token_lanes import TokenUsage

OFFICIAL_HOSTS = frozenset({"api.openai.com"})


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


def is_official(base_url: str) -> bool:
    """Whether ``base_url`` is OpenAI's own API (which takes ``max_completion_tokens`` only)."""
    return (urlparse(base_url).hostname or "") in OFFICIAL_HOSTS


def limit_fields(
    max_tokens: int | None, max_completion_tokens: int | None, both: bool
) -> dict[str, int]:
    """The token-limit keys of a request (see the module docstring); ``both`` sends the
    configured limit under both names."""
    if max_completion_tokens is not None:
        fields = {"max_completion_tokens": max_completion_tokens}
        if both:
            fields["max_tokens"] = max_completion_tokens
        return fields
    if max_tokens is not None:
        return {"max_tokens": max_tokens}
    return {}


def rejects_second_limit(status: int | None, body: str) -> bool:
    """Whether an error answer refuses ``max_tokens`` sent beside ``max_completion_tokens``."""
    text = body.lower()
    return status in (400, 422) and "max_tokens" in text and "max_completion_tokens" not in text


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


def over_limit(usage: Any, limit: int | None) -> int | None:
    """The completion tokens of an answer longer than ``limit`` (the server ignored it), or
    None."""
    if limit is None or not isinstance(usage, dict):
        return None
    completion = usage.get("completion_tokens")
    if isinstance(completion, int) and not isinstance(completion, bool) and completion > limit:
        return completion
    return None


def prompt_tokens(usage: Any) -> int | None:
    """``usage.prompt_tokens`` when the server reported it."""
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def tools_were_ignored(with_tools: Any, without_tools: Any) -> bool | None:
    """Whether the same request counts the same prompt tokens with and without its tools (the
    model never saw them); None when a usage is missing."""
    a, b = prompt_tokens(with_tools), prompt_tokens(without_tools)
    if a is None or b is None:
        return None
    return a <= b


def tool_calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an answer, a legacy ``function_call`` (``finish_reason``
    "function_call") taken as one when there are none."""
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    legacy = message.get("function_call")
    if not calls and isinstance(legacy, dict) and legacy.get("name"):
        # llama-cpp-python's legacy name carries a trailing colon ("get_weather:").
        function = {**legacy, "name": str(legacy["name"]).rstrip(":")}
        calls = [{"id": "call_0", "type": "function", "function": function}]
    return calls


def assistant_turn(content: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message sent back with the tool results, rebuilt from the documented
    fields only: servers add their own (llama-cpp-python a legacy ``function_call`` with a
    mangled name) and then refuse them in the next request."""
    calls = []
    for call in tool_calls:
        raw = call.get("function")
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        arguments = function.get("arguments")
        calls.append(
            {
                "id": str(call.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str(function.get("name") or ""),
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments or {}),
                },
            }
        )
    # A string, never null: llama-cpp-python refuses a null content.
    return {"role": "assistant", "content": content, "tool_calls": calls}
