"""``m`` in the run detail: a message for the node under the cursor (the same
``RunStore.queue_steer`` as ``tether steer``), delivered now (at the node's next turn) or on
its next attempt (a retry or a resume, first in its prompt), or refused with a sentence; the
Steers line of the inspector and ``tether node`` say which."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from store.model.run_records import NodeRecord, RunRecord
from store.runs.steer_log import default_sender, refusal_on_queue
from tui.actions.feedback import write_safely
from tui.modals.steer_dialog import SteerDialog
from tui.run_control import host_for

STEER_NOTE = ("a node that has not ended, in a run that has not; for its next attempt, a node "
              "that failed in a run that can be resumed")
"""When ``m`` applies (listed by ? help)."""


def steer_allowed(run: RunRecord | None, node: NodeRecord | None) -> bool:
    """``m`` applies to a node a message can still reach, now or on its next attempt (pure
    policy, the store's own: :func:`store.runs.steer_log.refusal_on_queue`)."""
    return run is not None and node is not None and refusal_on_queue(
        run.run_id, node.node_id, node.state, run.status, next_attempt=True) is None


def only_next_attempt(run: RunRecord, node: NodeRecord) -> bool:
    """Whether only the node's next attempt can read a message (the node or run ended)."""
    return refusal_on_queue(run.run_id, node.node_id, node.state, run.status,
                            next_attempt=False) is not None


async def steer_node(screen: Any, run: RunRecord, node: NodeRecord) -> str | None:
    """Ask for the message and queue it; returns the steer's id (None: cancelled/refused)."""
    target = Text.assemble(("run ", "dim"), (run.run_id, "bold"), ("  node ", "dim"),
                           (node.node_id, "bold"), (f"  {node.state}", "dim"))
    answer = await screen.app.push_screen_wait(
        SteerDialog(target, only_next_attempt=only_next_attempt(run, node)))
    if answer is None:
        return None
    host = host_for(screen.app)

    async def queue() -> str:
        store = await host.runs()
        steer = await store.queue_steer(run.run_id, node.node_id, node.iteration,
                                        answer.message, default_sender(),
                                        next_attempt=answer.next_attempt)
        return steer.steer_id

    steer_id: str | None = await write_safely(screen, queue)
    if steer_id is not None:
        when = "its next attempt" if answer.next_attempt else "its next turn"
        screen.app.notify(f"Steer {steer_id} queued for {node.node_id}, for {when}.",
                          markup=False)
        screen.tether.wake()
    return steer_id
