"""``x`` (clear) on a run that finishes while its confirmation is open: the person is told
what became of the clear they confirmed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine.workflow.declaration import read_declaration
from store.runs.run_log import RunLog
from store.runs.run_store import RunStore
from tests.tui_actions.pilot_support import dialog_target, press_for, until
from tests.tui_actions.test_run_actions import MakeApp, open_runs, runs_view, until_run
from tui.app import TetherApp
from tui.modals import ReasonDialog
from tui.run_control import KnownWorkflow, host_for

GATED = '''
import asyncio
import os
from pathlib import Path

from engine import Workflow
from engine.agents.agent import AgentRequest, AgentResult, ModelCall
from store.model.token_lanes import TokenUsage


class Gated:
    """Answers once the test opens its gate (a file): the run finishes when the test says."""

    name = "gated"
    native_structured_output = False
    simulated = False

    async def run(self, request: AgentRequest) -> AgentResult:
        gate = Path(os.environ["CLEAR_RACE_GATE"])
        while not gate.exists():
            await asyncio.sleep(0.01)
        await request.on_call(ModelCall(TokenUsage(input=10), "gated-1"))
        return AgentResult(text="done")


workflow = Workflow("gated", agents={"gated": Gated()}, default_agent="gated")
workflow.add_task("only", "Do one thing.")
if os.environ.get("CLEAR_RACE_TWO_NODES"):
    workflow.add_task("then", "Do the next thing.", depends_on=["only"])
'''


def gated_workflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[KnownWorkflow, Path]:
    """The gated workflow as a file the dashboard launches, and its gate."""
    gate = tmp_path / "gate"
    monkeypatch.setenv("CLEAR_RACE_GATE", str(gate))
    path = tmp_path / "gated.py"
    path.write_text(GATED)
    return KnownWorkflow(path, read_declaration(path), {}), gate


def said(app: TetherApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def clear_while_it_works(app: TetherApp, pilot: Any, known: KnownWorkflow,
                               gate: Path) -> str:
    """Launch the gated run, clear it with ``x`` while its agent works, then let the agent
    answer; returns the run's id."""
    run_id = await host_for(app).launch(known, {})
    await until_run(app, pilot, "the run to start", lambda runs: any(
        r.run_id == run_id and r.status == "running" for r in runs))
    await open_runs(app, pilot, select=run_id)
    await press_for(pilot, app, "x", ReasonDialog)
    await pilot.press("enter")
    await until(pilot, lambda: any("Clear requested" in s for s in said(app)),
                "the request to be written")
    gate.touch()
    return run_id


async def test_a_clear_the_run_ends_before_reaching_is_said_to_have_done_nothing(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The person confirms while the run's last node is done but the run not yet recorded
    finished: the request lands after its engine read the run for the last time, so there is
    no next dispatch to hand off at. The dashboard had said "hands off at its next dispatch"
    and then nothing; it now says the run finished and nothing was cleared."""
    known, gate = gated_workflow(tmp_path, monkeypatch)
    finishing = asyncio.Event()
    release = asyncio.Event()
    recorded = RunLog.set_run_status

    async def held(self: RunLog, run_id: str, status: str, **kwargs: Any) -> None:
        if status == "finished":  # the engine has decided: the run ends finished
            finishing.set()
            await release.wait()
        await recorded(self, run_id, status, **kwargs)

    monkeypatch.setattr(RunLog, "set_run_status", held)
    async with runs_view(make_app) as (app, pilot, _screen):
        run_id = await host_for(app).launch(known, {})
        await until_run(app, pilot, "the run to start", lambda runs: any(
            r.run_id == run_id and r.status == "running" for r in runs))
        screen = await open_runs(app, pilot, select=run_id)
        await press_for(pilot, app, "x", ReasonDialog)
        assert run_id in dialog_target(app)
        gate.touch()  # the last node ends while the person reads the dialog
        await until(pilot, finishing.is_set, "the engine to record the run's end")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        await until(pilot, lambda: any("Clear requested" in s for s in said(app)),
                    "the request to be written")
        release.set()
        await until_run(app, pilot, "the run to end", lambda runs: any(
            r.run_id == run_id and r.status == "finished" for r in runs))
        await until(pilot, lambda: any("nothing was cleared" in s for s in said(app)),
                    "the dashboard to say what became of the clear")
    assert (f"Run {run_id} finished with no work left to hand off, so nothing was "
            "cleared.") in said(app)


async def test_a_clear_the_run_reaches_says_where_it_continues(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Confirmed while the agent still works on a node with another after it: the run hands
    off once the attempt ends, and the dashboard names the new run."""
    monkeypatch.setenv("CLEAR_RACE_TWO_NODES", "1")
    known, gate = gated_workflow(tmp_path, monkeypatch)
    async with runs_view(make_app) as (app, pilot, _screen):
        run_id = await clear_while_it_works(app, pilot, known, gate)
        runs = await until_run(app, pilot, "the successor", lambda runs: any(
            r.parent_run_id == run_id for r in runs))
        successor = next(r.run_id for r in runs if r.parent_run_id == run_id)
        await until(pilot, lambda: f"Run {run_id} handed off to {successor}." in said(app),
                    "the dashboard to name the new run")


async def test_a_clear_during_the_last_attempt_finishes_the_run_without_a_new_generation(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Confirmed while the run's only node still works: nothing is left to hand off once it
    ends, so the run finishes (a new generation would carry every node and end at once) and
    the run's log and the dashboard say so."""
    known, gate = gated_workflow(tmp_path, monkeypatch)
    async with runs_view(make_app) as (app, pilot, _screen):
        run_id = await clear_while_it_works(app, pilot, known, gate)
        runs = await until_run(app, pilot, "the run to end", lambda runs: any(
            r.run_id == run_id and r.status != "running" for r in runs))
        assert next(r.status for r in runs if r.run_id == run_id) == "finished"
        assert not any(r.parent_run_id == run_id for r in runs)
        await until(pilot, lambda: (f"Run {run_id} finished with no work left to hand off, so "
                                    "nothing was cleared.") in said(app),
                    "the dashboard to say what became of the clear")
        events = await RunStore(await host_for(app).database()).recent_events(200, run_id=run_id)
        assert any("nothing was left to hand off" in str(e.payload) for e in events)


async def test_a_clear_confirmed_after_the_run_finished_is_refused_in_one_sentence(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run is recorded finished before the person confirms: nothing is written, and the
    dashboard says why (a finished run has nothing to clear)."""
    known, gate = gated_workflow(tmp_path, monkeypatch)
    async with runs_view(make_app) as (app, pilot, _screen):
        host = host_for(app)
        run_id = await host.launch(known, {})
        await until_run(app, pilot, "the run to start", lambda runs: any(
            r.run_id == run_id and r.status == "running" for r in runs))
        screen = await open_runs(app, pilot, select=run_id)
        await press_for(pilot, app, "x", ReasonDialog)
        gate.touch()
        await until_run(app, pilot, "the run to finish", lambda runs: any(
            r.run_id == run_id and r.status == "finished" for r in runs))
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen, "the dialog to close")
        await until(pilot, lambda: len(said(app)) > 0, "a sentence")
        assert said(app) == [
            f"Run {run_id} is finished, so there is nothing to clear (a clear would only run it "
            "again); start a new run of its workflow instead."]
        assert await (await host.runs()).list_handoffs() == []
