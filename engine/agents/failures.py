"""Is an agent failure permanent or transient? (pure functions)

A permanent failure (bad or unsupported model, exhausted quota or spend limit, failed auth, a
malformed request, max turns reached) would fail again on retry: the node fails at once. A
transient one (rate limit, overload, a server error, a dropped connection) is worth retrying
with backoff. Quota errors are checked first: OpenAI reports ``insufficient_quota`` with HTTP
429, which is otherwise a rate limit.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["permanent", "transient"]

# Checked first: these never get better by waiting a few seconds.
_PERMANENT_WORDS = (
    "insufficient_quota",
    "exceeded your current quota",
    "quota exceeded",
    "billing",
    "credit balance",
    "spend limit",
    "spending limit",
    "budget exhausted",
    "usage limit",
    "hit your limit",
    "invalid api key",
    "invalid x-api-key",
    "authentication",
    "unauthorized",
    "permission denied",
    "not_found_error",
    "model not found",
    "does not exist",
    "not supported",
    "unsupported model",
    "invalid_request_error",
    "maximum number of turns",
    "max_turns",
    "validation error",  # llama-cpp-python answers a request it cannot validate with HTTP 500
)
_TRANSIENT_WORDS = (
    "rate limit",
    "rate_limit",
    "overloaded",
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
)
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses the official SDKs retry (any other 5xx is transient too)."""


def status_kind(status: int | None) -> Kind | None:
    """What an HTTP status alone says (None when it says nothing either way)."""
    if status is None:
        return None
    if status in TRANSIENT_STATUSES or status >= 500:
        return "transient"
    if 400 <= status < 500:
        return "permanent"
    return None


def classify(message: str, status: int | None = None, default: Kind = "transient") -> Kind:
    """Classify a failure from its message and (when known) its HTTP status."""
    text = message.lower()
    if any(word in text for word in _PERMANENT_WORDS):
        return "permanent"
    by_status = status_kind(status)
    if by_status is not None:
        return by_status
    if any(word in text for word in _TRANSIENT_WORDS):
        return "transient"
    return default
