"""Process ownership of runs: who is executing a run, and whether another process may take it.

An engine process names itself with :func:`new_owner_id`: ``host:pid:start:random``, where
``start`` is the process's start time in clock ticks since boot (``/proc/PID/stat``), so a pid
reused by an unrelated process is not mistaken for the owner. On the owner's own host,
:func:`owner_liveness` is a fact, not a guess from the heartbeat: a run whose owner is alive is
never resumed, deleted or handed off by another process, however old its heartbeat (a stopped
or busy process keeps its run). Only for an owner on another host does the heartbeat age decide.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from store.model.ids import random_hex
from store.model.run_records import RunRecord

Liveness = Callable[[str | None], bool | None]


def process_start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def new_owner_id() -> str:
    """Identifies the calling process as the owner of the runs it executes:
    ``<host>:<pid>:<start ticks>:<random>`` (the format :func:`owner_liveness` reads)."""
    pid = os.getpid()
    start = process_start_ticks(pid) or "0"
    return f"{_hostname()}:{pid}:{start}:{random_hex(6)}"


def owner_liveness(owner_id: str | None) -> bool | None:
    """True when ``owner_id`` names a live process of this host, False when that process is
    gone (or its pid now belongs to another process), None when it cannot be told (another
    host, no owner recorded, or an id in an unknown format)."""
    if not owner_id:
        return None
    parts = owner_id.split(":")
    if len(parts) < 3 or parts[0] != _hostname() or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    if len(parts) >= 4 and parts[2] != "0":
        started = process_start_ticks(pid)
        if started is not None and started != parts[2]:
            return False  # the pid was reused by another process
    return True


def owner_is_dead(owner_id: str | None) -> bool:
    """True when ``owner_id`` names a process on this host that no longer exists, so its run
    can be taken over at once instead of waiting for the heartbeat to go stale."""
    return owner_liveness(owner_id) is False


def running_elsewhere(
    run: RunRecord, now_ms: int, me: str | None = None, *, liveness: Liveness = owner_liveness
) -> str | None:
    """Why ``run`` must be left to the process executing it (one sentence), or None when the
    caller (owner id ``me``) may resume, delete or hand it off."""
    if run.status != "running" or (me is not None and run.owner_id == me):
        return None
    beat_s = max(0, now_ms - (run.heartbeat_at_ms or now_ms)) // 1000
    state = liveness(run.owner_id)
    if state is True:
        pid = (run.owner_id or "").split(":")[1]
        return (
            f"Run {run.run_id} is being executed by process {pid} on this machine, which is "
            f"still alive (last heartbeat {beat_s} s ago); cancel the run or stop that process."
        )
    if state is False or run.is_stale(now_ms):
        return None
    return (
        f"Run {run.run_id} is still running in another process (heartbeat {beat_s} s ago); "
        "cancel it or wait."
    )


def _hostname() -> str:
    # socket is imported only when an owner is named or checked: `tether runs` never is.
    import socket

    return socket.gethostname()
