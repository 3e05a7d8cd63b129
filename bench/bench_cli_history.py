"""Commands that stay fast as history grows: the same commands on a small workspace and on one
with a long history, in the same run, and the ratio (large over small; target: the cost does not
grow with history).

The large workspace holds 10 000 runs, a node with 10 000 attempts (two calls each), 1 000 000
notes and 100 000 facts; the small one 50 runs, a node with 10 attempts, 1 000 notes and 1 000
facts. Both are created and migrated by Tether and filled with raw ``sqlite3`` ``executemany``
(the triggers keep the full-text index in step), and cached under
``/tmp/tether-bench-cli-history/`` (``--force`` rebuilds). Commands run interleaved, small then
large, ``--rounds`` times; medians are reported.

    python bench/bench_cli_history.py [--rounds 7] [--notes 1000000]
    results: bench/results/bench_cli_history.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CACHE = Path("/tmp/tether-bench-cli-history")
START_MS = 1_760_000_000_000
RUN_ID = "r-history000001"


def shape(size: str, notes: int) -> dict[str, int]:
    if size == "small":
        return {"runs": 50, "attempts": 10, "notes": 1_000, "facts": 1_000}
    return {"runs": 10_000, "attempts": 10_000, "notes": notes, "facts": 100_000}


def build(folder: Path, counts: dict[str, int]) -> None:
    """Create the workspace with Tether's migrations, then fill it with raw inserts."""
    from store.db.sqlite.direct import DirectDatabase, run_now
    from store.workspace.layout import Workspace

    run_now(DirectDatabase.open_now(Workspace(folder)).close())
    conn = sqlite3.connect(folder / "tether.db", isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    runs = [
        (f"r-{i:012d}" if i else RUN_ID, "history", "finished", START_MS + i, START_MS + i)
        for i in range(counts["runs"])
    ]
    conn.executemany(
        "INSERT INTO runs (run_id, workflow, status, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, ?)",
        runs,
    )
    conn.execute(
        "INSERT INTO nodes (run_id, node_id, iteration, state, attempts, updated_at_ms) "
        "VALUES (?, 'busy', 0, 'finished', ?, ?)",
        (RUN_ID, counts["attempts"], START_MS),
    )
    conn.executemany(
        "INSERT INTO attempts (run_id, node_id, iteration, attempt, state, agent, prompt, "
        "error, started_at_ms, finished_at_ms, input_tokens) "
        "VALUES (?, 'busy', 0, ?, ?, 'sim', ?, ?, ?, ?, ?)",
        (
            (
                RUN_ID,
                a,
                "finished" if a == counts["attempts"] else "failed",
                "Review the change. " * 40,
                None if a == counts["attempts"] else f"flaky {a}",
                START_MS + a,
                START_MS + a + 5,
                100 * a,
            )
            for a in range(1, counts["attempts"] + 1)
        ),
    )
    conn.executemany(
        "INSERT INTO calls (run_id, node_id, iteration, attempt, agent, simulated, input_tokens, "
        "context_tokens, bucket, started_at_ms, finished_at_ms) "
        "VALUES (?, 'busy', 0, ?, 'sim', 1, ?, ?, '<50k', ?, ?)",
        (
            (RUN_ID, a, 50 * a, 50 * a, START_MS + a, START_MS + a + 2)
            for a in range(1, counts["attempts"] + 1)
            for _ in range(2)
        ),
    )
    conn.executemany(
        "INSERT INTO facts (namespace, key, value_json, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, ?)",
        (
            (f"workflow:ns{i % 50}", f"key{i}", json.dumps({"n": i}), START_MS, START_MS)
            for i in range(counts["facts"])
        ),
    )
    conn.executemany(
        "INSERT INTO notes (id, namespace, body, status, author, created_at_ms) "
        "VALUES (?, ?, ?, 'accepted', 'bench', ?)",
        (
            (
                f"n{i:012d}",
                f"workflow:ns{i % 50}",
                f"Note {i}: run pytest -x before ruff.",
                START_MS + i,
            )
            for i in range(counts["notes"])
        ),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def workspace(size: str, notes: int, force: bool) -> Path:
    counts = shape(size, notes)
    folder = CACHE / f"{size}-{counts['notes']}"
    if force and folder.exists():
        shutil.rmtree(folder)
    if not (folder / "tether.db").exists():
        started = time.perf_counter()
        build(folder, counts)
        print(f"built {folder} in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


COMMANDS = {
    "node --attempts": ["node", "busy", "--run", RUN_ID, "--attempts"],
    "node --format json": ["node", "busy", "--run", RUN_ID, "--format", "json"],
    "notes list": ["notes", "list"],
    "notes list --format jsonl": ["notes", "list", "--format", "jsonl", "--limit", "1000"],
    "memory list": ["memory", "list"],
    "runs": ["runs"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--notes", type=int, default=1_000_000)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench/results/bench_cli_history.json"))
    args = parser.parse_args()
    tether = shutil.which("tether", path=str(Path(sys.executable).parent))
    if tether is None:
        raise SystemExit("no tether console script beside this Python; pip install -e . first")
    folders = {size: workspace(size, args.notes, args.force) for size in ("small", "large")}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times: dict[str, dict[str, list[float]]] = {
        name: {"small": [], "large": []} for name in COMMANDS
    }
    sizes: dict[str, dict[str, int]] = {name: {} for name in COMMANDS}
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            for size, folder in folders.items():
                started = time.perf_counter()
                done = subprocess.run(
                    [tether, *argv, "--workspace", str(folder)],
                    capture_output=True,
                    check=False,
                    env=env,
                )
                times[name][size].append((time.perf_counter() - started) * 1000)
                if done.returncode != 0:
                    raise SystemExit(f"{name} on {size} failed: {done.stderr.decode()}")
                sizes[name][size] = len(done.stdout)
    rows = {}
    print(f"CLI commands as history grows; load before {load_before}")
    print(f"{'command':<28} {'small ms':>9} {'large ms':>9} {'large/small':>11} {'output':>15}")
    for name in COMMANDS:
        small = statistics.median(times[name]["small"])
        large = statistics.median(times[name]["large"])
        rows[name] = {
            "small_ms": round(small, 1),
            "large_ms": round(large, 1),
            "large_over_small": round(large / small, 2),
            "output_bytes": sizes[name],
        }
        out = f"{sizes[name]['small']}/{sizes[name]['large']} B"
        print(f"{name:<28} {small:>9.1f} {large:>9.1f} {large / small:>10.2f}x {out:>15}")
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load after {load_after}")
    document = {
        "benchmark": "cli_history",
        "rounds": args.rounds,
        "shapes": {size: shape(size, args.notes) for size in ("small", "large")},
        "commands": rows,
        "load_average": {"before": load_before, "after": load_after},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
