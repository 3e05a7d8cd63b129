"""Hostile command agents, as real subprocesses: output without end is stopped at the answer
limit (text) or the output limit (any preset) with one invocation, however many retries the
task allows, and its ``stream.log`` ends with a marker at its cap; an answer whose JSON holds a
lone surrogate finishes the node with the replacement character instead of leaving it
running."""

from __future__ import annotations

import os
from pathlib import Path

from cli_agent_support import capture, fake_agent
from engine_test_support import agent_script, process_gone, run_workflow
from pydantic import BaseModel

from engine.agents.cli.command import CommandAgent
from engine.artifact_files import stream_log_path
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.runs.run_store import RunStore

ENDLESS = """
import os, sys
sys.stdin.read()
with open({count!r}, "a") as count:
    count.write(f"{{os.getpid()}}\\n")
line = {line!r} * 1000 + "\\n"
while True:
    sys.stdout.write(line)
"""


class Title(BaseModel):
    title: str


def _workflow(agent: CommandAgent, **task: object) -> Workflow:
    wf = Workflow("bounded", agents={"cli": agent}, default_agent="cli")
    wf.add_task("talk", "Say something.", **task)  # type: ignore[arg-type]
    return wf


async def _endless(db: Database, tmp_path: Path, preset: str, **limits: int) -> tuple[str, Path]:
    count = tmp_path / "invocations"
    agent = CommandAgent(
        command=agent_script(tmp_path, ENDLESS.format(count=str(count), line="x" if preset == "text"
                                                 else '{"noise": 1}')),
        preset=preset, kill_grace_s=0.2, **limits)
    outcome = await run_workflow(
        db, _workflow(agent, retries=2))
    assert outcome.status == "failed"
    pids = [int(line) for line in count.read_text().split()]
    assert len(pids) == 1, "a stopped agent is never retried (each start could cost money)"
    assert all(process_gone(pid) for pid in pids)
    return outcome.error or "", stream_log_path(
        db.workspace.artifacts_dir, outcome.run_id, "talk", 0, 1)


async def test_endless_text_is_stopped_at_the_answer_limit(db: Database, tmp_path: Path) -> None:
    error, log = await _endless(db, tmp_path, "text", max_answer_bytes=1_000_000,
                                max_log_bytes=200_000)
    assert "printed more than 1,000,000 bytes" in error and "was stopped" in error
    data = log.read_bytes()
    assert len(data) < 200_000 + 1_000
    assert b"reached its limit of 200,000 bytes" in data
    assert data.rstrip().endswith(b"more bytes were not kept]")


async def test_endless_json_is_stopped_at_the_output_limit(db: Database, tmp_path: Path) -> None:
    error, log = await _endless(db, tmp_path, "json", max_output_bytes=3_000_000,
                                max_log_bytes=100_000)
    assert "printed more than 3,000,000 bytes (max_output_bytes) and was stopped" in error
    assert os.path.getsize(log) < 100_000 + 1_000


async def test_a_lone_surrogate_in_the_answer_is_kept_as_a_replacement(
    db: Database, tmp_path: Path
) -> None:
    command = agent_script(tmp_path, r"""
        import sys
        sys.stdin.read()
        print('{"output": {"title": "half \\ud800 a pair"}, "model": "m\\udfff"}')
    """)
    outcome = await run_workflow(db, _workflow(CommandAgent(command=command), output=Title))
    assert outcome.status == "finished", outcome.error
    store = RunStore(db)
    node = await store.get_node(outcome.run_id, "talk")
    assert node.state == "finished" and node.output == {"title": "half \ufffd a pair"}
    (attempt,) = await store.list_attempts(outcome.run_id, "talk")
    assert attempt.state == "finished" and "\ufffd" in (attempt.response_text or "")


async def test_an_answer_longer_than_a_line_may_be_says_so(db: Database, tmp_path: Path) -> None:
    """Captures C (Claude Code stream-json) and X3 (codex exec --json) with the answer grown
    past ``max_line_bytes``: the line is kept in stream.log but not parsed, and the node failed
    with "without a result: no output" (Claude Code) or "no agent_message" (Codex), hiding
    that the CLI had printed an answer. The reason now says a line went unread and why."""
    for preset, name, field in (
        ("claude-code", "claude-code/C_gleam_basic_query_stream.jsonl", '"result":"4"'),
        ("codex", "codex/X3_0147_ok.jsonl", '"text":"Got it. What would you like to work on?"'),
    ):
        text = capture(name).read_text()
        assert text.count(field) == 1
        key = field.split(":", 1)[0]
        grown = tmp_path / f"{preset}-grown.jsonl"
        grown.write_text(text.replace(field, f'{key}:"{"y" * 5000}"'))
        agent = fake_agent(tmp_path, preset, {"stdout": grown}, max_line_bytes=4096)
        outcome = await run_workflow(db, _workflow(agent))
        assert outcome.status == "failed"
        error = outcome.error or ""
        assert "(1 line of its output passed max_line_bytes (4,096 bytes) and went unread; the " \
            "answer may be among them" in error, error
        log = stream_log_path(db.workspace.artifacts_dir, outcome.run_id, "talk", 0, 1)
        assert "y" * 5000 in log.read_text()
