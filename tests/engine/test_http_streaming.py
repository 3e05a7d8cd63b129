"""The HTTP agents streaming from a real local server (tests/sse_server.py) that replays
captured streams (tests/fixtures/agents/http) or speaks the documented event format: text in
the log and the call in the database while the answer is still coming, usage from the final
event, every stop reason as the APIs document it, and llama-cpp-python's habits (no usage in
streams, limits and tools it ignores)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from engine_test_support import run_workflow
from sse_server import ScriptServer, Step, one_task, sse

from engine.agents.http.anthropic import AnthropicAgent
from engine.agents.http.openai import OpenAIAgent
from engine.artifact_files import attempt_dir, stream_log_path
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "http"


def replay(name: str) -> Step:
    return Step("raw", body=(CAPTURES / name).read_bytes())




def _openai(server: ScriptServer, **settings: Any) -> OpenAIAgent:
    return OpenAIAgent(base_url=server.url + "/v1", model="gpt-4o-2024-08-06", **settings)


def _log(db: Database, run_id: str) -> str:
    return stream_log_path(db.workspace.artifacts_dir, run_id, "a", 0, 1).read_text()


async def test_openai_stream_records_the_final_usage_chunk_as_the_call(
    db: Database, server: ScriptServer
) -> None:
    server.script = [replay("openai_stream_text.sse")]
    outcome = await run_workflow(db, one_task(_openai(server, max_completion_tokens=50)))
    assert outcome.status == "finished", outcome.error
    (_, body), = server.requests  # fmt: skip
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 50 and body["max_tokens"] == 50  # a local server
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens == TokenUsage(input=9, output=2) and call.model == "gpt-4o-2024-08-06"
    assert (await RunStore(db).get_node(outcome.run_id, "a")).output == "Foo!"
    assert _log(db, outcome.run_id) == "Foo!"


async def test_the_log_and_the_calls_move_while_the_answer_is_still_coming(
    db: Database, server: ScriptServer
) -> None:
    chunk = {"model": "m", "choices": [{"delta": {"content": "Half of the answer."}}]}
    end = {"model": "m", "choices": [{"delta": {}, "finish_reason": "stop"}]}
    usage = {"model": "m", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 5}}
    # Held after the first piece of text, then after the usage chunk (before [DONE]).
    server.script = [Step("sse", events=sse(chunk, end, usage, "[DONE]"), hold_after=1)]
    task = asyncio.create_task(run_workflow(db, one_task(_openai(server))))
    store = RunStore(db)
    log = await _until(lambda: _text_of(db, store), lambda text: "Half of the answer." in text)
    assert not task.done() and log == "Half of the answer."  # shown before the answer ended
    assert (await store.list_runs())[0].status == "running"
    server.release.set()
    outcome = await task
    assert outcome.status == "finished", outcome.error
    (call,) = await store.list_calls(outcome.run_id)
    assert call.tokens == TokenUsage(input=30, output=5)


async def _text_of(db: Database, store: RunStore) -> str:
    runs = await store.list_runs()
    if not runs:
        return ""
    path = stream_log_path(db.workspace.artifacts_dir, runs[0].run_id, "a", 0, 1)
    return path.read_text() if path.exists() else ""


async def _until(read: Any, ok: Any, seconds: float = 30) -> Any:
    """Poll ``read`` until ``ok`` holds (a bounded wait on a condition, not a sleep)."""
    deadline = time.monotonic() + seconds
    while True:
        value = await read()
        if ok(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.02)


async def test_a_streamed_tool_call_runs_the_tool_and_the_conversation_goes_on(
    db: Database, server: ScriptServer
) -> None:
    from engine.agents.agent_tool import AgentTool

    seen: list[dict[str, Any]] = []

    async def get_weather(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"forecast": "sunny"}

    schema = {"type": "object", "properties": {}}
    tool = AgentTool("get_weather", "The weather.", schema, get_weather)
    agent = _openai(server)
    server.script = [replay("openai_stream_tool_call.sse"), replay("openai_stream_text.sse")]

    class Tools:
        async def block_for(self, *args: Any) -> Any:
            class Block:
                text = ""

            return Block()

        def tools_for(self, *args: Any) -> list[AgentTool]:
            return [tool]

        def retain_in_background(self, *args: Any) -> None:
            pass

    from engine.hooks import EngineHooks
    from engine.memory.memory_config import MemoryConfig

    wf = one_task(agent, memory=MemoryConfig(bank="team", recall="off", tools=True))
    outcome = await run_workflow(db, wf, hooks=EngineHooks(memory=Tools()))
    assert outcome.status == "finished", outcome.error
    assert seen == [{"city": "New York City"}]
    second = server.requests[1][1]["messages"]
    assert second[1]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"city":"New York City"}',
    }  # fmt: skip
    assert second[2] == {"role": "tool", "tool_call_id": "call_4XzlGBLtUe9dy3GVNV4jhq7h",
                         "content": '{"forecast": "sunny"}'}  # fmt: skip
    calls = await RunStore(db).list_calls(outcome.run_id)
    assert [c.tokens.total for c in calls] == [60, 11]


@pytest.mark.parametrize(
    ("capture", "said"),
    [
        ("openai_stream_length.sse", "cut off at the token limit (finish_reason 'length'"),
        ("openai_stream_refusal.sse", "the model refused: I'm sorry, I can't assist"),
    ],
)
async def test_openai_streamed_truncation_and_refusal_fail(
    db: Database, server: ScriptServer, capture: str, said: str
) -> None:
    server.script = [replay(capture)]
    outcome = await run_workflow(db, one_task(_openai(server), retries=2))
    assert outcome.status == "failed" and said in (outcome.error or "")
    assert len(server.requests) == 1  # not retried
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens.total > 0  # the spent tokens are recorded all the same


async def test_llama_cpp_stream_without_usage_is_unknown_said_and_not_repeated(
    db: Database, server: ScriptServer
) -> None:
    # The captured answer stops at max_tokens 6 (finish_reason "length"): a cut-off answer.
    server.script = [
        replay("llamacpp_0.3.36_stream_include_usage.sse"),
        Step("json", body={"model": "smol", "usage": {"prompt_tokens": 39, "completion_tokens": 6},
                           "choices": [{"message": {"content": "Hello!"},
                                        "finish_reason": "stop"}]}),
    ]  # fmt: skip
    agent = OpenAIAgent(base_url=server.url + "/v1", model="smol", max_tokens=6)
    outcome = await run_workflow(db, one_task(agent))
    assert outcome.status == "failed" and "finish_reason 'length', limit 6" in (outcome.error or "")
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens == TokenUsage() and call.cost_usd is None  # unknown, never $0
    assert call.detail["usage"] == "not reported"
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "a")
    assert "sent no usage in its stream" in attempt.details["warnings"][0]
    assert _log(db, outcome.run_id).startswith("Hello there! I'm here")
    # The same agent asks without streaming from then on, and its calls are counted.
    outcome = await run_workflow(db, one_task(agent))
    assert outcome.status == "finished", outcome.error
    assert server.requests[1][1].get("stream") is None
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens == TokenUsage(input=39, output=6)


async def test_a_limit_the_server_ignores_is_a_warning(db: Database, server: ScriptServer) -> None:
    answer = {"model": "smol", "usage": {"prompt_tokens": 39, "completion_tokens": 2002},
              "choices": [{"message": {"content": "1, 2"}, "finish_reason": "stop"}]}  # fmt: skip
    server.script = [Step("json", body=answer)]
    agent = OpenAIAgent(base_url=server.url + "/v1", model="smol", max_completion_tokens=16)
    outcome = await run_workflow(db, one_task(agent))
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "a")
    assert attempt.details["warnings"] == [
        "openai: the server wrote 2,002 output tokens although the limit is 16: it does not "
        "apply max_completion_tokens or max_tokens"
    ]


async def test_a_server_refusing_the_second_limit_name_gets_one(
    db: Database, server: ScriptServer
) -> None:
    refusal = {"error": {"message": "Unrecognized request argument supplied: max_tokens",
                         "type": "invalid_request_error"}}  # fmt: skip
    server.script = [Step("json", 400, refusal), replay("openai_stream_text.sse")]
    outcome = await run_workflow(db, one_task(_openai(server, max_completion_tokens=50)))
    assert outcome.status == "finished", outcome.error
    assert "max_tokens" in server.requests[0][1] and "max_tokens" not in server.requests[1][1]
    fallback = [c for c in await RunStore(db).list_calls(outcome.run_id) if c.kind == "retry"]
    assert fallback[0].detail["fallback"].endswith("-> max_completion_tokens")


def _anthropic(server: ScriptServer, **settings: Any) -> AnthropicAgent:
    return AnthropicAgent(base_url=server.url, model="claude-haiku-4-5", **settings)


async def test_anthropic_stream_basic_and_refusal_with_its_details(
    db: Database, server: ScriptServer
) -> None:
    server.script = [replay("anthropic_sse_basic.sse")]
    outcome = await run_workflow(db, one_task(_anthropic(server)))
    assert outcome.status == "finished", outcome.error
    assert server.requests[0][1]["stream"] is True
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens == TokenUsage(input=11, output=6)
    assert _log(db, outcome.run_id) == "Hello there!"
    server.script = [replay("anthropic_sse_refusal.sse")]
    outcome = await run_workflow(db, one_task(_anthropic(server), retries=1))
    assert outcome.status == "failed"
    assert "the model refused (stop_reason 'refusal': cyber: This request was refused due to " \
           "policy.)" in (outcome.error or "")  # fmt: skip


def _message(*blocks: dict[str, Any], stop: str, usage: dict[str, int]) -> list[str]:
    """A Messages stream in the documented event order with the given blocks."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
         "model": "claude-haiku-4-5", "content": [], "stop_reason": None,
         "usage": {"input_tokens": usage["input"], "output_tokens": 1}}},
    ]  # fmt: skip
    for index, block in enumerate(blocks):
        start = {**block, "text": ""} if block["type"] == "text" else block
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if block["type"] == "text":
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": block["text"]}})  # fmt: skip
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop},
                   "usage": {"output_tokens": usage["output"]}})  # fmt: skip
    events.append({"type": "message_stop"})
    return sse(*events, named=True)


async def test_pause_turn_sends_the_content_back_and_continues_the_turn(
    db: Database, server: ScriptServer
) -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
              "input": {"query": "retry-after header"}}  # fmt: skip
    server.script = [
        Step("sse", events=_message({"type": "text", "text": "Searching. "}, search,
                                    stop="pause_turn", usage={"input": 50, "output": 20})),
        Step("sse", events=_message({"type": "text", "text": "Done: use retry-after-ms."},
                                    stop="end_turn", usage={"input": 80, "output": 9})),
    ]  # fmt: skip
    outcome = await run_workflow(db, one_task(_anthropic(server)))
    assert outcome.status == "finished", outcome.error
    again = server.requests[1][1]["messages"]
    # The paused content goes back as the assistant's turn, with no new user message.
    assert [m["role"] for m in again] == ["user", "assistant"]
    assert again[1]["content"][1] == search
    node = await RunStore(db).get_node(outcome.run_id, "a")
    assert node.output == "Searching. Done: use retry-after-ms."
    assert len(await RunStore(db).list_calls(outcome.run_id)) == 2


async def test_pause_turn_continues_at_most_the_configured_times(
    db: Database, server: ScriptServer
) -> None:
    usage = {"input": 5, "output": 1}
    paused = _message({"type": "text", "text": "."}, stop="pause_turn", usage=usage)
    server.script = [Step("sse", events=paused) for _ in range(4)]
    outcome = await run_workflow(db, one_task(_anthropic(server, max_pause_continues=2)))
    assert outcome.status == "failed" and "paused 3 times" in (outcome.error or "")
    assert len(server.requests) == 3


async def test_an_answer_that_filled_the_context_window_fails_as_cut_off(
    db: Database, server: ScriptServer
) -> None:
    server.script = [Step("sse", events=_message(
        {"type": "text", "text": "The first half"}, stop="model_context_window_exceeded",
        usage={"input": 199_000, "output": 1000}))]  # fmt: skip
    outcome = await run_workflow(db, one_task(_anthropic(server), retries=2))
    assert outcome.status == "failed"
    assert "it filled the model's context window" in (outcome.error or "")
    kept = attempt_dir(db.workspace.artifacts_dir, outcome.run_id, "a", 0, 1) / "partial-output.txt"
    assert kept.read_text() == "The first half" and len(server.requests) == 1


async def test_an_error_event_mid_stream_is_retried_and_its_input_recorded(
    db: Database, server: ScriptServer
) -> None:
    usage = {"input": 40, "output": 3}
    begun = _message({"type": "text", "text": "Hel"}, stop="end_turn", usage=usage)
    overloaded = 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", ' \
                 '"message": "Overloaded"}}\n\n'  # fmt: skip
    server.script = [
        Step("sse", events=[*begun[:3], overloaded]),
        replay("anthropic_sse_basic.sse"),
    ]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    outcome = await run_workflow(db, one_task(_anthropic(server, sleep=sleep)))
    assert outcome.status == "finished", outcome.error
    calls = await RunStore(db).list_calls(outcome.run_id)
    assert [(c.kind, c.detail and c.detail.get("status")) for c in calls] == [
        ("model", None), ("retry", 529), ("model", None),
    ]  # fmt: skip
    assert calls[0].tokens.input == 40 and "interrupted" in calls[0].detail
    assert len(slept) == 1
