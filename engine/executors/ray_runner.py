"""The side of a remote attempt that runs on a Ray worker: the agent runs on an event loop of
its own thread, writing its artifact files in a temporary folder of the node, while the task (a
Ray streaming generator) yields what the orchestrator records: where it runs, each model call,
new bytes of those files, tool calls to answer, and the end.

Nothing here writes the workspace: the orchestrating process is the only writer of the run's
records. When the orchestrator cancels the task (``ray.cancel``: a KeyboardInterrupt in this
thread) or goes away, the agent's own task is cancelled, so a command agent stops its process
group as it would locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import queue
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agents.agent import AgentRequest, ModelCall
from engine.agents.agent_tool import AgentTool
from engine.executors.folder_tail import FolderTail
from engine.executors.remote_events import (
    CallEnded,
    Ended,
    FileBytes,
    Placed,
    RemoteEvent,
    ToolCalled,
    portable_error,
)

POLL_S = 0.1
"""How often new bytes of the artifact files are shipped while the agent is quiet."""
STOP_GRACE_S = 15.0
"""How long a cancelled attempt's agent gets to stop (a command agent's SIGTERM, then KILL)."""


@dataclass(frozen=True)
class ToolSpec:
    """An offered tool as it crosses to the node: everything but its handler, which stays
    with the orchestrator."""

    name: str
    description: str
    parameters: dict[str, Any]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class RemoteJob:
    """One attempt's agent invocation as sent to a Ray worker. ``request`` carries no
    callbacks, tools or paths (they are the orchestrator's); ``replies`` is the actor the
    orchestrator answers tool calls through (None when no tool is offered)."""

    agent: Any
    request: AgentRequest
    stream_name: str
    tools: tuple[ToolSpec, ...] = ()
    replies: Any = None
    reply_key: str = ""


def here(pid: int | None = None) -> Placed:
    """Where this code runs: the Ray node's id, this host's name, the node's address."""
    import ray

    context = ray.get_runtime_context()
    return Placed(
        node_id=context.get_node_id(),
        host=socket.gethostname(),
        address=ray.util.get_node_ip_address(),
        pid=pid or os.getpid(),
    )


def run_remote_attempt(job: RemoteJob) -> Iterator[RemoteEvent]:
    """The Ray task of one attempt (a streaming generator; see the module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="tether-attempt-"))
    os.chmod(folder, 0o700)
    events: queue.Queue[RemoteEvent] = queue.Queue()
    yield here()
    runner = _AgentThread(job, folder, events)
    runner.start()
    tail = FolderTail(folder)
    try:
        while True:
            try:
                event: RemoteEvent | None = events.get(timeout=POLL_S)
            except queue.Empty:
                event = None
            chunks = tail.read() if not isinstance(event, Ended) else tail.drain()
            if chunks:
                yield FileBytes(tuple(chunks))
            if event is not None:
                yield event
                if isinstance(event, Ended):
                    return
    except BaseException:
        # Cancelled (ray.cancel raises KeyboardInterrupt here) or the caller went away.
        runner.stop(STOP_GRACE_S)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _AgentThread(threading.Thread):
    """Runs the agent on an event loop of its own; everything it reports goes to ``events``."""

    def __init__(self, job: RemoteJob, folder: Path, events: queue.Queue[RemoteEvent]) -> None:
        super().__init__(name="tether-remote-attempt", daemon=True)
        self.job = job
        self.folder = folder
        self.events = events
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None
        self.ready = threading.Event()

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.ready.set()
        request = self._request()
        try:
            result = await self.job.agent.run(request)
        except asyncio.CancelledError:
            self.events.put(Ended(error=KeyboardInterrupt(), details=dict(request.details)))
            return
        except BaseException as error:
            self.events.put(Ended(error=portable_error(error), details=dict(request.details)))
            return
        self.events.put(Ended(result=result, details=dict(request.details)))

    def _request(self) -> AgentRequest:
        events = self.events

        async def on_call(call: ModelCall) -> None:
            events.put(CallEnded(call))

        tools = tuple(self._tool(spec) for spec in self.job.tools)
        return dataclasses.replace(
            self.job.request,
            stream_path=self.folder / self.job.stream_name,
            on_call=on_call,
            tools=tools,
        )

    def _tool(self, spec: ToolSpec) -> AgentTool:
        job = self.job
        events = self.events
        counter = iter(range(1, 1 << 62))

        async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
            import ray

            call_id = f"{job.reply_key}:{spec.name}:{next(counter)}"
            events.put(ToolCalled(call_id, spec.name, dict(arguments)))
            answer: dict[str, Any] = await asyncio.to_thread(
                ray.get, job.replies.take.remote(call_id)
            )
            if "error" in answer:
                raise RuntimeError(str(answer["error"]))
            return dict(answer["result"])

        return AgentTool(spec.name, spec.description, spec.parameters, handler, spec.metadata)

    def stop(self, grace_s: float) -> None:
        """Cancel the agent and wait (bounded) for it to stop."""
        self.ready.wait(grace_s)
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(task.cancel)
        self.join(grace_s)
