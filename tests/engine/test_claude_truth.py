"""Every token once and one truth per model in a Claude Code session (capture B: three models,
the stream showing two sonnet messages), with variants derived from it at run time: thinking
tokens reported per message (``output_tokens_details.thinking_tokens``, a part of
``output_tokens``, as a real session's result shows: 23,729 output of which 8,264 thinking,
index file 59227903269), and a stream that shows more than ``modelUsage``. Also the memory
tools' failures as warnings, and the attempt's model taken from its calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_agent_support import fake_agent, run_one

from engine.agents.cli.claude_session import ClaudeSession
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "claude-code"
SONNET = "claude-sonnet-4-5-20250929"
THINKING = {"msg_018gruYCuKR31QDG2vRkeBrT": 60, "msg_014M8wxCsJpqrbfgjeLGS1FP": 180}


def _events(**changes: Any) -> list[dict[str, Any]]:
    """Capture B's stream-json events, with per-message usage changes by message id."""
    lines = (CAPTURE / "B_vecsum_stream.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        message = event.get("message")
        if event["type"] == "assistant" and message["id"] in changes:
            message["usage"].update(changes[message["id"]])
    return events


def _session(events: list[dict[str, Any]]) -> tuple[list, Any]:
    session = ClaudeSession()
    live = []
    for event in events:
        live.extend(session.feed(json.dumps(event), 1000))
    outcome = session.finish(0, "", 2000)
    return [*live, *outcome.calls], outcome


def test_thinking_tokens_are_counted_once() -> None:
    thinking = {m: {"output_tokens_details": {"thinking_tokens": n}} for m, n in THINKING.items()}
    calls, outcome = _session(_events(**thinking))
    sonnet = [c for c in calls if c.model == SONNET]
    # Each message's thinking is its reasoning lane, taken out of its output (158 and 425).
    assert [(c.usage.output, c.usage.reasoning) for c in sonnet] == [(98, 60), (245, 180)]
    # modelUsage's 583 output tokens already include the 240 thinking ones: no sonnet row.
    assert [c.kind for c in sonnet] == ["model", "model"]
    total = sum((c.usage for c in calls), TokenUsage())
    assert total.output + total.reasoning == 583 + 125 + 224  # = every model's outputTokens
    assert sum(c.cost_usd for c in calls) == pytest.approx(0.0745213, abs=1e-12)
    assert "notes" not in outcome.details


def test_a_stream_showing_more_than_model_usage_keeps_one_truth_and_notes_the_other() -> None:
    calls, outcome = _session(
        _events(msg_014M8wxCsJpqrbfgjeLGS1FP={"cache_read_input_tokens": 34850})
    )
    sonnet = [c for c in calls if c.model == SONNET]
    assert [c.kind for c in sonnet] == ["model", "model"]  # the stream is sonnet's truth
    assert sum((c.usage for c in sonnet), TokenUsage()).cache_read == 42853 + 10000
    # Sonnet's dollars are its tokens at list price (3 in, 0.3 cache read, 3.75 cache write,
    # 15 out per MTok), never a negative correction towards Claude Code's figure.
    expected = (6 * 3 + 52853 * 0.3 + 8982 * 3.75 + 583 * 15) / 1e6
    assert sum(c.cost_usd for c in sonnet) == pytest.approx(expected)
    assert all(c.cost_usd >= 0 for c in calls)
    notes = outcome.details["notes"]
    assert notes[0] == (
        f"the stream showed 10,000 more {SONNET} tokens than modelUsage (52,424); "
        "the per-message figures are kept"
    )
    assert notes[1].startswith(f"Claude Code reported $0.055301 for {SONNET}; its calls are "
                               "priced by the price table at $")  # fmt: skip
    # The other models still follow modelUsage and their reported costs.
    others = [c for c in calls if c.model != SONNET]
    assert [round(c.cost_usd, 7) for c in others] == [0.0021204, 0.0170995]


def _with_memory_tool(failed: bool, denied: bool) -> list[dict[str, Any]]:
    events = _events()
    use = {"type": "tool_use", "id": "toolu_mem", "name": "mcp__tether__remember",
           "input": {"content": "Pin plotext below 6."}}  # fmt: skip
    events[1]["message"]["content"].append(use)
    result = {"type": "tool_result", "tool_use_id": "toolu_mem", "is_error": failed,
              "content": [{"type": "text", "text": "bank ci is not configured"}]}  # fmt: skip
    events[4]["message"]["content"].append(result)
    if denied:
        events[-1]["permission_denials"] = [
            {"tool_name": "mcp__tether__recall", "tool_use_id": "toolu_x", "tool_input": {}}
        ]
    return events


def test_a_failed_or_denied_memory_tool_call_is_a_warning() -> None:
    _, outcome = _session(_with_memory_tool(failed=True, denied=True))
    assert outcome.warnings == [
        "Claude Code's call to the memory tool remember failed: bank ci is not configured",
        "Claude Code was not allowed to run the memory tool mcp__tether__recall",
    ]
    _, clean = _session(_with_memory_tool(failed=False, denied=False))
    assert clean.warnings == []


async def test_the_attempt_model_comes_from_its_calls_when_the_config_names_none(
    db: Database, tmp_path: Path
) -> None:
    agent = fake_agent(tmp_path, "claude-code", {"stdout": CAPTURE / "B_vecsum_stream.jsonl"})
    outcome = await run_one(db, agent)
    assert outcome.status == "finished", outcome.error
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert attempt.model == SONNET  # the model with the most tokens of the three
    named = fake_agent(
        tmp_path, "claude-code", {"stdout": CAPTURE / "B_vecsum_stream.jsonl"}, model="sonnet"
    )
    outcome = await run_one(db, named)
    (attempt,) = await RunStore(db).list_attempts(outcome.run_id, "work")
    assert attempt.model == "sonnet"  # what the config names stays
