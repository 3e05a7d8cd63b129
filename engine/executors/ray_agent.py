"""The orchestrator's side of a remote attempt: an agent whose every ``run`` is a Ray task.

:class:`RayAgent` stands in for the task's agent in :mod:`engine.run.attempt`, so an attempt
on Ray is recorded exactly as a local one: the streamed model calls go through the request's
``on_call`` (group commit, fencing and budget checks unchanged), the artifact bytes are appended
to the attempt's own files (the dashboard's Log tab tails them live), tool calls run here on the
orchestrator's tools and are answered through an actor, and where the attempt runs is recorded
on it as soon as it starts. Leaving an attempt before its end (a cancel, a timeout, a budget
that stops the attempt, whether by cancelling it or by raising where a call is recorded)
cancels the Ray task; a lost node fails the attempt with "the Ray node running it was lost"
and the task's retries decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from engine.agents.agent import Agent, AgentError, AgentRequest, AgentResult, ModelCall
from engine.agents.agent_tool import AgentTool
from engine.artifact_files import ensure_private_folder
from engine.executors.folder_tail import safe_name
from engine.executors.ray_cluster import RayCluster
from engine.executors.ray_faults import attempt_failure, is_node_lost
from engine.executors.ray_runner import RemoteJob, ToolSpec
from engine.executors.remote_events import CallEnded, Ended, FileBytes, Placed, ToolCalled
from store.clock import SYSTEM_CLOCK

OnPlaced = Callable[[AgentRequest, Placed], Awaitable[None]]


async def _no_call(call: ModelCall) -> None:
    return None


def portable_request(request: AgentRequest) -> AgentRequest:
    """The request as it crosses to a node: no callbacks, tools, paths or test clocks (those
    stay here); every other field, present and future, goes as it is."""
    return dataclasses.replace(
        request, on_call=_no_call, tools=(), stream_path=None, clock=SYSTEM_CLOCK
    )


def tool_specs(tools: tuple[AgentTool, ...] | list[AgentTool]) -> tuple[ToolSpec, ...]:
    """The offered tools without their handlers."""
    return tuple(
        ToolSpec(t.name, t.description, dict(t.parameters), dict(t.metadata)) for t in tools
    )


def append_bytes(folder: Path, name: str, data: bytes) -> None:
    """Append a remote attempt's bytes to its artifact file here (owner-only, created on the
    first write); a name that would leave the attempt folder is refused."""
    if not safe_name(name):
        raise AgentError(f"the Ray node sent a file name outside the attempt folder: {name!r}")
    import os

    path = folder / name
    ensure_private_folder(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab", buffering=0) as handle:
        handle.write(data)


class RayAgent:
    """Runs ``inner`` as a Ray task with ``options`` (see the module docstring)."""

    def __init__(
        self,
        inner: Agent,
        cluster: RayCluster,
        options: Mapping[str, Any],
        on_placed: OnPlaced,
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self.inner = inner
        self.cluster = cluster
        self.options = dict(options)
        self.on_placed = on_placed
        self.on_lost = on_lost
        """Told when a node running an attempt was lost (the cluster's nodes are re-read)."""

    def __getattr__(self, name: str) -> Any:
        # name, model, simulated, native_structured_output, supports_tools: the inner agent's.
        return getattr(self.inner, name)

    async def run(self, request: AgentRequest) -> AgentResult:
        """One invocation of the inner agent on the cluster."""
        tools = {tool.name: tool for tool in request.tools}
        key = f"{request.run_id}/{request.node_id}/{request.iteration}/{request.attempt}"
        job = RemoteJob(
            agent=self.inner,
            request=portable_request(request),
            stream_name=request.stream_path.name if request.stream_path else "stream.log",
            tools=tool_specs(list(request.tools)),
            replies=self.cluster.replies() if tools else None,
            reply_key=f"{key}/{'repair' if request.repair else 'first'}",
        )
        stream = self.cluster.submit(job, self.options)
        where = ""
        node = ""
        ended = False
        try:
            while True:
                try:
                    event = await (await stream.__anext__())
                except StopAsyncIteration:
                    raise AgentError("its Ray task ended without an answer") from None
                except AgentError:
                    raise
                except Exception as error:
                    if is_node_lost(error):
                        self.cluster.node_lost(node)
                        self.on_lost()
                    raise attempt_failure(error, where) from error
                if isinstance(event, Placed):
                    where = f"host {event.host}, node {event.node_id[:8]}"
                    node = event.node_id
                    await self.on_placed(request, event)
                elif isinstance(event, CallEnded):
                    await request.on_call(event.call)
                elif isinstance(event, FileBytes):
                    folder = request.stream_path.parent if request.stream_path else None
                    if folder is not None:
                        for name, data in event.chunks:
                            append_bytes(folder, name, data)
                elif isinstance(event, ToolCalled):
                    await self._answer(event, tools)
                elif isinstance(event, Ended):
                    ended = True
                    return self._ended(event, request)
        finally:
            if not ended:
                # Left before the end (a cancel, a timeout, a budget stop raised where a call
                # is recorded, a failed write): the agent on the node is stopped too.
                self.cluster.cancel(stream)

    async def _answer(self, event: ToolCalled, tools: Mapping[str, AgentTool]) -> None:
        tool = tools.get(event.name)
        answer: dict[str, Any]
        if tool is None:
            answer = {"error": f"no tool named {event.name!r} was offered"}
        else:
            try:
                answer = {"result": await tool.call(event.arguments)}
            except Exception as error:
                answer = {"error": f"{type(error).__name__}: {error}"}
        await self.cluster.replies().put.remote(event.call_id, answer)

    @staticmethod
    def _ended(event: Ended, request: AgentRequest) -> AgentResult:
        # The node's copy of the details started as ours: it is the whole of them now.
        request.details.clear()
        request.details.update(event.details)
        if event.error is not None:
            if isinstance(event.error, KeyboardInterrupt):
                raise AgentError("its Ray task was cancelled on the node")
            raise event.error
        assert event.result is not None
        return event.result
