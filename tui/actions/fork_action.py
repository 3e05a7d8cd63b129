"""``b`` (branch) in the run detail: fork the run from the node under the cursor, with its
prompt (and agent) edited in :class:`tui.modals.fork_dialog.ForkDialog`; the fork runs in the
embedded engine (the same ``Engine.fork`` as ``tether fork``) and the compare of the two runs
opens."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from engine.fork import ForkEdit, task_of
from store.model.run_records import NodeRecord
from tui.actions.feedback import write_safely
from tui.modals.fork_dialog import ForkDialog, task_prompt_as_sent
from tui.run_control import host_for

FORK_NOTE = "a node that ran (upstream nodes must have finished); F is taken by the Timeline"
"""When ``b`` applies (listed by ? help)."""


def fork_allowed(node: NodeRecord | None) -> bool:
    """``b`` applies to a node that ran: one that is not pending (pure policy)."""
    return node is not None and node.state != "pending"


def upstream_nodes(nodes: list[NodeRecord], node_id: str) -> list[str]:
    """The node rows upstream of ``node_id`` by the tasks each depends on, directly or not
    (pure; the engine's plan, :func:`engine.fork.plan_fork`, decides what is carried)."""
    by_task: dict[str, set[str]] = {}
    for node in nodes:
        by_task.setdefault(task_of(node.node_id), set()).update(node.depends_on)
    seen: set[str] = set()
    todo = list(by_task.get(task_of(node_id), ()))
    while todo:
        task = todo.pop()
        if task not in seen:
            seen.add(task)
            todo += by_task.get(task, ())
    return sorted({n.node_id for n in nodes if task_of(n.node_id) in seen})


def carried_words(names: list[str]) -> Text:
    """What the fork carries over, named (the nodes upstream of the chosen one)."""
    text = Text("Carried over as recorded, never run again: ", style="dim")
    text.append(", ".join(names) if names else "nothing (no node is upstream of it)")
    text.append("\nThe node runs with the edit; every other node runs anew.", style="dim")
    return text


async def fork_from_node(screen: Any, run_id: str, node: NodeRecord) -> str | None:
    """Ask for the edit, fork, open the compare; returns the fork's id (None: cancelled or
    refused, said in one sentence)."""
    reader = screen.tether.reader
    attempts = await reader.attempts(run_id, node.node_id, node.iteration)
    block = await reader.memory_block(run_id, node.node_id, node.iteration)
    sent = attempts[-1].prompt if attempts else None
    prompt = task_prompt_as_sent(sent, block.text if block is not None else None)
    upstream = upstream_nodes(list(screen.nodes.values()), node.node_id)
    target = Text.assemble(("run ", "dim"), (run_id, "bold"), ("  node ", "dim"),
                           (node.node_id, "bold"))
    request = await screen.app.push_screen_wait(
        ForkDialog(target, prompt, carried_words(upstream))
    )
    if request is None:
        return None
    edit = ForkEdit(prompt=request.prompt, agent=request.agent)
    host = host_for(screen.app)
    fork_id: str | None = await write_safely(
        screen, lambda: host.fork(run_id, node.node_id, edit)
    )
    if fork_id is None:
        return None
    screen.app.notify(f"Forked {run_id} from {node.node_id} as {fork_id}; it runs in the "
                      "embedded engine.", markup=False)
    screen.tether.wake()
    screen.tether.open_compare(run_id, fork_id)
    return fork_id
