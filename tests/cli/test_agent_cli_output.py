"""`tether run`, `tether node` and `tether runs` on a captured multi-model Claude Code session
(capture B, replayed by the fake CLI), with the agent defined in the workspace's config.toml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_agent_support import CLAUDE_SETTINGS_FLAGS, FAKE_CLI, capture

ROOT = Path(__file__).resolve().parents[2]


def tether(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args, "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def session_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("agent-cli")
    workspace = folder / "ws"
    workspace.mkdir()
    spec = folder / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "stdout": str(capture("claude-code/B_vecsum_stream.jsonl")),
                "expect": CLAUDE_SETTINGS_FLAGS,
            }
        )
    )
    (workspace / "config.toml").write_text(
        textwrap.dedent(
            f"""
            [agents.claude]
            type = "command"
            preset = "claude-code"
            command = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE_CLI))}]
            model = "claude-sonnet-4-5"
            max_turns = 5
            permission_mode = "acceptEdits"
            allowed_tools = ["Read", "Grep"]
            env = {{ FAKE_CLI_SPEC = {json.dumps(str(spec))} }}
            """
        )
    )
    workflow = folder / "verify.py"
    workflow.write_text(
        textwrap.dedent(
            """
            from engine import Workflow

            workflow = Workflow("verify", default_agent="claude")
            workflow.add_task("verify", "Check that the test covers the requirements.")
            """
        )
    )
    result = tether(workspace, "run", str(workflow), "--format", "json")
    assert result.returncode == 0, result.stderr
    return workspace, json.loads(result.stdout)["run_id"]


def test_node_shows_per_call_tokens_models_and_cost(session_run: tuple[Path, str]) -> None:
    workspace, run_id = session_run
    result = tether(workspace, "node", "verify", "--run", run_id)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "cost: $0.0745" in text
    assert "command: " in text and "--output-format stream-json --verbose" in text
    assert "--model claude-sonnet-4-5 --max-turns 5 --permission-mode acceptEdits" in text
    assert "session: id d49d1efb-0239-4aa2-a2b0-f6c86b2320a6, num turns 3" in text
    assert "model claude-opus-4-5-20251101: 23,187 tokens, cost $0.0171" in text
    calls = [line.strip() for line in text.splitlines() if line.strip().startswith("call ")]
    assert len(calls) == 4
    assert (
        "context   24,851 = input 1 + cache read 18,003 + cache write 6,847; output 158"
        in (calls[0])
    )
    assert "(claude/claude-sonnet-4-5-20250929) cost $0.0335" in calls[0]
    assert "(claude/claude-sonnet-4-5-20250929) cost $0.0219" in calls[1]
    assert "reconciliation" in calls[2] and "claude-haiku-4-5-20251001) cost $0.0021" in calls[2]
    assert "reconciliation" in calls[3] and "claude-opus-4-5-20251101) cost $0.0171" in calls[3]


def test_node_json_and_runs_json_carry_cost(session_run: tuple[Path, str]) -> None:
    workspace, run_id = session_run
    shown = tether(workspace, "node", "verify", "--run", run_id, "--format", "json")
    node = json.loads(shown.stdout)
    (attempt,) = node["attempts"]
    assert attempt["cost_usd"] == pytest.approx(0.0745213) and attempt["cost_complete"]
    assert [c["kind"] for c in attempt["calls"]] == ["model", "model"] + ["reconciliation"] * 2
    assert sum(c["cost_usd"] for c in attempt["calls"]) == pytest.approx(0.0745213)
    assert attempt["details"]["invocations"][0]["models"]["claude-haiku-4-5-20251001"][
        "cost_usd"
    ] == pytest.approx(0.0021204)
    (run,) = json.loads(tether(workspace, "runs", "--format", "json").stdout)["items"]
    assert run["cost_usd"] == pytest.approx(0.0745213) and run["unpriced_calls"] == 0
    listed = tether(workspace, "runs").stdout
    assert "COST" in listed and "$0.0745" in listed


def _fake_cli_workspace(tmp_path: Path, name: str, preset: str, spec: dict[str, object],
                        tables: str, model: str | None = None) -> Path:
    """A workspace whose config.toml has ``tables`` and agent ``name``: the fake CLI
    following ``spec`` (a Codex agent gets its own CODEX_HOME)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {"FAKE_CLI_SPEC": str(spec_path), "CODEX_HOME": str(tmp_path / "codex-home")}
    command = json.dumps([sys.executable, str(FAKE_CLI)])
    (workspace / "config.toml").write_text(
        f"{tables}\n[agents.{name}]\ntype = \"command\"\npreset = \"{preset}\"\n"
        f"command = {command}\n" + (f"model = {json.dumps(model)}\n" if model else "")
        + "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n"
    )
    return workspace


def _workflow_file(tmp_path: Path, workflow: str, *tasks: str) -> Path:
    path = tmp_path / "workflow.py"
    path.write_text("\n".join(["from engine import Workflow", f"workflow = {workflow}", *tasks]))
    return path


def test_a_session_that_cost_money_without_tokens_shows_its_cost(tmp_path: Path) -> None:
    """Capture N5 (a 295-turn session stopped by the five-hour limit) reports
    ``total_cost_usd: 13.8`` and no usage at all: the run summary and `tether runs` said
    "cost –" (as if nothing was spent) while the attempt held the $13.80. Its
    rate_limit_event is dropped here so the reset comes from the text ("resets 6:40am"),
    always later than the 0 s this workspace waits for a limit: one attempt, no waiting."""
    lines = capture("claude-code/N5_session_limit_295_turns.jsonl").read_text().splitlines()
    stdout = tmp_path / "n5.jsonl"
    stdout.write_text("\n".join(line for line in lines if "rate_limit_event" not in line) + "\n")
    workspace = _fake_cli_workspace(tmp_path, "claude", "claude-code", {"stdout": str(stdout),
                                    "exit": 1}, "[engine]\nlimit_wait_s = 0\n")
    workflow = _workflow_file(tmp_path, 'Workflow("long", default_agent="claude")',
                              'workflow.add_task("work", "Refactor the parser.")')
    result = tether(workspace, "run", str(workflow))
    assert result.returncode == 3, result.stderr
    summary = next(line for line in result.stderr.splitlines() if line.startswith("run "))
    assert "failed: 0/1 nodes, 0 tokens" in summary and summary.endswith("cost $13.80")
    listed = tether(workspace, "runs").stdout.splitlines()
    assert "$13.80" in listed[1].split()


def test_a_dollar_budget_says_it_cannot_count_unpriced_calls(tmp_path: Path) -> None:
    """Capture X3 (codex exec --json) on an agent whose model has no price, under a $0.01 run
    budget: four nodes ran and spent an unknown amount while the budget showed "0%/$0.01" and
    "$0.00 of $0.01", with nothing said. Now the run warns once that the dollar budget cannot
    count the call, and the budget figures carry "+?"."""
    workspace = _fake_cli_workspace(
        tmp_path, "codex", "codex", {"stdout": str(capture("codex/X3_0147_ok.jsonl"))},
        "[budget]\nrun_usd = 0.01\n", model="house-model-7b")
    workflow = _workflow_file(
        tmp_path, 'Workflow("fan", default_agent="codex", concurrency=1)',
        'workflow.fan_out("each", items=["a", "b", "c", "d"])(lambda ctx: f"Do {ctx.item}")')
    result = tether(workspace, "run", str(workflow))
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if " warn " in line]
    assert len(warned) == 1, result.stderr
    assert "A call of model house-model-7b has no known price, so the run budget ([budget] " \
        "run_usd) of $0.01 cannot count what it cost" in warned[0]
    listed = tether(workspace, "runs").stdout.splitlines()[1].split()
    assert "0%/$0.01+?" in listed and "unknown" in listed
    budget = tether(workspace, "budget").stdout
    assert "$0.00+? of $0.01" in budget and "(UTC): unknown and" in budget
