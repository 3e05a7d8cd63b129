"""``b`` and ``m`` in the run detail (the real app with Pilot, real subprocess agents).
``b`` (branch; ``F`` follows the Timeline) forks the run from the node under the cursor: the
dialog shows the node's prompt as sent and names what is carried over; ctrl+s forks, the
fork runs in the embedded engine and the compare of the two runs opens; ``b`` is not offered
on a node that never ran. ``m`` steers a running node; it is withdrawn once the node ended."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from textual.widgets import Static, TextArea

from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.loader import load_workflow
from store.clock import ManualClock
from store.db.backends import open_database
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import press_for, shown_keys, until
from tui.modals.fork_dialog import ForkDialog
from tui.run_control import host_for
from tui.screens.compare_view import CompareScreen
from tui.screens.run_detail import RunDetailScreen

WORKFLOW = Path(__file__).resolve().parents[1] / "engine" / "fork_workflow.py"


async def test_b_forks_from_the_node_and_opens_the_compare(
    make_app, workspace: Workspace, clock: ManualClock, tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    count = tmp_path / "count.jsonl"
    monkeypatch.setenv("COUNT_FILE", str(count))
    async with await open_database(workspace, clock=clock) as db:
        origin = await Engine(db, config=EngineConfig(poll_interval_s=0.02)).start(
            load_workflow(WORKFLOW), {"goal": "keys"}, workflow_path=str(WORKFLOW))
    assert origin.status == "finished", origin.error
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_run(origin.run_id, node_key="draft#0")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.selected_node is not None
                    and app.screen.selected_node.node_id == "draft", "the run on draft")
        detail = app.screen
        assert "b" in shown_keys(app)
        dialog = await press_for(pilot, app, "b", ForkDialog)
        area = dialog.query_one("#fork-prompt", TextArea)
        assert area.text == "Draft from 2 sections"
        carried = str(dialog.query_one("#fork-carried", Static).render())
        assert "plan, sections[0], sections[1]" in carried
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is detail, "the dialog to close")
        store = await host_for(app).runs()
        assert len(await store.list_runs()) == 1  # escape wrote nothing
        dialog = await press_for(pilot, app, "b", ForkDialog)
        dialog.query_one("#fork-prompt", TextArea).text = "Draft in one line"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen), "the compare")
        fork_id = app.screen.run_b
        for _ in range(2000):
            if (await store.get_run(fork_id)).status == "finished":
                break
            await pilot.pause(0.02)
        fork = await store.get_run(fork_id)
        assert fork.status == "finished" and fork.forked_from == origin.run_id
    seen = Counter(json.loads(line)["node"] for line in count.read_text().splitlines())
    assert seen == Counter({"plan": 1, "sections[0]": 1, "sections[1]": 1, "draft": 2,
                            "review": 2, "side": 2})
    async with await open_database(workspace, clock=clock) as db:
        (attempt,) = await RunStore(db).list_attempts(fork_id, "draft")
        assert attempt.prompt == "Draft in one line"


def test_b_applies_to_a_node_that_ran_and_names_its_upstream() -> None:
    from store.model.run_records import NodeRecord
    from tui.actions.fork_action import fork_allowed, upstream_nodes

    nodes = [NodeRecord("r", "plan", 0, "finished"),
             NodeRecord("r", "sections[0]", 0, "finished", depends_on_json='["plan"]'),
             NodeRecord("r", "draft", 0, "failed", depends_on_json='["sections"]'),
             NodeRecord("r", "review", 0, "pending", depends_on_json='["draft"]'),
             NodeRecord("r", "side", 0, "finished")]
    assert [fork_allowed(n) for n in nodes] == [True, True, True, False, True]
    assert not fork_allowed(None)
    assert upstream_nodes(nodes, "review") == ["draft", "plan", "sections[0]"]
    assert upstream_nodes(nodes, "side") == []


async def test_m_sends_the_running_node_a_message_it_reads_at_its_next_turn(
    make_app, workspace: Workspace, clock: ManualClock, tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textual.widgets import Checkbox, Input

    from tests.engine.test_steer import claude, workflow
    from tui.modals.steer_dialog import SteerDialog

    ready, record = tmp_path / "ready", tmp_path / "record.jsonl"
    monkeypatch.setenv("STEER_READY", str(ready))
    monkeypatch.setenv("STEER_RECORD", str(record))
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        engine = await host_for(app).engine()
        task = asyncio.ensure_future(engine.start(workflow(claude()), {}))
        await until(pilot, ready.exists, "the first turn to be under way")
        store = await host_for(app).runs()
        (run,) = await store.list_runs()
        app.open_run(run.run_id, node_key="work#0")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.run is not None and "m" in shown_keys(app),
                    "m offered on the running node")
        dialog = await press_for(pilot, app, "m", SteerDialog)
        box = dialog.query_one("#steer-next", Checkbox)
        assert not box.value and not box.disabled  # now, unless asked for the next attempt
        await pilot.press("ctrl+n")
        assert box.value
        await pilot.press("ctrl+n")
        assert not box.value
        dialog.query_one("#steer-input", Input).value = "Mention the date."
        await pilot.press("enter")
        await until(pilot, task.done, "the run to end")
        assert task.result().status == "finished"
        (steer,) = await store.list_steers(run.run_id)
        assert steer.state == "delivered" and steer.message == "Mention the date."
        await until(pilot, lambda: "m" not in shown_keys(app), "m withdrawn once it ended")
    lines = [json.loads(line)["message"] for line in record.read_text().splitlines()]
    assert lines == ["Write the summary.", "Mention the date."]


async def test_m_on_a_failed_node_sends_the_message_to_its_next_attempt(
    make_app, workspace: Workspace, clock: ManualClock, tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node failed (a one-shot CLI): ``m`` is still offered, its dialog can only send for
    the next attempt, and the resumed run's attempt 2 reads the message first, once."""
    from textual.widgets import Checkbox, Input

    from tests.engine.test_steer_next_attempt import PREFIX, prompts
    from tests.engine.test_steer_next_attempt import workflow as one_shot
    from tui.modals.steer_dialog import SteerDialog

    ready, record = tmp_path / "ready", tmp_path / "record.jsonl"
    monkeypatch.setenv("STEER_READY", str(ready))
    monkeypatch.setenv("STEER_RECORD", str(record))
    monkeypatch.setenv("LOGNAME", "alice")  # who sends it (getpass reads LOGNAME first)
    ready.with_name("ready.go").touch()  # attempt 1 fails at once
    wf = one_shot(retries=0)
    async with await open_database(workspace, clock=clock) as db:
        assert (await Engine(db).start(wf, {})).status == "failed"
        (run,) = await RunStore(db).list_runs()
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_run(run.run_id, node_key="work#0")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.selected_node is not None and "m" in shown_keys(app),
                    "m offered on the failed node")
        dialog = await press_for(pilot, app, "m", SteerDialog)
        box = dialog.query_one("#steer-next", Checkbox)
        assert box.value and box.disabled
        await pilot.press("ctrl+n")
        assert box.value  # the node ended: only its next attempt can read it
        dialog.query_one("#steer-input", Input).value = "Use the metric system."
        await pilot.press("enter")
        store = await host_for(app).runs()

        async def queued() -> bool:
            return len(await store.list_steers(run.run_id)) == 1

        for _ in range(2000):
            if await queued():
                break
            await pilot.pause(0.02)
        (steer,) = await store.list_steers(run.run_id)
        assert (steer.state, steer.deliver) == ("queued", "next-attempt")
    async with await open_database(workspace, clock=clock) as db:
        assert (await Engine(db).resume(wf, run.run_id)).status == "finished"
        (steer,) = await RunStore(db).list_steers(run.run_id)
    assert (steer.state, steer.attempt) == ("delivered", 2)
    assert prompts(record) == ["Write the report.", PREFIX + "Write the report."]
