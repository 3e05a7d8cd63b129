"""Every command acts on the workspace it is told about: ``--workspace DIR`` after the command
name, before it (``tether --workspace DIR run ...``), or ``TETHER_WORKSPACE``, never on the
nearest ``.tether/`` of the current directory (a decoy here, checked unchanged each time)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from cli_harness import Outcome, run_cli
from storage_support import REPO_ROOT, sqlite_dump, tether

from engine.memory.encoders import semantic_available
from store.clock import SYSTEM_CLOCK
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.runs.saved_filters import save_filter
from store.workspace.layout import Workspace
from tools.otlp_receiver import HttpReceiver
from tui.cli.main import cli

WAYS = ("after", "before", "environment")
WORKFLOW = """
from engine import Workflow

workflow = Workflow("tiny", default_agent="simulated")
workflow.add_task("plan", "Plan the change")
"""


@dataclass(frozen=True)
class Case:
    """A command and what it must have done to the target workspace."""

    args: tuple[str, ...]
    check: Callable[[Outcome, Path], None]


async def seed(root: Path, where: str, workflow: Path) -> None:
    async with await MemoryStore.open(Workspace(root), clock=SYSTEM_CLOCK) as memory:
        await memory.set_fact("user:t", "where", where)
        await memory.set_fact("user:t", "old", 1, ttl_ms=0)  # expired at once
        await memory.save_note("user:t", f"{where}word lives here", note_id="live")
        await memory.save_note("user:t", "a proposal", note_id="pend", status="pending")
        await memory.create_thread("user:t", "a thread", thread_id="t-1")
        for index in range(6):
            await memory.save_message("t-1", "user", f"message {index} " * 40,
                                      message_id=f"m{index}")
        runs = RunStore(memory.db)
        done = await runs.create_run("tiny", run_id=f"r-{where}-done", status="finished",
                                     workflow_path=str(workflow))
        await runs.upsert_node(done.run_id, "plan", 0, "finished")
        await runs.create_run("tiny", run_id=f"r-{where}-wait", status="pending")
        await runs.upsert_node(f"r-{where}-wait", "plan", 0, "pending")  # a steer's target
        await runs.create_run("tiny", run_id=f"r-{where}-bad", status="failed",
                              workflow_path=str(workflow))
        await save_filter(memory.db, f"{where}-filter", "status = failed")



def facts(root: Path) -> dict[str, object]:
    result = tether(root, "memory", "list", "user:t", "--format", "json")
    return {f["key"]: f["value"] for f in json.loads(result.stdout)["items"]}


def runs(root: Path) -> dict[str, dict[str, object]]:
    result = tether(root, "runs", "--format", "json", "--limit", "100")
    return {r["run_id"]: r for r in json.loads(result.stdout)["items"]}


def expect(text: str) -> Callable[[Outcome, Path], None]:
    def check(outcome: Outcome, root: Path) -> None:
        assert text in outcome.stdout, outcome.stdout

    return check


def _vectors(root: Path) -> int:
    conn = sqlite3.connect(f"file:{root / 'tether.db'}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0])
    finally:
        conn.close()


def _filters(root: Path) -> set[str]:
    listed = tether(root, "filters", "list", "--format", "json")
    return {f["name"] for f in json.loads(listed.stdout)["items"]}


def _notes(root: Path, status: str = "any") -> dict[str, str]:
    listed = tether(root, "notes", "list", "--status", status, "--format", "json")
    return {n["id"]: n["status"] for n in json.loads(listed.stdout)["items"]}


CASES = {
    "memory set": Case(("memory", "set", "user:t", "new", '"value"'),
                       lambda o, r: None if facts(r)["new"] == "value" else pytest.fail("set")),
    "memory get": Case(("memory", "get", "user:t", "where"), expect('"target"')),
    "memory list": Case(("memory", "list"), expect('"target"')),
    "memory rm": Case(("memory", "rm", "user:t", "where"),
                      lambda o, r: None if "where" not in facts(r) else pytest.fail("rm")),
    "memory gc": Case(("memory", "gc"), expect("Removed 1 expired fact")),
    "memory limit": Case(("memory", "limit", "--max-tokens", "50"), expect("from 1 thread")),
    "memory summarize": Case(("memory", "summarize", "--keep-recent", "0"),
                             expect("Wrote 1 summary")),
    "notes list": Case(("notes", "list"), expect("targetword")),
    "notes add": Case(("notes", "add", "user:t", "added here"),
                      lambda o, r: None if o.stdout.strip() in _notes(r) else pytest.fail("add")),
    "notes accept": Case(("notes", "accept", "pend"),
                         lambda o, r: None if _notes(r)["pend"] == "accepted" else pytest.fail()),
    "notes reject": Case(("notes", "reject", "pend"),
                         lambda o, r: None if _notes(r)["pend"] == "rejected" else pytest.fail()),
    "notes search": Case(("notes", "search", "targetword"), expect("targetword")),
    "run": Case(("run", "{workflow}", "--format", "json"),
                lambda o, r: None if json.loads(o.stdout)["run_id"] in runs(r) else pytest.fail()),
    "runs": Case(("runs",), expect("r-target-done")),
    "node": Case(("node", "plan", "--run", "r-target-done"), expect("Node: plan")),
    "cancel": Case(("cancel", "r-target-wait"),
                   lambda o, r: None if runs(r)["r-target-wait"]["status"] == "cancelled"
                   else pytest.fail("cancel")),
    "clear": Case(("clear", "r-target-bad"),
                  lambda o, r: None if runs(r)["r-target-bad"]["status"] == "handed-off"
                  else pytest.fail("clear")),
    "doctor": Case(("doctor",), expect("target")),
    "notes import": Case(("notes", "import", "{notes}"),
                         lambda o, r: None if "imported" in _notes(r) else pytest.fail()),
    "memory status": Case(("memory", "status"), lambda o, r: None),  # reads only: decoy check
    "usage": Case(("usage", "--by", "workflow"), lambda o, r: None),  # reads only: decoy check
    "cost": Case(("cost", "r-target-done"), expect("Run r-target-done")),
    "compare": Case(("compare", "r-target-done", "r-target-bad"), expect("A r-target-done")),
    "replay": Case(("replay", "r-target-done"), expect("Run r-target-done")),  # reads only
    "filters list": Case(("filters", "list"), expect("target-filter")),
    "filters save": Case(("filters", "save", "mine", "status = finished"),
                         lambda o, r: None if "mine" in _filters(r) else pytest.fail("save")),
    "filters rm": Case(("filters", "rm", "target-filter"),
                       lambda o, r: None if "target-filter" not in _filters(r)
                       else pytest.fail("rm")),
    "prices": Case(("prices",), expect("Prices in USD per million tokens")),  # reads only
    # The decoy has no run r-target-done: only the target answers this.
    "budget": Case(("budget", "--run", "r-target-done"),
                   expect("Run r-target-done is held to no budget.")),
    "memory reindex": Case(("memory", "reindex"),
                           lambda o, r: None if _vectors(r) > 0 else pytest.fail("reindex")),
}
CASES["worker"] = Case(
    ("worker", "--exit-when-idle", "--poll-seconds", "0.2", "--workflows", "{folder}"),
    lambda o, r: None if sorted(x["status"] for x in runs(r).values()).count("finished") == 2
    and "target" in o.stderr else pytest.fail(o.stderr),  # r-target-done and the queued run
)
# The export names a run only the target has: the decoy would answer "no such run".
CASES["fork"] = Case(
    ("fork", "r-target-done", "plan", "--no-start", "--format", "json"),
    lambda o, r: None if runs(r)[json.loads(o.stdout)["run_id"]]["forked_from"] == "r-target-done"
    else pytest.fail(o.stdout),
)
CASES["steer"] = Case(
    ("steer", "r-target-wait", "plan", "go on", "--format", "json"),
    lambda o, r: None if json.loads(tether(r, "node", "plan", "--run", "r-target-wait",
                                           "--format", "json").stdout)["steers"][0]["message"]
    == "go on" else pytest.fail(o.stdout),
)
CASES["export otlp"] = Case(
    ("export", "otlp", "--run", "r-target-done", "--no-metrics", "--endpoint", "{otlp}"),
    expect("(1 of 1 run)"),
)
NEEDS_SEMANTIC = {"memory reindex"}
SEPARATE = {"tui", "demo", "mcp", "serve", "migrate"}  # tested below
# The encoder service serves until idle; tests/memory/test_encoder_service.py starts it with
# --workspace (its socket is named after that workspace).
SEPARATE.add("memory encoder")


def every_command() -> set[str]:
    """Every command and subcommand the CLI offers ("memory set", "runs", ...)."""
    found: set[str] = set()
    with click.Context(cli) as ctx:
        for name in cli.list_commands(ctx):
            command = cli.get_command(ctx, name)
            if isinstance(command, click.Group):
                with click.Context(command, parent=ctx) as sub:
                    found.update(f"{name} {child}" for child in command.list_commands(sub))
            else:
                found.add(name)
    return found


def test_the_cases_cover_every_command() -> None:
    assert every_command() == set(CASES) | SEPARATE


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("templates")
    workflow = base / "tiny.py"
    workflow.write_text(WORKFLOW)
    (base / "notes.jsonl").write_text(
        json.dumps({"namespace": "user:t", "body": "an imported note", "id": "imported"}) + "\n"
    )
    import asyncio

    for root, where in ((base / "target", "target"), (base / "project" / ".tether", "decoy")):
        asyncio.run(seed(root, where, workflow))
        queued = run_cli(["run", str(workflow), "--queue", "--workspace", str(root)],
                         cwd=base)  # for `tether worker`
        assert queued.code == 0, queued.stderr
    return base / "target", base / "project", workflow


def fresh(templates: tuple[Path, Path, Path], where: Path) -> tuple[Path, Path, list[str]]:
    target, project, _ = templates
    shutil.copytree(target, where / "target")
    shutil.copytree(project, where / "project")
    decoy = sqlite_dump(where / "project" / ".tether" / "tether.db")
    return where / "target", where / "project", decoy


def arguments(case: Case, way: str, target: Path, workflow: Path,
              otlp: str = "") -> tuple[list[str], dict]:
    args = [a.replace("{workflow}", str(workflow)).replace("{otlp}", otlp)
            .replace("{notes}", str(workflow.with_name("notes.jsonl")))
            .replace("{folder}", str(workflow.parent)) for a in case.args]
    if way == "after":
        return [*args, "--workspace", str(target)], {}
    if way == "before":
        return ["--workspace", str(target), *args], {}
    return args, {"TETHER_WORKSPACE": str(target)}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_command_uses_the_named_workspace(
    name: str, way: str, templates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    if name in NEEDS_SEMANTIC and not semantic_available():
        pytest.skip("semantic recall is not installed: pip install '.[semantic]'")
    target, project, decoy = fresh(templates, tmp_path)
    with contextlib.ExitStack() as stack:
        otlp = stack.enter_context(HttpReceiver()).endpoint if name == "export otlp" else ""
        args, env = arguments(CASES[name], way, target, templates[2], otlp)
        outcome = run_cli(args, cwd=project, env=env)
    assert outcome.code == 0, (args, outcome.stderr)
    CASES[name].check(outcome, target)
    assert sqlite_dump(project / ".tether" / "tether.db") == decoy  # the decoy is untouched
    assert not (project / ".tether" / "artifacts").exists() or not any(
        (project / ".tether" / "artifacts").iterdir())


def test_two_different_workspaces_are_refused(tmp_path: Path) -> None:
    outcome = run_cli(["--workspace", str(tmp_path / "a"), "runs", "--workspace",
                       str(tmp_path / "b")], cwd=tmp_path)
    assert outcome.code == 2 and "given twice" in outcome.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("way", WAYS)
def test_demo_uses_the_named_workspace(
    way: str, templates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, project, decoy = fresh(templates, tmp_path)
    target = tmp_path / "demo-here"
    args, env = arguments(Case(("demo", "--headless"), expect("")), way, target, templates[2])
    result = tether(None, *args, cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    assert len(runs(target)) >= 4
    assert sqlite_dump(project / ".tether" / "tether.db") == decoy
    assert not (project / "tether-demo").exists()


@pytest.mark.parametrize("way", WAYS)
def test_the_dashboard_opens_the_named_workspace(
    way: str, templates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    from tests.tui_actions.test_hostile_dashboard import pty_env, run_in_pty

    target, project, decoy = fresh(templates, tmp_path)
    args, env = arguments(Case(("tui",), expect("")), way, target, templates[2])
    code, output = run_in_pty(
        [sys.executable, "-m", "tui.cli.entry", *args], {**pty_env(), **env}, send=b"q",
        ready=b"r-target-done", cwd=project,
    )
    assert code == 0, output[-2000:]
    assert b"r-decoy" not in output
    assert sqlite_dump(project / ".tether" / "tether.db") == decoy


@pytest.mark.parametrize("way", WAYS)
async def test_the_mcp_server_uses_the_named_workspace(
    way: str, templates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    target, project, decoy = fresh(templates, tmp_path)
    args, env = arguments(Case(("mcp", "--bank", "seedbank"), expect("")), way, target,
                          templates[2])
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_WORKSPACE"}
    environment.update(PYTHONPATH=str(REPO_ROOT), **env)
    params = StdioServerParameters(command=sys.executable, args=["-m", "tui.cli.entry", *args],
                                   env=environment, cwd=str(project))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("remember", {"content": "remembered through MCP"})
        assert not result.is_error
    listed = tether(target, "notes", "list", "--status", "pending", "--format", "json")
    assert "remembered through MCP" in listed.stdout
    assert sqlite_dump(project / ".tether" / "tether.db") == decoy


@pytest.mark.parametrize("way", WAYS)
def test_serve_refuses_a_named_workspace_that_does_not_exist_instead_of_the_nearest(
    way: str, templates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`tether serve` listens until stopped, so the check is that it names the workspace it
    was told about: a missing one is refused (exit 1), and the decoy beside it is not served."""
    _, project, decoy = fresh(templates, tmp_path)
    missing = tmp_path / "not-there"
    args, env = arguments(Case(("serve", "--port", "0"), expect("")), way, missing, templates[2])
    result = tether(None, *args, cwd=project, env=env, timeout=60)
    assert result.returncode == 1, result.stderr
    assert str(missing) in result.stderr and "decoy" not in result.stderr
    assert sqlite_dump(project / ".tether" / "tether.db") == decoy


@pytest.mark.parametrize("way", WAYS)
def test_migrate_takes_the_named_workspace_as_its_source(
    way: str, templates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`tether migrate` needs a PostgreSQL server to copy into; what is checked here is its
    source: a named workspace that does not exist is refused, the decoy is never copied."""
    _, project, decoy = fresh(templates, tmp_path)
    missing = tmp_path / "not-there"
    args, env = arguments(Case(("migrate", "--to", "postgresql://tether@127.0.0.1:1/none"),
                               expect("")), way, missing, templates[2])
    outcome = run_cli(args, cwd=project, env=env)
    assert outcome.code == 2, outcome.stderr
    assert str(missing) in outcome.stderr
    assert sqlite_dump(project / ".tether" / "tether.db") == decoy
