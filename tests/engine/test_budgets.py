"""Budgets in dollars and tokens, per run and per workspace per day, enforced while calls
stream: a real subprocess replaying a long real Claude Code session is stopped within one model
call of crossing a dollar budget; an HTTP request in flight is cancelled; alerts at 50/80/100 %
are recorded once; each test counts the agent's invocations."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from cli_agent_support import capture, invocations, sequenced
from engine_test_support import ScriptedAgent
from http_support import send_json, serving

from engine.agents.http.openai import OpenAIAgent
from engine.budget import (
    BudgetConfig,
    Limit,
    alert_text,
    crossed,
    day_limits,
    exceeded_reason,
    parse_budget,
    percent,
    run_limits,
)
from engine.ceiling import Ceiling
from engine.pricing import Price
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig, parse_config
from engine.run.run_end import RunOutcome
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.clock import ManualClock
from store.db.backends import open_database
from store.db.seam import Database
from store.errors import InvalidInputError
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.budget_log import utc_day
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

LONG = "claude-code/V_20260114130738144.jsonl"  # 148 lines, 42 API messages, $1.28 in all


async def run(db: Database, workflow: Workflow, config: EngineConfig | None = None,
              raw_input: Any = None) -> RunOutcome:
    engine = Engine(db, config=config or EngineConfig(poll_interval_s=0.02), hooks=build_hooks(db))
    return await engine.start(workflow, raw_input)


# -- the pure parts -------------------------------------------------------------------------


def test_budget_settings_are_checked_and_become_limits() -> None:
    config = parse_budget({"run_usd": 5, "day_tokens": 1000, "on_exceeded": "skip-remaining"},
                          "config")
    assert config == BudgetConfig(run_usd=5.0, day_tokens=1000, on_exceeded="skip-remaining")
    limits = run_limits(Ceiling(120_000, "handoff", max_usd=2.0), config)
    assert [(x.unit, x.maximum, x.on_exceeded, x.source) for x in limits] == [
        ("tokens", 120_000, "handoff", "ceiling"),
        ("usd", 2.0, "handoff", "ceiling"),
        ("usd", 5.0, "skip-remaining", "config"),
    ]
    assert [(x.scope, x.unit, x.on_exceeded) for x in day_limits(config)] == [
        ("day", "tokens", "fail")]
    for bad, said in [
        ({"run_usd": 0}, "run_usd must be a number of dollars > 0"),
        ({"day_tokens": 1.5}, "day_tokens must be a whole number > 0"),
        ({"on_exceeded": "handoff"}, "on_exceeded must be one of fail, skip-remaining, warn"),
        ({"weekly_usd": 3}, "unknown [budget] setting 'weekly_usd'"),
    ]:
        with pytest.raises(InvalidInputError, match=bad and said.replace("[", r"\[")):
            parse_budget(bad, "config")
    with pytest.raises(InvalidInputError, match="give max_tokens, max_usd or both"):
        Ceiling()
    with pytest.raises(InvalidInputError, match="max_usd must be"):
        Ceiling(max_usd=-1)
    assert parse_config({"budget": {"day_usd": 40}}).budget.day_usd == 40.0


def test_thresholds_alert_once_each_and_say_what_they_are() -> None:
    limit = Limit("run", "usd", 2.0, "fail", "ceiling")
    assert percent(1.599, 2.0) == 79 and crossed(limit, 1.599) == [50]
    assert crossed(limit, 1.6, [50]) == [80]
    assert crossed(limit, 2.5, [50]) == [80, 100]
    assert alert_text(limit, 80, 1.63, "r-1", "2026-12-01") == (
        "80% of the dollar ceiling: run r-1 at $1.63 of $2.00")
    day = Limit("day", "tokens", 1_000_000, "fail", "config")
    assert exceeded_reason(day, 1_000_500, "r-1", "2026-12-01") == (
        "Stopped by the daily budget ([budget] day_tokens): the workspace on 2026-12-01 used "
        "1,000,500 tokens of its 1,000,000 tokens.")
    assert day.key("r-1", "2026-12-01") == "day:2026-12-01:tokens"


# -- a real agent CLI stopped while it streams ---------------------------------------------


def replay_spec(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """The fake CLI replaying the long capture as fast as it can write, through a one-page
    pipe (so it cannot run far ahead of Tether), then staying alive until it is killed."""
    lines = len(capture(LONG).read_text().splitlines())
    return {"stdout": capture(LONG), "pipe_size": 4096, "on_sigterm": tmp_path / "sigterm",
            "pause_after": lines, "wait_for": tmp_path / "never", **extra}


def cumulative(costs: list[float], budget: float) -> int:
    """The index of the call whose cost carried the running total to ``budget``."""
    total = 0.0
    for index, cost in enumerate(costs):
        total += cost
        if total >= budget:
            return index
    raise AssertionError("the calls never reached the budget")


@pytest.fixture
async def sqlite_db(workspace: Workspace) -> AsyncIterator[Database]:
    """A SQLite workspace (the paced replay reads its calls table, as any SQLite reader may)."""
    database = await open_database(workspace)
    try:
        yield database
    finally:
        await database.close()


@pytest.mark.parametrize("ignore_sigterm", [False, True])
async def test_a_command_agent_streaming_past_a_dollar_budget_is_stopped_within_one_call(
    sqlite_db: Database, tmp_path: Path, ignore_sigterm: bool
) -> None:
    db = sqlite_db
    agent = sequenced(tmp_path, "claude-code", [replay_spec(
        tmp_path, ignore_sigterm=ignore_sigterm, pace_by_database=db.workspace.database_path,
        expect=[["--max-budget-usd", "0.3000"]])], kill_grace_s=0.2)
    workflow = Workflow("spend", agents={"claude": agent}, default_agent="claude",
                        ceiling=Ceiling(max_usd=0.30))
    workflow.add_task("work", "Implement the whole spec.", retries=2, backoff=0.0)
    outcome = await run(db, workflow)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.startswith(
        f"Stopped by the dollar ceiling: run {outcome.run_id} spent $0.3")
    assert len(invocations(tmp_path)) == 1  # a budget stop is never retried
    # The CLI was told to stop (SIGTERM) long before the end of its 148 lines.
    said = (tmp_path / "sigterm").read_text()
    assert said.startswith("SIGTERM after ") and int(said.split()[2]) < 120
    printed = int(said.split()[2])
    store = RunStore(db)
    calls = await store.list_calls(outcome.run_id, "work")
    costs = [c.cost_usd or 0.0 for c in calls]
    crossing = cumulative(costs, 0.30)
    # Within one model call: after the call that crossed the budget, the CLI got at most one
    # more API message out (the one in flight) before it was stopped, and that one's tokens
    # are recorded too.
    assert len([c for c in calls[crossing + 1:] if c.kind == "model"]) <= 1
    # The SIGTERM came once the crossing call was complete (the line completing it may have
    # been the one being written when it arrived).
    replayed = capture(LONG).read_text().splitlines()
    message = calls[crossing].detail["message_id"]
    completed_at = max(i for i, line in enumerate(replayed, 1) if message in line) + 1
    assert completed_at <= printed + 1
    (attempt,) = await store.list_attempts(outcome.run_id, "work")
    assert attempt.state == "cancelled" and attempt.details["stopped_by"] == "budget"
    assert attempt.tokens == TokenUsage.sum(c.tokens for c in calls)  # tokens and cost kept
    assert attempt.cost.usd == pytest.approx(sum(costs))
    assert sum(costs) < 0.30 + 2 * max(costs)
    alerts = [e for e in await store.recent_events(1000, run_id=outcome.run_id)
              if e.type == "budget.alert"]
    assert [e.payload["threshold"] for e in alerts] == [50, 80, 100]


# -- an HTTP request in flight is cancelled ------------------------------------------------


class SlowProvider(BaseHTTPRequestHandler):
    """OpenAI-compatible: the node "spend" answers at once with a costly usage; the node
    "wait" is held until the test releases it (or the client goes away)."""

    release = threading.Event()
    arrived = threading.Event()
    held: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"]
        if "wait" in text:
            SlowProvider.held.append(text)
            SlowProvider.arrived.set()
            SlowProvider.release.wait(30)  # released once the run has ended
            with contextlib.suppress(OSError):  # Tether hung up long ago
                send_json(self, 200, _answer(1))
            return
        SlowProvider.arrived.wait(30)  # the costly answer comes once "wait" is in flight
        send_json(self, 200, _answer(1_000_000))


def _answer(prompt_tokens: int) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": "done"}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 10}}


async def test_a_budget_cancels_an_http_request_in_flight(db: Database) -> None:
    SlowProvider.release.clear()
    SlowProvider.arrived.clear()
    SlowProvider.held.clear()
    with serving(SlowProvider) as url:
        agent = OpenAIAgent(base_url=url, model="metered", api_key="k")
        workflow = Workflow("http-budget", agents={"api": agent}, default_agent="api",
                            concurrency=2, ceiling=Ceiling(max_usd=0.5))
        workflow.add_task("wait", "Please wait for the big answer.")
        workflow.add_task("spend", "Spend it all.")
        config = EngineConfig(poll_interval_s=0.02,
                              prices={"metered": Price(1.0, 1.0, 1.0, 1.0)})
        try:
            outcome = await run(db, workflow, config)
            # The run ended while the server still held "wait": its request was cancelled.
            assert not SlowProvider.release.is_set()
        finally:
            SlowProvider.release.set()
    assert outcome.status == "failed"
    assert outcome.error == (
        f"Stopped by the dollar ceiling: run {outcome.run_id} spent $1.00 of its $0.50.")
    store = RunStore(db)
    (held,) = await store.list_attempts(outcome.run_id, "wait")
    assert held.state == "cancelled" and held.details["stopped_by"] == "budget"
    assert held.error == outcome.error
    assert SlowProvider.held == ["Please wait for the big answer."]


# -- per-day and per-run budgets from config.toml ------------------------------------------


async def test_a_spent_daily_budget_refuses_the_next_dispatch(db: Database,
                                                             clock: ManualClock) -> None:
    store = RunStore(db)
    other = await store.create_run("elsewhere")
    await store.record_call(CallUsage(other.run_id, "n", 0, 1, "api", TokenUsage(input=10),
                                      cost_usd=3.5, finished_at_ms=clock.now_ms()))
    day = utc_day(clock.now_ms())
    assert (await store.day_spend(day)).cost.usd == pytest.approx(3.5)
    agent = ScriptedAgent()
    workflow = Workflow("daily", agents={"a": agent}, default_agent="a")
    workflow.add_task("t", "Anything.")
    config = parse_config({"budget": {"day_usd": 3.0}, "engine": {"poll_interval_s": 0.02}})
    outcome = await run(db, workflow, config)
    assert outcome.status == "failed"
    assert outcome.error == (
        f"Stopped by the daily budget ([budget] day_usd): the workspace on {day} spent $3.50 "
        "of its $3.00.")
    assert agent.invocations == []  # nothing was paid for


async def test_skip_remaining_budget_skips_what_was_not_started(db: Database) -> None:
    agent = ScriptedAgent(usage=TokenUsage(input=600))
    workflow = Workflow("skip", agents={"a": agent}, default_agent="a")
    workflow.add_task("one", "One.")
    workflow.add_task("two", "Two.", depends_on=["one"])
    workflow.add_task("three", "Three.", depends_on=["two"])
    config = parse_config({"budget": {"run_tokens": 1000, "on_exceeded": "skip-remaining"}})
    outcome = await run(db, workflow, config)
    assert outcome.status == "finished"
    states = {n.node_id: n.state for n in await RunStore(db).list_nodes(outcome.run_id)}
    assert states["one"] == "finished" and states["three"] == "skipped"
    assert Counter(node for node, _, _ in agent.invocations) == Counter(one=1, two=1)


async def test_reasoning_tokens_count_against_a_token_budget(db: Database) -> None:
    # A reasoning model's calls are mostly reasoning (billed as output, kept in its own lane):
    # a run_tokens budget that did not count them let such a run spend on unseen.
    agent = ScriptedAgent(usage=TokenUsage(input=100, output=50, reasoning=450))
    workflow = Workflow("thinking", agents={"a": agent}, default_agent="a")
    for index in range(4):
        workflow.add_task(f"t{index}", f"Step {index}.",
                          depends_on=[f"t{index - 1}"] if index else None)
    config = parse_config({"budget": {"run_tokens": 1000, "on_exceeded": "skip-remaining"}})
    outcome = await run(db, workflow, config)
    states = {n.node_id: n.state for n in await RunStore(db).list_nodes(outcome.run_id)}
    assert [states[f"t{i}"] for i in range(4)] == ["finished", "finished", "skipped", "skipped"]
    assert len(agent.invocations) == 2  # 600 tokens each: the second crossed 1,000


async def test_alerts_are_recorded_once_per_threshold_and_the_run_keeps_its_budgets(
    db: Database,
) -> None:
    agent = ScriptedAgent(usage=TokenUsage(input=300))
    workflow = Workflow("alerts", agents={"a": agent}, default_agent="a",
                        ceiling=Ceiling(1000, "warn"))
    for index in range(4):
        workflow.add_task(f"t{index}", f"Step {index}.",
                          depends_on=[f"t{index - 1}"] if index else None)
    outcome = await run(db, workflow)
    assert outcome.status == "finished"  # warn: alerts only
    store = RunStore(db)
    alerts = [e for e in await store.recent_events(500, run_id=outcome.run_id)
              if e.type == "budget.alert"]
    assert [(e.payload["threshold"], e.payload["spent"]) for e in alerts] == [
        (50, 600), (80, 900), (100, 1200)]
    assert alerts[1].payload["text"] == (
        f"80% of the token ceiling: run {outcome.run_id} at 900 tokens of 1,000 tokens")
    key = alerts[0].payload["budget"]
    assert not await store.record_alert(key, 80, outcome.run_id, {"text": "again"})
    assert await store.alerts_of(key) == [50, 80, 100]
    run_record = await store.get_run(outcome.run_id)
    assert run_record.budgets == [{"scope": "run", "unit": "tokens", "max": 1000,
                                   "on_exceeded": "warn", "source": "ceiling"}]
