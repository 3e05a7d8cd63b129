"""Steers reaching a running attempt: a person's message for the node (``tether steer``, the
dashboard's ``m``), delivered at most once at the next point where its agent can take it.

A run's :class:`SteerWatch` (polled by its monitor, :mod:`engine.run.monitor`) reads the run's
steers queued to deliver now once per poll interval, whatever the number of nodes, so an
attempt reads the database only while a steer is waiting somewhere in its run: dispatching a
node costs no read of its own. While an attempt talks to its agent and a steer is waiting, its
:class:`Steering` reads the node's queued steers (woken by the watch, and every poll interval).
An agent that takes input mid-run (``takes_steers``: Claude Code through its stream-json input,
the HTTP agents before their tool loop's next turn) gets each on its inbox and marks it
delivered right before it writes it; any other agent cannot, so the steer is refused at once
with a sentence naming the agent. When the attempt ends, what is still queued is refused (the
node's turn ended before it could be delivered): a steer is never left waiting for an attempt
that will not come. A steer that arrives after the watch's last poll and before the attempt's
end is refused by the next poll once its node has ended (or by the run's last poll, as the run
ends); one for a node waiting to retry goes to its next attempt.

A steer sent for the node's **next attempt** (``tether steer --next-attempt``: the way to reach
an agent that runs one shot) is not read while an attempt runs: the next attempt that starts
(a retry, or the run resumed) takes it (:meth:`SteerWatch.next_attempt_steers`; the attempt's
start marks it delivered, at most once) and its prompt begins with it (:func:`steered_prompt`).
No task reads for them unless one waits: the watch learns which node iterations one waits for
from its poll (the same one read, which the run also makes before it dispatches anything, so
a resumed run knows what was sent while it was stopped), from each attempt's start and from a
retrying attempt's end (a column of a statement they run anyway). Only such a node's next
attempt reads and takes them, and only such a node's end refuses them in its transaction. A
steer queued after all of those and before the attempt's start (a poll interval at most: the
watch had not polled yet) is known from that start: it goes to the attempt after, or is
refused in the transaction that ends the node; one queued while an attempt runs and after the
last poll, for a node that then finishes, is refused by the next poll (or the run's last).
Every change of a steer is conditional on it still being queued, so none is delivered twice;
an attempt whose agent never ran (the run stopped while its start was committed) gives back
what its start took (``engine.run.attempt``), for the attempt after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from engine.agents.agent import Agent, AgentRequest
from engine.run.units import Key
from store.model.run_records import RunRequests
from store.model.states import ENDED_NODE_STATES
from store.runs.run_store import RunStore
from store.runs.steer_log import NEXT_ATTEMPT, NO_NEXT_ATTEMPT_STATES, SteerRecord, no_next_attempt

HAD_ITS_TURN = ENDED_NODE_STATES
"""Node states no attempt follows: a steer still queued for one will not be delivered (one
for a node waiting to retry waits for its next attempt)."""


def ended_sentence(node_id: str, attempt: int) -> str:
    """Why a steer was refused because its node's attempt ended first (one sentence)."""
    return f"Attempt {attempt} of {node_id} ended before the message could be delivered."


class SteerWatch:
    """The steers of one run execution: whether any is waiting, the attempts that can take
    one now, and the refusal of those whose node's attempt ended before they were read."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.waiting = False
        """Whether the last poll found a queued steer for now in the run (attempts read only
        then)."""
        self.active: dict[Key, Steering] = {}
        self.next_attempt: set[Key] = set()
        """The node iterations a steer for the next attempt waits for, as far as this run
        knows (a stale entry costs one read; see the module docstring)."""

    async def poll(self) -> None:
        """Read the run's queued steers (one read): wake the attempts they are for, note the
        nodes whose next attempt has one, refuse those whose node had its turn (for now: no
        attempt running any more; for the next attempt: no attempt will come)."""
        queued = await self.store.queued_steers_of_run(self.run_id)
        self.waiting = any(steer.deliver != NEXT_ATTEMPT for steer, _, _ in queued)
        for steer, node_state, attempts in queued:
            key = (steer.node_id, steer.iteration)
            if steer.deliver == NEXT_ATTEMPT:
                if node_state in NO_NEXT_ATTEMPT_STATES and attempts > 0:
                    await self.store.decide_steer(steer, attempts, refusal=no_next_attempt(
                        steer.node_id, node_state, attempts))
                else:
                    self.next_attempt.add(key)
                continue
            steering = self.active.get(key)
            if steering is not None:
                steering.watch_now()
            elif node_state in HAD_ITS_TURN and attempts > 0:
                await self.store.decide_steer(
                    steer, attempts, refusal=ended_sentence(steer.node_id, attempts))

    async def next_attempt_steers(self, unit: Any) -> list[SteerRecord]:
        """The steers waiting for the node's next attempt, which the attempt about to start
        takes (its start marks them delivered, in the same transaction); no read unless the
        run knows one waits."""
        key = (unit.node_id, unit.iteration)
        if key not in self.next_attempt:
            return []
        self.next_attempt.discard(key)
        return await self.store.next_attempt_steers(self.run_id, unit.node_id, unit.iteration)

    def waits(self, unit: Any, count: int = 1) -> None:
        """Note that ``count`` steers wait for the node's next attempt (what an attempt's
        start, or a retrying attempt's end, read)."""
        if count > 0:
            self.next_attempt.add((unit.node_id, unit.iteration))

    def retrying(self, unit: Any, requests: RunRequests | None) -> None:
        """Take in what a retrying attempt's end read about the node's next attempt."""
        if requests is not None:
            self.waits(unit, requests.next_attempt_steers)

    def refuses_at_end(self, unit: Any) -> bool:
        """Whether the node's end must look for steers waiting for its next attempt (to
        refuse them in its transaction when no attempt will come)."""
        return (unit.node_id, unit.iteration) in self.next_attempt


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


class Steering:
    """The steers of one attempt (see the module docstring)."""

    def __init__(self, watch: SteerWatch, request: AgentRequest, agent: Agent, agent_name: str,
                 poll_s: float) -> None:
        self.watch = watch
        self.store = watch.store
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

    # Made on first use: most attempts never read a steer, and each attempt has a Steering.
    @cached_property
    def wake(self) -> asyncio.Event:
        """Set to read the node's queued steers again before the next poll interval."""
        return asyncio.Event()

    def start(self) -> Steering:
        """Take the node's queued steers from now on: read at once when a steer waits in the
        run, else as soon as the run's watch finds one (no task, no read until then)."""
        self.watch.active[(self.request.node_id, self.request.iteration)] = self
        if self.watch.waiting:
            self.watch_now()
        return self

    def watch_now(self) -> None:
        """Read the node's queued steers now, then every poll interval until the attempt
        ends (the run's watch found a steer waiting)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._watch())
        else:
            self.wake.set()

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
            self.wake.clear()  # before the read: a wake-up during it is not lost
            if self.watch.waiting:
                await self._read()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_s):
                    await self.wake.wait()

    def stop(self) -> asyncio.Future[None] | None:
        """Stop reading; refuse what is still queued for the node (its turn ended). None when
        there is nothing to do (no steer waited at the watch's last poll, nothing read):
        the attempt's end is then queued without a pass of the event loop in between."""
        request = self.request
        key = (request.node_id, request.iteration)
        if self.watch.active.get(key) is self:
            del self.watch.active[key]
        if self._task is None and not self.watch.waiting:
            return None  # a steer queued since is refused by the watch's next poll
        return asyncio.ensure_future(self._stop())

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if not self.watch.waiting:
            return
        request = self.request
        with contextlib.suppress(Exception):
            for steer in await self.store.queued_steers(request.run_id, request.node_id,
                                                         request.iteration):
                await self.store.decide_steer(
                    steer, request.attempt,
                    refusal=ended_sentence(request.node_id, request.attempt))
