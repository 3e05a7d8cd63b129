"""Stopping what a dead orchestrator's remote attempts left running on a node.

When the orchestrating process dies, Ray ends its tasks and their workers' direct children,
but an agent CLI's own children (a shell a coding agent started, a server it spawned) are
reparented and live on, spending money. Every process an attempt starts inherits
``TETHER_RUN_ID`` (the command agent sets it): before a resumed or claimed run dispatches
anything, the new orchestrator runs :func:`reap_run` on every node of the cluster, which stops
each process of the same user whose environment names the run. The run is held by the new
orchestrator by then, so none of them is one of its own attempts.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def names_run(environ: bytes, run_id: str) -> bool:
    """True when a process environment (``/proc/PID/environ``: NUL-separated) has
    ``TETHER_RUN_ID=<run_id>`` exactly."""
    wanted = f"TETHER_RUN_ID={run_id}".encode()
    return any(entry == wanted for entry in environ.split(b"\0"))


def processes_of_run(run_id: str, proc: Path = PROC, me: int | None = None) -> list[int]:
    """Pids of the processes readable here whose environment names ``run_id`` (this one
    excluded)."""
    me = os.getpid() if me is None else me
    found: list[int] = []
    for entry in _pids(proc):
        if entry == me:
            continue
        try:
            environ = (proc / str(entry) / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's
        if names_run(environ, run_id):
            found.append(entry)
    return found


def _pids(proc: Path) -> Iterable[int]:
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]


def reap_run(run_id: str) -> list[int]:
    """SIGKILL every process of this host (readable by this user) whose environment names
    ``run_id``; returns their pids."""
    pids = processes_of_run(run_id)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return pids
