"""Stopping the agent CLIs of a process that dies without stopping them itself.

An agent CLI runs in its own session (process group), so a Ctrl-C at the terminal does not
reach it and the engine stops it in order; but when the engine is killed outright (kill -9, the
OOM killer) nothing stopped it: it worked, and spent, on until it next printed a line into a
closed pipe, or a later resume on the same host reaped it (:mod:`engine.executors.reaper`).

Each process that starts agents also starts one watchdog, this file run as a script on the
standard library alone: the process tells it, over the watchdog's stdin, which process groups
it runs (``+PGID``) and which it has stopped (``-PGID``). The write end of that pipe belongs to
this process only, so the watchdog reads end-of-file the moment this process ends, however it
ends, and then SIGKILLs every group still listed. ``prctl(PR_SET_PDEATHSIG)`` would not do: it
reaches the agent alone, not its children, and fires when the *thread* that started it ends.
The watchdog lives in a session of its own, so the signal a terminal sends the engine's group
does not end it first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading


class GroupWatchdog:
    """This process's watchdog, started on first use (again after a fork, or if it died)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()

    def watch(self, pgid: int) -> None:
        """Have the process group ``pgid`` killed if this process dies before :meth:`release`."""
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """The group ``pgid`` was stopped (or ended) by this process: forget it."""
        with self._lock:
            self._groups.discard(pgid)
            if self._process is not None:
                self._send(f"-{pgid}\n")

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's watchdog and groups are the parent's. The child's
        copy of the pipe is closed, or the parent's death would not be seen while it lives."""
        self._lock = threading.Lock()
        process, self._process, self._groups = self._process, None, set()
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()

    def _send(self, line: str) -> None:
        for _ in range(2):
            if self._process is None or self._process.poll() is not None:
                # Dead (or never started): a new one is told every group still running.
                line = "".join(f"+{pgid}\n" for pgid in sorted(self._groups))
                self._process = _start()
                if self._process is None:
                    return  # no watchdog: the reaper on resume remains
            assert self._process.stdin is not None
            try:
                self._process.stdin.write(line.encode())
                self._process.stdin.flush()
                return
            except (OSError, ValueError):  # its pipe broke: it died; start another
                self._process = None


def _start() -> subprocess.Popen[bytes] | None:
    if not sys.executable:
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


WATCHDOG = GroupWatchdog()
"""The one watchdog of this process."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHDOG.forget_after_fork)


def serve(stdin: int = 0) -> None:
    """The watchdog's loop: keep the groups listed on ``stdin``; at its end, SIGKILL them."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # a terminal's signals are for the engine
    groups: set[int] = set()
    pending = b""
    while chunk := os.read(stdin, 4096):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                pgid = int(line[1:])
                if pgid > 1:  # never the watchdog's own group (0) or init's (1)
                    (groups.add if line[:1] == b"+" else groups.discard)(pgid)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    serve()
