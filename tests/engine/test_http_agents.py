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

from engine.agents.agent_tool import AgentTool
from engine.agents.http.anthropic import AnthropicAgent
from engine.agents.http.openai import OpenAIAgent
from engine.artifact_files import attempt_dir, stream_log_path
from engine.hooks import EngineHooks
from engine.pricing import Price
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore


class Verdict(BaseModel):
    ok: bool
    reason: str


class FakeProvider(BaseHTTPRequestHandler):
    """Plays OpenAI and Anthropic: the first request asks for the ``remember`` tool when it is
    offered, the next answers; requests are kept for the test to inspect."""

    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    fail_with: int | None = None
    # Answers to give first, in order: (status, JSON body, extra headers).
    script: list[tuple[int, dict[str, Any], dict[str, str]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeProvider.requests.append((self.path, body, dict(self.headers)))
        if FakeProvider.script:
            status, payload, headers = FakeProvider.script.pop(0)
            self._send(status, payload, headers)
            return
        if FakeProvider.fail_with:
            self._send(FakeProvider.fail_with, {"error": {"message": "slow down"}})
            return
        if self.path == "/v1/chat/completions":
            self._send(200, self._openai(body))
        elif self.path == "/v1/messages":
            self._send(200, self._anthropic(body))
        else:
            self._send(404, {"error": "no such path"})

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
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
        return {
            "model": body.get("model"),
            "choices": [{"message": message, "finish_reason": "stop"}],
            "usage": usage,
        }

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
    FakeProvider.script = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
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
    from engine.memory.memory_config import MemoryConfig

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


class Sleeps:
    """The agent's injected sleep: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _plain_wf(agent: Any, tasks: tuple[str, ...] = ("a",), **task: Any) -> Workflow:
    wf = Workflow("http", agents={"model": agent}, default_agent="model", concurrency=1)
    for name in tasks:
        wf.add_task(name, "Is the change safe?", **{"backoff": 0.01, **task})
    return wf


def _error(message: str, kind: str = "error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


async def test_http_errors_fail_the_attempt_clearly(db: Database, provider: str) -> None:
    FakeProvider.fail_with = 429
    sleeps = Sleeps()
    agent = OpenAIAgent(base_url=provider + "/v1", api_key="k", sleep=sleeps)
    outcome = await run_workflow(db, _plain_wf(agent, retries=1))
    assert outcome.status == "failed"
    assert "returned HTTP 429" in (outcome.error or "") and "after 2 retries" in outcome.error
    assert len(FakeProvider.requests) == 6  # 3 requests per attempt, 2 attempts
    assert len(sleeps.waits) == 4


async def test_retries_honour_retry_after_and_show_in_the_calls(
    db: Database, provider: str
) -> None:
    FakeProvider.script = [
        (429, _error("Rate limit reached", "rate_limit_error"), {"retry-after-ms": "1500"}),
        (503, _error("upstream unavailable"), {}),
    ]
    sleeps = Sleeps()
    agent = OpenAIAgent(base_url=provider + "/v1", model="gpt-4o-mini", sleep=sleeps)
    outcome = await run_workflow(db, _plain_wf(agent))
    assert outcome.status == "finished", outcome.error
    assert sleeps.waits[0] == 1.5 and 0.75 <= sleeps.waits[1] <= 1.0  # header, then backoff
    calls = await RunStore(db).list_calls(outcome.run_id)
    assert [(c.kind, c.detail and c.detail.get("status")) for c in calls] == [
        ("retry", 429),
        ("retry", 503),
        ("model", None),
    ]
    assert calls[0].detail["wait_s"] == 1.5 and calls[0].tokens == TokenUsage()
    assert calls[0].cost_usd == 0.0
    # gpt-4o-mini list price: 0.15 fresh, 0.075 cached, 0.6 output (reasoning as output).
    assert calls[2].cost_usd == pytest.approx((200 * 0.15 + 1000 * 0.075 + 90 * 0.6) / 1e6)
    run = await RunStore(db).get_run(outcome.run_id)
    assert run.cost.known and run.cost.usd == pytest.approx(calls[2].cost_usd)
    log = stream_log_path(db.workspace.artifacts_dir, outcome.run_id, "a", 0, 1).read_text()
    assert "[retry 1/2 in 1.50s] HTTP 429" in log


async def test_anthropic_overload_529_is_retried(db: Database, provider: str) -> None:
    FakeProvider.script = [(529, _error("Overloaded", "overloaded_error"), {})]
    sleeps = Sleeps()
    agent = AnthropicAgent(base_url=provider, model="claude-haiku-4-5", sleep=sleeps)
    outcome = await run_workflow(db, _plain_wf(agent, output=Verdict))
    assert outcome.status == "finished", outcome.error
    assert len(sleeps.waits) == 1 and len(FakeProvider.requests) == 2


@pytest.mark.parametrize(
    ("status", "payload"),
    [
        (429, _error("You exceeded your current quota.", "insufficient_quota", "quota")),
        (400, _error("Unsupported parameter: 'temperature'", "invalid_request_error")),
        (403, _error("Your spend limit has been reached.")),
    ],
)
async def test_quota_spend_limit_and_validation_errors_are_never_retried(
    db: Database, provider: str, status: int, payload: dict[str, Any]
) -> None:
    FakeProvider.script = [(status, payload, {})]
    sleeps = Sleeps()
    agent = OpenAIAgent(base_url=provider + "/v1", sleep=sleeps)
    outcome = await run_workflow(db, _plain_wf(agent, retries=2))
    assert outcome.status == "failed" and f"HTTP {status}" in (outcome.error or "")
    assert len(FakeProvider.requests) == 1 and sleeps.waits == []
    assert len(await RunStore(db).list_attempts(outcome.run_id, "a")) == 1


async def test_total_wait_is_capped(db: Database, provider: str) -> None:
    FakeProvider.fail_with = 503
    sleeps = Sleeps()
    agent = OpenAIAgent(
        base_url=provider + "/v1",
        sleep=sleeps,
        retry={"max_retries": 5, "max_total_wait_s": 2.0},
    )
    FakeProvider.script = [(503, _error("busy"), {"retry-after": "1.5"})] * 6
    outcome = await run_workflow(db, _plain_wf(agent))
    assert outcome.status == "failed"
    assert sleeps.waits == [1.5] and len(FakeProvider.requests) == 2


def _openai_answer(message: dict[str, Any], finish: str) -> dict[str, Any]:
    usage = {"prompt_tokens": 50, "completion_tokens": 16}
    return {"model": "m", "choices": [{"message": message, "finish_reason": finish}],
            "usage": usage}  # fmt: skip


@pytest.mark.parametrize(
    ("message", "finish", "said", "partial"),
    [
        ({"role": "assistant", "content": '{"ok": tr'}, "length", "cut off at the token limit",
         '{"ok": tr'),
        ({"role": "assistant", "content": None, "refusal": "I can't help with that."}, "stop",
         "the model refused: I can't help with that.", None),
        ({"role": "assistant", "content": "Here is"}, "content_filter", "content filter",
         "Here is"),
    ],
)  # fmt: skip
async def test_openai_truncation_and_refusal_fail_and_keep_the_partial_answer(
    db: Database,
    provider: str,
    message: dict[str, Any],
    finish: str,
    said: str,
    partial: str | None,
) -> None:
    FakeProvider.script = [(200, _openai_answer(message, finish), {})]
    agent = OpenAIAgent(base_url=provider + "/v1", max_completion_tokens=16)
    outcome = await run_workflow(db, _plain_wf(agent, retries=2, output=Verdict))
    assert outcome.status == "failed" and said in (outcome.error or "")
    assert len(FakeProvider.requests) == 1  # a failure of this kind is not retried
    body = FakeProvider.requests[0][1]
    # A local server: both names (llama-cpp-python applies only max_tokens).
    assert body["max_completion_tokens"] == 16 and body["max_tokens"] == 16
    kept = attempt_dir(db.workspace.artifacts_dir, outcome.run_id, "a", 0, 1) / "partial-output.txt"
    assert (kept.read_text() if kept.exists() else None) == partial
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens.total == 66  # the tokens were spent all the same


@pytest.mark.parametrize(
    ("stop", "said"),
    [("max_tokens", "stop_reason 'max_tokens', limit 64"), ("refusal", "the model refused")],
)
async def test_anthropic_truncation_and_refusal_fail(
    db: Database, provider: str, stop: str, said: str
) -> None:
    answer = {
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "The change is"}],
        "stop_reason": stop,
        "usage": {"input_tokens": 20, "output_tokens": 64},
    }
    FakeProvider.script = [(200, answer, {})]
    agent = AnthropicAgent(base_url=provider, max_tokens=64)
    outcome = await run_workflow(db, _plain_wf(agent, retries=2))
    assert outcome.status == "failed" and said in (outcome.error or "")
    kept = attempt_dir(db.workspace.artifacts_dir, outcome.run_id, "a", 0, 1) / "partial-output.txt"
    assert kept.read_text() == "The change is"


def test_max_tokens_and_max_completion_tokens_are_exclusive() -> None:
    with pytest.raises(ValueError, match="not both"):
        OpenAIAgent(max_tokens=10, max_completion_tokens=10)


async def test_json_schema_rejection_falls_back_once_and_is_remembered(
    db: Database, provider: str
) -> None:
    # What llama-cpp-python's server answers to response_format json_schema.
    rejection = {
        "error": {
            "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
            "type": "internal_server_error",
        }
    }
    FakeProvider.script = [(500, rejection, {})]
    sleeps = Sleeps()
    agent = OpenAIAgent(base_url=provider + "/v1", sleep=sleeps)
    outcome = await run_workflow(
        db, _plain_wf(agent, tasks=("a", "b"), output=Verdict), raw_input=None
    )
    assert outcome.status == "finished", outcome.error
    assert sleeps.waits == []  # not retried as a server error
    formats = [body.get("response_format") for _, body, _ in FakeProvider.requests]
    assert formats[0]["type"] == "json_schema" and formats[0]["json_schema"]["strict"] is True
    assert formats[0]["json_schema"]["schema"]["additionalProperties"] is False
    schema = Verdict.model_json_schema()
    assert formats[1:] == [{"type": "json_object", "schema": schema}] * 2
    for _, body, _ in FakeProvider.requests[1:]:
        assert body["messages"][0]["content"].count("REQUIRED OUTPUT") == 1
    calls = await RunStore(db).list_calls(outcome.run_id)
    fallback = [c for c in calls if c.kind == "retry"]
    assert len(fallback) == 1 and fallback[0].detail["fallback"] == "native -> json_object"


async def test_tools_are_offered_with_tool_choice_auto(db: Database, provider: str) -> None:
    hook = RememberHook()
    agent = OpenAIAgent(base_url=provider + "/v1", model="local-model")
    outcome = await run_workflow(db, _wf(agent), hooks=EngineHooks(memory=hook))
    assert outcome.status == "finished", outcome.error
    assert FakeProvider.requests[0][1]["tool_choice"] == "auto"


async def test_unknown_model_cost_is_unknown_and_configured_prices_apply(
    db: Database, provider: str
) -> None:
    agent = OpenAIAgent(base_url=provider + "/v1", model="local-model")
    outcome = await run_workflow(db, _plain_wf(agent))
    run = await RunStore(db).get_run(outcome.run_id)
    assert run.cost.unpriced_calls == 1 and not run.cost.known
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.cost_usd is None

    prices = {"local-model": Price(input=1.0, output=2.0, cache_read=0.5, cache_write=1.0)}
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02, prices=prices))
    outcome = await engine.start(_plain_wf(agent), None)
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.cost_usd == pytest.approx((200 * 1.0 + 1000 * 0.5 + 90 * 2.0) / 1e6)


@pytest.mark.parametrize("count", [-1, 7.5, 1e300])
async def test_bogus_usage_from_a_server_fails_the_attempt_once(
    db: Database, provider: str, count: float
) -> None:
    answer = _openai_answer({"role": "assistant", "content": "fine"}, "stop")
    answer["usage"]["prompt_tokens"] = count
    FakeProvider.script = [(200, answer, {})]
    agent = OpenAIAgent(base_url=provider + "/v1")
    outcome = await run_workflow(db, _plain_wf(agent, retries=2))
    assert outcome.status == "failed"
    assert "reported an invalid token count for prompt_tokens" in (outcome.error or "")
    assert await RunStore(db).list_calls(outcome.run_id) == []
    assert len(FakeProvider.requests) == 1


async def test_a_model_that_keeps_calling_tools_stops_at_the_bound(
    db: Database, provider: str
) -> None:
    """A server that answers every request with a tool call, even the last one sent with
    tool_choice "none" (servers that ignore it exist): after max_tool_rounds the OpenAI agent
    ran the tools once more and sent one request more, whose answer and usage were never
    recorded (seen against a local server: 10 requests, 9 call rows at the default 8 rounds).
    Now it stops at the answer to the last request: every request is a call row."""
    calling = {
        "model": "local-model",
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "remember", "arguments": '{"text": "again"}'}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5},
    }
    FakeProvider.script = [(200, calling, {})] * 10
    hook = RememberHook()
    agent = OpenAIAgent(base_url=provider + "/v1", model="local-model", max_tool_rounds=2)
    outcome = await run_workflow(db, _wf(agent), hooks=EngineHooks(memory=hook))
    assert outcome.status == "failed"
    assert "still calling tools after 2 rounds" in (outcome.error or "")
    assert [body.get("tool_choice") for _, body, _ in FakeProvider.requests] == [
        "auto", "auto", "none"]
    assert len(await RunStore(db).list_calls(outcome.run_id)) == 3
    assert hook.remembered == ["again", "again"]
