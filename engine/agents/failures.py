"""What kind of failure an agent reported (pure functions).

Three kinds, because they call for three different things:

* **limit**: a subscription, session, weekly or usage-credit limit ("You've hit your session
  limit · resets 6:40am (UTC)", Codex's "You've hit your usage limit … try again in 2 days").
  Retrying at once only fails again; the engine waits for the reset when it is near (see
  :mod:`engine.run.retry_plan`) and otherwise fails saying when it resets. Read first: these
  come as HTTP 429, which is otherwise a rate limit.
* **permanent**: the same request would fail the same way: an exhausted quota or credit
  balance, billing, auth, an unknown or unsupported model, a prompt that is too long, a
  malformed request or command line, max turns reached.
* **transient**: worth retrying with backoff (and, for an agent CLI, by resuming its session):
  rate limits, overload, server errors, dropped connections.

Claude Code's "only prompt commands are supported in streaming mode" is a bug inside the CLI
(anthropics/claude-code#16768), not a problem with the prompt: never permanent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["permanent", "transient", "limit"]

# Checked first: a limit that resets in hours or days.
_LIMIT_WORDS = (
    "hit your session limit",
    "hit your weekly limit",
    "hit your limit",
    "hit your usage limit",
    "out of extra usage",
    "weekly limit reached",
    "hour limit reached",
    "usage limit reached",
    "usage_limit_reached",
    "usage limit has been reached",
    "limit will reset at",
    "usage_limit_exceeded",
    "credits_depleted",
)
# Never better by waiting a few seconds (checked after the limits).
_PERMANENT_WORDS = (
    "usage credits required",
    "usage credits are required",
    "insufficient_quota",
    "exceeded your current quota",
    "quota exceeded",
    "billing",
    "credit balance",
    "spend limit",
    "spending limit",
    "budget exhausted",
    "invalid api key",
    "invalid x-api-key",
    "please run /login",
    "authentication",
    "unauthorized",
    "refresh token has expired",
    "permission denied",
    "not_found_error",
    "model not found",
    "does not exist",
    "not supported",
    "unsupported model",
    "invalid_request_error",
    "prompt is too long",
    "prompt_too_long",
    "context_length_exceeded",
    "model_context_window_exceeded",
    "maximum context length",
    "maximum number of turns",
    "max_turns",
    "validation error",  # llama-cpp-python answers a request it cannot validate with HTTP 500
    "unknown option",
    "unexpected argument",
    "unrecognized arguments",
    "can only be used with",
)
_TRANSIENT_WORDS = (
    "rate limit",
    "rate_limit",
    "overloaded",
    "at capacity",
    "too many requests",
    "try again",
    "temporarily",
    "timed out",
    "timeout",
    "stream disconnected",
    "connection reset",
    "connection refused",
    "internal server error",
    "service unavailable",
    "bad gateway",
    "only prompt commands are supported in streaming mode",
)
# Claude Code's ``terminal_reason`` values that say the kind by themselves.
_TERMINAL_KIND: dict[str, Kind] = {
    "blocking_limit": "limit",
    "prompt_too_long": "permanent",
    "image_error": "permanent",
    "max_turns": "permanent",
    "budget_exhausted": "permanent",
    "structured_output_retry_exhausted": "permanent",
    "rapid_refill_breaker": "permanent",  # context refilled too fast after compaction
    "tool_deferred_unavailable": "permanent",
}
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses the official SDKs retry (any other 5xx is transient too)."""

RESUME_FAILED_WORDS = (
    "no conversation found with session id",  # Claude Code (anthropics/claude-code#62851)
    "no saved session found",  # Codex (openai/codex#16066)
    "no rollout found",  # Codex app-server (RunMaestro/Maestro#1043)
    "state db missing rollout path",  # Codex (openai/codex#11634)
)
"""What an agent CLI says when the session it was asked to resume cannot be continued."""


@dataclass(frozen=True)
class Failure:
    """What a failure is: its kind, and when the limit resets (epoch ms) when it said."""

    kind: Kind
    resets_at_ms: int | None = None


def status_kind(status: int | None) -> Kind | None:
    """What an HTTP status alone says (None when it says nothing either way)."""
    if status is None:
        return None
    if status in TRANSIENT_STATUSES or status >= 500:
        return "transient"
    if 400 <= status < 500:
        return "permanent"
    return None


def _has(text: str, words: Sequence[str]) -> bool:
    return any(word in text for word in words)


def classify(
    message: str,
    status: int | None = None,
    default: Kind = "transient",
    terminal_reason: str | None = None,
) -> Kind:
    """Classify a failure from its message, its HTTP status and (Claude Code) its
    ``terminal_reason`` (see the module docstring)."""
    text = message.lower()
    if _has(text, _LIMIT_WORDS):
        return "limit"
    by_reason = _TERMINAL_KIND.get(terminal_reason or "")
    if by_reason is not None:
        return by_reason
    if _has(text, _PERMANENT_WORDS):
        return "permanent"
    by_status = status_kind(status)
    if by_status is not None:
        return by_status
    if _has(text, _TRANSIENT_WORDS):
        return "transient"
    return default


def resume_failed(text: str) -> bool:
    """True when an agent CLI said the session it was to resume cannot be continued."""
    return _has(text.lower(), RESUME_FAILED_WORDS)
