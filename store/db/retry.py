"""Retry timing: one jittered exponential backoff for every retry loop (busy SQLite writes,
PostgreSQL serialization failures, LISTEN reconnects, HTTP agents' retries)."""

from __future__ import annotations

from collections.abc import Callable


def backoff_s(
    attempt: int,
    *,
    first_s: float,
    max_s: float,
    jitter: float = 0.5,
    draw: Callable[[], float] | None = None,
) -> float:
    """Seconds to wait before retry number ``attempt`` (0 for the first retry): ``first_s``
    doubled at every attempt, at most ``max_s``, less up to ``jitter`` of it at random (so
    processes retrying at once spread out). ``draw`` gives the random number in [0, 1)
    (``random.random`` when not given)."""
    delay = min(max_s, first_s * 2.0**attempt)
    if not jitter:
        return delay
    if draw is None:
        import random  # only when something has to wait: the command line starts without it

        draw = random.random
    return delay * (1 - jitter * draw())
