"""The bounded queue between what was mapped and the collector: spans wait here, a thread of
their own sends them in batches, and what does not fit is dropped and counted, so a collector
that is down, slow or failing never makes anything else wait.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from engine.telemetry.otel_mapping import SpanData
from engine.telemetry.otel_status import ExportStatus

Send = Callable[[Sequence[SpanData]], bool]


class SpanQueue:
    """Spans waiting to be sent, at most ``size``; :meth:`offer` never blocks."""

    def __init__(self, size: int, status: ExportStatus) -> None:
        self.size = size
        self.status = status
        self._items: deque[SpanData] = deque()
        self._ready = threading.Condition()

    def offer(self, spans: Sequence[SpanData]) -> int:
        """Queue ``spans``; those beyond the size are dropped (counted, reported once a
        streak). Returns how many were queued."""
        with self._ready:
            room = max(0, self.size - len(self._items))
            taken = list(spans[:room])
            self._items.extend(taken)
            waiting = len(self._items)
            if taken:
                self._ready.notify()
        self.status.waiting(waiting)
        lost = len(spans) - len(taken)
        if lost:
            self.status.dropped(lost, self.size)
        return len(taken)

    def take(self, most: int, wait_s: float) -> list[SpanData]:
        """Up to ``most`` spans, waiting at most ``wait_s`` for the first one."""
        with self._ready:
            if not self._items:
                self._ready.wait(wait_s)
            batch = [self._items.popleft() for _ in range(min(most, len(self._items)))]
            waiting = len(self._items)
        self.status.waiting(waiting)
        return batch

    def __len__(self) -> int:
        with self._ready:
            return len(self._items)

    def wake(self) -> None:
        """Wake a waiting :meth:`take` (the sender is stopping)."""
        with self._ready:
            self._ready.notify_all()


class SpanSender:
    """The thread that sends queued spans in batches of ``batch_size`` through ``send``."""

    def __init__(self, queue: SpanQueue, send: Send, batch_size: int, interval_s: float) -> None:
        self.queue = queue
        self.send = send
        self.batch_size = batch_size
        self.interval_s = interval_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tether-otlp-send", daemon=True)

    def start(self) -> None:
        """Start sending."""
        self._thread.start()

    def _run(self) -> None:
        while True:
            stopping = self._stopping.is_set()
            batch = self.queue.take(self.batch_size, 0 if stopping else self.interval_s)
            if batch:
                if not self.send(batch) and stopping:
                    return  # the collector fails: what is left stays for a back-fill
            elif stopping:
                return

    def stop(self, deadline: float) -> bool:
        """Send what is queued until ``deadline`` (a ``time.monotonic()`` value), then stop.
        Returns whether everything queued went out. A slow collector may hold the last batch
        past the deadline: the thread is a daemon, so the process still ends on time."""
        self._stopping.set()
        self.queue.wake()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive() and not len(self.queue)
