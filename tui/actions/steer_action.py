"""``m`` in the run detail: a message for the running node under the cursor (the same
``RunStore.queue_steer`` as ``tether steer``). It is delivered at the node's next turn, or
refused with a sentence; the Steers line of the inspector and ``tether node`` say which."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from store.model.run_records import TERMINAL_RUN_STATUSES, NodeRecord, RunRecord
from store.model.states import ENDED_NODE_STATES
from store.runs.steer_log import default_sender
from tui.actions.feedback import write_safely
from tui.modals.reason import ReasonDialog
from tui.run_control import host_for

STEER_NOTE = "a node that has not ended, in a run that has not"
"""When ``m`` applies (listed by ? help)."""


def steer_allowed(run: RunRecord | None, node: NodeRecord | None) -> bool:
    """``m`` applies to a node that has not ended in a run that has not (pure policy)."""
    return (run is not None and node is not None and run.status not in TERMINAL_RUN_STATUSES
            and node.state not in ENDED_NODE_STATES)


async def steer_node(screen: Any, run_id: str, node: NodeRecord) -> str | None:
    """Ask for the message and queue it; returns the steer's id (None: cancelled/refused)."""
    target = Text.assemble(("run ", "dim"), (run_id, "bold"), ("  node ", "dim"),
                           (node.node_id, "bold"), (f"  {node.state}", "dim"))
    answer = await screen.app.push_screen_wait(ReasonDialog(
        "Send the node a message?", target, confirm_label="Send",
        placeholder="What the node should read at its next turn",
        detail="A steerable Claude Code agent reads it after the turn under way; an agent "
               "that runs one shot refuses it, and says so."))
    if answer is None or answer.reason is None:
        return None
    message = answer.reason
    host = host_for(screen.app)

    async def queue() -> str:
        store = await host.runs()
        steer = await store.queue_steer(run_id, node.node_id, node.iteration, message,
                                        default_sender())
        return steer.steer_id

    steer_id: str | None = await write_safely(screen, queue)
    if steer_id is not None:
        screen.app.notify(f"Steer {steer_id} queued for {node.node_id}.", markup=False)
        screen.tether.wake()
    return steer_id
