"""The command agent against real subprocesses: presets, streaming, exit status, and killing
the whole process group on timeout."""

from __future__ import annotations

import os
import time
from pathlib import Path

from engine_test_support import agent_script, run_workflow
from pydantic import BaseModel

from engine.agents.cli.command import CommandAgent
from engine.artifact_files import stream_log_path
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore


class Summary(BaseModel):
    title: str
    lines: int


def _workflow(agent: CommandAgent, **task: object) -> Workflow:
    wf = Workflow("cmd", agents={"cli": agent}, default_agent="cli")
    wf.add_task("sum", "Summarise the prompt.", output=Summary, **task)  # type: ignore[arg-type]
    return wf


async def test_json_preset_streams_and_reports_usage(db: Database, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        import json, sys
        prompt = sys.stdin.read()
        print("thinking about", len(prompt), "chars", flush=True)
        print(json.dumps({"output": {"title": "ok", "lines": prompt.count("\\n")},
                          "usage": {"input_tokens": 70, "cache_read_tokens": 30,
                                    "cache_write_tokens": 5, "output_tokens": 9},
                          "model": "cli-model"}))
    """,
    )
    outcome = await run_workflow(db, _workflow(CommandAgent(command=command, preset="json")))
    assert outcome.status == "finished", outcome.error
    store = RunStore(db)
    node = await store.get_node(outcome.run_id, "sum")
    assert node.output["title"] == "ok"
    (call,) = await store.list_calls(outcome.run_id, "sum")
    assert call.tokens == TokenUsage(input=70, cache_read=30, cache_write=5, output=9)
    assert call.model == "cli-model"
    log = stream_log_path(db.workspace.artifacts_dir, outcome.run_id, "sum", 0, 1).read_text()
    assert log.startswith("thinking about")


async def test_failing_command_reports_its_stderr(db: Database, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        import sys
        sys.stdin.read()
        print("model overloaded", file=sys.stderr)
        sys.exit(3)
    """,
    )
    outcome = await run_workflow(db, _workflow(CommandAgent(command=command)))
    assert outcome.status == "failed"
    assert "exited with status 3: model overloaded" in (outcome.error or "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


async def test_timeout_kills_the_whole_process_group(db: Database, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = agent_script(
        tmp_path,
        f"""
        import subprocess, sys, time
        sys.stdin.read()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(120)
    """,
    )
    agent = CommandAgent(command=command, kill_grace_s=0.5)
    started = time.monotonic()
    outcome = await run_workflow(db, _workflow(agent, timeout_s=1.0))
    assert outcome.status == "failed" and "timed out" in (outcome.error or "")
    assert time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
