"""The dashboard on a run of real command-agent sessions (the fake CLI replaying Codex
captures): a memory tool call that Codex cancelled is a ⚠ on the node and a warning in its
Attempts tab, and a turn with no rollout file is one row in the Calls tab, marked as a turn
total and kept out of the buckets (Pilot, on a real SQLite workspace)."""

from __future__ import annotations

from pathlib import Path

from cli_agent_support import capture, fake_agent
from textual.widgets import Static, TabbedContent

from engine.memory.memory_config import MemoryConfig
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.db.backends import open_database
from store.workspace.layout import Workspace
from tests.tui.test_views import SIZE, open_run, settle
from tests.tui_actions.pilot_support import until
from tui.app import TetherApp
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.workflow_graph import WorkflowGraph

WARNING = "Codex's call to the memory tool remember did not run: user cancelled MCP tool call"


async def _codex_run(workspace: Workspace, tmp_path: Path) -> str:
    cancelled = {"stdout": capture("codex/C10_mcp_call_cancelled.jsonl")}
    remember = fake_agent(tmp_path, "codex", cancelled)
    review = fake_agent(tmp_path, "codex", {"stdout": capture("codex/R1_exec_28_requests.jsonl")})
    workflow = Workflow("codex", agents={"remember": remember, "review": review},
                        default_agent="review")  # fmt: skip
    workflow.add_task("learn", "Save the lesson.", agent="remember",
                      memory=MemoryConfig(bank="ci", recall="off", tools=True))  # fmt: skip
    workflow.add_task("review", "Review the change.")
    async with await open_database(workspace) as db:
        engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
        outcome = await engine.start(workflow, None)
    assert outcome.status == "finished", outcome.error
    return outcome.run_id


async def test_warnings_and_turn_totals_are_shown_on_the_node(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".tether")
    run_id = await _codex_run(workspace, tmp_path)
    app = TetherApp(workspace, watch=False, poll_interval=0.05)
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        detail = await open_run(pilot, app, run_id)
        nodes = detail.query_one("#nodes-table", KeyedTable)
        assert nodes.get_row("learn#0")[0].plain.endswith("finished ⚠")
        assert "⚠" not in nodes.get_row("review#0")[0].plain
        graph = detail.query_one(WorkflowGraph)
        assert "⚠ finished" in graph.drawn

        nodes.select_key("learn#0")
        inspector = detail.query_one("#inspector", TabbedContent)
        inspector.active = "tab-attempts"
        box = detail.query_one("#attempt-errors", Static)
        await until(pilot, lambda: WARNING in str(box.render()), "the warning in the Attempts tab")
        attempts = detail.query_one("#attempts-table", KeyedTable)
        assert attempts.get_row("1")[-1].plain.startswith("⚠ 1 warning: Codex's call")

        nodes.select_key("review#0")
        inspector.active = "tab-calls"
        calls = detail.query_one("#calls-table", KeyedTable)
        await until(pilot, lambda: len(calls.keys) == 1, "the review's calls")
        row = [cell.plain for cell in calls.get_row(calls.keys[0])]
        assert "(turn total: not one call)" in row[2] and row[4] == "–"  # no bucket
