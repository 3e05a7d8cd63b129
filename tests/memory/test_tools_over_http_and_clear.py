"""Memory tools through OpenAI-style function calling against a real local HTTP server, and a
person's clear request honoured by the engine at its next dispatch (full hooks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from http_support import serving
from memory_support import RecordingAgent, engine_with_hooks
from pydantic import BaseModel

from engine.agents.agent import AgentRequest, AgentResult
from engine.agents.http.openai import OpenAIAgent
from engine.memory.memory_config import MemoryConfig
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

NS = "workflow:ops"


class Verdict(BaseModel):
    summary: str


class ToolCallingProvider(BaseHTTPRequestHandler):
    """First answer: call ``remember``; once a tool result is in the conversation: answer."""

    bodies: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ToolCallingProvider.bodies.append(body)
        if not any(m.get("role") == "tool" for m in body["messages"]):
            arguments = {"content": "Page the on-call before restarting ingest.",
                         "propose": True, "tags": ["source:reflection"]}
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "remember", "arguments": json.dumps(arguments)}}],
            }
        else:
            message = {"role": "assistant", "content": json.dumps({"summary": "done"})}
        payload = json.dumps({"choices": [{"message": message}], "usage": {
            "prompt_tokens": 500, "completion_tokens": 20}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def provider() -> Iterator[str]:
    ToolCallingProvider.bodies = []
    with serving(ToolCallingProvider) as url:
        yield url


async def test_http_agent_calls_remember_through_function_calling(
    db: Database, provider: str
) -> None:
    await MemoryStore(db).save_note(NS, "Restarting ingest drops the queue backlog.")
    agent = OpenAIAgent(name="api", base_url=provider, api_key="test-key")
    wf = Workflow("http-memory", agents={"api": agent}, default_agent="api")
    wf.add_task("triage", "Triage the ingest restart and its queue backlog.", output=Verdict,
                memory=MemoryConfig(bank="ops", tools=True))
    outcome = await engine_with_hooks(db).start(wf)
    assert outcome.status == "finished", outcome.error
    first = ToolCallingProvider.bodies[0]
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert set(offered) == {"remember", "recall"}
    assert offered["remember"]["properties"]["bank"]["enum"] == ["ops"]
    assert first["messages"][0]["content"].startswith("Background recalled from memory")
    tool_reply = json.loads(ToolCallingProvider.bodies[1]["messages"][-1]["content"])
    assert tool_reply["ok"] and tool_reply["status"] == "pending"
    note = await MemoryStore(db).get_note(tool_reply["note_id"])
    assert note is not None and note.namespace == NS and note.status == "pending"
    assert (note.run_id, note.node_id) == (outcome.run_id, "triage")
    assert "source:reflection" in note.tags


class ClearingAgent(RecordingAgent):
    """Asks for a clear of its own run while the first task runs (as a person would)."""

    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db

    async def run(self, request: AgentRequest) -> AgentResult:
        if request.node_id == "a" and not self.prompts:
            await RunStore(self.db).request_clear(request.run_id, "residue from step a")
        return await super().run(request)


async def test_a_clear_request_hands_off_at_the_next_dispatch(db: Database) -> None:
    agent = ClearingAgent(db)
    wf = Workflow("clearable", agents={"rec": agent}, default_agent="rec")
    seen: list[Any] = []

    def second(ctx: Any) -> str:
        seen.append(ctx.continuation)
        return "second step"

    wf.add_task("a", "first step", output=Verdict)
    wf.add_task("b", second, output=Verdict, depends_on=["a"])
    engine = engine_with_hooks(db)
    first = await engine.start(wf)
    assert first.status == "handed-off" and first.next_run_id
    handoff = (await RunStore(db).list_handoffs(from_run_id=first.run_id))[0]
    assert handoff.trigger == "person" and handoff.reason == "residue from step a"
    assert handoff.carried_state["generation"] == 1
    final = await engine.run_chain(wf, first)
    assert final.status == "finished" and final.run_id == first.next_run_id
    assert seen and seen[-1]["generation"] == 1  # the successor's prompts read ctx.continuation
