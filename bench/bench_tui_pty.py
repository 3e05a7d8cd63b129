"""The dashboard felt through a real terminal: first paint and key -> screen for a view switch,
measured in tmux (a real pty, the real ``tether tui`` process), beside two floors in the same
rounds and the same terminal: a bare Textual app (``bench/bare_textual.py``: one 200-row table
per screen, no database) and ``less``.

    python bench/bench_tui_pty.py [--size small|big] [--rounds 5] [--starts 5] [--load 8]

The workspace is bench/gen_workspace.py's (built once under ``/tmp/tether-bench-ws/``, not
committed). Bytecode caches are written first and used, as for an installed Tether. With
``--load N`` busy loops (child processes, ended by pid) raise the 1-minute load average to
about N before the first measurement. *First paint*: from starting the command to the Runs
view's rows on the screen (the bare app: its table's first row; ``less``: its first page), the
median of ``--starts`` cold starts of each, the two taking turns (a tmux server is running
before the first, so no side pays for its start).
*View switch*: from ``tmux send-keys`` to the view's own rows on the screen (``2`` Tokens,
``3`` Memory, ``4`` Handoffs, ``1`` Runs; the bare app: ``2`` and ``1``; ``less``: space, to
the next page's first line). Each view's header line is printed as it was on screen, the same
in every round (the same answers), and the first screen the dashboard showed with its tab line
is checked: its count is "loading" or the true one, never a number the data does not have.
The dashboard's RSS is read at the end; the load average at the start and the end. Results: a
table and ``bench/results/bench_tui_pty_<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from gen_workspace import generate
from pty_screen import (
    ROOT,
    BusyLoops,
    compile_sources,
    key_to_screen,
    kill,
    loops_for_load,
    pane_pid,
    python_command,
    rss_mb,
    screen,
    start,
    tmux,
    wait_for,
)

RESULTS = Path(__file__).with_name("results")
VIEWS = (("2", "Tokens", "Histogram of calls"), ("3", "Memory", "Facts ("),
         ("4", "Handoffs", "Chain  Gen"), ("1", "Runs", "Status      Run"))
FLOOR_VIEWS = (("2", "floor view two"), ("1", "floor view one"))
SETTLE_S = 2.0


def page_down(session: str) -> float:
    """``less``: ms from space to the next page's first line on screen."""
    top = screen(session).splitlines()[0]
    sent = time.perf_counter()
    tmux("send-keys", "-t", session, "Space")
    while time.perf_counter() < sent + 60:
        if screen(session).splitlines()[0] != top:
            return (time.perf_counter() - sent) * 1000
    raise SystemExit(f"less never scrolled in {session}")


def first_crumb(session: str, started: float) -> tuple[str, float]:
    """The dashboard's tab line the first time it is on screen (what a person sees first),
    and when; read as fast as the screen can be read."""
    while time.perf_counter() < started + 90:
        for line in screen(session).splitlines():
            if "1 Runs" in line:
                return line.split("│", 1)[-1].strip(), (time.perf_counter() - started) * 1000
    raise SystemExit(f"the dashboard never drew its tabs:\n{screen(session)}")


def end(*sessions: str) -> None:
    """End the sessions and wait (up to 10 s) until their programs are gone, so a program
    still shutting down does not take the CPU from the next one measured."""
    pids = [pane_pid(session) for session in sessions]
    kill(*sessions)
    deadline = time.perf_counter() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.perf_counter() < deadline:
        time.sleep(0.01)


def measure(workspace: Path, rounds: int, starts: int, folder: Path, tag: str) -> dict[str, Any]:
    tether, floor, pager, keeper = f"{tag}-tui", f"{tag}-bare", f"{tag}-less", f"{tag}-keep"
    switches: dict[str, list[float]] = {name: [] for _, name, _ in VIEWS}
    headers: dict[str, set[str]] = {name: set() for _, name, _ in VIEWS}
    floor_switches: list[float] = []
    pages: list[float] = []
    text = folder / "pages.txt"
    text.write_text("".join(f"line {n} of the pager's file\n" for n in range(47 * 200)))
    try:
        # The tmux server is started first, by a session of its own: otherwise the first
        # program measured (the bare app) would pay for the server's start and the others not.
        tmux("new-session", "-d", "-s", keeper, "-x", "160", "-y", "48", "exec sleep 3600")
        # The floors first, on a machine no dashboard is warming views on.
        floor_command = python_command(f"{ROOT}/.venv/bin/python", f"{ROOT}/bench/bare_textual.py")
        tether_command = python_command(f"{ROOT}/.venv/bin/tether", "tui", "--workspace",
                                        str(workspace))
        floor_paint = start(floor, floor_command, "r-00000200")
        first_page = start(pager, f"less -S {text}", "line 0 of")
        started = time.perf_counter()
        tmux("new-session", "-d", "-s", tether, "-x", "160", "-y", "48",
             "exec " + tether_command)
        crumb, tabs_ms = first_crumb(tether, started)
        appeared, runs_line = wait_for(tether, "runs shown")
        first_paint = (appeared - started) * 1000
        wait_for(tether, "Status      Run")
        # A person reads the first screen before pressing a key (the dashboard builds the
        # other views meanwhile).
        time.sleep(SETTLE_S)
        for _ in range(rounds):
            for key, name, marker in VIEWS:
                elapsed, line = key_to_screen(tether, key, marker)
                switches[name].append(elapsed)
                headers[name].add(line[:60])
                for floor_key, floor_marker in FLOOR_VIEWS:
                    floor_switches.append(key_to_screen(floor, floor_key, floor_marker)[0])
                pages.append(page_down(pager))
        rss = rss_mb(pane_pid(tether))
        floor_rss = rss_mb(pane_pid(floor))
        end(tether, floor)
        # More cold starts, the two sides taking turns: one start is a single sample of a
        # machine whose load moves by the second.
        floor_paints, paints = [floor_paint], [first_paint]
        for _ in range(starts - 1):
            floor_paints.append(start(floor, floor_command, "r-00000200"))
            end(floor)
            paints.append(start(tether, tether_command, "runs shown"))
            end(tether)
    finally:
        kill(tether, floor, pager, keeper)
    every = [ms for values in switches.values() for ms in values]
    return {
        "first_paint_ms": round(statistics.median(paints), 1),
        "first_paint_all_ms": [round(ms, 1) for ms in paints],
        "first_tabs_ms": round(tabs_ms, 1),
        "first_crumb": crumb, "crumb_at_first_paint": runs_line.split("│", 1)[-1].strip(),
        "floor_first_paint_ms": round(statistics.median(floor_paints), 1),
        "floor_first_paint_all_ms": [round(ms, 1) for ms in floor_paints],
        "less_first_page_ms": round(first_page, 1),
        "switch_median_ms": {name: round(statistics.median(v), 1) for name, v in switches.items()},
        "switch_first_ms": {name: round(v[0], 1) for name, v in switches.items()},
        "switch_median_all_ms": round(statistics.median(every), 1),
        "floor_switch_median_ms": round(statistics.median(floor_switches), 1),
        "less_page_median_ms": round(statistics.median(pages), 1),
        "dashboard_rss_mb": round(rss, 1), "floor_rss_mb": round(floor_rss, 1),
        "headers": {k: sorted(v) for k, v in headers.items()},
    }


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("small", "big"), default="small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--starts", type=int, default=5,
                        help="cold starts of the dashboard and of the bare app (the first paint "
                             "reported is their median)")
    parser.add_argument("--load", type=float, default=0.0,
                        help="raise the 1-minute load to about this with busy loops first")
    args = parser.parse_args()
    workspace = generate(args.size)
    compile_sources()
    load_before = os.getloadavg()
    with BusyLoops(loops_for_load(args.load)) as busy, \
            tempfile.TemporaryDirectory(prefix="tether-pty-") as folder:
        load_start = busy.wait_for_load(args.load * 0.9) if busy.count else load_before[0]
        result = measure(workspace.root, args.rounds, args.starts, Path(folder),
                         f"tether-pty-{os.getpid()}")
        load_end = os.getloadavg()
    result = {
        "size": args.size, "rounds": args.rounds, "starts": args.starts,
        "busy_loops": busy.count,
        **result,
        "load_before": [round(x, 2) for x in load_before], "load_at_start": round(load_start, 2),
        "load_at_end": [round(x, 2) for x in load_end], "cpus": os.cpu_count(),
    }
    report(result)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"bench_tui_pty_{args.size}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def report(result: dict[str, Any]) -> None:
    """The table, Tether beside its floors."""
    print(f"dashboard through tmux, workspace {result['size']}, {result['rounds']} rounds, "
          f"{result['busy_loops']} busy loops, load {result['load_at_start']} -> "
          f"{result['load_at_end'][0]} ({result['cpus']} cpus)")
    print(f"first paint     Tether {result['first_paint_ms']:>6.0f} ms   bare Textual "
          f"{result['floor_first_paint_ms']:>6.0f} ms   "
          f"less {result['less_first_page_ms']:>4.0f} ms   (medians of {result['starts']} "
          f"cold starts, taking turns: Tether {result['first_paint_all_ms']}, bare "
          f"{result['floor_first_paint_all_ms']})")
    print(f"first tab line  {result['first_tabs_ms']:.0f} ms showing {result['first_crumb']!r}; "
          f"at first paint {result['crumb_at_first_paint']!r}")
    print(f"{'view':<10} {'first':>8} {'median':>8}   header on screen (same every round)")
    for name, median in result["switch_median_ms"].items():
        shown = " | ".join(result["headers"][name])
        print(f"{name:<10} {result['switch_first_ms'][name]:>6.0f}ms {median:>6.0f}ms   {shown}")
    print(f"view switch median  Tether {result['switch_median_all_ms']:.0f} ms   bare Textual "
          f"{result['floor_switch_median_ms']:.0f} ms   less (space) "
          f"{result['less_page_median_ms']:.0f} ms (same rounds)")
    print(f"RSS  Tether {result['dashboard_rss_mb']:.0f} MB   bare Textual "
          f"{result['floor_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
