"""Reading a program's screen through a real terminal (tmux), for the dashboard benchmarks.

A program starts in a fresh detached tmux session (a real pty, 160x48); the screen is read
with ``tmux capture-pane`` in a loop until a text is on it, so every measured side carries the
same reading cost (a few ms). Busy loops raise the machine's load for the "at load N" figures:
started as child processes and ended by their pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 90.0


def tmux(*args: str) -> str:
    """One tmux command; its output."""
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    """The text on ``session``'s screen now."""
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(session: str, text: str, timeout_s: float = TIMEOUT_S) -> tuple[float, str]:
    """Read the screen until ``text`` is on it; the time it appeared and the line holding it."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        shown = screen(session)
        if text in shown:
            line = next(line for line in shown.splitlines() if text in line)
            return time.perf_counter(), line.strip()
    raise SystemExit(f"{text!r} never appeared in {session}:\n{screen(session)}")


def start(session: str, command: str, marker: str) -> float:
    """Start ``command`` in a fresh 160x48 session; ms until ``marker`` is on screen."""
    started = time.perf_counter()
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", f"exec {command}")
    appeared, _ = wait_for(session, marker)
    return (appeared - started) * 1000


def key_to_screen(session: str, key: str, marker: str) -> tuple[float, str]:
    """ms from sending ``key`` to ``marker`` on screen, and the line holding it."""
    sent = time.perf_counter()
    tmux("send-keys", "-t", session, key)
    appeared, line = wait_for(session, marker)
    return (appeared - sent) * 1000, line


def kill(*sessions: str) -> None:
    """End the sessions (and the programs in them)."""
    for session in sessions:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)


def pane_pid(session: str) -> int:
    """The pid of the program running in ``session``."""
    return int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0])


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def python_command(*args: str) -> str:
    """A command line for this checkout's venv that writes and uses bytecode caches, as an
    installed Tether does (a session may set PYTHONDONTWRITEBYTECODE; then every start would
    compile every module from source, a cost no user pays)."""
    return "env -u PYTHONDONTWRITEBYTECODE " + " ".join(args)


def compile_sources() -> None:
    """Write the bytecode caches of Tether's packages (pip does this for an installed wheel)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "tui", "engine", "store", "bench"],
        cwd=ROOT, check=True, capture_output=True,
    )


class BusyLoops:
    """``count`` processes spinning on a core each, so the load average climbs; ended (by pid)
    on exit. :meth:`wait_for_load` waits until the 1-minute load reaches a target."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyLoops:
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", "while True: pass"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))
        return self

    def wait_for_load(self, target: float, timeout_s: float = 120.0) -> float:
        """Wait (up to ``timeout_s``) for the 1-minute load to reach ``target``; the load then."""
        deadline = time.monotonic() + timeout_s
        while self.count and os.getloadavg()[0] < target and time.monotonic() < deadline:
            time.sleep(2.0)
        return os.getloadavg()[0]

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def loops_for_load(target: float) -> int:
    """How many busy loops bring the machine from its present load to about ``target``."""
    return max(0, round(target - os.getloadavg()[0]))
