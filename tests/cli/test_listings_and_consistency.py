"""Listing commands at scale and CLI consistency, through real ``tether`` processes on real
workspaces: ``--limit`` with an "N more" line, one JSON shape, ``--format jsonl``; ``--ttl``
durations; ``tether node draft#2`` and a fan-out's ids; paged attempts; generation and parent in
``tether runs``; exit code 3 for a cancelled run; short commands that import neither the engine
nor asyncio."""

from __future__ import annotations

import importlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from store.db.sqlite.direct import DirectDatabase, run_now
from store.memory.memory_store import MemoryStore
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tui.cli.main import COMMAND_MODULES

ROOT = Path(__file__).resolve().parents[2]


def tether(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """7 runs (one continuing another), 7 facts and 7 notes in one namespace, a loop node with
    3 iterations, a fan-out of 2, and a node with 25 attempts."""
    root = tmp_path_factory.mktemp("listings") / "ws"
    db = DirectDatabase.open_now(Workspace(root))
    memory, runs = MemoryStore(db), RunStore(db)
    ids: dict[str, str] = {}
    for i in range(7):
        run_now(memory.set_fact("workflow:many", f"k{i}", i))
        run_now(memory.save_note("workflow:many", f"Note {i} says run pytest."))
    first = run_now(runs.create_run("many", status="failed"))
    for _ in range(5):
        run_now(runs.create_run("many", status="finished"))
    child, _ = run_now(
        runs.continue_as_new(
            first.run_id, trigger="person", reason="too long", carried_state={}, input=None
        )
    )
    ids["parent"], ids["child"], ids["run"] = first.run_id, child.run_id, first.run_id
    run_id = first.run_id
    nodes = [("draft", i, "finished", []) for i in range(3)]
    nodes += [("review[a.py]", 0, "finished", []), ("review[b.py]", 0, "failed", [])]
    nodes += [("flaky", 0, "pending", [])]
    run_now(runs.upsert_nodes(run_id, nodes))
    for attempt in range(1, 26):
        run_now(runs.start_attempt(run_id, "flaky", 0, attempt, agent="sim"))
        run_now(
            runs.record_call(
                CallUsage(run_id, "flaky", 0, attempt, "sim", TokenUsage(input=attempt))
            )
        )
        state = "finished" if attempt == 25 else "failed"
        run_now(
            runs.finish_attempt(
                run_id,
                "flaky",
                0,
                attempt,
                state,
                error=None if attempt == 25 else f"e{attempt}",
                usage=TokenUsage(input=attempt),
                node_state="finished" if attempt == 25 else "retrying",
            )
        )
    for iteration in range(3):
        run_now(runs.start_attempt(run_id, "draft", iteration, 1, agent="sim"))
        run_now(
            runs.finish_attempt(
                run_id,
                "draft",
                iteration,
                1,
                "finished",
                node_state="finished",
                node_output={"round": iteration},
                set_node_output=True,
            )
        )
    run_now(db.close())
    return root, ids


@pytest.mark.parametrize(
    ("args", "noun", "total"),
    [
        (("runs",), "runs", 7),
        (("memory", "list", "workflow:many"), "facts", 7),
        (("notes", "list", "workflow:many"), "notes", 7),
    ],
)
def test_listings_cut_at_limit_say_how_many_more_in_one_shape(
    seeded: tuple[Path, dict[str, str]], args: tuple[str, ...], noun: str, total: int
) -> None:
    workspace, _ = seeded
    document = json.loads(tether(workspace, *args, "--limit", "3", "--format", "json").stdout)
    assert set(document) == {"items", "more"}
    assert (len(document["items"]), document["more"]) == (3, total - 3)
    everything = json.loads(tether(workspace, *args, "--format", "json").stdout)
    assert (len(everything["items"]), everything["more"]) == (total, 0)
    assert everything["items"][:3] == document["items"]

    text = tether(workspace, *args, "--limit", "3")
    assert text.stdout.splitlines()[-1] == f"… {total - 3} more {noun} (raise --limit to see them)"

    lines = tether(workspace, *args, "--limit", "3", "--format", "jsonl")
    assert [json.loads(line) for line in lines.stdout.splitlines()] == document["items"]
    assert lines.stderr.strip() == f"… {total - 3} more {noun} (raise --limit to see them)"


def test_notes_search_says_when_more_match(seeded: tuple[Path, dict[str, str]]) -> None:
    workspace, _ = seeded
    cut = json.loads(
        tether(workspace, "notes", "search", "pytest", "--limit", "2", "--format", "json").stdout
    )
    assert len(cut["items"]) == 2 and cut["more"] == 1
    whole = json.loads(
        tether(workspace, "notes", "search", "pytest", "--limit", "50", "--format", "json").stdout
    )
    assert len(whole["items"]) == 7 and whole["more"] == 0
    text = tether(workspace, "notes", "search", "pytest", "--limit", "2").stdout
    assert text.splitlines()[-1] == "… more matching notes (raise --limit to see them)"


@pytest.mark.parametrize(
    ("ttl", "ms"), [("5m", 300_000), ("2h", 7_200_000), ("7d", 604_800_000), ("90000", 90_000)]
)
def test_ttl_takes_the_dashboards_durations(tmp_path: Path, ttl: str, ms: int) -> None:
    workspace = tmp_path / "ws"
    assert tether(workspace, "memory", "set", "global:t", "k", "1", "--ttl", ttl).returncode == 0
    fact = json.loads(
        tether(workspace, "memory", "get", "global:t", "k", "--format", "json").stdout
    )
    assert fact["ttl_ms"] == ms


def test_a_bad_ttl_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    bad = tether(workspace, "memory", "set", "global:t", "k", "1", "--ttl", "5 minutes")
    assert bad.returncode == 2 and "30s, 5m, 2h or 7d" in bad.stderr
    assert not workspace.exists()


def test_node_takes_iteration_suffix_and_lists_a_fan_out(
    seeded: tuple[Path, dict[str, str]],
) -> None:
    workspace, ids = seeded
    shown = tether(workspace, "node", "draft#1", "--run", ids["run"])
    assert shown.returncode == 0, shown.stderr
    assert "Node: draft (iteration 1)" in shown.stdout and '"round": 1' in shown.stdout
    as_json = json.loads(
        tether(workspace, "node", "draft#2", "--run", ids["run"], "--format", "json").stdout
    )
    assert (as_json["node_id"], as_json["iteration"]) == ("draft", 2)
    clash = tether(workspace, "node", "draft#1", "--iteration", "2", "--run", ids["run"])
    assert clash.returncode == 2 and "iteration 1" in clash.stderr

    fan_out = tether(workspace, "node", "review", "--run", ids["run"])
    assert fan_out.returncode == 0, fan_out.stderr
    assert fan_out.stdout.splitlines() == [
        "review is a fan-out; its nodes:",
        "  review[a.py]  finished",
        "  review[b.py]  failed",
    ]
    listed = json.loads(
        tether(workspace, "node", "review", "--run", ids["run"], "--format", "json").stdout
    )
    assert listed == {
        "items": [
            {"node_id": "review[a.py]", "iteration": 0, "state": "finished"},
            {"node_id": "review[b.py]", "iteration": 0, "state": "failed"},
        ],
        "more": 0,
    }
    assert tether(workspace, "node", "revie", "--run", ids["run"]).returncode == 1


def test_node_pages_its_attempts(seeded: tuple[Path, dict[str, str]]) -> None:
    workspace, ids = seeded
    latest = tether(workspace, "node", "flaky", "--run", ids["run"]).stdout
    assert "Attempts: 25" in latest and "(24 earlier attempts; --attempts shows them)" in latest
    assert "attempt 25 " in latest and "attempt 24 " not in latest

    page = tether(workspace, "node", "flaky", "--run", ids["run"], "--attempts", "--limit", "10")
    numbers = [
        int(line.split()[1]) for line in page.stdout.splitlines() if line.startswith("  attempt ")
    ]
    assert numbers == list(range(16, 26))
    assert "(15 earlier attempts; --offset 10 shows the next page)" in page.stdout
    older = tether(
        workspace,
        "node",
        "flaky",
        "--run",
        ids["run"],
        "--attempts",
        "--limit",
        "10",
        "--offset",
        "10",
    ).stdout
    assert [
        int(line.split()[1]) for line in older.splitlines() if line.startswith("  attempt ")
    ] == list(range(6, 16))

    document = json.loads(
        tether(
            workspace, "node", "flaky", "--run", ids["run"], "--limit", "4", "--format", "json"
        ).stdout
    )
    assert document["attempts_total"] == 25 and document["attempts_offset"] == 0
    assert [a["attempt"] for a in document["attempts"]] == [22, 23, 24, 25]
    # Each attempt carries its own calls only (the page reads the calls of its attempts).
    assert [[c["tokens"]["input_tokens"] for c in a["calls"]] for a in document["attempts"]] == [
        [22],
        [23],
        [24],
        [25],
    ]


def test_runs_shows_generation_and_parent(seeded: tuple[Path, dict[str, str]]) -> None:
    workspace, ids = seeded
    lines = tether(workspace, "runs").stdout.splitlines()
    assert lines[0].split() == [
        "RUN",
        "WORKFLOW",
        "STATUS",
        "GEN",
        "PARENT",
        "FORKED",
        "NODES",
        "TOKENS",
        "COST",
        "BUDGET",
        "AGE",
    ]
    row = next(line for line in lines if line.startswith(ids["child"]))
    assert row.split()[3:5] == ["1", ids["parent"]]
    parent_row = next(line for line in lines if line.startswith(ids["parent"]))
    assert parent_row.split()[3:5] == ["0", "-"]


def test_a_cancelled_run_exits_3(tmp_path: Path) -> None:
    workflow = tmp_path / "slow.py"
    workflow.write_text(
        textwrap.dedent("""
        from engine import Workflow
        workflow = Workflow("slow", default_agent="sim", agents={
            "sim": {"type": "simulated", "latency_ms": 200}})
        previous = None
        for i in range(200):
            workflow.add_task(f"s{i}", f"step {i}", depends_on=[previous] if previous else [])
            previous = f"s{i}"
    """)
    )
    workspace = tmp_path / "ws"
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.entry", "run", str(workflow),
         "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    run_id = None
    deadline = time.monotonic() + 60
    while run_id is None and time.monotonic() < deadline:
        try:  # read-only, so the file is never created from here
            with sqlite3.connect(f"file:{workspace / 'tether.db'}?mode=ro", uri=True) as conn:
                row = conn.execute("SELECT run_id FROM runs WHERE status = 'running'").fetchone()
            run_id = row[0] if row else None
        except sqlite3.Error:  # not created or not migrated yet
            pass
        if run_id is None:
            time.sleep(0.05)
    assert run_id is not None, "the run never started"
    assert tether(workspace, "cancel", run_id).returncode == 0
    _, err = process.communicate(timeout=60)
    assert process.returncode == 3, err
    assert f"run {run_id} cancelled" in err


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "get", "global:x", "k"),
        ("notes", "add", "global:x", "a note"),
        ("runs",),
        ("node", "x", "--run", "r-nope"),
        ("memory", "list"),
        ("--help",),
    ],
)
def test_short_commands_import_neither_engine_nor_asyncio(tmp_path: Path, args: tuple[str, ...]):
    argv = list(args) if args == ("--help",) else [*args, "--workspace", str(tmp_path / "ws")]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tui.cli.entry", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    imported = {
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "store.workspace.layout" in imported  # the listing is real (the hot commands skip click)
    heavy = {"engine", "pydantic", "asyncio", "aiosqlite", "textual", "rich", "httpx"}
    assert not heavy & imported, sorted(heavy & imported)


def test_help_lines_match_each_commands_own_help() -> None:
    for name, lazy in COMMAND_MODULES.items():
        module = importlib.import_module(lazy.module)
        command = next(c for c in module.COMMANDS if c.name == name)
        full = " ".join((command.help or "").split())
        assert full.startswith(lazy.short_help.removesuffix("...")), name


def test_the_more_line_says_where_counting_stopped() -> None:
    from tui.cli.output import more_line

    assert more_line(12, "runs", 1000) == "… 12 more runs (raise --limit to see them)"
    assert more_line(1, "matching runs") == "… 1 more matching run (raise --limit to see them)"
    assert more_line(1000, "notes", 1000) == "… 1,000+ more notes (raise --limit to see them)"
