"""The Codex preset through the real engine on a real workspace, with the fake CLI standing in
for ``codex exec`` (tests/fake_agent_cli.py): per-request calls from the rollout file it writes
under ``CODEX_HOME`` as Codex does (capture R1: 28 requests in one 1.77M-token turn), the
aggregate row when there is none, the model filled from the calls, memory tools that a
``codex exec``-like client runs or cancels by their annotations, tool items and warnings on
the attempt, and output schemas that cannot be strict refused before the run (the strict form
itself: tests/engine/test_cli_agents.py and test_agent_parsers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_agent_support import capture, fake_agent, run_one
from pydantic import BaseModel

from engine.memory.memory_config import MemoryConfig
from store.db.database_url import for_child_process
from store.db.seam import Database
from store.errors import InvalidInputError
from store.memory.memory_store import MemoryStore
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore

ROOT = Path(__file__).resolve().parents[2]
THREAD = "019c8a4d-8f45-7010-8b5d-7fad920aa6f9"
TURN = TokenUsage(input=1751428 - 1651968, cache_read=1651968, output=14600 - 4293, reasoning=4293)
R1 = {
    "stdout": capture("codex/R1_exec_28_requests.jsonl"),
    "rollout": capture("codex/R1_rollout_28_requests.jsonl"),
    "rollout_name": f"rollout-2026-02-23T12-41-04-{THREAD}.jsonl",
}


@pytest.mark.parametrize("compressed", [False, True])
async def test_a_turn_of_28_model_requests_is_28_calls_in_their_own_buckets(
    db: Database, tmp_path: Path, compressed: bool
) -> None:
    agent = fake_agent(tmp_path, "codex", {**R1, "rollout_zst": compressed})
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    store = RunStore(db)
    calls = await store.list_calls(outcome.run_id)
    assert len(calls) == 28 and {c.kind for c in calls} == {"model"}
    assert sum((c.tokens for c in calls), TokenUsage()) == TURN
    (attempt,) = await store.list_attempts(outcome.run_id, "work")
    assert attempt.tokens == TURN
    # The config names no model: the attempt's is the one its calls used.
    assert attempt.model == "gpt-5.3-codex"
    buckets = await store.usage_by_bucket(outcome.run_id)
    assert sum(n for n, _ in buckets.values()) == 28 and "≥1M" not in buckets
    invocation = attempt.details["invocations"][0]
    assert invocation["requests"] == 28 and invocation["rollout"].endswith(
        ".jsonl.zst" if compressed else ".jsonl"
    )
    assert invocation["tool_calls"] == [
        {"type": "command_execution", "status": "completed", "name": "/bin/zsh -lc 'rg --files'",
         "exit_code": 0},
    ]  # fmt: skip


async def test_without_a_rollout_the_turn_is_one_row_kept_out_of_the_histogram(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(tmp_path, "codex", {"stdout": R1["stdout"]}, model="gpt-5.3-codex")
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    store = RunStore(db)
    (row,) = await store.list_calls(outcome.run_id)
    assert row.kind == "reconciliation" and row.detail["aggregate"] == "turn"
    assert row.tokens == TURN and "no rollout file for thread" in row.detail["reason"]
    buckets = await store.usage_by_bucket(outcome.run_id)
    assert sum(n for n, _ in buckets.values()) == 0  # no call in any bucket, ≥1M included
    (attempt,) = await store.list_attempts(outcome.run_id, "work")
    assert attempt.tokens == TURN  # the tokens are all there, once
    shown = _tether("node", "work", "--run", outcome.run_id, db=db)
    assert "turn total (several model requests; no bucket)" in shown
    assert "no per-request usage: no rollout file for thread" in shown
    assert "requests 0" not in shown  # unknown, not none


def _tether(*args: str, db: Database) -> str:
    """``tether ARGS`` on ``db``'s workspace (a PostgreSQL one by its URL)."""
    env = dict(os.environ)
    if db.workspace.database_url:
        env["TETHER_DATABASE_URL"] = for_child_process(db.workspace.database_url)
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(db.workspace.root)],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


MEMORY = MemoryConfig(bank="code-review", recall="off", tools=True)


async def test_codex_exec_runs_both_memory_tools_without_anyone_to_approve(
    db: Database, tmp_path: Path
) -> None:
    # The fake CLI lists the tools of the real `tether mcp` and decides like codex exec in its
    # default mode: a tool whose annotations do not clear it is cancelled.
    agent = fake_agent(
        tmp_path,
        "codex",
        {
            "stdout": capture("codex/X3_0147_ok.jsonl"),
            "codex_approval": True,
            "mcp_calls": [
                {"tool": "remember", "arguments": {"content": "Run ruff before pytest."}},
                {"tool": "recall", "arguments": {"query": "ruff pytest"}},
            ],
            "mcp_results": tmp_path / "mcp.json",
        },
    )
    outcome = await run_one(db, agent, memory=MEMORY)
    assert outcome.status == "finished", outcome.error
    results = json.loads((tmp_path / "mcp.json").read_text())
    assert [r.get("cancelled", False) for r in results] == [False, False]
    (note,) = await MemoryStore(db).list_notes(MEMORY.namespaces[0])
    assert note.body == "Run ruff before pytest."
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    records = attempt.details["invocations"][0]["tool_calls"]
    assert [(r["name"], r["status"]) for r in records] == [
        ("tether.remember", "completed"),
        ("tether.recall", "completed"),
    ]
    assert "warnings" not in attempt.details


async def test_a_cancelled_memory_tool_call_is_a_warning_on_the_node(
    db: Database, tmp_path: Path
) -> None:
    # Capture C10: what codex exec prints when it declines a custom tool (openai/codex#16685).
    agent = fake_agent(tmp_path, "codex", {"stdout": capture("codex/C10_mcp_call_cancelled.jsonl")})
    outcome = await run_one(db, agent, memory=MEMORY)
    assert outcome.status == "finished", outcome.error  # the answer stands; the gap is shown
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    warning = "Codex's call to the memory tool remember did not run: user cancelled MCP tool call"
    assert attempt.details["warnings"] == [warning]
    shown = _tether("node", "work", "--run", outcome.run_id, db=db)
    assert f"warning: {warning}" in shown
    assert "tool: mcp_tool_call tether.remember failed: user cancelled MCP tool call" in shown
    log = (Path(db.workspace.artifacts_dir) / outcome.run_id / "work").rglob("stream.log")
    assert any(f"[warning] {warning}" in p.read_text() for p in log)


class Loose(BaseModel):
    verdict: str
    note: str = ""


async def test_a_schema_that_cannot_be_strict_is_refused_before_codex_starts(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(
        tmp_path, "codex", {"stdout": capture("codex/X3_0147_ok.jsonl"),
                            "record": tmp_path / "argv.json"},
    )  # fmt: skip
    with pytest.raises(InvalidInputError) as refused:
        await run_one(db, agent, output=Loose)
    said = str(refused.value)
    assert "Codex needs a strict output schema" in said and "field 'note' is optional" in said
    assert not (tmp_path / "argv.json").exists()  # Codex was never started
    assert await RunStore(db).list_runs() == []
