"""``tether steer RUN NODE MESSAGE``: a message for a running node, delivered at most once.

The message is queued (refused at once, exit 2, for a node or run that ended); the engine
running the node hands it to its agent at the next point where the agent can take it (a
steerable Claude Code agent: its stream-json input, after the turn under way) or refuses it
with a sentence (an agent that runs one shot). With ``--next-attempt`` it waits for the node's
next attempt (a retry, or the run resumed; a failed node too) and is first in its prompt.
``--wait`` waits for that decision and prints it; ``tether node`` lists every steer of a node
with who sent it and what became of it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import click

from store.db.backends import open_database
from store.model.ids import validate_node_id, validate_run_id
from store.runs.run_store import RunStore
from store.runs.steer_log import NEXT_ATTEMPT, SteerRecord, default_sender
from tui.cli.arguments import split_iteration
from tui.cli.common import (
    EXIT_NOT_COMPLETED,
    format_option,
    run_async,
    workspace_from,
    workspace_option,
)
from tui.cli.output import echo, print_json
from tui.plain import visible

WAIT_POLL_S = 0.2


def steer_lines(steers: Sequence[SteerRecord]) -> list[str]:
    """A node's steers as ``tether node`` prints them (literal text, oldest first)."""
    if not steers:
        return []
    lines = ["Steers:"]
    for steer in steers:
        said = visible(steer.message, keep_newlines=False)
        what = "queued for the next attempt" if steer.deliver == NEXT_ATTEMPT else steer.state
        if steer.state == "delivered":
            what = f"delivered to attempt {steer.attempt}"
            if steer.deliver == NEXT_ATTEMPT:
                what += " (first in its prompt)"
        elif steer.refusal:
            what = f"refused: {visible(steer.refusal, keep_newlines=False)}"
        lines.append(f"  {steer.steer_id} from {visible(steer.sent_by)}: {said!r} — {what}")
    return lines


@click.command("steer")
@click.argument("run_id", metavar="RUN")
@click.argument("node_id", metavar="NODE")
@click.argument("message")
@click.option("--as", "sent_by", metavar="NAME", default=None,
              help="Who sends it (default: your login name).")
@click.option("--next-attempt", is_flag=True,
              help="Deliver it on the node's next attempt (a retry, or the run resumed), first "
              "in that attempt's prompt: the way to reach an agent that runs one shot, or a "
              "node that failed.")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Wait up to SECONDS for the delivery or the refusal, and print it.")
@format_option
@workspace_option
@run_async
async def steer_command(run_id: str, node_id: str, message: str, sent_by: str | None,
                        next_attempt: bool, wait_s: float | None, output_format: str,
                        workspace_dir: str | None) -> None:
    """Send MESSAGE to the running NODE of RUN (delivered at most once, or refused), or to
    its next attempt (--next-attempt)."""
    validate_run_id(run_id)
    node_id, iteration = split_iteration(node_id, None)
    validate_node_id(node_id)
    workspace = workspace_from(workspace_dir)
    async with await open_database(workspace, create=False) as db:
        store = RunStore(db)
        steer = await store.queue_steer(run_id, node_id, iteration or 0, message,
                                        sent_by or default_sender(), next_attempt=next_attempt)
        if wait_s:
            for _ in range(max(1, int(wait_s / WAIT_POLL_S))):
                steer = next(s for s in await store.list_steers(run_id, node_id)
                             if s.steer_id == steer.steer_id)
                if steer.state != "queued":
                    break
                await asyncio.sleep(WAIT_POLL_S)
    if output_format == "json":
        print_json(steer.as_dict())
    elif steer.state == "queued":
        when = "next attempt, first in its prompt" if next_attempt else "next turn"
        echo(f"Steer {steer.steer_id} queued for {node_id}; it is delivered at the node's {when} "
             f"(tether node {node_id} --run {run_id} shows when).")
    else:
        echo("\n".join(steer_lines([steer])[1:]).strip())
    if steer.state == "refused":
        sys.exit(EXIT_NOT_COMPLETED)


COMMANDS = [steer_command]
