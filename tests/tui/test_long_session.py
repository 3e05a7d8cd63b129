"""A long session keeps nothing per change: the footer's rebuilds (every time the keys that
apply change, e.g. a run starting or ending) leave no widget behind, nor lines they drew."""

from __future__ import annotations

import gc
from typing import Any

from textual._styles_cache import StylesCache
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tests.tui_actions.pilot_support import until
from tui.screens.runs_view import RunsScreen
from tui.widgets.footer import live_watchers
from tui.widgets.keyed_table import KeyedTable


def keys_text(footer: Footer) -> str:
    return " ".join(str(key.description) for key in footer.query(FooterKey))


class Node:
    def __init__(self, closing: bool = False, closed: bool = False) -> None:
        self._closing = closing
        self._closed = closed


def test_only_watchers_of_nodes_in_use_are_kept() -> None:
    alive, closing, closed = Node(), Node(closing=True), Node(closed=True)
    kept = live_watchers([(alive, "a"), (closing, "b"), (closed, "c")])
    assert kept == [(alive, "a")]


async def runs_footer(pilot: Any, app: Any) -> Footer:
    """The Runs view's footer, once it shows its keys."""
    await until(pilot, lambda: isinstance(app.screen, RunsScreen)
                and app.screen.query(FooterKey), "the footer's keys")
    return app.screen.query_one(Footer)


async def rebuild(pilot: Any, app: Any, footer: Footer, turns: int = 30) -> set[str]:
    """Move the cursor between a running and a finished run ``turns`` times: a running run
    offers c (cancel), a finished one R and d, so the footer is rebuilt on each move, as when
    runs start and end in a long session. The footers shown."""
    table = app.screen.query_one("#runs-table", KeyedTable)
    footers: set[str] = set()
    for turn in range(turns):
        assert table.select_key("run-incident-1" if turn % 2 else "run-review-1")
        await until(pilot, lambda turn=turn: "Quit" in keys_text(footer) and (
            "Cancel" in keys_text(footer)) == bool(turn % 2),
            "the footer's keys for the run under the cursor")
        footers.add(keys_text(footer))
    return footers


async def test_footer_rebuilds_leave_no_keys_behind(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        footer = await runs_footer(pilot, app)
        assert len(await rebuild(pilot, app, footer)) == 2
        await pilot.pause()
        shown = len(footer.query(FooterKey))
        assert shown > 0
        # One watcher per key bound to the footer's compact (the palette key is not bound).
        assert len(getattr(footer, "__watchers")["compact"]) <= shown
        gc.collect()
        alive = [o for o in gc.get_objects() if isinstance(o, FooterKey)]
        # The keys on screen, plus those of the other views' footers (built in the
        # background); none of the 30 rebuilds' removed keys.
        assert len(alive) < 8 * shown


def unowned_styles_caches() -> int:
    """Styles caches no live widget owns (Textual's StylesCache.get_inner_outer cache keeps
    those of removed widgets alive, with the lines they drew)."""
    gc.collect()
    objects = gc.get_objects()
    owned = {id(o._styles_cache) for o in objects if isinstance(o, Widget)}
    return sum(isinstance(o, StylesCache) and id(o) not in owned for o in objects)


async def test_removed_footer_keys_leave_no_styles_cache(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        footer = await runs_footer(pilot, app)
        StylesCache.get_inner_outer.cache_clear()  # only what these rebuilds leave counts
        assert len(await rebuild(pilot, app, footer)) == 2
        await pilot.pause()
        # Without emptying get_inner_outer's cache: the styles caches of 30 rebuilds' keys.
        assert unowned_styles_caches() == 0
