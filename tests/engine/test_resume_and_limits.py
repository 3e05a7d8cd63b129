"""Retries that resume the session, limits that are not retried, through the real engine and a
real subprocess (tests/fake_agent_cli.py checks the arguments it was given and replays
captured output from tests/fixtures/agents), and an HTTP agent against a real local server.
Each test counts the agent's invocations: nothing here may be paid for twice."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from cli_agent_support import (
    V10_SESSION,
    api_500_after_ten_messages,
    capture,
    invocations,
    run_one,
    sequenced,
)
from http_support import send_json, serving

from engine.agents.http.openai import OpenAIAgent
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.clock import ManualClock
from store.db.seam import Database
from store.runs.run_store import RunStore

C_SESSION = "1d1e46f9-35c7-4834-b529-846d5bb82288"
N5_SESSION = "785fbe16-057e-4eeb-bcba-8b89169e67aa"


async def test_a_transient_failure_resumes_the_session_and_pays_only_the_new_turns(
    db: Database, tmp_path: Path
) -> None:
    agent = sequenced(tmp_path, "claude-code", [
        {"stdout": api_500_after_ten_messages(tmp_path), "exit": 1},
        {"stdout": capture("claude-code/C_gleam_basic_query_stream.jsonl"),
         "expect": [[f"--resume={V10_SESSION}"]]},
    ])
    outcome = await run_one(db, agent, retries=2)
    assert outcome.status == "finished", outcome.error
    first, second = invocations(tmp_path)
    assert not any(a.startswith("--resume") for a in first["argv"])
    assert second["stdin"].startswith("Your previous turn in this session stopped with an error")
    assert "API Error: 500" in second["stdin"]
    store = RunStore(db)
    failed, resumed = await store.list_attempts(outcome.run_id, "work")
    assert failed.state == "failed" and "API Error: 500" in (failed.error or "")
    assert resumed.details["resumed_session"] == V10_SESSION
    assert resumed.details["continues_attempt"] == 1
    assert resumed.details["invocations"][0]["resumed_session"] == V10_SESSION
    # Each invocation's own cost: $0.3594 for the failed one, $0.1355 for the resumed turns;
    # not a second (or third) $0.36 for the whole session again.
    assert failed.cost.usd == pytest.approx(0.35941625)
    assert resumed.cost.usd == pytest.approx(0.1354875)
    run = await store.get_run(outcome.run_id)
    assert run.cost.usd == pytest.approx(0.35941625 + 0.1354875)


async def test_codex_resumes_its_thread_with_the_flags_exec_resume_takes(
    db: Database, tmp_path: Path
) -> None:
    thread = "01a0009e-f7b4-7622-9f79-bbf2ebb90bb1"
    dropped = tmp_path / "dropped.jsonl"
    dropped.write_text(
        json.dumps({"type": "thread.started", "thread_id": thread}) + "\n"
        + json.dumps({"type": "turn.started"}) + "\n"
        + json.dumps({"type": "error", "message": "stream disconnected before completion"})
        + "\n"
        + json.dumps({"type": "turn.failed",
                      "error": {"message": "stream disconnected before completion"}}) + "\n"
    )
    agent = sequenced(tmp_path, "codex", [
        {"stdout": dropped, "exit": 1, "expect": [["--sandbox", "workspace-write"]]},
        {"stdout": capture("codex/X3_0147_ok.jsonl"),
         "expect": [["exec", "resume", "--json"], ["-c", 'sandbox_mode="workspace-write"'],
                    [thread, "-"]],
         "forbid": ["--sandbox"]},
    ], sandbox="workspace-write")
    outcome = await run_one(db, agent, retries=1)
    assert outcome.status == "finished", outcome.error
    assert len(invocations(tmp_path)) == 2
    _, resumed = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert resumed.details["resumed_session"] == thread


async def test_a_session_that_cannot_be_resumed_starts_fresh_in_the_same_attempt(
    db: Database, tmp_path: Path
) -> None:
    missing = tmp_path / "empty.jsonl"
    missing.write_text("")
    agent = sequenced(tmp_path, "claude-code", [
        {"stdout": api_500_after_ten_messages(tmp_path), "exit": 1},
        {"stdout": missing, "exit": 1, "expect": [[f"--resume={V10_SESSION}"]],
         # anthropics/claude-code#62851
         "stderr": f"No conversation found with session ID: {V10_SESSION}\n"},
        {"stdout": capture("claude-code/C_gleam_basic_query_stream.jsonl"),
         "forbid": ["--resume"]},
    ])
    outcome = await run_one(db, agent, retries=1)
    assert outcome.status == "finished", outcome.error
    runs = invocations(tmp_path)
    assert len(runs) == 3
    assert runs[2]["stdin"] == runs[0]["stdin"]  # the fresh session gets the whole prompt
    attempts = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert len(attempts) == 2
    assert "could not be resumed" in attempts[1].details["notes"][0]


@pytest.mark.parametrize(
    ("stdout", "said"),
    [
        ("claude-code/N5_session_limit_295_turns.jsonl", "resets at 2026-09-25 06:40 UTC"),
        ("claude-code/N10_weekly_limit.json", "resets at 2026-09-21 22:00 UTC"),
        ("claude-code/N6_prompt_too_long_400.json", "Prompt is too long"),
    ],
)
async def test_limits_and_permanent_failures_run_once(
    db: Database, tmp_path: Path, stdout: str, said: str
) -> None:
    agent = sequenced(tmp_path, "claude-code", [{"stdout": capture(stdout), "exit": 1}])
    outcome = await run_one(db, agent, retries=2)
    assert outcome.status == "failed"
    assert said in (outcome.error or "")
    assert len(invocations(tmp_path)) == 1
    if "limit" in stdout:
        assert "not retried" in (outcome.error or "")


async def test_usage_credits_for_long_context_and_a_usage_error_run_once(
    db: Database, tmp_path: Path
) -> None:
    credits = tmp_path / "credits.json"
    credits.write_text(json.dumps({  # anthropics/claude-code#64117, as a result line
        "type": "result", "subtype": "success", "is_error": True, "api_error_status": 429,
        "terminal_reason": "api_error", "session_id": "s-credits",
        "result": "API Error: Usage credits required for 1M context · run /usage-credits to "
                  "turn them on, or /model to switch to standard context"}) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for name, spec in {
        "credits": {"stdout": credits, "exit": 1},
        "usage": {"stdout": empty, "exit": 1,
                  "stderr": "error: unknown option '--verbosee'\n"},
    }.items():
        agent = sequenced(tmp_path, "claude-code", [spec], name=name)
        outcome = await run_one(db, agent, retries=2)
        assert outcome.status == "failed", name
        assert len(invocations(tmp_path, name)) == 1, name


async def test_a_second_result_after_the_success_does_not_fail_the_node(
    db: Database, tmp_path: Path
) -> None:
    agent = sequenced(tmp_path, "claude-code", [
        {"stdout": capture("claude-code/S_second_result_after_success_16768.jsonl"), "exit": 1},
    ])
    outcome = await run_one(db, agent, retries=2)
    assert outcome.status == "finished", outcome.error
    assert len(invocations(tmp_path)) == 1
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    notes = attempt.details["invocations"][0]["notes"]
    assert "only prompt commands are supported in streaming mode" in notes[0]


async def test_a_limit_that_has_reset_is_retried_in_its_session_without_using_a_retry(
    db: Database, tmp_path: Path, clock: ManualClock
) -> None:
    # N5 with its rate_limit_event's resetsAt moved to the engine's "now": the window is over.
    lines = capture("claude-code/N5_session_limit_295_turns.jsonl").read_text().splitlines()
    event = json.loads(lines[0])
    event["rate_limit_info"]["resetsAt"] = clock.now_ms() // 1000
    shaped = tmp_path / "n5-reset.jsonl"
    shaped.write_text("\n".join([json.dumps(event), *lines[1:]]) + "\n")
    agent = sequenced(tmp_path, "claude-code", [
        {"stdout": shaped, "exit": 1},
        {"stdout": capture("claude-code/C_gleam_basic_query_stream.jsonl"),
         "expect": [[f"--resume={N5_SESSION}"]]},
    ])
    outcome = await run_one(db, agent, retries=0)
    assert outcome.status == "finished", outcome.error
    assert len(invocations(tmp_path)) == 2


# -- HTTP -----------------------------------------------------------------------------------


class LimitServer(BaseHTTPRequestHandler):
    """Answers every request with Codex's usage limit (HTTP 429, earendil-works/pi#4172)."""

    hits: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        LimitServer.hits.append(self.path)
        send_json(self, 429, {"error": {"type": "usage_limit_reached",
                                        "message": "The usage limit has been reached",
                                        "resets_in_seconds": 467439}})


async def test_an_http_usage_limit_is_asked_once_and_says_when_it_resets(db: Database) -> None:
    LimitServer.hits = []
    with serving(LimitServer) as url:
        outcome = await _one_http_task(db, url)
    assert outcome.status == "failed"
    assert LimitServer.hits == ["/v1/chat/completions"]
    assert "not retried: resets at 2026-01-06 09:50 UTC" in (outcome.error or "")


async def _one_http_task(db: Database, url: str) -> Any:
    agent = OpenAIAgent(base_url=url, model="gpt-5.1-codex", api_key="k")
    workflow = Workflow("http", agents={"api": agent}, default_agent="api")
    workflow.add_task("work", "Say hi.", retries=2, backoff=0.01)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
    return await engine.start(workflow, None)
