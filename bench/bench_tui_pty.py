"""The dashboard felt through a real terminal: first paint and key -> screen for a view switch,
measured in tmux (a real pty, the real ``tether tui`` process), beside ``less`` in the same
rounds and the same terminal.

    python bench/bench_tui_pty.py [--size small|big] [--rounds 5]

The workspace is bench/gen_workspace.py's (built once under ``/tmp/tether-bench-ws/``, not
committed). *First paint*: from starting the command to the Runs view's rows on the screen
(``less``: its first page). *View switch*: from ``tmux send-keys`` to the view's own rows on the
screen (``2`` Tokens, ``3`` Memory, ``4`` Handoffs, ``1`` Runs; ``less``: space, to the next
page's first line). The screen is read with ``tmux capture-pane`` in a loop, so both sides carry
the same reading cost (a few ms). Each view's header line is printed as it was on screen, the
same in every round (the same answers). The dashboard's RSS is read at the end; the load
average at the start and the end. Results: a table and ``bench/results/bench_tui_pty.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from gen_workspace import generate  # noqa: E402

RESULTS = Path(__file__).with_name("results") / "bench_tui_pty.json"
VIEWS = (("2", "Tokens", "Histogram of calls"), ("3", "Memory", "Facts ("),
         ("4", "Handoffs", "Chain  Gen"), ("1", "Runs", "Status      Run"))
TIMEOUT_S = 60.0


def tmux(*args: str) -> str:
    """One tmux command; its output."""
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(session: str, text: str) -> tuple[float, str]:
    """Read the screen until ``text`` is on it; the time it appeared and the line holding it."""
    deadline = time.perf_counter() + TIMEOUT_S
    while time.perf_counter() < deadline:
        shown = screen(session)
        if text in shown:
            line = next(line for line in shown.splitlines() if text in line)
            return time.perf_counter(), line.strip()
    raise SystemExit(f"{text!r} never appeared in {session}:\n{screen(session)}")


def start(session: str, command: str, marker: str) -> float:
    """Start ``command`` in a fresh 160x48 tmux session; ms until ``marker`` is on screen."""
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


def page_down(session: str) -> float:
    """``less``: ms from space to the next page's first line on screen."""
    top = screen(session).splitlines()[0]
    sent = time.perf_counter()
    tmux("send-keys", "-t", session, "Space")
    deadline = sent + TIMEOUT_S
    while time.perf_counter() < deadline:
        if screen(session).splitlines()[0] != top:
            return (time.perf_counter() - sent) * 1000
    raise SystemExit(f"less never scrolled in {session}")


def rss_mb(session: str) -> float:
    pid = tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0]
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("small", "big"), default="small")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    workspace = generate(args.size)
    load_start = os.getloadavg()
    tag = f"tether-pty-{os.getpid()}"
    tether, pager = f"{tag}-tui", f"{tag}-less"
    switches: dict[str, list[float]] = {name: [] for _, name, _ in VIEWS}
    headers: dict[str, set[str]] = {name: set() for _, name, _ in VIEWS}
    pages: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tether-pty-") as folder:
        text = Path(folder) / "pages.txt"
        text.write_text("".join(f"line {n} of the pager's file\n" for n in range(47 * 200)))
        try:
            first_paint = start(
                tether, f"{ROOT}/.venv/bin/tether tui --workspace {workspace.root}",
                "runs shown",
            )
            wait_for(tether, "Status      Run")
            first_page = start(pager, f"less -S {text}", "line 0 of")
            time.sleep(1.0)  # a person reads the first screen before pressing a key
            for _ in range(args.rounds):
                for key, name, marker in VIEWS:
                    elapsed, line = key_to_screen(tether, key, marker)
                    switches[name].append(elapsed)
                    headers[name].add(line[:60])
                    pages.append(page_down(pager))
            rss = rss_mb(tether)
        finally:
            for session in (tether, pager):
                subprocess.run(["tmux", "kill-session", "-t", session], check=False,
                               capture_output=True)
    load_end = os.getloadavg()
    every = [ms for values in switches.values() for ms in values]
    result: dict[str, Any] = {
        "size": args.size, "rounds": args.rounds,
        "first_paint_ms": round(first_paint, 1), "less_first_page_ms": round(first_page, 1),
        "switch_median_ms": {name: round(statistics.median(v), 1) for name, v in switches.items()},
        "switch_first_ms": {name: round(v[0], 1) for name, v in switches.items()},
        "switch_median_all_ms": round(statistics.median(every), 1),
        "less_page_median_ms": round(statistics.median(pages), 1),
        "dashboard_rss_mb": round(rss, 1), "headers": {k: sorted(v) for k, v in headers.items()},
        "load_at_start": [round(x, 2) for x in load_start],
        "load_at_end": [round(x, 2) for x in load_end], "cpus": os.cpu_count(),
    }
    print(f"dashboard through tmux, workspace {args.size}, {args.rounds} rounds")
    print(f"first paint {first_paint:.0f} ms   (less, first page: {first_page:.0f} ms)")
    print(f"{'view':<10} {'first':>8} {'median':>8}   header on screen (same every round)")
    for _, name, _ in VIEWS:
        values = switches[name]
        shown = " | ".join(sorted(headers[name]))
        print(f"{name:<10} {values[0]:>6.0f}ms {statistics.median(values):>6.0f}ms   {shown}")
    print(f"all switches median {statistics.median(every):.0f} ms; less, space to next page "
          f"median {statistics.median(pages):.0f} ms (same rounds)")
    print(f"dashboard RSS {rss:.0f} MB; load {load_start} -> {load_end}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
