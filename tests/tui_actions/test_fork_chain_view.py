"""``o`` shows a run's fork chain (the real app with Pilot over real runs of a real
subprocess agent): from a fork of a fork in the run detail, and from the Runs view, the chain
is the first run, its fork and the fork of that, each with the node it was forked from and its
edit; the detail shows the edit as recorded; ``=`` compares a fork with its origin (its
carried nodes marked, never differing) and ``enter`` opens the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from engine.fork import ForkEdit
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.loader import load_workflow
from store.clock import ManualClock
from store.db.backends import open_database
from store.workspace.layout import Workspace
from tests.tui_actions.pilot_support import press_for, shown_keys, until
from tui.run_control import host_for
from tui.screens.compare_view import CompareScreen
from tui.screens.fork_chain_view import ForkChainScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs_view import RunsScreen
from tui.widgets.keyed_table import KeyedTable

WORKFLOW = Path(__file__).resolve().parents[1] / "engine" / "fork_workflow.py"


async def three_generations(workspace: Workspace, clock: ManualClock) -> list[str]:
    workflow = load_workflow(WORKFLOW)
    async with await open_database(workspace, clock=clock) as db:
        engine = Engine(db, config=EngineConfig(poll_interval_s=0.02))
        origin = await engine.start(workflow, {"goal": "chain"}, workflow_path=str(WORKFLOW))
        ids = [origin.run_id]
        for node, edit in (("draft", ForkEdit(prompt="Draft it short")),
                           ("review", ForkEdit(memory_block="Readers are new."))):
            fork = await engine.fork(workflow, ids[-1], node, edit)
            assert (await engine.resume(workflow, fork.run_id)).status == "finished"
            ids.append(fork.run_id)
    return ids


def table_text(screen: ForkChainScreen) -> list[str]:
    table = screen.query_one("#chain-table", KeyedTable)
    return [" ".join(str(cell) for cell in table.get_row(key)) for key in table.keys]


async def test_o_shows_the_fork_chain_and_compares_a_fork_with_its_origin(
    make_app, workspace: Workspace, clock: ManualClock, tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COUNT_FILE", str(tmp_path / "count.jsonl"))
    origin, fork, second = await three_generations(workspace, clock)
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_run(second)
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.run is not None, "the fork of the fork")
        assert "o" in shown_keys(app)
        chain = await press_for(pilot, app, "o", ForkChainScreen)
        await until(pilot, lambda: len(chain.links) == 3, "the chain read")
        assert chain.query_one(KeyedTable).keys == [origin, fork, second]
        rows = table_text(chain)
        assert rows[0].startswith(origin) and "first run" in rows[0]
        assert rows[1].startswith(f"└─ ↳ {fork}") and "from draft · prompt · 3 carried" in rows[1]
        assert rows[2].startswith(f"   └─ ↳ {second}")
        assert "from review · memory block · 4 carried" in rows[2]
        assert chain.query_one(KeyedTable).cursor_key == second  # the run it was opened from
        detail = str(chain.query_one("#chain-detail", Static).render())
        assert f"forked from {fork} at node review" in detail
        assert "Memory block as edited" in detail and "Readers are new." in detail
        await pilot.press("up")
        await until(pilot, lambda: "Draft it short" in str(
            chain.query_one("#chain-detail", Static).render()), "the first fork's edit")
        compare = await press_for(pilot, app, "equals_sign", CompareScreen)
        assert (compare.run_a, compare.run_b) == (origin, fork)
        await until(pilot, lambda: compare.comparison is not None, "the compare read")
        assert compare.comparison is not None
        carried = {p.key for p in compare.comparison.pairs if p.carried}
        assert carried == {"plan#0", "sections[0]#0", "sections[1]#0"}
        assert not any(p.differs for p in compare.comparison.pairs if p.carried)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is chain, "back to the chain")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.run_id == fork, "the fork opened")

        # From the Runs view: o on the first run shows the same chain.
        await app.switch_mode("runs")
        while not isinstance(app.screen, RunsScreen):
            await app.pop_screen()
        runs = app.screen
        await until(pilot, lambda: runs.selected_run_id is not None, "the runs listed")
        runs.query_one(KeyedTable).select_key(origin)
        chain = await press_for(pilot, app, "o", ForkChainScreen)
        await until(pilot, lambda: len(chain.links) == 3, "the chain from Runs")
        assert chain.run_id == origin and chain.query_one(KeyedTable).cursor_key == origin
        assert "first run of this chain" in str(chain.query_one("#chain-detail",
                                                                Static).render())
        # A new fork of the origin appears in the open chain as soon as it is recorded.
        workflow = load_workflow(WORKFLOW)
        engine = await host_for(app).engine()
        third = await engine.fork(workflow, origin, "side", ForkEdit(agent="simulated"))
        await until(pilot, lambda: len(chain.links) == 4, "the new fork listed")
        # Siblings come in the order they were created (the id breaks a tie of the same
        # millisecond): the new fork sits beside the first one, the fork of the fork under it.
        keys = chain.query_one(KeyedTable).keys
        assert keys[0] == origin and set(keys) == {origin, fork, second, third.run_id}
        assert keys.index(second) == keys.index(fork) + 1
        third_row = table_text(chain)[keys.index(third.run_id)]
        assert "from side · agent simulated · 0 carried" in third_row
