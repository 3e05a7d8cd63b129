"""OpenAI-compatible and Anthropic agents against a real local HTTP server: token lanes,
native structured output, tool calls, and HTTP errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from engine_test_support import run_workflow
from pydantic import BaseModel

from engine.agents.http import AnthropicAgent, OpenAIAgent
from engine.agents.tools import AgentTool
from engine.hooks import EngineHooks
from engine.workflow import Workflow
from store.database import Database
from store.run_records import TokenUsage
from store.runs import RunStore


class Verdict(BaseModel):
    ok: bool
    reason: str


class FakeProvider(BaseHTTPRequestHandler):
    """Plays OpenAI and Anthropic: the first request asks for the ``remember`` tool when it is
    offered, the next answers; requests are kept for the test to inspect."""

    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    fail_with: int | None = None

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeProvider.requests.append((self.path, body, dict(self.headers)))
        if FakeProvider.fail_with:
            self._send(FakeProvider.fail_with, {"error": {"message": "slow down"}})
            return
        if self.path == "/v1/chat/completions":
            self._send(200, self._openai(body))
        elif self.path == "/v1/messages":
            self._send(200, self._anthropic(body))
        else:
            self._send(404, {"error": "no such path"})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _openai(body: dict[str, Any]) -> dict[str, Any]:
        usage = {
            "prompt_tokens": 1200,
            "completion_tokens": 90,
            "prompt_tokens_details": {"cached_tokens": 1000},
            "completion_tokens_details": {"reasoning_tokens": 40},
        }
        tool_done = any(m.get("role") == "tool" for m in body["messages"])
        if body.get("tools") and not tool_done:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "remember", "arguments": '{"text": "use pytest -x"}'},
                    }
                ],
            }
        else:
            message = {"role": "assistant", "content": '{"ok": true, "reason": "openai"}'}
        return {"model": "local-model", "choices": [{"message": message}], "usage": usage}

    @staticmethod
    def _anthropic(body: dict[str, Any]) -> dict[str, Any]:
        usage = {
            "input_tokens": 30,
            "cache_read_input_tokens": 52_000,
            "cache_creation_input_tokens": 700,
            "output_tokens": 55,
        }
        tool_done = any(
            isinstance(m["content"], list)
            and any(c.get("type") == "tool_result" for c in m["content"])
            for m in body["messages"]
        )
        names = [t["name"] for t in body.get("tools", [])]
        if "remember" in names and not tool_done:
            content = [
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "remember",
                    "input": {"text": "cache keys include the prompt"},
                }
            ]
        else:
            content = [
                {
                    "type": "tool_use",
                    "id": "tu_2",
                    "name": "final_output",
                    "input": {"ok": True, "reason": "anthropic"},
                }
            ]
        return {"model": "claude-test", "content": content, "usage": usage}


@pytest.fixture
def provider() -> Iterator[str]:
    FakeProvider.requests = []
    FakeProvider.fail_with = None
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class RememberHook:
    """A minimal memory hook offering a real ``remember`` tool."""

    def __init__(self) -> None:
        self.remembered: list[str] = []

    async def block_for(self, *args: Any) -> Any:
        class Block:
            text = "[memory] advisory context"

        return Block()

    def tools_for(self, *args: Any) -> list[AgentTool]:
        async def remember(arguments: dict[str, Any]) -> dict[str, Any]:
            self.remembered.append(arguments["text"])
            return {"saved": True}

        schema = {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        return [AgentTool("remember", "Save a learning.", schema, remember)]

    def retain_in_background(self, *args: Any) -> None:
        pass


def _wf(agent: Any) -> Workflow:
    from engine.memory.config import MemoryConfig

    wf = Workflow("http", agents={"model": agent}, default_agent="model")
    wf.add_task(
        "judge", "Is the change safe?", output=Verdict, memory=MemoryConfig(bank="team", tools=True)
    )
    return wf


async def test_openai_lanes_native_schema_and_tool_round(db: Database, provider: str) -> None:
    hook = RememberHook()
    agent = OpenAIAgent(base_url=provider + "/v1", model="local-model", api_key="k")
    outcome = await run_workflow(db, _wf(agent), hooks=EngineHooks(memory=hook))
    assert outcome.status == "finished", outcome.error
    assert hook.remembered == ["use pytest -x"]
    first = FakeProvider.requests[0][1]
    assert first["response_format"]["json_schema"]["schema"]["title"] == "Verdict"
    assert "REQUIRED OUTPUT" not in first["messages"][0]["content"]  # native: no JSON prompt
    assert first["messages"][0]["content"].startswith("[memory] advisory context")
    assert FakeProvider.requests[0][2]["Authorization"] == "Bearer k"
    calls = await RunStore(db).list_calls(outcome.run_id)
    lane = TokenUsage(input=200, cache_read=1000, output=50, reasoning=40)
    assert [c.tokens for c in calls] == [lane, lane]
    assert (await RunStore(db).get_node(outcome.run_id, "judge")).output["reason"] == "openai"


async def test_anthropic_forced_final_tool_and_cache_lanes(db: Database, provider: str) -> None:
    hook = RememberHook()
    agent = AnthropicAgent(base_url=provider, model="claude-test", api_key="k")
    outcome = await run_workflow(db, _wf(agent), hooks=EngineHooks(memory=hook))
    assert outcome.status == "finished", outcome.error
    assert hook.remembered == ["cache keys include the prompt"]
    path, body, headers = FakeProvider.requests[0]
    assert path == "/v1/messages" and headers["x-api-key"] == "k"
    assert body["tool_choice"] == {"type": "any"}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    calls = await RunStore(db).list_calls(outcome.run_id)
    assert [c.bucket for c in calls] == ["50k–100k", "50k–100k"]
    assert calls[0].tokens == TokenUsage(input=30, cache_read=52_000, cache_write=700, output=55)
    assert (await RunStore(db).get_node(outcome.run_id, "judge")).output["reason"] == "anthropic"


async def test_http_errors_fail_the_attempt_clearly(db: Database, provider: str) -> None:
    FakeProvider.fail_with = 429
    agent = OpenAIAgent(base_url=provider + "/v1", api_key="k")
    wf = Workflow("err", agents={"model": agent}, default_agent="model")
    wf.add_task("a", "x", retries=1, backoff=0.01)
    outcome = await run_workflow(db, wf)
    assert outcome.status == "failed"
    assert "returned HTTP 429" in (outcome.error or "")
    assert len(FakeProvider.requests) == 2  # 429 is retryable
