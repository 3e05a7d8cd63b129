"""How the OpenTelemetry export of this process is going, for the people watching: counters the
exporter's threads update, a snapshot the dashboard's status line reads (the seam: no
OpenTelemetry import here), and where warnings go (stderr, unless a front end takes them)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

MAX_REASON_CHARS = 160


@dataclass(frozen=True)
class ExportSnapshot:
    """The export's state at one moment."""

    endpoint: str
    protocol: str
    metrics_endpoint: str = ""
    spans_sent: int = 0
    spans_dropped: int = 0
    spans_failed: int = 0
    spans_waiting: int = 0
    metric_failures: int = 0
    spans_failing: bool = False
    metrics_failing: bool = False
    reason: str | None = None
    last_ok_at_ms: int | None = None
    problem: str | None = None
    """Export is configured but cannot run at all (the packages are missing)."""

    @property
    def failing(self) -> bool:
        """The last export of spans or of metrics failed (or export cannot run)."""
        return self.spans_failing or self.metrics_failing or self.problem is not None

    @property
    def healthy(self) -> bool:
        """Nothing lost and nothing failing."""
        return not (self.failing or self.spans_dropped or self.spans_failed or self.problem)


class ExportStatus:
    """Thread-safe counters of one exporter (its tail, export and metric threads write them)."""

    def __init__(self, endpoint: str, protocol: str, *, metrics_endpoint: str = "",
                 warn: bool = True) -> None:
        self._lock = threading.Lock()
        self._warn = warn
        self._state = ExportSnapshot(endpoint, protocol, metrics_endpoint or endpoint)
        self._warned_failing = False
        self._warned_dropping = False

    def snapshot(self) -> ExportSnapshot:
        """The current state."""
        with self._lock:
            return self._state

    def _change(self, add: dict[str, int] | None = None, **changes: object) -> ExportSnapshot:
        """Set ``changes`` and add ``add`` to counters, in one step."""
        with self._lock:
            for name, delta in (add or {}).items():
                changes[name] = getattr(self._state, name) + delta
            self._state = replace(self._state, **changes)  # type: ignore[arg-type]
            return self._state

    def waiting(self, count: int) -> None:
        """``count`` spans wait in the queue."""
        self._change(spans_waiting=count)

    def dropped(self, count: int, queue_size: int) -> None:
        """``count`` spans did not fit in the queue; the first drop of a streak is reported."""
        state = self._change({"spans_dropped": count})
        if self._warn and not self._warned_dropping:
            self._warned_dropping = True
            report(
                f"telemetry: the collector at {state.endpoint} is not keeping up; spans beyond "
                f"a queue of {queue_size} are dropped ({state.spans_dropped} so far). Runs go "
                "on; tether export otlp can send them later."
            )

    def sent(self, count: int, now_ms: int) -> None:
        """A batch of ``count`` spans was accepted."""
        state = self._change({"spans_sent": count}, spans_failing=False, last_ok_at_ms=now_ms)
        if not state.metrics_failing:
            self._change(reason=None)
        self._warned_failing = False
        self._warned_dropping = False

    def failed(self, count: int, reason: str | None, signal: str = "spans") -> None:
        """An export of ``count`` spans (or of metrics) failed; the first failure of a streak
        is reported."""
        reason = _short(reason) or "the collector did not accept them"
        if signal == "spans":
            state = self._change({"spans_failed": count}, spans_failing=True, reason=reason)
        else:
            # A span failure's reason stays: it says more to a person watching traces.
            keep = self.snapshot().reason if self.snapshot().spans_failing else None
            state = self._change({"metric_failures": 1}, metrics_failing=True,
                                 reason=keep or reason)
        if self._warn and not self._warned_failing:
            self._warned_failing = True
            where = state.endpoint if signal == "spans" else state.metrics_endpoint
            later = ("tether export otlp can send their spans later" if signal == "spans" else
                     "metrics = false under [telemetry] sends spans only")
            report(f"telemetry: cannot send {signal} to {where} ({reason}); runs go on, and "
                   f"{later}.")

    def metrics_sent(self) -> None:
        """A metrics export was accepted."""
        state = self._change(metrics_failing=False)
        if not state.spans_failing:
            self._change(reason=None)

    def replace(self, snapshot: ExportSnapshot) -> None:
        """Take the state another process reported (the export process's own)."""
        with self._lock:
            self._state = snapshot

    def unavailable(self, problem: str) -> None:
        """Export cannot run at all."""
        self._change(problem=problem, reason=problem)


def _short(text: str | None) -> str | None:
    if not text:
        return None
    line = " ".join(text.split())
    return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 1] + "…"


def now_ms() -> int:
    """Wall-clock milliseconds (when a batch was last accepted)."""
    return int(time.time() * 1000)


# -- the seam: what this process exports, and where its warnings go -----------------------------

_STATUSES: dict[str, ExportStatus] = {}
"""The export of each workspace this process exports, by :func:`workspace_key`."""
_LOCK = threading.Lock()


def workspace_key(workspace: Any) -> str:
    """What names a workspace here (its database URL or its database file)."""
    return str(workspace.database_url or workspace.database_path)


def register(key: str, status: ExportStatus) -> None:
    """Make ``status`` the one shown for the workspace ``key``."""
    with _LOCK:
        _STATUSES[key] = status


def unregister(key: str) -> None:
    """Forget the export of workspace ``key`` (it stopped)."""
    with _LOCK:
        _STATUSES.pop(key, None)


def current(key: str | None = None) -> ExportSnapshot | None:
    """The export state for workspace ``key`` (any workspace's when None), or None when this
    process exports nothing."""
    with _LOCK:
        status = _STATUSES.get(key) if key else next(iter(_STATUSES.values()), None)
    return None if status is None else status.snapshot()


def _to_stderr(text: str) -> None:
    try:
        print(f"tether: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr closed: the status line or the next command says it


_sink: Callable[[str], None] = _to_stderr


def report(text: str) -> None:
    """Tell the person running this process (stderr unless :func:`set_sink` changed it)."""
    _sink(text)


def set_sink(sink: Callable[[str], None] | None) -> None:
    """Send warnings to ``sink`` instead of stderr (the dashboard shows them on its status
    line); None restores stderr."""
    global _sink
    _sink = sink or _to_stderr
