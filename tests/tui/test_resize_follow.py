"""A terminal made smaller mid-session: the activity feed keeps following the newest events.

Textual keeps a scroll view's offset when the view gets shorter, so a feed that sat at its end
was left above the new bottom: it then counted every later event as "new" instead of showing
it (seen in tmux: 160x48 -> 80x24 and the Runs view's feed stopped at the events it showed
before the resize).
"""

from __future__ import annotations

from test_views import screen_text, settle
from textual.pilot import Pilot

from tui.app import TetherApp
from tui.widgets.log_view import FollowLog


async def _feed_after_shrink(pilot: Pilot[None], app: TetherApp, scroll_to: int | None
                             ) -> FollowLog:
    """The Runs view's feed with 60 more lines, scrolled to ``scroll_to`` (None: left at the
    end), after the terminal went from 160x48 to 80x24 and one more line arrived."""
    await settle(pilot, app)
    feed = app.screen.query_one("#activity-feed", FollowLog)
    feed.append(f"older event {i}" for i in range(60))
    await pilot.pause()
    assert feed.following and feed.scroll_y == feed.max_scroll_y > 0
    if scroll_to is not None:
        feed.scroll_to(y=scroll_to, animate=False, immediate=True)
        await pilot.pause()
    await pilot.resize_terminal(80, 24)
    await settle(pilot, app)
    feed.append(["the newest event"])
    await pilot.pause()
    return feed


async def test_the_activity_feed_follows_the_end_after_the_terminal_shrinks(make_app):
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        feed = await _feed_after_shrink(pilot, app, None)
        assert feed.following and feed.pending == 0
        assert feed.scroll_y == feed.max_scroll_y
        assert "the newest event" in screen_text(app)


async def test_a_feed_scrolled_up_by_the_person_stays_where_it_is_after_a_resize(make_app):
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        feed = await _feed_after_shrink(pilot, app, 3)
        assert not feed.following and feed.pending == 1 and feed.scroll_y == 3
