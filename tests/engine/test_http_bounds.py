"""HTTP agents against hostile and half-working servers (a real local server,
tests/sse_server.py): an endless body and a slow-loris server end the request at its size
bound and whole-request deadline, HTTP 200 with no event falls back once, a stream cancelled
mid-answer (as a budget does) still records what it cost, a server that never shows the model
its tools fails the attempt saying so, and a task without ``timeout_s`` gets the default."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_test_support import run_workflow
from sse_server import ScriptServer, Step, one_task, sse

import engine.workflow.task_spec as task_spec
from engine.agents.agent import AgentRequest, ModelCall
from engine.agents.agent_tool import AgentTool
from engine.agents.cli.command import CommandAgent
from engine.agents.http.anthropic import AnthropicAgent
from engine.agents.http.openai import OpenAIAgent
from engine.hooks import EngineHooks
from engine.memory.memory_config import MemoryConfig
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.runs.run_store import RunStore

LIMIT = 1024 * 1024


async def _no_wait(seconds: float) -> None:
    return None


@pytest.mark.parametrize("body", ["sse", "json"])
async def test_an_endless_body_stops_at_the_size_bound(
    db: Database, server: ScriptServer, body: str
) -> None:
    server.script = [Step("endless", body=body)]
    agent = OpenAIAgent(base_url=server.url + "/v1", max_response_bytes=LIMIT, sleep=_no_wait)
    outcome = await run_workflow(db, one_task(agent, retries=2))
    assert outcome.status == "failed"
    assert f"larger than {LIMIT:,} bytes (max_response_bytes); stopped reading" in (
        outcome.error or ""
    )
    assert len(server.requests) == 1  # not retried: the same server would send it again
    # The agent stopped reading: the server got no further than the socket buffers allow.
    assert server.sent < LIMIT + 16 * 1024 * 1024


async def test_a_slow_loris_server_cannot_hold_a_request_past_its_deadline(
    db: Database, server: ScriptServer
) -> None:
    # A keep-alive comment every 50 ms forever: no read ever waits long, the answer never ends.
    server.script = [Step("trickle"), Step("trickle")]
    agent = AnthropicAgent(
        base_url=server.url, timeout_s=0.5, sleep=_no_wait, retry={"max_retries": 1}
    )
    outcome = await run_workflow(db, one_task(agent))
    assert outcome.status == "failed"
    assert "no complete answer within timeout_s (0.5 s for the request)" in (outcome.error or "")
    assert "after 1 retry" in (outcome.error or "") and len(server.requests) == 2


async def test_http_200_with_no_event_for_tools_falls_back_to_asking_without_streaming(
    db: Database, server: ScriptServer
) -> None:
    # llama-cpp-python with chatml-function-calling: "Automatic streaming tool choice is not
    # supported" is an empty HTTP 200 body; the same request without streaming works.
    answer = {"model": "smol", "usage": {"prompt_tokens": 300, "completion_tokens": 9},
              "choices": [{"message": {"content": None, "tool_calls": [
                  {"id": "c1", "type": "function",
                   "function": {"name": "remember", "arguments": '{"text": "x"}'}}]},
                  "finish_reason": "tool_calls"}]}  # fmt: skip
    done = {"model": "smol", "usage": {"prompt_tokens": 320, "completion_tokens": 3},
            "choices": [{"message": {"content": "Saved."}, "finish_reason": "stop"}]}  # fmt: skip
    server.script = [Step("empty"), Step("json", body=answer), Step("json", body=done)]
    agent = OpenAIAgent(base_url=server.url + "/v1", model="smol")
    outcome = await run_workflow(db, _toolone_task(agent), hooks=EngineHooks(memory=Remember()))
    assert outcome.status == "finished", outcome.error
    assert [body.get("stream") for _, body in server.requests] == [True, None, None]
    calls = await RunStore(db).list_calls(outcome.run_id)
    assert calls[0].kind == "retry"
    assert calls[0].detail["fallback"] == "stream -> no stream for requests with tools"


class Remember:
    """A memory hook offering one ``remember`` tool and counting its calls."""

    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] = []

    async def block_for(self, *args: Any) -> Any:
        class Block:
            text = ""

        return Block()

    def tools_for(self, *args: Any) -> list[AgentTool]:
        async def remember(arguments: dict[str, Any]) -> dict[str, Any]:
            self.saved.append(arguments)
            return {"saved": True}

        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return [AgentTool("remember", "Save a lesson for later tasks.", schema, remember)]

    def retain_in_background(self, *args: Any) -> None:
        pass


def _toolone_task(agent: Any) -> Workflow:
    wf = Workflow("http", agents={"model": agent}, default_agent="model")
    wf.add_task("a", "Remember: run ruff first.",
                memory=MemoryConfig(bank="team", recall="off", tools=True))  # fmt: skip
    return wf


def _plain(prompt_tokens: int, text: str = "I will remember that.") -> Step:
    return Step("json", body={"model": "smol", "choices": [
        {"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1}})  # fmt: skip


async def test_a_server_that_never_shows_the_model_its_tools_fails_the_attempt(
    db: Database, server: ScriptServer
) -> None:
    # SmolLM2's template never renders tools: the same prompt size with and without them.
    server.script = [_plain(39), _plain(39), _plain(39)]
    agent = OpenAIAgent(base_url=server.url + "/v1", model="smol", stream=False)
    outcome = await run_workflow(db, _toolone_task(agent), hooks=EngineHooks(memory=Remember()))
    assert outcome.status == "failed"
    assert "the server ignored the offered tools" in (outcome.error or "")
    assert "--chat_format chatml-function-calling" in (outcome.error or "")
    # The answer, then the two one-token probes: three requests, no more.
    assert len(server.requests) == 3
    probes = [body for _, body in server.requests[1:]]
    assert ["tools" in p for p in probes] == [True, False]
    assert all(p["max_completion_tokens"] == 1 and p["max_tokens"] == 1 for p in probes)


async def test_a_server_that_shows_the_tools_is_checked_once_and_trusted(
    db: Database, server: ScriptServer
) -> None:
    server.script = [_plain(420), _plain(420), _plain(39), _plain(420)]
    agent = OpenAIAgent(base_url=server.url + "/v1", model="smol", stream=False)
    for _ in range(2):
        outcome = await run_workflow(db, _toolone_task(agent), hooks=EngineHooks(memory=Remember()))
        assert outcome.status == "finished", outcome.error
    assert len(server.requests) == 4  # the second run asks no probe
    # OpenAI's own API renders tools: never probed.
    assert OpenAIAgent(base_url="https://api.openai.com/v1")._tools_checked is True


async def test_a_stream_cancelled_mid_answer_still_records_its_input(
    server: ScriptServer, tmp_path: Path
) -> None:
    events = sse(
        {"type": "message_start", "message": {"model": "claude-haiku-4-5", "content": [],
         "usage": {"input_tokens": 1200, "cache_read_input_tokens": 50_000, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Long answer"}},
        named=True,
    )  # fmt: skip
    server.script = [Step("sse", events=events, hold_after=3)]
    calls: list[ModelCall] = []

    async def on_call(call: ModelCall) -> None:
        calls.append(call)

    agent = AnthropicAgent(base_url=server.url)
    log = tmp_path / "stream.log"
    task = asyncio.create_task(agent.run(
        AgentRequest(prompt="Write a lot.", on_call=on_call, stream_path=log)))
    # Until the agent has read the held part (its text is in the log): cancelling before the
    # client has read message_start leaves nothing to record, which is right but not this case.
    while not (log.exists() and "Long answer" in log.read_text()):
        await asyncio.sleep(0.01)
    task.cancel()  # what a budget or a cancel does to the attempt
    with pytest.raises(asyncio.CancelledError):
        await task
    (call,) = calls
    assert call.usage.input == 1200 and call.usage.cache_read == 50_000
    assert "interrupted" in (call.detail or {})


async def test_a_task_without_timeout_s_gets_the_default(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_spec, "DEFAULT_TIMEOUT_S", 0.5)
    hanging = CommandAgent(command=[sys.executable, "-c", "import time; time.sleep(60)"],
                           preset="text", kill_grace_s=0.2)  # fmt: skip
    outcome = await run_workflow(db, one_task(hanging))
    assert outcome.status == "failed"
    assert "timed out after 0.5 s (the default; set timeout_s)" in (outcome.error or "")
    assert task_spec.TaskSpec("t", lambda ctx: "").effective_timeout_s == 0.5
