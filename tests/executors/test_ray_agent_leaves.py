"""The orchestrator's side of a remote attempt leaving before its end: whatever makes it leave
(the attempt cancelled, a budget check raising where a call is recorded, a lost node), the Ray
task is cancelled, so its agent stops on the node; an attempt that ends normally cancels
nothing. The cluster here is a stand-in that yields events as Ray's streaming generator would
(the real one: tests/on_ray/)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest

from engine.agents.agent import AgentRequest, AgentResult, ModelCall
from engine.agents.simulated import SimulatedAgent
from engine.executors.ray_agent import RayAgent
from engine.executors.remote_events import CallEnded, Ended, Placed, RemoteEvent
from store.model.token_lanes import TokenUsage

CALL = ModelCall(TokenUsage(input=10, output=5), "sim-1")


class StandInCluster:
    """Submits to a script of events; the stream then waits as a running task would."""

    def __init__(self, events: list[RemoteEvent | BaseException]) -> None:
        self.events = events
        self.cancelled: list[object] = []

    def submit(self, job: Any, options: dict[str, Any]) -> AsyncIterator[Awaitable[Any]]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[Awaitable[Any]]:
        for event in self.events:
            yield self._ready(event)
        yield asyncio.get_running_loop().create_future()  # still running on the node

    @staticmethod
    async def _ready(event: RemoteEvent | BaseException) -> RemoteEvent:
        if isinstance(event, BaseException):
            raise event
        return event

    def cancel(self, task: object) -> None:
        self.cancelled.append(task)

    def node_lost(self, node_id: str) -> None:
        pass


def _agent(cluster: StandInCluster) -> tuple[RayAgent, list[str]]:
    placed: list[str] = []

    async def on_placed(request: AgentRequest, event: Placed) -> None:
        placed.append(event.node_id)

    return RayAgent(SimulatedAgent(), cluster, {}, on_placed), placed  # type: ignore[arg-type]


PLACED = Placed(node_id="5094f00f09d2", host="vm", address="10.0.0.1", pid=7)


async def test_a_budget_stop_raised_where_a_call_is_recorded_stops_the_remote_task() -> None:
    cluster = StandInCluster([PLACED, CallEnded(CALL)])
    agent, placed = _agent(cluster)
    recorded: list[ModelCall] = []

    async def on_call(call: ModelCall) -> None:
        recorded.append(call)
        raise RuntimeError("the run's budget of $1.00 is spent")

    with pytest.raises(RuntimeError, match="budget"):
        await agent.run(AgentRequest("Review.", run_id="r", node_id="n", on_call=on_call))
    assert recorded == [CALL] and placed == [PLACED.node_id]
    assert len(cluster.cancelled) == 1


async def test_cancelling_the_attempt_stops_the_remote_task() -> None:
    cluster = StandInCluster([PLACED])
    agent, placed = _agent(cluster)
    running = asyncio.create_task(agent.run(AgentRequest("Review.", run_id="r", node_id="n")))
    while not placed:
        await asyncio.sleep(0)  # a turn of the loop, not a wait for time
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert len(cluster.cancelled) == 1


async def test_a_lost_node_fails_the_attempt_and_an_answer_cancels_nothing() -> None:
    lost_error = type("NodeDiedError", (Exception,), {})("the node died")
    cluster = StandInCluster([PLACED, lost_error])
    agent, _ = _agent(cluster)
    with pytest.raises(Exception, match="the Ray node running it was lost"):
        await agent.run(AgentRequest("Review.", run_id="r", node_id="n"))
    assert len(cluster.cancelled) == 1  # harmless on a task Ray already failed

    answered = StandInCluster([PLACED, CallEnded(CALL),
                               Ended(result=AgentResult(text="done"), details={"k": 1})])
    agent, _ = _agent(answered)
    calls: list[ModelCall] = []

    async def on_call(call: ModelCall) -> None:
        calls.append(call)

    request = AgentRequest("Review.", run_id="r", node_id="n", on_call=on_call)
    result = await agent.run(request)
    assert result.text == "done" and calls == [CALL] and request.details == {"k": 1}
    assert answered.cancelled == []
