"""Claude Code and Codex presets through the real engine and a real subprocess: the fake CLI
(fake_agent_cli.py) checks the flags Tether built and replays captured output
(tests/fixtures/agents, sources in its README) with the captured exit status and stderr."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from cli_agent_support import (
    CLAUDE_SETTINGS,
    CLAUDE_SETTINGS_FLAGS,
    V10,
    capture,
    fake_agent,
    recorded,
    run_one,
)
from pydantic import BaseModel

from engine.agents.cli.command import CommandAgent
from engine.artifact_files import attempt_dir, stream_log_path
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore

SONNET = "claude-sonnet-4-5-20250929"
B_SESSION = "d49d1efb-0239-4aa2-a2b0-f6c86b2320a6"


class Summary(BaseModel):
    title: str
    lines: int


async def test_claude_code_session_records_per_message_calls_models_and_cost(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(
        tmp_path,
        "claude-code",
        {
            "stdout": capture("claude-code/B_vecsum_stream.jsonl"),
            "expect": [*CLAUDE_SETTINGS_FLAGS, ["--append-system-prompt", "be brief"]],
            "forbid": ["--json-schema", "--resume", "--mcp-config"],
            "record": tmp_path / "argv.json",
        },
        extra_args=["--append-system-prompt", "be brief"],
        **CLAUDE_SETTINGS,
    )
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    store = RunStore(db)
    calls = await store.list_calls(outcome.run_id, "work")
    assert [(c.kind, c.model, c.bucket) for c in calls] == [
        ("model", SONNET, "<50k"),
        ("model", SONNET, "<50k"),
        ("reconciliation", "claude-haiku-4-5-20251001", "<50k"),
        ("reconciliation", "claude-opus-4-5-20251101", "<50k"),
    ]
    assert [round(c.cost_usd or 0, 8) for c in calls] == [
        0.03345015,
        0.02185125,
        0.0021204,
        0.0170995,
    ]
    (attempt,) = await store.list_attempts(outcome.run_id, "work")
    assert attempt.tokens == TokenUsage(input=12, cache_read=80746, cache_write=8982, output=932)
    assert attempt.cost.usd == pytest.approx(0.0745213) and attempt.cost.known
    (invocation,) = attempt.details["invocations"]
    assert invocation["session_id"] == B_SESSION
    assert invocation["command"][2:] == recorded(tmp_path / "argv.json")["argv"]
    run = await store.get_run(outcome.run_id)
    assert run.cost.usd == pytest.approx(0.0745213) and run.cost.unpriced_calls == 0
    # Model calls count as calls in the rollups; reconciliation rows add tokens, not calls.
    buckets = await store.usage_by_bucket(outcome.run_id)
    assert buckets["<50k"][0] == 2 and buckets["<50k"][1].total == attempt.tokens.total


def paused_session(
    db: Database, tmp_path: Path, lines: int
) -> tuple[asyncio.Task[Any], Path]:
    """Run capture B through the fake Claude Code, which stops after ``lines`` lines until the
    returned file exists: what the test sees meanwhile arrived while the session ran."""
    go = tmp_path / "go"
    agent = fake_agent(
        tmp_path,
        "claude-code",
        {"stdout": capture("claude-code/B_vecsum_stream.jsonl"), "pause_after": lines,
         "wait_for": go},
    )  # fmt: skip
    return asyncio.create_task(run_one(db, agent)), go


async def test_stream_log_shows_tool_use_while_the_session_runs(
    db: Database, tmp_path: Path
) -> None:
    task, go = paused_session(db, tmp_path, 3)
    deadline = time.monotonic() + 60
    log = None
    while time.monotonic() < deadline and not task.done():
        runs = await RunStore(db).list_runs()
        if runs:
            log = stream_log_path(db.workspace.artifacts_dir, runs[0].run_id, "work", 0, 1)
            if log.exists() and '"tool_use"' in log.read_text():
                break
        await asyncio.sleep(0.02)
    # The CLI is still waiting: what the log shows arrived while the session ran.
    assert not task.done() and log is not None and '"name":"Read"' in log.read_text()
    go.write_text("")
    outcome = await task
    assert outcome.status == "finished", outcome.error
    assert log.read_bytes() == capture("claude-code/B_vecsum_stream.jsonl").read_bytes()


async def test_claude_code_calls_are_recorded_while_the_session_runs(
    db: Database, tmp_path: Path
) -> None:
    # Six lines: the init, the first message's three events and its two tool results.
    task, go = paused_session(db, tmp_path, 6)
    store = RunStore(db)
    deadline = time.monotonic() + 60
    calls: list = []
    while time.monotonic() < deadline and not task.done() and not calls:
        runs = await store.list_runs()
        if runs:
            calls = await store.list_calls(runs[0].run_id, "work")
        await asyncio.sleep(0.02)
    # The CLI is still waiting: the first message's call is already in the database, with its
    # tokens and its table price, for the dashboard to show.
    assert not task.done() and len(calls) == 1
    (first,) = calls
    assert (first.kind, first.model, first.bucket) == ("model", SONNET, "<50k")
    assert first.tokens == TokenUsage(input=1, cache_read=18003, cache_write=6847, output=158)
    assert first.cost_usd == pytest.approx(0.03345015)
    go.write_text("")
    outcome = await task
    assert outcome.status == "finished", outcome.error
    calls = await store.list_calls(outcome.run_id, "work")
    assert [(c.kind, c.model) for c in calls] == [
        ("model", SONNET),
        ("model", SONNET),
        ("reconciliation", "claude-haiku-4-5-20251001"),
        ("reconciliation", "claude-opus-4-5-20251101"),
    ]
    run = await store.get_run(outcome.run_id)
    assert run.cost.usd == pytest.approx(0.0745213) and run.cost.unpriced_calls == 0


async def test_rate_limit_is_retried_and_max_turns_fails_at_once_with_its_tokens(
    db: Database, tmp_path: Path
) -> None:
    limited = fake_agent(
        tmp_path, "claude-code", {"stdout": capture("claude-code/E_429.json"), "exit": 1}
    )
    outcome = await run_one(db, limited, retries=2)
    assert outcome.status == "failed"
    assert "Claude Code failed (error, HTTP 429, exit status 1): API Error" in (outcome.error or "")
    assert len(await RunStore(db).list_attempts(outcome.run_id, "work")) == 3  # transient

    turns = fake_agent(
        tmp_path,
        "claude-code",
        {"stdout": capture("claude-code/F1_max_turns_result_null.json"), "exit": 1},
    )
    outcome = await run_one(db, turns, retries=2)
    assert outcome.status == "failed"
    assert "Reached maximum number of turns (3)" in (outcome.error or "")
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")  # permanent
    assert attempt.tokens.total == 42763 and attempt.cost.usd == pytest.approx(0.24722425)


@pytest.mark.parametrize(
    ("fixture", "said", "tokens"),
    [
        ("G_error_during_execution.json", "error_during_execution", 1_185_266),
        ("K_empty_result.json", "empty result", 13),
    ],
)
async def test_failed_sessions_keep_their_reason_and_spent_tokens(
    db: Database, tmp_path: Path, fixture: str, said: str, tokens: int
) -> None:
    agent = fake_agent(tmp_path, "claude-code", {"stdout": capture(f"claude-code/{fixture}")})
    outcome = await run_one(db, agent)
    assert outcome.status == "failed" and said in (outcome.error or "")
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert attempt.state == "failed" and attempt.tokens.total == tokens


async def test_a_failed_exit_after_a_successful_result_does_not_quote_the_answer(
    db: Database, tmp_path: Path
) -> None:
    """Capture V (a whole session whose result is a success) ending with exit status 1 and a
    line on stderr, as a CLI killed or crashing after its result does: the node fails, and
    its reason was the model's answer ("Claude Code failed (error, exit status 1): Actually,
    on reflection, ...") as if the answer were the error. It now says the result reported
    success and quotes stderr."""
    agent = fake_agent(tmp_path, "claude-code", {
        "stdout": capture(V10), "exit": 1, "stderr": "Error: EPIPE: broken pipe, write\n"})
    outcome = await run_one(db, agent)
    assert outcome.status == "failed"
    assert "Claude Code failed (error, exit status 1): its result reported success; Error: " \
        "EPIPE: broken pipe, write" in (outcome.error or ""), outcome.error
    assert "on reflection" not in (outcome.error or "")
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert attempt.tokens.total == 151_827  # what the session spent is kept


async def test_verbose_json_array_output_is_read(db: Database, tmp_path: Path) -> None:
    agent = fake_agent(
        tmp_path, "claude-code", {"stdout": capture("claude-code/C_gleam_basic_query_array.json")}
    )
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    assert (await RunStore(db).get_node(outcome.run_id, "work")).output == "4"


async def test_structured_output_passes_the_schema_and_reads_structured_output(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(
        tmp_path,
        "claude-code",
        {
            "stdout": capture("claude-code/H_structured_output.json"),
            "record": tmp_path / "argv.json",
        },
    )
    outcome = await run_one(db, agent, output=Summary)
    assert outcome.status == "finished", outcome.error
    assert (await RunStore(db).get_node(outcome.run_id, "work")).output == {
        "title": "Files listed",
        "lines": 3,
    }
    seen = recorded(tmp_path / "argv.json")
    schema = json.loads(seen["argv"][seen["argv"].index("--json-schema") + 1])
    assert schema == Summary.model_json_schema()
    assert "REQUIRED OUTPUT" not in seen["stdin"]  # native: no JSON instructions in the prompt


async def test_repair_turn_resumes_the_same_session(db: Database, tmp_path: Path) -> None:
    agent = fake_agent(
        tmp_path,
        "claude-code",
        {
            "counter": tmp_path / "n",
            "record": tmp_path / "argv.json",
            "sequence": [
                {"stdout": capture("claude-code/C_gleam_basic_query_stream.jsonl")},
                {
                    "stdout": capture("claude-code/H_structured_output.json"),
                    "expect": [["--resume=1d1e46f9-35c7-4834-b529-846d5bb82288"]],
                },
            ],
        },
    )
    outcome = await run_one(db, agent, output=Summary)
    assert outcome.status == "finished", outcome.error
    first, second = recorded(tmp_path / "argv.json.1"), recorded(tmp_path / "argv.json.2")
    assert not any(a.startswith("--resume") for a in first["argv"])
    assert "Your previous answer could not be used" in second["stdin"]
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert [i["session_id"] for i in attempt.details["invocations"]] == [
        "1d1e46f9-35c7-4834-b529-846d5bb82288",
        "40e7b02d-c0f9-4876-9010-f514d4eb0603",
    ]


async def test_a_line_over_64_kib_does_not_fail_the_node(db: Database, tmp_path: Path) -> None:
    # Derived from capture C: the same session whose answer is 300 000 characters long.
    answer = "x" * 300_000
    lines = capture("claude-code/C_gleam_basic_query_stream.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    events[1]["message"]["content"][0]["text"] = answer
    events[2]["result"] = answer
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps(e) + "\n" for e in events))
    outcome = await run_one(db, fake_agent(tmp_path, "claude-code", {"stdout": big}))
    assert outcome.status == "finished", outcome.error
    assert (await RunStore(db).get_node(outcome.run_id, "work")).output == answer


async def test_stdout_is_streamed_to_the_log_with_bounded_memory(
    db: Database, tmp_path: Path
) -> None:
    # 100 000 noise lines (about 12 MB) before the json preset's answer line.
    noisy = tmp_path / "noisy.txt"
    noise = "progress: reading files and thinking about the change, step %06d of many\n"
    with noisy.open("w") as handle:
        for n in range(100_000):
            handle.write(noise % n)
        handle.write('{"output": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}\n')
    agent = fake_agent(tmp_path, "json", {"stdout": noisy})
    tracemalloc.start()
    try:
        outcome = await run_one(db, agent)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.status == "finished", outcome.error
    size = noisy.stat().st_size
    log = stream_log_path(db.workspace.artifacts_dir, outcome.run_id, "work", 0, 1)
    assert log.stat().st_size == size  # stored once, in the log
    assert peak < size / 4, f"peak {peak:,} bytes for {size:,} bytes of output"
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert attempt.response_text == "done"

    text_agent = fake_agent(tmp_path, "text", {"stdout": noisy}, max_answer_bytes=1_000_000)
    outcome = await run_one(db, text_agent)
    assert outcome.status == "failed"
    assert "printed more than 1,000,000 bytes" in (outcome.error or "")


@pytest.mark.parametrize("value", [-5, 12.5, 1e300])
async def test_bogus_token_counts_fail_the_attempt_once(
    db: Database, tmp_path: Path, value: float
) -> None:
    # Derived from capture A with one count replaced.
    data = json.loads(capture("claude-code/A_gleam_result_success.json").read_text())
    data["modelUsage"]["claude-opus-4-5-20251101"]["outputTokens"] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data) + "\n")
    outcome = await run_one(db, fake_agent(tmp_path, "claude-code", {"stdout": bad}), retries=2)
    assert outcome.status == "failed"
    assert "reported an invalid token count for outputTokens" in (outcome.error or "")
    store = RunStore(db)
    assert len(await store.list_attempts(outcome.run_id, "work")) == 1
    assert await store.list_calls(outcome.run_id) == []


# -- Codex ----------------------------------------------------------------------------------


async def test_codex_flags_reasoning_and_cost(db: Database, tmp_path: Path) -> None:
    agent = fake_agent(
        tmp_path,
        "codex",
        {
            "stdout": capture("codex/X9_reasoning_tokens.jsonl"),
            "expect": [
                ["exec", "--json", "-m", "gpt-5", "--sandbox", "read-only"],
                ["--skip-git-repo-check"],
            ],
            "record": tmp_path / "argv.json",
        },
        model="gpt-5",
        sandbox="read-only",
        skip_git_repo_check=True,
    )
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    assert recorded(tmp_path / "argv.json")["argv"][-1] == "-"
    (call,) = await RunStore(db).list_calls(outcome.run_id)
    assert call.tokens == TokenUsage(input=4277, cache_read=22272, output=438, reasoning=1152)
    # gpt-5 list price: 1.25 fresh, 0.125 cached, 10 output (reasoning billed as output).
    expected = (4277 * 1.25 + 22272 * 0.125 + (438 + 1152) * 10) / 1e6
    assert call.model == "gpt-5" and call.cost_usd == pytest.approx(expected)


async def test_codex_output_schema_file(db: Database, tmp_path: Path) -> None:
    # Derived from capture X3 with a JSON answer.
    lines = capture("codex/X3_0147_ok.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    events[2]["item"]["text"] = '{"title": "ok", "lines": 2}'
    answer = tmp_path / "answer.jsonl"
    answer.write_text("".join(json.dumps(e) + "\n" for e in events))
    agent = fake_agent(tmp_path, "codex", {"stdout": answer, "record": tmp_path / "argv.json"})
    outcome = await run_one(db, agent, output=Summary)
    assert outcome.status == "finished", outcome.error
    argv = recorded(tmp_path / "argv.json")["argv"]
    schema_file = Path(argv[argv.index("--output-schema") + 1])
    folder = attempt_dir(db.workspace.artifacts_dir, outcome.run_id, "work", 0, 1)
    assert schema_file.parent == folder
    assert json.loads(schema_file.read_text()) == {
        **Summary.model_json_schema(),
        "additionalProperties": False,  # strict form: every field is required
    }


async def test_codex_reconnect_inside_a_completed_turn_runs_once(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(
        tmp_path, "codex", {"stdout": capture("codex/X5_reconnect_then_success.jsonl")}
    )
    outcome = await run_one(db, agent, retries=2)
    assert outcome.status == "finished", outcome.error
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert attempt.details["invocations"][0]["reconnects"] == 1


@pytest.mark.parametrize(
    ("fixture", "status", "said"),
    [
        ("X4_0147_bad_model.jsonl", 1, "model is not supported when using Codex"),
        ("X8_rollout_budget_37676.jsonl", 1, "shared rollout token budget exhausted"),
    ],
)
async def test_codex_failures_read_the_events_and_are_permanent(
    db: Database, tmp_path: Path, fixture: str, status: int, said: str
) -> None:
    agent = fake_agent(
        tmp_path,
        "codex",
        {"stdout": capture(f"codex/{fixture}"), "exit": status, "stderr": "Error: exiting\n"},
    )
    outcome = await run_one(db, agent, retries=2)
    assert outcome.status == "failed" and said in (outcome.error or "")
    assert len(await RunStore(db).list_attempts(outcome.run_id, "work")) == 1


async def test_codex_noise_on_stderr_is_kept_aside(db: Database, tmp_path: Path) -> None:
    agent = fake_agent(
        tmp_path,
        "codex",
        {
            "stdout": capture("codex/X7_opendesign_2268.jsonl"),
            "stderr": "2026-05-01T10:00:00Z WARN codex_core: failed to load models cache\n",
        },
    )
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    folder = attempt_dir(db.workspace.artifacts_dir, outcome.run_id, "work", 0, 1)
    assert "failed to load models cache" in (folder / "stderr.log").read_text()
    assert (await RunStore(db).get_node(outcome.run_id, "work")).output == "Hello."


async def test_a_custom_agent_reporting_bogus_usage_fails_only_its_attempt(
    db: Database,
) -> None:
    from engine_test_support import run_workflow

    from engine.agents.agent import AgentRequest, AgentResult, ModelCall
    from engine.workflow.definition import Workflow

    class Bogus:
        name = "bogus"
        native_structured_output = False
        simulated = False

        async def run(self, request: AgentRequest) -> AgentResult:
            await request.on_call(ModelCall(TokenUsage(input=-3, output=2**70)))
            return AgentResult(text="never")

    workflow = Workflow("bogus", agents={"b": Bogus()}, default_agent="b")
    workflow.add_task("work", "Do it.", retries=2, backoff=0.01)
    outcome = await run_workflow(db, workflow)
    assert outcome.status == "failed"
    assert "Agent b reported an invalid token count for input: -3 is negative" in (
        outcome.error or ""
    )
    assert await RunStore(db).list_calls(outcome.run_id) == []


@pytest.mark.parametrize(("preset", "name", "said"), [
    ("claude-code", V10, "Claude Code ended without a result (killed by SIGKILL): no output"),
    ("codex", "codex/X1_agentcmd_stream2.jsonl",
     "Codex failed (killed by SIGKILL): no error event and nothing on stderr"),
])
async def test_an_agent_killed_mid_stream_says_it_was_killed(
    db: Database, tmp_path: Path, preset: str, name: str, said: str
) -> None:
    """A CLI killed by a signal half-way through its stream (the OOM killer, a person's kill
    -9): the reason read "exited with status -9", Python's way of saying a signal, which
    tells a person nothing. It now names the signal; the calls printed before stay."""
    lines = capture(name).read_text().splitlines()
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, sys\nsys.stdin.read()\n"
        f"sys.stdout.write({json.dumps(chr(10).join(lines[: len(lines) // 2]) + chr(10))})\n"
        "sys.stdout.flush()\nos.kill(os.getpid(), signal.SIGKILL)\n")
    agent = CommandAgent(command=[sys.executable, str(script)], preset=preset,
                         env={"CODEX_HOME": str(tmp_path / "codex-home")})
    outcome = await run_one(db, agent)
    assert outcome.status == "failed"
    assert said in (outcome.error or ""), outcome.error
