"""The pure parts of the CLI and HTTP agents, driven by captured output (tests/fixtures/agents):
Claude Code sessions reconciled with modelUsage, Codex turns, token-count validation, bounded
line splitting, failure classification, retry timing, prices and strict schemas."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from engine.agents.agent import AgentError
from engine.agents.cli.claude_code import ClaudeSettings, claude_argv
from engine.agents.cli.claude_session import ClaudeSession
from engine.agents.cli.codex import CodexSession, CodexSettings, codex_argv
from engine.agents.cli.lines import LineSplitter
from engine.agents.failures import classify
from engine.agents.http.http_retry import RetryPolicy, header_wait, retry_wait, should_retry
from engine.agents.reported_usage import MAX_TOKENS, bad_count
from engine.pricing import PriceTable, parse_prices, split_cost
from engine.structured import strict_schema
from store.errors import InvalidInputError
from store.model.token_lanes import TokenUsage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def claude(name: str, returncode: int = 0) -> tuple[ClaudeSession, list, object]:
    """Feed a capture line by line: the calls recorded while it ran, then the outcome."""
    session = ClaudeSession()
    live = []
    for line in (FIXTURES / "claude-code" / name).read_text().splitlines():
        live.extend(session.feed(line, 1000))
    return session, live, session.finish(returncode, "", 2000)


def codex(name: str, returncode: int = 0) -> tuple[CodexSession, list, object]:
    session = CodexSession("gpt-5")
    calls = []
    for line in (FIXTURES / "codex" / name).read_text().splitlines():
        calls.extend(session.feed(line, 1000))
    return session, calls, session.finish(returncode, "", 2000)


# -- Claude Code -----------------------------------------------------------------------------


def test_multi_model_stream_is_one_call_per_message_reconciled_with_model_usage() -> None:
    session, live, outcome = claude("B_vecsum_stream.jsonl")
    calls = [*live, *outcome.calls]
    # Two sonnet messages (one of them in three events), then one reconciliation per model the
    # stream never showed; sonnet's messages already add up to its modelUsage. The first is
    # recorded as soon as its tool results arrive, priced by the table; the last one with the
    # result, with what sonnet's reported cost holds beyond the first.
    assert [c.detail["message_id"] for c in live] == ["msg_018gruYCuKR31QDG2vRkeBrT"]
    assert live[0].detail["cost_source"] == "price table"
    assert [(c.kind, c.model) for c in calls] == [
        ("model", "claude-sonnet-4-5-20250929"),
        ("model", "claude-sonnet-4-5-20250929"),
        ("reconciliation", "claude-haiku-4-5-20251001"),
        ("reconciliation", "claude-opus-4-5-20251101"),
    ]
    assert calls[0].usage == TokenUsage(input=1, cache_read=18003, cache_write=6847, output=158)
    assert calls[1].usage == TokenUsage(input=5, cache_read=24850, cache_write=2135, output=425)
    assert calls[2].usage == TokenUsage(input=2, cache_read=14934, output=125)
    assert calls[3].usage == TokenUsage(input=4, cache_read=22959, output=224)
    total = sum((c.usage for c in calls), TokenUsage())
    assert total == TokenUsage(input=12, cache_read=80746, cache_write=8982, output=932)
    # Per-model costUSD: sums match Claude Code's figures exactly.
    assert [round(c.cost_usd or 0, 8) for c in calls] == [
        0.03345015,
        0.02185125,
        0.0021204,
        0.0170995,
    ]
    assert sum(c.cost_usd or 0 for c in calls) == pytest.approx(0.0745213, abs=1e-12)
    assert outcome.result.text.startswith("Now let me verify")
    assert outcome.details["session_id"] == "d49d1efb-0239-4aa2-a2b0-f6c86b2320a6"
    assert set(outcome.details["models"]) == {
        "claude-haiku-4-5-20251001",
        "claude-opus-4-5-20251101",
        "claude-sonnet-4-5-20250929",
    }


SONNET_45 = "claude-sonnet-4-5-20250929"


def _said(mid: str, model: str, output: int, conversation: str | None = None) -> str:
    usage = {"input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": output}
    message = {"id": mid, "model": model, "usage": usage,
               "content": [{"type": "text", "text": "..."}]}
    return json.dumps({"type": "assistant", "parent_tool_use_id": conversation, "message": message})


def _tool_results(conversation: str | None = None) -> str:
    return json.dumps({"type": "user", "parent_tool_use_id": conversation,
                       "message": {"content": [{"type": "tool_result", "content": "ok"}]}})


def _result(usage: dict[str, dict[str, float]], total: float) -> str:
    return json.dumps({"type": "result", "subtype": "success", "result": "done",
                       "modelUsage": usage, "total_cost_usd": total})


def _feed(lines: list[str]) -> tuple[list[list], object]:
    session = ClaudeSession()
    live = [session.feed(line, 1000) for line in lines]
    return live, session.finish(0, "", 2000)


def test_a_message_is_recorded_once_its_conversation_moves_on() -> None:
    # Main asks a sub-agent (conversation "t1"); the sub-agent's first message is complete when its
    # second one starts, main's when its tool results arrive; the last ones with the result.
    lines = [
        _said("m1", SONNET_45, 50),
        _said("s1", SONNET_45, 20, conversation="t1"),
        _said("s1", SONNET_45, 30, conversation="t1"),  # a later snapshot of the same message
        _said("s2", SONNET_45, 40, conversation="t1"),
        _tool_results(),
        _said("m2", SONNET_45, 60),
        _result({SONNET_45: {"inputTokens": 40, "cacheReadInputTokens": 4000,
                             "outputTokens": 180, "costUSD": 0.01}}, 0.01),
    ]
    live, outcome = _feed(lines)
    recorded = [[c.detail["message_id"] for c in batch] for batch in live]
    assert recorded == [[], [], [], ["s1"], ["m1"], [], []]
    s1 = live[3][0]
    assert s1.usage.output == 30 and s1.detail["subagent"] is True
    assert [c.detail.get("message_id") for c in outcome.calls] == ["s2", "m2"]
    calls = [*live[3], *live[4], *outcome.calls]
    assert sum((c.usage for c in calls), TokenUsage()).output == 180
    assert sum(c.cost_usd for c in calls) == pytest.approx(0.01, abs=1e-12)


def test_a_reported_cost_below_the_table_is_a_note_never_a_negative_row() -> None:
    # Both messages are recorded while the session runs, at list price (0.00666 together);
    # Claude Code reported 0.006. Dollars cannot go back below what was recorded: the calls
    # keep their table prices, and the reported figure is a note.
    lines = [
        _said("m1", SONNET_45, 100), _tool_results(),
        _said("m2", SONNET_45, 300), _tool_results(),
        _result({SONNET_45: {"inputTokens": 20, "cacheReadInputTokens": 2000,
                             "outputTokens": 400, "costUSD": 0.006}}, 0.006),
    ]
    live, outcome = _feed(lines)
    recorded = [c for batch in live for c in batch]
    assert [c.cost_usd for c in recorded] == pytest.approx([0.00183, 0.00483])
    assert outcome.calls == []
    assert outcome.details["notes"] == [
        f"Claude Code reported $0.006000 for {SONNET_45}; its calls are priced by the price "
        "table at $0.006660"
    ]


def test_a_model_without_a_price_is_recorded_at_the_end_with_its_reported_cost() -> None:
    lines = [
        _said("m1", "claude-future-9", 100), _tool_results(),
        _said("m2", "claude-future-9", 300),
        _result({"claude-future-9": {"inputTokens": 20, "cacheReadInputTokens": 2000,
                                     "outputTokens": 400, "costUSD": 0.05}}, 0.05),
    ]
    live, outcome = _feed(lines)
    assert all(batch == [] for batch in live)
    assert [c.kind for c in outcome.calls] == ["model", "model"]
    assert sum(c.cost_usd for c in outcome.calls) == pytest.approx(0.05, abs=1e-12)
    assert all(c.cost_usd > 0 for c in outcome.calls)


def test_json_result_alone_records_model_usage_and_unexplained_cost() -> None:
    # A: modelUsage (one model) is 19x bigger in places than the top-level usage, and
    # total_cost_usd is more than the model's costUSD.
    _, _, outcome = claude("A_gleam_result_success.json")
    model_row, rest = outcome.calls
    assert model_row.kind == "reconciliation" and model_row.model == "claude-opus-4-5-20251101"
    assert model_row.usage == TokenUsage(input=38, cache_read=28775, cache_write=31159, output=765)
    assert model_row.cost_usd == pytest.approx(0.22844625)
    assert rest.usage == TokenUsage() and rest.cost_usd == pytest.approx(0.24722425 - 0.22844625)
    assert outcome.result.text == "Here are the files in the current directory."


def test_stream_without_model_usage_reconciles_with_the_top_level_usage() -> None:
    # C: the streamed message says 5 output tokens, the result says 25.
    _, _, outcome = claude("C_gleam_basic_query_stream.jsonl")
    message, rest = outcome.calls
    assert message.usage == TokenUsage(input=10, cache_write=21570, output=5)
    assert rest.kind == "reconciliation" and rest.usage == TokenUsage(output=20)
    assert (message.cost_usd or 0) + (rest.cost_usd or 0) == pytest.approx(0.1354875)
    assert outcome.result.text == "4"


def test_verbose_json_array_is_read_like_the_stream() -> None:
    _, _, stream = claude("C_gleam_basic_query_stream.jsonl")
    _, _, array = claude("C_gleam_basic_query_array.json")
    assert [c.usage for c in array.calls] == [c.usage for c in stream.calls]
    assert array.result.text == "4" and array.error is None


@pytest.mark.parametrize(
    ("fixture", "returncode", "retryable", "said", "tokens"),
    [
        ("E_429.json", 1, True, "error, HTTP 429, exit status 1): API Error: Request rejected", 0),
        ("F1_max_turns_result_null.json", 1, False, "Reached maximum number of turns (3)", 42763),
        ("G_error_during_execution.json", 0, True, "error_during_execution", 1185266),
        ("K_empty_result.json", 0, True, "empty result", 13),
    ],
)
def test_failed_sessions_give_their_reason_class_and_spent_tokens(
    fixture: str, returncode: int, retryable: bool, said: str, tokens: int
) -> None:
    _, _, outcome = claude(fixture, returncode)
    assert outcome.result is None and outcome.error is not None
    assert said in str(outcome.error)
    assert outcome.error.retryable is retryable
    assert sum(c.usage.total for c in outcome.calls) == tokens


def test_structured_output_is_the_answer() -> None:
    _, _, outcome = claude("H_structured_output.json")
    assert outcome.result.output == {"title": "Files listed", "lines": 3}
    assert json.loads(outcome.result.text) == {"title": "Files listed", "lines": 3}


def test_claude_command_line_carries_every_setting() -> None:
    argv = claude_argv(
        ["claude"],
        ClaudeSettings("claude-opus-4-5", 7, "acceptEdits", ["Read", "Grep"], ["Bash"], ["--x"]),
        schema={"type": "object"},
        resume_session="s-1",
        mcp_config={"mcpServers": {}},
        mcp_tools=["mcp__tether__recall"],
    )
    assert argv == [
        "claude", "-p", "--output-format", "stream-json", "--verbose",
        "--model", "claude-opus-4-5", "--max-turns", "7", "--permission-mode", "acceptEdits",
        "--allowedTools", "Read,Grep,mcp__tether__recall", "--disallowedTools", "Bash",
        "--mcp-config", '{"mcpServers":{}}', "--json-schema", '{"type":"object"}',
        "--resume=s-1", "--x",
    ]  # fmt: skip


# -- Codex -----------------------------------------------------------------------------------


def test_codex_turn_splits_cached_input_and_reasoning_once() -> None:
    _, calls, outcome = codex("X9_reasoning_tokens.jsonl")
    (call,) = calls
    assert call.usage == TokenUsage(input=4277, cache_read=22272, output=438, reasoning=1152)
    assert call.usage.total == 26549 + 1590  # input_tokens + output_tokens, nothing twice
    assert outcome.result.text.startswith("The fixture leaks")
    _, calls, _ = codex("X1_agentcmd_stream2.jsonl")
    assert calls[0].usage == TokenUsage(input=1048, cache_read=4992, output=129)


def test_codex_reconnect_notice_inside_a_completed_turn_is_not_a_failure() -> None:
    session, calls, outcome = codex("X5_reconnect_then_success.jsonl")
    assert outcome.error is None and len(calls) == 1
    assert outcome.details["reconnects"] == 1


@pytest.mark.parametrize(
    ("fixture", "returncode", "said"),
    [
        ("X4_0147_bad_model.jsonl", 1, "not supported when using Codex with a ChatGPT account"),
        ("X4_0147_bad_model.jsonl", 0, "invalid_request_error"),
        ("X8_rollout_budget_37676.jsonl", 0, "shared rollout token budget exhausted"),
    ],
)
def test_codex_fatal_errors_are_read_from_the_events_and_permanent(
    fixture: str, returncode: int, said: str
) -> None:
    _, _, outcome = codex(fixture, returncode)
    assert said in str(outcome.error)
    assert outcome.error.retryable is False


def test_codex_thread_totals_across_two_turns_are_recorded_as_growth() -> None:
    # Without a rollout file (no CODEX_HOME given) each turn is one aggregate row.
    session = CodexSession()
    first = {"type": "turn.completed", "usage": {"input_tokens": 100, "output_tokens": 10}}
    second = {"type": "turn.completed", "usage": {"input_tokens": 250, "output_tokens": 30}}
    a = session.feed(json.dumps(first), 1)
    b = session.feed(json.dumps(second), 2)
    assert [c.usage for c in a + b] == [
        TokenUsage(input=100, output=10),
        TokenUsage(input=150, output=20),
    ]
    assert [(c.kind, c.detail["aggregate"], c.detail["turn"]) for c in a + b] == [
        ("reconciliation", "turn", 1),
        ("reconciliation", "turn", 2),
    ]


def test_codex_command_line_carries_every_setting(tmp_path: Path) -> None:
    argv = codex_argv(
        ["codex"],
        CodexSettings("gpt-5", "workspace-write", True, ["--profile", "ci"]),
        schema_file=tmp_path / "s.json",
        mcp_command=["/bin/tether", "mcp", "--bank", "b"],
    )
    assert argv == [
        "codex", "exec", "--json", "-m", "gpt-5", "--sandbox", "workspace-write",
        "--skip-git-repo-check", "--output-schema", str(tmp_path / "s.json"),
        "-c", 'mcp_servers.tether.command="/bin/tether"',
        "-c", 'mcp_servers.tether.args=["mcp", "--bank", "b"]',
        "--profile", "ci", "-",
    ]  # fmt: skip


# -- token counts, lines, failures -----------------------------------------------------------


@pytest.mark.parametrize("value", [-5, 12.5, 1e300, "12", True, float("nan"), MAX_TOKENS + 1])
def test_bad_token_counts_are_named(value: object) -> None:
    assert bad_count(value) is not None


@pytest.mark.parametrize("value", [0, 12, 12.0, MAX_TOKENS])
def test_good_token_counts_pass(value: object) -> None:
    assert bad_count(value) is None


@pytest.mark.parametrize("value", [-5, 12.5, 1e300])
def test_a_bogus_count_in_a_captured_result_is_one_clear_error(value: float) -> None:
    data = json.loads((FIXTURES / "claude-code" / "A_gleam_result_success.json").read_text())
    data["modelUsage"]["claude-opus-4-5-20251101"]["outputTokens"] = value
    session = ClaudeSession()
    session.feed(json.dumps(data), 1)
    with pytest.raises(AgentError, match="invalid token count for outputTokens") as caught:
        session.finish(0, "", 2)
    assert caught.value.retryable is False


def test_line_splitter_keeps_long_lines_whole_and_caps_memory() -> None:
    splitter = LineSplitter(max_line_bytes=1024)
    long = b"x" * 200_000
    chunks = [b'{"a": 1}\n' + long[:70_000], long[70_000:], b"\nlast"]
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    lines += list(splitter.finish())
    assert [(line.text[:8], line.truncated, line.size) for line in lines] == [
        ('{"a": 1}', False, 8),
        ("xxxxxxxx", True, 200_000),
        ("last", False, 4),
    ]
    assert len(lines[1].text) == 1024


def test_quota_beats_rate_limit_and_statuses_classify() -> None:
    assert classify("You exceeded your current quota (insufficient_quota)", 429) == "permanent"
    assert classify("Rate limit reached for requests", 429) == "transient"
    assert classify("Overloaded", 529) == "transient"
    assert classify("invalid model", 400) == "permanent"
    assert classify("something odd") == "transient"


# -- HTTP retry timing -------------------------------------------------------------------------


def test_retry_waits_follow_the_sdk_policy() -> None:
    policy = RetryPolicy()
    rng = random.Random(1)
    waits = [retry_wait(policy, n, {}, 0.0, rng) for n in (1, 2, 3, 4, 5, 6)]
    for n, wait in enumerate(waits, start=1):
        base = min(8.0, 0.5 * 2 ** (n - 1))
        assert 0.75 * base <= wait <= base
    assert retry_wait(policy, 1, {"retry-after-ms": "1500"}, 0.0, rng) == 1.5
    assert retry_wait(policy, 1, {"retry-after": "3"}, 0.0, rng) == 3.0
    assert header_wait({"retry-after": "Wed, 21 Oct 2015 07:28:05 GMT"}, 1445412480.0) == 5.0
    assert header_wait({"retry-after": "3600"}, 0.0) is None  # unreasonable: use backoff


def test_what_is_retried() -> None:
    assert should_retry(429, '{"error": {"type": "rate_limit_error"}}', {})
    assert should_retry(529, "overloaded", {}) and should_retry(503, "", {})
    assert should_retry(408, "", {}) and should_retry(409, "", {}) and should_retry(None, "", {})
    assert not should_retry(429, '{"error": {"code": "insufficient_quota"}}', {})
    assert not should_retry(400, "invalid_request_error", {})
    assert not should_retry(422, "bad", {})
    assert not should_retry(500, "", {"x-should-retry": "false"})
    assert should_retry(400, "", {"x-should-retry": "true"})


# -- prices and schemas ----------------------------------------------------------------------


def test_prices_match_models_and_config_overrides() -> None:
    table = PriceTable(parse_prices({"local-7b": {"input": 0.1, "output": 0.2}}, "config"))
    usage = TokenUsage(input=1_000_000, output=1_000_000)
    assert table.cost("local-7b", usage) == pytest.approx(0.3)
    assert table.cost("gpt-4o-mini-2024-07-18", usage) == pytest.approx(0.75)
    assert table.cost("openai/gpt-4.1-mini", usage) == pytest.approx(2.0)
    assert table.cost("claude-haiku-4-5-20251001", usage) == pytest.approx(6.0)
    assert table.cost("some-unknown-model", usage) is None
    assert table.cost(None, usage) is None
    with pytest.raises(InvalidInputError, match=r"prices.'m'.input"):
        parse_prices({"m": {"input": -1, "output": 1}}, "config")
    with pytest.raises(InvalidInputError, match="needs both input and output"):
        parse_prices({"m": {"input": 1}}, "config")


def test_split_cost_adds_up() -> None:
    shares = split_cost(0.1, [1.0, 2.0, 0.0])
    assert sum(shares) == pytest.approx(0.1, abs=1e-15) and shares[2] == pytest.approx(0)
    assert split_cost(1.0, [0.0, 0.0]) == [0.5, 0.5]


def test_strict_schema_only_when_the_schema_allows() -> None:
    closed = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["a", "b"],
    }
    assert strict_schema(closed) == {**closed, "additionalProperties": False}
    assert strict_schema({**closed, "required": ["a"]}) is None
    assert strict_schema({"type": "object"}) is None
    assert strict_schema({**closed, "additionalProperties": True}) is None
    assert strict_schema({**closed, "oneOf": []}) is None


def test_strict_schema_closes_every_object_and_says_why_one_cannot_be() -> None:
    from pydantic import BaseModel

    from engine.structured import strict_problem

    class Finding(BaseModel):
        path: str
        line: int

    class Review(BaseModel):
        verdict: str
        findings: list[Finding]

    class Loose(BaseModel):
        verdict: str
        tags: dict[str, str]

    schema = strict_schema(Review.model_json_schema())
    assert schema is not None
    for node in (schema, schema["$defs"]["Finding"]):  # nested objects too (Codex's rule)
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])
    assert strict_problem(Review.model_json_schema()) is None
    assert strict_problem(Loose.model_json_schema()) == (
        "field 'tags' is a free-form object (no fixed fields)"
    )
