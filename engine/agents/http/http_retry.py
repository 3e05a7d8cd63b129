"""When an HTTP agent retries a request, and how long it waits (pure functions).

The policy follows the official OpenAI and Anthropic SDKs: retry HTTP 408, 409, 429, every 5xx
(Anthropic's 529 "overloaded" included) and dropped connections; wait ``initial_s * 2**n``
capped at ``max_s``, minus up to 25 % jitter; a ``retry-after-ms`` or ``retry-after`` header
(seconds or an HTTP date) replaces that wait when it is reasonable (0 to 60 s); an
``x-should-retry`` header has the last word. Tether adds a cap on the total time spent waiting
(``max_total_wait_s``). Never retried: an exhausted quota or spend limit (OpenAI answers
``insufficient_quota`` with HTTP 429), a subscription or usage limit (Codex's
``usage_limit_reached``; a 429 whose ``retry-after`` is longer than an in-call wait), and other
4xx answers (a request the server will refuse again). A limit's reset time
(:func:`limit_reset_ms`) goes to the engine, which waits for it when it is near.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Mapping
from dataclasses import dataclass

from engine.agents.failures import TRANSIENT_STATUSES, classify
from engine.agents.reset_times import reset_at_ms
from store.db.retry import backoff_s

MAX_HEADER_WAIT_S = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how long an HTTP agent retries one request."""

    max_retries: int = 2
    initial_s: float = 0.5
    max_s: float = 8.0
    max_total_wait_s: float = 60.0

    @classmethod
    def from_setting(cls, value: object) -> RetryPolicy:
        """A policy from an agent's ``retry`` setting (a table of the fields above)."""
        if value is None:
            return cls()
        if isinstance(value, RetryPolicy):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(
                "retry must be a table with max_retries, initial_s, max_s, max_total_wait_s"
            )
        unknown = sorted(set(value) - {"max_retries", "initial_s", "max_s", "max_total_wait_s"})
        if unknown:
            raise ValueError(f"retry has an unknown key {unknown[0]!r}")
        policy = cls(**{k: v for k, v in value.items()})
        for name in ("max_retries", "initial_s", "max_s", "max_total_wait_s"):
            number = getattr(policy, name)
            if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
                raise ValueError(f"retry.{name} must be a number >= 0")
        if not isinstance(policy.max_retries, int):
            raise ValueError("retry.max_retries must be a whole number")
        return policy


def should_retry(status: int | None, body: str, headers: Mapping[str, str]) -> bool:
    """Whether a failed request (``status`` None: the connection failed) is worth retrying."""
    hint = headers.get("x-should-retry", "").strip().lower()
    if hint in ("true", "false"):
        return hint == "true"
    if status is None:
        return True
    if status not in TRANSIENT_STATUSES and status < 500:
        return False
    # A 429 or 5xx that says the quota or spend limit is used up will not clear by waiting.
    return classify(body, status) == "transient"


def header_wait(headers: Mapping[str, str], now_s: float) -> float | None:
    """The wait the server asked for (``retry-after-ms``, then ``retry-after``), if sane."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            wait = float(raw_ms) / 1000
        except ValueError:
            wait = -1
        if 0 <= wait <= MAX_HEADER_WAIT_S:
            return wait
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        wait = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        wait = email.utils.mktime_tz(parsed) - now_s
    return wait if 0 <= wait <= MAX_HEADER_WAIT_S else None


RESET_HEADERS = ("anthropic-ratelimit-unified-reset", "x-codex-primary-reset-at")
"""Headers that give a subscription limit's reset as epoch seconds (Claude's unified limits,
anthropics/claude-code#37009; Codex, earendil-works/pi#4172)."""


def limit_reset_ms(
    status: int | None, body: str, headers: Mapping[str, str], now_s: float
) -> tuple[str, int | None]:
    """The kind of a failed request's answer (limit, permanent or transient) and, for a
    limit, when it resets (epoch ms). A 429 whose ``retry-after`` asks for longer than an
    in-call retry waits (:data:`MAX_HEADER_WAIT_S`) is a limit that resets then."""
    kind = classify(body, status)
    asked = _asked_wait(headers, now_s)
    if kind == "transient" and status == 429 and asked is not None and asked > MAX_HEADER_WAIT_S:
        kind = "limit"
    if kind != "limit":
        return kind, None
    for name in RESET_HEADERS:
        raw = headers.get(name)
        if raw is not None:
            try:
                return kind, int(float(raw) * 1000)
            except ValueError:
                continue
    if asked is not None:
        return kind, int((now_s + asked) * 1000)
    return kind, reset_at_ms(body, int(now_s * 1000))


def _asked_wait(headers: Mapping[str, str], now_s: float) -> float | None:
    """``retry-after-ms`` / ``retry-after`` in seconds, however long (None when absent)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - now_s)


def retry_wait(
    policy: RetryPolicy,
    retry: int,
    headers: Mapping[str, str],
    now_s: float,
    rng: random.Random,
) -> float:
    """Seconds to wait before retry number ``retry`` (1-based)."""
    asked = header_wait(headers, now_s)
    if asked is not None:
        return asked
    return backoff_s(
        retry - 1, first_s=policy.initial_s, max_s=policy.max_s, jitter=0.25, draw=rng.random
    )
