"""The process bench/bench_dashboard_churn.py measures: ``tether tui`` on a workspace, and with
``--churn`` its embedded engine launching runs against it without end (the dashboard's own
engine, as when a person presses ``n``; its recall asks the workspace's shared encoder).

    python bench/churn_dashboard.py WORKSPACE [--churn] --status FILE

The churn: the code-review example (hybrid recall and a retained note on every run), and every
fifth run the context-handoff example (it clears itself: a handoff to a new generation, three
times); once the workspace holds more than :data:`KEEP_RUNS` runs, the oldest are deleted, so
rows leave the Runs view as others arrive. ``--status`` is rewritten after every run: runs
started, finished, handed off, deleted, and this process's RSS before the first run and after
it (the model must not load here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from store.workspace.layout import Workspace  # noqa: E402
from tui.app import TetherApp, run_dashboard  # noqa: E402

KEEP_RUNS = 250
CHANGES = ("retry flaky pytest fixtures", "speed up the cache index", "queue worker latency",
           "parser migration lock", "deploy signal handler")


def rss_mb() -> float:
    """This process's resident memory in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_status(path: Path, status: dict[str, Any]) -> None:
    """Replace the status file in one rename (the driver never reads half of it)."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(status))
    os.replace(part, path)


async def churn(app: TetherApp, status_path: Path) -> None:
    """Run, finish, hand off and delete runs in the dashboard's embedded engine, forever."""
    from engine.examples import EXAMPLES_DIR
    from engine.workflow.loader import load_workflow
    from store.runs.run_store import RunStore
    from tui.run_control import host_for

    status: dict[str, Any] = {"started": 0, "finished": 0, "handed_off": 0, "deleted": 0,
                              "rss_before_mb": round(rss_mb(), 1), "rss_after_first_mb": None,
                              "model_modules_loaded": False}
    write_status(status_path, status)
    host = host_for(app)
    engine = await host.engine()
    review = load_workflow(EXAMPLES_DIR / "code_review.py")
    handoff = load_workflow(EXAMPLES_DIR / "context_handoff.py")
    runs = RunStore(await host.database())
    while True:
        n = status["started"]
        if n % 5 == 4:
            outcome = await engine.start(handoff, {"goal": f"migrate suite {n}", "increments": 6})
            last = await runs.get_run((await engine.run_chain(handoff, outcome)).run_id)
            status["handed_off"] += last.generation
        else:
            await engine.start(review, {"change": f"{CHANGES[n % len(CHANGES)]} {n}"})
        status["started"] += 1
        status["finished"] += 1
        listed = await runs.list_runs(limit=KEEP_RUNS + 50)
        for old in listed[KEEP_RUNS:]:
            await runs.delete_run(old.run_id)
            status["deleted"] += 1
        if status["rss_after_first_mb"] is None:
            status["rss_after_first_mb"] = round(rss_mb(), 1)
        status["model_modules_loaded"] = any(
            name in sys.modules for name in ("onnxruntime", "tokenizers"))
        status["rss_mb"] = round(rss_mb(), 1)
        write_status(status_path, status)
        await asyncio.sleep(0)  # let the dashboard draw between runs


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--churn", action="store_true")
    parser.add_argument("--status", type=Path, required=True)
    args = parser.parse_args()
    background = [lambda app: churn(app, args.status)] if args.churn else []
    if not args.churn:
        write_status(args.status, {"rss_before_mb": round(rss_mb(), 1)})
    sys.exit(run_dashboard(Workspace(args.workspace), background=background))


if __name__ == "__main__":
    main()
