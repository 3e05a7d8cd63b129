"""The clock the store and engine read, injectable so tests control time without sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current time in integer milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to; for tests."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms`` milliseconds."""
        self._now += ms

    def set(self, now_ms: int) -> None:
        """Jump to an absolute time."""
        self._now = now_ms


SYSTEM_CLOCK = SystemClock()
