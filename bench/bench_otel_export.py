"""Engine overhead per task with OpenTelemetry export on vs off, in the same run: a collector
that takes everything, one that is down (a closed port), one that answers 500 and one that
never answers (holds every request).

The engine and the DAG are ``bench_engine_overhead``'s (``layers``: 10 nodes per layer, each
joining two of the layer before; an instant agent reporting one call per attempt), run through
``open_engine`` exactly as ``tether run`` does, export turned on the way a user turns it on
(``OTEL_EXPORTER_OTLP_ENDPOINT``). Each measurement is a fresh Python process; modes are
interleaved round by round and the best of ``--repeat`` kept (load on a shared machine only
adds). ``engine ms/task`` is the engine's own time (``Engine.start`` to its end); ``exit s`` is
what the process then takes to end (the export's last batches, bounded by
``shutdown_timeout_s``). The answers are shown beside the times: the spans and the tokens the
collector received against what the workspace recorded.

    python bench/bench_otel_export.py                   # 1 000 nodes, 3 rounds
    python bench/bench_otel_export.py --nodes 200 --repeat 1
    results: bench/results/bench_otel_export.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

MODES = ("off", "on", "down", "500", "hold")


async def run_engine(n: int, folder: str) -> dict[str, Any]:
    """The child: one run of the layers DAG; the engine's time and what it recorded."""
    from bench_engine_overhead import WIDTH, graph_of, instant_agent

    from engine.run.engine_config import EngineConfig
    from engine.run.wiring import open_engine
    from engine.workflow.definition import Workflow
    from store.db.sqlite.sqlite_database import SqliteDatabase
    from store.workspace.layout import Workspace

    # The folder outlives this process: its export process reads it to the end.
    db = await SqliteDatabase.open(Workspace(Path(folder) / ".tether"))
    try:
        workflow = Workflow("bench", agents={"instant": instant_agent()},
                            default_agent="instant", concurrency=WIDTH)
        graph = graph_of("layers", n)
        for node, deps in graph.items():
            workflow.add_task(node, f"do {node}", depends_on=deps)
        engine = open_engine(db, config=EngineConfig(poll_interval_s=0.5))
        started = time.perf_counter()
        outcome = await engine.start(workflow, {})
        elapsed = time.perf_counter() - started
        assert outcome.status == "finished", outcome.error
        run = await engine.store.get_run(outcome.run_id)
        attempts = await db.fetch_value("SELECT count(*) FROM attempts")
        calls = await db.fetch_value("SELECT count(*) FROM calls")
    finally:
        await db.close()
    return {"seconds": elapsed, "nodes": len(graph), "tokens": run.tokens.total,
            "spans_recorded": attempts + calls + 1}


def child(n: int, folder: str) -> None:
    print(json.dumps(asyncio.run(run_engine(n, folder))), flush=True)


def one(n: int, endpoint: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TETHER_NO_BACKGROUND_EMBED"] = "1"
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "2000"
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--child", str(n), folder], env=env,
                              capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the {endpoint or 'off'} run failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["exit_seconds"] = max(0.0, wall - result["seconds"])
    result["warnings"] = [line for line in done.stderr.splitlines() if "telemetry" in line]
    return result


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    from tools.otlp_receiver import HttpReceiver, latest

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench/results/bench_otel_export.json"))
    args = parser.parse_args()
    load_before = os.getloadavg()
    best: dict[str, dict[str, Any]] = {}
    with HttpReceiver() as ok, HttpReceiver() as failing, HttpReceiver() as holding:
        failing.mode, holding.mode = "fail", "hold"
        endpoints = {"off": None, "on": ok.endpoint, "down": f"http://127.0.0.1:{closed_port()}",
                     "500": failing.endpoint, "hold": holding.endpoint}
        for round_number in range(args.repeat):
            for mode in MODES:
                spans_before, metrics_before = len(ok.spans()), len(ok.metrics)
                result = one(args.nodes, endpoints[mode])
                if mode == "on":
                    points = ok.metric_points(metrics_before)
                    usage = latest(points.get("gen_ai.client.token.usage", []))
                    result["spans"] = len(ok.spans()) - spans_before
                    result["tokens_received"] = int(sum(p["sum"] for p in usage))
                if mode not in best or result["seconds"] < best[mode]["seconds"]:
                    best[mode] = result
                print(f"round {round_number + 1} {mode:>5}: "
                      f"{result['seconds'] * 1000 / result['nodes']:.3f} ms/task", flush=True)
    load_after = os.getloadavg()
    off = best["off"]["seconds"]
    print()
    print(f"engine overhead with OpenTelemetry export, layers DAG of {args.nodes} nodes "
          f"(best of {args.repeat}; {os.cpu_count()} cores, load {load_before[0]:.2f} -> "
          f"{load_after[0]:.2f})")
    print(f"{'collector':<28}{'ms/task':>10}{'vs off':>9}{'exit s':>9}   answers")
    labels = {"off": "export off (baseline)", "on": "on, collector takes all",
              "down": "on, collector down", "500": "on, collector answers 500",
              "hold": "on, collector never answers"}
    for mode in MODES:
        r = best[mode]
        answers = ""
        if mode == "on":
            answers = (f"spans received {r['spans']} of {r['spans_recorded']} recorded; "
                       f"tokens {r['tokens_received']} of {r['tokens']}")
        elif r["warnings"]:
            answers = r["warnings"][0].removeprefix("tether: ")[:70]
        print(f"{labels[mode]:<28}{r['seconds'] * 1000 / r['nodes']:>10.3f}"
              f"{r['seconds'] / off:>8.2f}x{r['exit_seconds']:>9.2f}   {answers}")
    document = {
        "benchmark": "bench_otel_export",
        "nodes": args.nodes,
        "repeat": args.repeat,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "load_before": load_before, "load_after": load_after},
        "modes": {mode: {**best[mode], "ms_per_task": best[mode]["seconds"] * 1000
                         / best[mode]["nodes"]} for mode in MODES},
        "workspace_tokens": best["off"]["tokens"],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nresults: {args.out}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), sys.argv[3])
    else:
        main()
