"""Dashboard memory while following a huge, fast-growing node log.

A node's stream log of 1M lines (about 60 MB) is opened in the run's Log tab, then 1M more lines
are appended while the tab follows it. Prints the dashboard's RSS at each step and the peak, and
writes ``bench/results/log_tail.json``. Run: ``python bench/bench_log_tail.py [--lines N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path

from textual.widgets import TabbedContent

from engine.artifact_files import stream_log_path
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.app import TetherApp
from tui.screens.run_detail import RunDetailScreen

RESULTS = Path(__file__).with_name("results") / "log_tail.json"
LINE = "line {} of the agent's stream output, with a few more words in it\n"


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def append_lines(path: Path, start: int, count: int) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(LINE.format(start + i) for i in range(count))


async def measure(root: Path, lines: int) -> dict[str, float]:
    workspace = Workspace(root)
    async with await open_database(workspace) as db:
        store = RunStore(db)
        run = await store.create_run("log-bench", run_id="r-logbench")
        await store.upsert_node(run.run_id, "chatty", 0, "running", attempts=1)
    log = stream_log_path(workspace.artifacts_dir, "r-logbench", "chatty", 0, 1)
    log.parent.mkdir(parents=True, exist_ok=True)
    append_lines(log, 0, lines)
    figures = {"lines_each_step": lines, "log_mb_at_end": 0.0}
    peak = 0.0
    app = TetherApp(workspace, watch=False, poll_interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.5)
        figures["rss_mb_start"] = rss_mb()
        await app.push_screen(RunDetailScreen("r-logbench"))
        await pilot.pause(0.5)
        app.screen.query_one(TabbedContent).active = "tab-log"
        for _ in range(30):
            await pilot.pause(0.1)
            peak = max(peak, rss_mb())
        figures["rss_mb_log_open"] = rss_mb()
        append_lines(log, lines, lines)
        for _ in range(150):
            await pilot.pause(0.1)
            peak = max(peak, rss_mb())
        figures["rss_mb_after_growth"] = rss_mb()
    figures["rss_mb_peak"] = peak
    figures["log_mb_at_end"] = log.stat().st_size / 1e6
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        figures = asyncio.run(measure(Path(folder) / "ws", args.lines))
    figures["load_average"] = os.getloadavg()[0]
    for name, value in figures.items():
        print(f"{name:<22} {value:10.1f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
