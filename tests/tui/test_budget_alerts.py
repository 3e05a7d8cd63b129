"""Budget alerts in the dashboard: while a run another engine executes crosses 50, 80 and 100 %
of its budget, the bell rings once per threshold and the status line says the newest; the
activity feed shows the alert in words and a carried node is marked in the node table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.text import Text

import tui.app as tui_app
from engine.agents.agent import AgentRequest, AgentResult, ModelCall
from engine.ceiling import Ceiling
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.clock import SYSTEM_CLOCK, ManualClock
from store.db.backends import open_database
from store.model.token_lanes import TokenUsage
from store.workspace.layout import Workspace
from tui.app import TetherApp
from tui.budget_alerts import ALERT_SHOWN_MS
from tui.event_text import event_sentence, event_summary
from tui.screens.run_detail_render import reuse_cell
from tui.widgets.status import StatusLine


class Ringing(TetherApp):
    """The dashboard, counting the times it rings the terminal bell."""

    CSS_PATH = str(Path(tui_app.__file__).with_name("app.tcss"))
    rung = 0

    def bell(self) -> None:
        self.rung += 1
        super().bell()


class Steady:
    """Reports one 300-token call per attempt (no price: the budget is in tokens)."""

    name = "steady"
    native_structured_output = False
    simulated = False

    async def run(self, request: AgentRequest) -> AgentResult:
        await request.on_call(ModelCall(TokenUsage(input=300), "steady-1"))
        return AgentResult(text="done")


def workflow() -> Workflow:
    flow = Workflow("alerts", agents={"steady": Steady()}, default_agent="steady",
                    ceiling=Ceiling(1000, "warn"))
    for index in range(4):
        flow.add_task(f"t{index}", f"Step {index}.",
                      depends_on=[f"t{index - 1}"] if index else None)
    return flow


async def test_bell_and_status_line_at_each_threshold(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".tether")
    db = await open_database(workspace)
    app = Ringing(workspace, watch=False, poll_interval=0.02)
    app.animation_level = "none"
    try:
        async with app.run_test(size=(200, 40)) as pilot:
            await pilot.pause(0.1)
            engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
            outcome = await engine.start(workflow())
            assert outcome.status == "finished"
            for _ in range(200):  # the dashboard polls every 20 ms: until it has read them all
                if app.tailer.budget_alerts.bells == 3:
                    break
                await pilot.pause(0.02)
            assert app.tailer.budget_alerts.bells == 3 and app.rung == 3
            await pilot.pause(0.05)
            line = app.screen.query_one(StatusLine).render()
            text = line.plain if isinstance(line, Text) else str(line)
            assert (f"⚠ budget 100% of the token ceiling: run {outcome.run_id} at 1,200 tokens "
                    "of 1,000 tokens; warn applies") in text
            newest = app.tailer.budget_alerts.newest
            assert newest is not None and newest[1] == 100
            await pilot.pause(0.1)
            assert app.rung == 3  # once per alert, not on every refresh
    finally:
        await db.close()


async def test_feed_words_and_the_carried_marker() -> None:
    payload = '{"text": "80% of the dollar ceiling: run r-1 at $1.63 of $2.00", "threshold": 80}'
    assert event_summary("budget.alert", payload) == (
        "80% of the dollar ceiling: run r-1 at $1.63 of $2.00")
    assert event_summary("node.state", '{"state": "finished", "carried_from": "r-0"}') == (
        "is now finished (carried from r-0)")
    from store.model.history_records import EventRecord

    alert = EventRecord(seq=7, at_ms=0, type="budget.alert", run_id="r-1", payload_json=payload)
    assert event_sentence(alert) == (  # the feed says it once, not "Run r-1 80% of …"
        "Budget alert: 80% of the dollar ceiling: run r-1 at $1.63 of $2.00.")
    from store.model.run_records import NodeRecord

    assert reuse_cell(NodeRecord("r-1", "plan", 0, "finished", carried_from="r-0")).plain == (
        "carried")
    assert reuse_cell(NodeRecord("r-1", "plan", 0, "finished", cached=True)).plain == "HIT"


def shown_status(app: TetherApp) -> str:
    """The status line as the terminal shows it (cut at the screen's edge)."""
    status = app.screen.query_one(StatusLine)
    return "".join(segment.text for segment in status.render_line(0)).rstrip()


@pytest.mark.parametrize("width", [160, 80])
async def test_an_alert_leaves_room_for_the_freshness_then_leaves(
    tmp_path: Path, width: int
) -> None:
    """The demo's handoff alert once filled a 160-column status line and pushed "checked …
    · last change …" off the screen: the alert now takes only the room the freshness leaves
    it, and once it is old (five minutes) it is gone from the line."""
    workspace = Workspace(tmp_path / ".tether")
    db = await open_database(workspace)
    clock = ManualClock(SYSTEM_CLOCK.now_ms())
    app = TetherApp(workspace, watch=False, poll_interval=0.02, clock=clock)
    app.animation_level = "none"
    try:
        async with app.run_test(size=(width, 30)) as pilot:
            await pilot.pause(0.1)
            engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
            outcome = await engine.start(workflow())
            for _ in range(200):  # the dashboard polls every 20 ms: until it has read them all
                newest = app.tailer.budget_alerts.newest
                if newest is not None and newest[1] == 100:
                    break
                await pilot.pause(0.02)
            clock.set(SYSTEM_CLOCK.now_ms() + 2_000)  # the alert is 2 s old
            app.screen.update_chrome()
            await pilot.pause()
            shown = shown_status(app)
            assert "⚠ budget 100% " in shown
            assert re.search(r"checked \S+ ago · last change \S+ ago", shown), shown
            if width == 160:  # the run's id still fits beside the freshness
                assert f"run {outcome.run_id}" in shown
            clock.advance(ALERT_SHOWN_MS)
            app.screen.update_chrome()
            await pilot.pause()
            shown = shown_status(app)
            assert "budget" not in shown and shown.startswith("● live  checked "), shown
            assert f"event #{app.tailer.last_seq}" in shown
    finally:
        await db.close()
