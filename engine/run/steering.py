"""Steers reaching a running attempt: a person's message for the node (``tether steer``, the
dashboard's ``m``), delivered at most once at the next point where its agent can take it.

While an attempt talks to its agent, :class:`Steering` reads the node's queued steers every
poll interval. An agent that takes input mid-run (``takes_steers``: Claude Code through its
stream-json input, the HTTP agents before their tool loop's next turn) gets each on its inbox
and marks it delivered right before it writes it; any other agent cannot, so the steer is
refused at once with a sentence naming the agent. When the
attempt ends, what is still queued is refused (the node's turn ended before it could be
delivered): a steer is never left waiting for an attempt that will not come.

A steer sent for the node's **next attempt** (``tether steer --next-attempt``: the way to reach
an agent that runs one shot) is not read while an attempt runs: the next attempt that starts
(a retry, or the run resumed) takes it (:func:`next_attempt_steers`; the attempt's start
marks it delivered, at most once) and its prompt begins with it (:func:`steered_prompt`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from engine.agents.agent import Agent, AgentRequest
from store.runs.run_store import RunStore
from store.runs.steer_log import SteerRecord


def cannot_take(agent_name: str, agent: Agent) -> str:
    """Why ``agent`` cannot take a message mid-run (one sentence, naming the way that works)."""
    kind = getattr(agent, "preset", None) or type(agent).__name__
    if kind == "claude-code":
        return (f"Agent {agent_name!r} (claude-code) was not started with steerable=True, so "
                "it read its prompt once and cannot take a message; nothing was delivered "
                "(send it with --next-attempt for the node's next attempt to read).")
    return (f"Agent {agent_name!r} ({kind}) runs one shot and cannot take a message while it "
            "works; nothing was delivered (send it with --next-attempt for the node's next "
            "attempt to read).")


def steered_prompt(prompt: str, steers: Sequence[SteerRecord]) -> str:
    """An attempt's prompt with the messages sent for it first, each naming its sender
    (pure; unchanged without any)."""
    if not steers:
        return prompt
    said = "\n\n".join(f"A message from {s.sent_by} for this attempt:\n{s.message}"
                        for s in steers)
    return f"{said}\n\n{prompt}"


async def next_attempt_steers(store: RunStore, run_id: str, unit: Any) -> list[SteerRecord]:
    """The steers waiting for the node's next attempt: the attempt about to start takes them
    (its start marks them delivered, in the same transaction)."""
    return await store.next_attempt_steers(run_id, unit.node_id, unit.iteration)


class Steering:
    """The steers of one attempt (see the module docstring)."""

    def __init__(self, store: RunStore, request: AgentRequest, agent: Agent, agent_name: str,
                 poll_s: float) -> None:
        self.store = store
        self.request = request
        self.agent = agent
        self.agent_name = agent_name
        self.poll_s = poll_s
        self.queue: asyncio.Queue[SteerRecord] = asyncio.Queue()
        self.seen: set[str] = set()
        self.takes = bool(getattr(agent, "takes_steers", False))
        if self.takes:
            request.steers = self
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Steering:
        """Start reading the node's queued steers."""
        self._task = asyncio.ensure_future(self._watch())
        return self

    async def deliver(self, steer: Any) -> bool:
        """Mark ``steer`` delivered by this attempt; False: decided already (do not send)."""
        return await self.store.decide_steer(steer, self.request.attempt)

    async def waiting(self) -> list[SteerRecord]:
        """Every steer waiting for this attempt now: what the queue holds and what the
        database has that the last read had not (an HTTP agent asks at each turn)."""
        await self._read()
        found = []
        while not self.queue.empty():
            found.append(self.queue.get_nowait())
        return found

    async def _read(self) -> None:
        request = self.request
        for steer in await self.store.queued_steers(request.run_id, request.node_id,
                                                     request.iteration):
            if steer.steer_id in self.seen:
                continue
            self.seen.add(steer.steer_id)
            if self.takes:
                self.queue.put_nowait(steer)
            else:
                await self.store.decide_steer(
                    steer, request.attempt, refusal=cannot_take(self.agent_name, self.agent))

    async def _watch(self) -> None:
        while True:
            await self._read()
            await asyncio.sleep(self.poll_s)

    async def stop(self) -> None:
        """Stop reading; refuse what is still queued for the node (its turn ended)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        request = self.request
        with contextlib.suppress(Exception):
            for steer in await self.store.queued_steers(request.run_id, request.node_id,
                                                         request.iteration):
                await self.store.decide_steer(
                    steer, request.attempt,
                    refusal=f"Attempt {request.attempt} of {request.node_id} ended before the "
                            "message could be delivered.")
