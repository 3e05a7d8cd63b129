"""Reading token counts that an agent reported, strictly (pure functions).

Agent output is input from outside: a count that is negative, fractional, not a number, or
absurdly large (``1e300`` would overflow SQLite's 64-bit integers) fails the attempt with one
clear sentence instead of crashing the engine or writing a bogus usage row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.agents.agent import AgentError
from store.model.token_lanes import TokenUsage

MAX_TOKENS = 10_000_000_000
"""The largest count accepted for one lane of one call or session (ten billion)."""


def bad_count(value: Any) -> str | None:
    """Why ``value`` is not a usable token count, or None when it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not a number"
    if isinstance(value, float) and (value != value or not value.is_integer()):
        return f"{value!r} is not a whole number"
    if value < 0:
        return f"{value!r} is negative"
    if value > MAX_TOKENS:
        return f"{value!r} is more than {MAX_TOKENS:,}"
    return None


def token_count(mapping: Any, key: str, source: str) -> int:
    """``mapping[key]`` as a token count: 0 when absent or null, AgentError when invalid.

    ``source`` names who reported it (for example "Claude Code's modelUsage") in the error.
    """
    if not isinstance(mapping, Mapping):
        return 0
    value = mapping.get(key)
    if value is None:
        return 0
    problem = bad_count(value)
    if problem is not None:
        raise AgentError(
            f"{source} reported an invalid token count for {key}: {problem}.", retryable=False
        )
    return int(value)


def one_hour_writes(usage: Any, source: str) -> int:
    """How many of an Anthropic usage object's cache-write tokens had the 1-hour TTL
    (``cache_creation.ephemeral_1h_input_tokens``; 0 when not reported), never more than the
    cache writes it reports."""
    split = usage.get("cache_creation") if isinstance(usage, Mapping) else None
    one_hour = token_count(split, "ephemeral_1h_input_tokens", source)
    return min(one_hour, token_count(usage, "cache_creation_input_tokens", source))


def check_usage(usage: TokenUsage, source: str) -> None:
    """Refuse a usage whose lanes are not whole counts within bounds (custom agents)."""
    for lane, value in zip(usage._fields, usage, strict=True):
        problem = bad_count(value)
        if problem is not None:
            raise AgentError(
                f"{source} reported an invalid token count for {lane}: {problem}.",
                retryable=False,
            )


def subtract(total: TokenUsage, part: TokenUsage) -> tuple[TokenUsage, TokenUsage]:
    """``(total - part, part - total)`` lane by lane, each clamped at zero: what ``total``
    holds beyond ``part``, and what ``part`` holds beyond ``total``."""
    pairs = list(zip(total, part, strict=True))
    more = TokenUsage(*(max(0, a - b) for a, b in pairs))
    less = TokenUsage(*(max(0, b - a) for a, b in pairs))
    return more, less
