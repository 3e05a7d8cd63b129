"""Claude Code's stream-json input: the prompt and every steer as user messages on stdin.

With ``--input-format stream-json`` Claude Code reads one JSON message a line,
``{"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": ...}]}}``,
and answers each turn with a ``result`` event; a message written while a turn is under way is
taken when that turn ends. It exits once stdin is closed. So :func:`converse` writes the
prompt, then each steer the inbox brings (marked delivered first: none is written twice), and
closes stdin once every message written has had its result, or the program's output ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from engine.agents.agent import SteerInbox

INPUT_ARGS = ["--input-format", "stream-json"]


def user_line(text: str) -> bytes:
    """One user message as Claude Code's stream-json input reads it (a line)."""
    message = {"type": "user",
               "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")


def is_result(line: str) -> bool:
    """True for a stream-json ``result`` event line (the end of a turn)."""
    if '"result"' not in line:
        return False
    try:
        event = json.loads(line)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("type") == "result"


class Turns:
    """The turns the program ended so far (its ``result`` lines) and whether its output did."""

    def __init__(self) -> None:
        self.results = 0
        self.closed = False
        self.changed = asyncio.Event()

    def saw(self, line: str) -> None:
        """Count ``line`` when it ends a turn."""
        if is_result(line):
            self.results += 1
            self.changed.set()

    def end(self) -> None:
        """The program's output ended: no more turns will."""
        self.closed = True
        self.changed.set()


async def converse(stdin: Any, prompt: str, inbox: SteerInbox, turns: Turns,
                   details: dict[str, Any]) -> None:
    """Write ``prompt``, then each steer, until every message has had its turn (see the
    module docstring); ``details["steers_delivered"]`` lists the steers written."""
    stdin.write(user_line(prompt))
    await stdin.drain()
    written = 1
    while turns.results < written and not turns.closed:
        taking = asyncio.ensure_future(inbox.queue.get())
        waiting = asyncio.ensure_future(turns.changed.wait())
        await asyncio.wait({taking, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        turns.changed.clear()
        if not taking.done():
            taking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await taking
            continue
        steer = taking.result()
        if turns.results >= written or turns.closed:
            inbox.queue.put_nowait(steer)  # the last turn ended first: left for the refusal
            break
        if await inbox.deliver(steer):
            stdin.write(user_line(steer.message))
            await stdin.drain()
            written += 1
            details.setdefault("steers_delivered", []).append(steer.steer_id)
