"""The dashboard's memory over a long session of churning runs, beside the same dashboard idle.

    python bench/bench_dashboard_churn.py [--minutes 10] [--sample-s 10]   # --minutes 60: an hour

Two real ``tether tui`` processes in tmux (bench/churn_dashboard.py, a real pty each, 160x48):
one whose embedded engine launches runs without end on its workspace (code review with hybrid
recall through the workspace's shared encoder, every fifth run a context handoff that clears
itself to new generations, the oldest runs deleted past 250), and one on an idle workspace (the
floor: what a dashboard that only ticks its clock keeps). Every ``--sample-s`` the RSS of both
is read from /proc, with the runs done and the Runs view's count as on screen. The slope is a
least-squares fit in MB per minute over the samples from the moment the Runs view shows its
full window of 200 runs (before that every sample adds rows; without it, after the first
fifth). Also printed: the churned dashboard's RSS before its first run and after it (the model
must stay out of it: the encoder is another process, whose RSS is shown too), and the load
average. JSON in
``bench/results/bench_dashboard_churn.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from pty_screen import (
    ROOT,
    compile_sources,
    kill,
    pane_pid,
    python_command,
    rss_mb,
    screen,
    tmux,
    wait_for,
)

RESULTS = Path(__file__).with_name("results") / "bench_dashboard_churn.json"
SHOWN = re.compile(r"(\d+) runs? shown")
RUNS_SHOWN = 200
"""The Runs view's window (tui.screens.runs_view.RUNS_SHOWN)."""


def slope_mb_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) samples, in MB per minute (0 with fewer than 2)."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if not spread:
        return 0.0
    return sum((t - mean_t) * (m - mean_m) for t, m in samples) / spread * 60


def kb_per_run(rows: list[dict[str, Any]]) -> float:
    """Least-squares RSS growth per run (KB) over ``rows`` (runs done, RSS): the growth
    whatever the machine's speed."""
    # The fit's x is the run count; slope_mb_per_min scales by 60 (seconds to minutes).
    per_sixty_runs = slope_mb_per_min([(row["runs"], row["rss_mb"]) for row in rows])
    return round(per_sixty_runs / 60 * 1024, 1)


def encoder_rss(workspace: Path) -> float:
    """The RSS of the workspace's encoder service, found by its command line (read only)."""
    wanted = str(workspace)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [word.decode(errors="replace") for word in command]
        if "encoder" in words and wanted in words:
            return rss_mb(int(entry.name))
    return 0.0


def shown_count(session: str) -> int | None:
    """The Runs view's count as on screen."""
    found = SHOWN.search(screen(session))
    return int(found.group(1)) if found else None


def read_status(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample-s", type=float, default=10.0)
    args = parser.parse_args()
    compile_sources()
    load_before = os.getloadavg()
    tag = f"tether-churn-{os.getpid()}"
    churned, idle = f"{tag}-runs", f"{tag}-idle"
    with tempfile.TemporaryDirectory(prefix="tether-churn-") as folder:
        root = Path(folder)
        spaces = {churned: root / "churned", idle: root / "idle"}
        for space in spaces.values():
            (space).mkdir()
            (space / "config.toml").write_text('[memory]\nmode = "hybrid"\n')
        statuses = {name: root / f"{name}.json" for name in spaces}
        env = "TETHER_SIM_LATENCY_MS=20 TETHER_ENCODER_IDLE_S=30"
        try:
            for name, space in spaces.items():
                churn = "--churn" if name == churned else ""
                tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "48",
                     "exec " + python_command(
                         f"{env} {ROOT}/.venv/bin/python", f"{ROOT}/bench/churn_dashboard.py",
                         str(space), churn, "--status", str(statuses[name])))
            # The idle one has no database until something writes; it shows its waiting line.
            wait_for(churned, "runs shown")
            pids = {name: pane_pid(name) for name in spaces}
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in spaces}
            rows: list[dict[str, Any]] = []
            started = time.monotonic()
            while time.monotonic() - started < args.minutes * 60:
                time.sleep(args.sample_s)
                at = time.monotonic() - started
                status = read_status(statuses[churned])
                row = {"s": round(at), "runs": status.get("started", 0),
                       "shown": shown_count(churned),
                       "rss_mb": round(rss_mb(pids[churned]), 1),
                       "idle_rss_mb": round(rss_mb(pids[idle]), 1),
                       "encoder_rss_mb": round(encoder_rss(spaces[churned]), 1)}
                if not row["rss_mb"]:
                    raise SystemExit(f"the churned dashboard ended:\n{screen(churned)}")
                rows.append(row)
                samples[churned].append((at, row["rss_mb"]))
                samples[idle].append((at, row["idle_rss_mb"]))
                print(json.dumps(row), flush=True)
            final = read_status(statuses[churned])
            idle_status = read_status(statuses[idle])
        finally:
            kill(churned, idle)
    full = [i for i, row in enumerate(rows) if (row["shown"] or 0) >= RUNS_SHOWN]
    warm = full[0] if full else max(1, len(rows) // 5)
    result = {
        "minutes": args.minutes, "samples": rows,
        "slope_from_s": rows[warm]["s"] if len(rows) > warm else None,
        "slope_mb_per_min": round(slope_mb_per_min(samples[churned][warm:]), 3),
        "idle_slope_mb_per_min": round(slope_mb_per_min(samples[idle][warm:]), 3),
        "kb_per_run": kb_per_run(rows[warm:]),
        "runs": final.get("started", 0), "handed_off": final.get("handed_off", 0),
        "deleted": final.get("deleted", 0),
        "rss_before_first_run_mb": final.get("rss_before_mb"),
        "rss_after_first_run_mb": final.get("rss_after_first_mb"),
        "idle_rss_at_start_mb": idle_status.get("rss_before_mb"),
        "model_modules_in_dashboard": final.get("model_modules_loaded"),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
    }
    last = rows[-1] if rows else {}
    print(f"{args.minutes:g} min, {result['runs']} runs ({result['handed_off']} handoffs, "
          f"{result['deleted']} deleted), Runs view showing {last.get('shown')} at the end; "
          f"load {result['load_before'][0]} -> {result['load_after'][0]}")
    print(f"RSS slope from {result['slope_from_s']} s on: churned dashboard "
          f"{result['slope_mb_per_min']:+.3f} MB/min   idle dashboard (floor) "
          f"{result['idle_slope_mb_per_min']:+.3f} MB/min; {result['kb_per_run']:+.1f} KB per run")
    print(f"churned dashboard RSS: before its first run {result['rss_before_first_run_mb']} MB, "
          f"after it {result['rss_after_first_run_mb']} MB, at the end {last.get('rss_mb')} MB;"
          f" model modules loaded in it: {result['model_modules_in_dashboard']}; encoder "
          f"service {last.get('encoder_rss_mb')} MB; idle dashboard {last.get('idle_rss_mb')} MB")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
