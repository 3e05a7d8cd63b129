"""Replay in the dashboard (Pilot): ``r`` on a run opens a read-only cursor over its event log;
``[``/``]`` step, ``{``/``}`` jump between node ends, ``home``/``end`` go to the ends, ``escape``
leaves; the graph, the Nodes table, the tokens, the memory blocks and the proposed notes all
show the run as it was at the cursor's event; nothing is written."""

from __future__ import annotations

from test_views import open_run, screen_text, settle

from store.db.backends import open_database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from tests.tui_actions.pilot_support import press_for, shown_keys, until
from tui.app import TetherApp
from tui.screens.replay_view import ReplayScreen
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.filter_bar import FilterBar
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.workflow_graph import WorkflowGraph

SIZE = (160, 48)
RUN = "run-review-1"


def table_states(screen: ReplayScreen) -> dict[str, str]:
    table = screen.query_one("#replay-nodes", KeyedTable)
    return {key: table.get_row(key)[0].plain.split()[-1] for key in table.keys}


def graph_states(screen: ReplayScreen) -> dict[str, str]:
    graph = screen.query_one(WorkflowGraph).graph
    return {box.key: box.state for column in graph.columns for box in column}


def shown(screen: ReplayScreen, widget: str) -> str:
    return str(screen.query_one(widget).render())


async def propose_a_note(app: TetherApp) -> str:
    """The sample run retains a note for review after its last node (as the engine does)."""
    async with await open_database(app.workspace) as db:
        note = await MemoryStore(db).save_note("workflow:code-review", "check [bold]the[/] tests",
                                               status="pending", run_id=RUN,
                                               node_id="summarize", iteration=0)
        await RunStore(db).append_event("memory.retained", run_id=RUN, node_id="summarize",
                                        iteration=0,
                                        payload={"note_ids": [note.id], "status": "pending"})
        return note.id


async def events_written(app: TetherApp) -> int:
    async with await open_database(app.workspace) as db:
        return await RunStore(db).last_event_seq()


async def opened(pilot, app: TetherApp) -> ReplayScreen:
    await open_run(pilot, app, RUN)
    assert "r" in shown_keys(app)
    screen = await press_for(pilot, app, "r", ReplayScreen)
    await until(pilot, lambda: screen.state is not None, "the replayed run")
    return screen


async def test_every_replay_key_moves_the_cursor_and_every_part_follows(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        note_id = await propose_a_note(app)
        before = await events_written(app)
        screen = await opened(pilot, app)
        state = screen.state
        assert state is not None and state.position == state.total  # opens on the last event
        total = state.total
        assert shown(screen, "#replay-header").startswith(f"Replay {total}/{total} · ")
        assert table_states(screen) == {"plan#0": "finished", "review-a#0": "finished",
                                        "review-b#0": "finished", "summarize#0": "finished"}
        assert "Pending notes proposed so far: 1" in shown(screen, "#replay-notes")
        assert "check [bold]the[/] tests" in shown(screen, "#replay-notes")  # literally
        assert note_id in shown(screen, "#replay-notes")

        await pilot.press("home")
        assert screen.position == 1 and table_states(screen) == {}
        assert "run created" in shown(screen, "#replay-header")
        assert "No model call yet." in shown(screen, "#replay-tokens")
        await pilot.press("left_square_bracket")  # nothing before the first: stays
        assert screen.position == 1
        await pilot.press("right_square_bracket")
        assert screen.position == 2
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert screen.position == 4
        await pilot.press("left_square_bracket")
        assert screen.position == 3

        # } : plan's end; the table and the graph agree; its call is counted, no other yet.
        await pilot.press("right_curly_bracket")
        assert "node plan ended: finished" in shown(screen, "#replay-header")
        assert table_states(screen) == {"plan#0": "finished", "review-a#0": "pending",
                                        "review-b#0": "pending", "summarize#0": "pending"}
        assert graph_states(screen) == {"plan": "finished", "review-a": "pending",
                                        "review-b": "pending", "summarize": "pending"}
        first_end = screen.position
        assert screen.state is not None and screen.state.run_tokens.total == 45_000
        assert "1 call · 45.0k tokens" in shown(screen, "#replay-tokens")
        assert "Memory blocks recalled so far: 1" in shown(screen, "#replay-memory")
        # The node under the cursor: its block's recalled items, shown literally.
        screen.query_one("#replay-nodes", KeyedTable).select_key("plan#0")
        await until(pilot, lambda: "Block of plan#0" in shown(screen, "#replay-memory"),
                    "plan's recalled items")
        assert "prefer pytest -x" in shown(screen, "#replay-memory")
        assert "[bold red]x[/]" in shown(screen, "#replay-memory")
        assert "Pending notes proposed so far: 0" in shown(screen, "#replay-notes")
        assert "45.0k" in shown(screen, "#replay-summary")

        # } again: review-a's end, with review-b retried and running its second attempt.
        await pilot.press("right_curly_bracket")
        states = table_states(screen)
        assert states["review-a#0"] == "finished" and states["review-b#0"] == "running"
        table = screen.query_one("#replay-nodes", KeyedTable)
        assert table.get_row("review-b#0")[3].plain == "2"  # attempts so far
        assert "degraded" in shown(screen, "#replay-memory")
        await pilot.press("left_curly_bracket")
        assert screen.position == first_end
        await pilot.press("left_curly_bracket")  # no node end before plan's: stays
        assert screen.position == first_end

        await pilot.press("end")
        assert screen.position == total
        assert "Pending notes proposed so far: 1" in shown(screen, "#replay-notes")
        await pilot.press("right_square_bracket")
        assert screen.position == total

        await pilot.press("g")
        assert screen.query_one("#replay-nodes", KeyedTable).has_focus
        await pilot.press("home")  # the table's own home does not take it: the cursor moves
        assert screen.position == 1
        await pilot.press("g")

        assert f"Replay 1/{total}" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run again")
        await settle(pilot, app)
        assert await events_written(app) == before  # replay wrote nothing


async def test_help_names_the_replay_keys(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await opened(pilot, app)
        await pilot.press("question_mark")
        await until(pilot, lambda: "Step back" in screen_text(app), "the help")
        text = screen_text(app)
        for words in ("Next node end", "Prev node end", "First event", "Last event",
                      "read-only"):
            assert words in text


async def test_slash_filters_the_nodes_and_a_running_run_says_what_is_replayed(
        make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = await opened(pilot, app)
        await pilot.press("slash")
        bar = screen.query_one(FilterBar)
        await until(pilot, lambda: bar.has_focus, "the filter bar")
        bar.value = "review"
        await pilot.press("enter")
        await until(pilot, lambda: set(table_states(screen)) == {"review-a#0", "review-b#0"},
                    "the filtered nodes")
        assert set(graph_states(screen)) == {"review-a", "review-b"}
        assert "still running" not in shown(screen, "#replay-header")
        await pilot.press("slash")
        await until(pilot, lambda: bar.has_focus, "the filter bar")
        bar.value = ""
        await pilot.press("enter")  # an empty filter shows every node again
        await until(pilot, lambda: len(table_states(screen)) == 4, "every node")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run again")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RunDetailScreen), "the runs")

        await open_run(pilot, app, "run-incident-1")
        running = await press_for(pilot, app, "r", ReplayScreen)
        await until(pilot, lambda: running.state is not None, "the running run replayed")
        assert "still running: the events up to when replay opened" in shown(
            running, "#replay-header")
        assert table_states(running)["triage#0"] == "running"
