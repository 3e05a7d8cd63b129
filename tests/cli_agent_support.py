"""Running workflows on the fake agent CLI (fake_agent_cli.py) that replays captured output."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from engine.agents.cli.command import CommandAgent
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.run_end import RunOutcome
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.db.seam import Database

FAKE_CLI = Path(__file__).with_name("fake_agent_cli.py")
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "agents"
CLAUDE_PROTOCOL = ["-p", "--output-format", "stream-json", "--verbose"]
CLAUDE_SETTINGS = {
    "model": "claude-sonnet-4-5",
    "max_turns": 5,
    "permission_mode": "acceptEdits",
    "allowed_tools": ["Read", "Grep"],
}
"""Agent settings the Claude Code tests use, and the flags they must become."""
CLAUDE_SETTINGS_FLAGS = [
    CLAUDE_PROTOCOL,
    ["--model", "claude-sonnet-4-5"],
    ["--max-turns", "5"],
    ["--permission-mode", "acceptEdits"],
    ["--allowedTools", "Read,Grep"],
]


def capture(name: str) -> Path:
    """A captured output file (``claude-code/...`` or ``codex/...``)."""
    return FIXTURES / name


V10 = "claude-code/V_20260114122959423.jsonl"
V10_SESSION = "e567210c-1158-4d20-b973-7dd50723b178"


def api_500_after_ten_messages(tmp_path: Path) -> Path:
    """Derived from capture V_20260114122959423 (10 assistant events, 4 API messages, $0.36):
    the same session, ending in the API Error 500 the issue saw instead of its success."""
    lines = capture(V10).read_text().splitlines()
    result = json.loads(lines[-1])
    result.update(
        is_error=True,
        api_error_status=500,
        terminal_reason="api_error",
        result='API Error: 500 {"type":"error","error":{"type":"api_error","message":'
        '"Internal server error"},"request_id":"req_011CY156CgekdKXjNP84kfFx"}',
    )
    path = tmp_path / "api500.jsonl"
    path.write_text("\n".join([*lines[:-1], json.dumps(result)]) + "\n")
    return path


def fake_agent(tmp_path: Path, preset: str, spec: dict[str, Any], **settings: Any) -> CommandAgent:
    """A command agent whose program is the fake CLI following ``spec`` (paths as strings).

    A Codex agent gets its own ``CODEX_HOME`` (``tmp_path / "codex-home"``), never the
    machine's ``~/.codex``."""
    spec_path = tmp_path / f"spec-{uuid.uuid4().hex[:8]}.json"
    spec_path.write_text(json.dumps({k: _plain(v) for k, v in spec.items()}))
    env = {"FAKE_CLI_SPEC": str(spec_path)}
    if preset == "codex":
        env["CODEX_HOME"] = str(tmp_path / "codex-home")
    env.update(settings.pop("env", {}))
    return CommandAgent(
        command=[sys.executable, str(FAKE_CLI)],
        preset=preset,
        env=env,
        **settings,
    )


def sequenced(
    tmp_path: Path, preset: str, steps: list[dict[str, Any]], name: str = "argv", **settings: Any
) -> CommandAgent:
    """A fake CLI agent whose invocations follow ``steps`` in turn, each recorded (see
    :func:`invocations`)."""
    spec = {"counter": tmp_path / f"{name}.n", "record": tmp_path / f"{name}.json",
            "sequence": steps}
    return fake_agent(tmp_path, preset, spec, **settings)


def invocations(tmp_path: Path, name: str = "argv") -> list[dict[str, Any]]:
    """What each invocation of a :func:`sequenced` agent received, in order: the count of
    agent runs a test checks."""
    found = sorted(tmp_path.glob(f"{name}.json.*"), key=lambda p: int(p.suffix[1:]))
    return [recorded(p) for p in found]


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


async def run_one(
    db: Database, agent: CommandAgent, prompt: str = "Summarise the change.", **task: Any
) -> RunOutcome:
    """Run a one-task workflow on ``agent`` with the standard hooks (memory runtime included)."""
    workflow = Workflow("cli", agents={"cli": agent}, default_agent="cli")
    task.setdefault("backoff", 0.01)
    workflow.add_task("work", prompt, **task)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
    return await engine.start(workflow, None)


def recorded(path: Path) -> dict[str, Any]:
    """What the fake CLI received: ``{"argv": [...], "stdin": "..."}``."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data
