"""Command-line start-up: the commands agents' hooks and scripts call in loops, against the floor
of starting Python at all (``python -c pass``) with the same interpreter, in the same run.

Each round runs every command once, in turn (a burst of load hits all of them alike); the
median and the minimum over ``--rounds`` rounds are reported, with each command's ratio to the
floor (target: ``memory get``, ``notes add`` and ``runs`` within 4x). The workspace is a fresh
one holding 1 000 facts, 1 000 notes and 200 runs.

    python bench/bench_cli_startup.py [--rounds 30]
    results: bench/results/bench_cli_startup.json

``tether`` is the console script of the Python running this benchmark; an editable install
(``pip install -e``) adds an import hook to every start of that Python, ``python -c pass``
included, so the floor is measured with the same interpreter and hooks as the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 4.0


def seed(workspace: Path) -> None:
    """A workspace with some history, written through the store (one code path)."""
    from store.db.sqlite.direct import DirectDatabase, run_now
    from store.memory.memory_store import MemoryStore
    from store.runs.run_store import RunStore
    from store.workspace.layout import Workspace

    db = DirectDatabase.open_now(Workspace(workspace))
    memory = MemoryStore(db)
    runs = RunStore(db)
    for i in range(1000):
        run_now(memory.set_fact(f"workflow:bench{i % 10}", f"key{i}", {"n": i}))
        run_now(memory.save_note(f"workflow:bench{i % 10}", f"Note number {i} about pytest."))
    for i in range(200):
        run_now(runs.create_run("bench", input={"i": i}, status="finished"))
    run_now(db.close())


def commands(tether: str, workspace: Path) -> dict[str, list[str]]:
    w = ["--workspace", str(workspace)]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "tether memory get": [tether, "memory", "get", "workflow:bench3", "key3", *w],
        "tether notes add": [tether, "notes", "add", "workflow:bench1", "Run ruff first.", *w],
        "tether runs": [tether, "runs", *w],
        "tether memory list": [tether, "memory", "list", "workflow:bench2", *w],
        "tether --help": [tether, "--help"],
    }


def _children_cpu_ms() -> float:
    """CPU time (user + system) of every finished child so far: unlike wall time, it does not
    count the time a busy machine made the command wait for a core."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", default=str(ROOT / "bench/results/bench_cli_startup.json"))
    args = parser.parse_args()
    tether = shutil.which("tether", path=str(Path(sys.executable).parent))
    if tether is None:
        raise SystemExit("no tether console script beside this Python; pip install -e . first")
    load_before = load_average()
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder) / "ws"
        seed(workspace)
        cases = commands(tether, workspace)
        # As installed for a person: bytecode cached (PYTHONDONTWRITEBYTECODE would make every
        # start compile every module); one untimed round writes the caches.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for argv in cases.values():
            subprocess.run(argv, capture_output=True, check=False, env=env)
        times: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, argv in cases.items():
                before = _children_cpu_ms()
                started = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, check=False, env=env)
                times[name].append((time.perf_counter() - started) * 1000)
                cpu[name].append(_children_cpu_ms() - before)
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed: {done.stderr.decode()}")
    floor = statistics.median(times["python -c pass"])
    cpu_floor = statistics.median(cpu["python -c pass"])
    rows = {}
    print(f"CLI start-up, {args.rounds} interleaved rounds; load before {load_before}")
    print(
        f"{'command':<22} {'median ms':>10} {'min ms':>8} {'x floor':>8} "
        f"{'cpu ms':>8} {'cpu x floor':>12}"
    )
    for name, samples in times.items():
        median = statistics.median(samples)
        cpu_median = statistics.median(cpu[name])
        rows[name] = {
            "median_ms": round(median, 2),
            "min_ms": round(min(samples), 2),
            "over_floor": round(median / floor, 2),
            "cpu_median_ms": round(cpu_median, 2),
            "cpu_over_floor": round(cpu_median / cpu_floor, 2),
        }
        print(
            f"{name:<22} {median:>10.1f} {min(samples):>8.1f} {median / floor:>7.2f}x "
            f"{cpu_median:>8.1f} {cpu_median / cpu_floor:>11.2f}x"
        )
    load_after = load_average()
    print(f"load after {load_after}; target: memory get, notes add, runs within {TARGET_RATIO}x")
    document = {
        "benchmark": "cli_startup",
        "rounds": args.rounds,
        "floor": "python -c pass",
        "target_over_floor": TARGET_RATIO,
        "commands": rows,
        "load_average": {"before": load_before, "after": load_after},
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "editable_install": any(
                p.name.startswith("__editable__")
                for p in Path(sys.prefix).glob("lib/*/site-packages/*.pth")
            ),
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
