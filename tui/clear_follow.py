"""What became of a clear this dashboard asked for (``x`` on a run an engine is executing).

Such a clear is a *request*: the engine hands off at its next dispatch. A run whose last
node is done has no next dispatch: whether the request landed during that node's attempt or
after the engine read the run for the last time, the run ends finished with nothing handed off.
The person was told "hands off at its next dispatch"; here the dashboard follows each request
it made to the run's end and says how it ended, so a clear confirmed in time is never silently
lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from store.model.history_records import EventRecord

ENDS = ("finished", "failed", "cancelled")
"""A run's ends other than its handoff: the clear was not applied."""


def not_cleared(run_id: str, status: str) -> str:
    """The one sentence for a requested clear that the run ended without applying."""
    if status == "finished":
        return (f"Run {run_id} finished with no work left to hand off, so nothing was "
                "cleared.")
    ended = {"failed": "failed"}.get(status, f"was {status}")
    return (f"Run {run_id} {ended} before its engine reached the clear, so nothing was "
            "cleared (x clears it now).")


class ClearFollowUps:
    """The clears this dashboard requested, followed through the events it reads."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.say = say
        """Shows one sentence (the dashboard's notification)."""
        self._asked: dict[str, bool] = {}
        """Run id -> whether its ``run.clear-requested`` event was seen yet."""

    def expect(self, run_id: str) -> None:
        """A clear of ``run_id`` is about to be written (called first, so no event of it can
        be read before it is expected)."""
        self._asked[run_id] = False

    def forget(self, run_id: str) -> None:
        """The clear was not requested (refused, or done at once): nothing to follow."""
        self._asked.pop(run_id, None)

    def take(self, events: Iterable[EventRecord]) -> None:
        """Follow the expected runs through ``events``: once a run's clear request is seen,
        its handoff or its end is said in one sentence."""
        for event in events:
            run_id = event.run_id
            if run_id is None or run_id not in self._asked:
                continue
            if event.type == "run.clear-requested":
                self._asked[run_id] = True
            elif self._asked[run_id]:
                self._follow(run_id, event.type, event.payload)

    def _follow(self, run_id: str, kind: str, payload: Any) -> None:
        data = payload if isinstance(payload, dict) else {}
        sentence = None
        if kind == "handoff":
            sentence = f"Run {run_id} handed off to {data.get('to_run_id', 'a new run')}."
        elif kind == "run.status" and data.get("status") in ENDS:
            sentence = not_cleared(run_id, str(data["status"]))
        if sentence is None:
            return
        self.forget(run_id)
        if self.say is not None:
            self.say(sentence)
