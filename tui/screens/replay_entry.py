"""``r`` on a run's view: open its replay (:mod:`tui.screens.replay_view`) over it."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding

from tui.screens.live_screen import LiveScreen


class ReplayEntry(LiveScreen):
    """A view of one run (``self.run_id``) on which ``r`` replays it."""

    run_id: str
    BINDINGS: ClassVar[list[Binding]] = [Binding("r", "replay", "Replay")]

    def action_replay(self) -> None:
        """Replay the run: a read-only cursor over its event log, escape comes back."""
        from tui.screens.replay_view import ReplayScreen

        self.app.push_screen(ReplayScreen(self.run_id))
