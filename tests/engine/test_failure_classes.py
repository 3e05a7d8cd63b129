"""Failure classes that match reality: every captured CLI session gets the right retry
decision, every real limit text is a limit with its reset time, and the plan that follows.

The captures are in tests/fixtures/agents (sources in its README). The message texts below are
verbatim from the public issue trackers of the two CLIs (cited per line); the reset times are
computed for a fixed "now" (2026-12-01 23:00 UTC) and, where the text names no zone, UTC as
the machine's zone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.agents.agent import AgentError
from engine.agents.cli.claude_session import ClaudeSession
from engine.agents.cli.codex import CodexSession
from engine.agents.cli.outcome import Outcome
from engine.agents.failures import classify, resume_failed
from engine.agents.http.http_retry import limit_reset_ms, should_retry
from engine.agents.reset_times import describe_reset, reset_at_ms
from engine.run.retry_plan import MAX_LIMIT_WAITS, plan_retry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
NOW = int(datetime(2026, 12, 1, 23, 0, tzinfo=UTC).timestamp() * 1000)


def ms(text: str) -> int:
    """Epoch ms of an ISO time in UTC."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


# When a capture was made, where its verdict depends on it: N5's limit resets at
# 2026-09-25 06:40 UTC (its rate_limit_event), a five-hour window it hit at most 5 h before.
CAPTURED_AT = {"N5_session_limit_295_turns.jsonl": ms("2026-09-25T03:00")}


def read(kind: str, name: str, returncode: int) -> Outcome:
    session: ClaudeSession | CodexSession = (
        ClaudeSession() if kind == "claude-code" else CodexSession("gpt-5")
    )
    now = CAPTURED_AT.get(name, NOW)
    for line in (FIXTURES / kind / name).read_text().splitlines():
        session.feed(line, now)
    return session.finish(returncode, "", now)


def decision(error: AgentError | None, now_ms: int = NOW) -> str:
    """What the engine does after one attempt ending like this (task retries=2, default
    limit wait bound)."""
    if error is None:
        return "success"
    plan = plan_retry(error, failures=1, retries=2, limit_waits=0, backoff_s=1.0, now_ms=now_ms,
                      can_resume=True)
    if error.limit:
        return "wait for the limit" if plan.retry else "fail: limit"
    if not plan.retry:
        return "fail"
    return "retry, resuming" if plan.resume_session else "retry"


# Every capture, with its exit status as the real CLI exited, and the decision it must get.
CAPTURES: dict[tuple[str, str], tuple[int, str]] = {
    ("claude-code", "A_gleam_result_success.json"): (0, "success"),
    ("claude-code", "B_vecsum_json.json"): (0, "success"),
    ("claude-code", "B_vecsum_stream.jsonl"): (0, "success"),
    ("claude-code", "C_gleam_basic_query_array.json"): (0, "success"),
    ("claude-code", "C_gleam_basic_query_stream.jsonl"): (0, "success"),
    # "This request would exceed your organization rate limit. Please try again later."
    ("claude-code", "E_429.json"): (1, "retry, resuming"),
    ("claude-code", "F1_max_turns_result_null.json"): (1, "fail"),
    ("claude-code", "G_error_during_execution.json"): (0, "retry, resuming"),
    ("claude-code", "H_structured_output.json"): (0, "success"),
    ("claude-code", "K_empty_result.json"): (0, "retry, resuming"),
    ("claude-code", "N5_session_limit_295_turns.jsonl"): (1, "fail: limit"),
    ("claude-code", "N6_prompt_too_long_400.json"): (1, "fail"),
    ("claude-code", "N9_overloaded_529.json"): (1, "retry"),  # no session id printed
    ("claude-code", "N10_weekly_limit.json"): (1, "fail: limit"),
    ("claude-code", "S_second_result_after_success_16768.jsonl"): (1, "success"),
    ("claude-code", "V_20260114122959423.jsonl"): (0, "success"),
    ("claude-code", "V_20260114130738144.jsonl"): (0, "success"),
    ("claude-code", "V_20260114133928115.jsonl"): (0, "success"),
    ("codex", "C10_mcp_call_cancelled.jsonl"): (0, "success"),
    ("codex", "C5_agentcmd_stream5.jsonl"): (0, "success"),
    ("codex", "C7_at_capacity.jsonl"): (1, "retry"),  # no thread started: nothing to resume
    ("codex", "R1_exec_28_requests.jsonl"): (0, "success"),
    ("codex", "X1_agentcmd_stream2.jsonl"): (0, "success"),
    ("codex", "X3_0147_ok.jsonl"): (0, "success"),
    ("codex", "X4_0147_bad_model.jsonl"): (1, "fail"),
    ("codex", "X5_reconnect_then_success.jsonl"): (0, "success"),
    ("codex", "X7_opendesign_2268.jsonl"): (0, "success"),
    ("codex", "X8_rollout_budget_37676.jsonl"): (0, "fail"),
    ("codex", "X9_reasoning_tokens.jsonl"): (0, "success"),
}


def test_the_table_names_every_capture() -> None:
    on_disk = {
        (folder.name, path.name)
        for folder in (FIXTURES / "claude-code", FIXTURES / "codex")
        for path in folder.iterdir()
        if not path.name.startswith("R1_rollout")  # a session file Codex writes, not stdout
    }
    assert on_disk == set(CAPTURES)


@pytest.mark.parametrize(("where", "expected"), sorted(CAPTURES.items()))
def test_every_capture_gets_the_right_retry_decision(
    where: tuple[str, str], expected: tuple[int, str]
) -> None:
    returncode, wanted = expected
    outcome = read(*where, returncode)
    assert decision(outcome.error, CAPTURED_AT.get(where[1], NOW)) == wanted, outcome.error


def test_limits_carry_their_reset_time_and_say_it() -> None:
    n5 = read("claude-code", "N5_session_limit_295_turns.jsonl", 1).error
    assert n5 is not None and n5.limit
    # rate_limit_event.resetsAt 1790318400 (seconds) wins over the printed "6:40am (UTC)".
    assert n5.resets_at_ms == 1_790_318_400_000
    assert n5.session_id == "785fbe16-057e-4eeb-bcba-8b89169e67aa"
    n10 = read("claude-code", "N10_weekly_limit.json", 1).error
    assert n10 is not None and n10.resets_at_ms == ms("2027-09-21T22:00")  # next Sep 21, 10pm
    plan = plan_retry(n10, failures=0, retries=2, limit_waits=0, backoff_s=1, now_ms=NOW)
    assert not plan.retry and "resets at 2027-09-21 22:00 UTC" in plan.why_not
    near = AgentError("You've hit your session limit", limit=True, resets_at_ms=NOW + 90_000,
                      session_id="s-1")
    waiting = plan_retry(near, failures=0, retries=0, limit_waits=0, backoff_s=1, now_ms=NOW,
                         can_resume=True)
    assert waiting.retry and waiting.waits_for_limit and waiting.resume_session == "s-1"
    assert waiting.wait_s == pytest.approx(91.0)
    tired = plan_retry(near, failures=0, retries=2, limit_waits=MAX_LIMIT_WAITS, backoff_s=1,
                       now_ms=NOW)
    assert not tired.retry and "already waited 3 times" in tired.why_not
    far = plan_retry(near, failures=0, retries=2, limit_waits=0, backoff_s=1, now_ms=NOW,
                     limit_wait_s=60)
    assert "resets at 23:01 UTC (in 1 min 30 s)" not in far.why_not
    assert "resets at 23:01 UTC (in 1 min), beyond the 60 s" in far.why_not


# (text, kind, reset in UTC or None, source)
MESSAGES = [
    ("You've hit your session limit · resets 6:40am (UTC)", "limit", "2026-12-02T06:40",
     "capture N5"),
    ("You've hit your weekly limit · resets Sep 21, 10pm (UTC)", "limit", "2027-09-21T22:00",
     "capture N10"),
    ("You've hit your limit · resets 2pm (Asia/Shanghai)", "limit", "2026-12-02T06:00",
     "paperclipai/paperclip#5776"),
    ("You've hit your session limit · resets 8:30pm (Asia/Tokyo)", "limit", "2026-12-02T11:30",
     "anthropics/claude-code#77082"),
    ("You've hit your session limit · resets 12:50am (America/Los_Angeles)", "limit",
     "2026-12-02T08:50", "anthropics/claude-code#74079"),
    ("You've hit your weekly limit · resets Jun 7, 4pm (Europe/Rome)", "limit",
     "2027-06-07T14:00", "anthropics/claude-code#65802"),
    ("You're out of extra usage · resets Feb 4, 8pm (Europe/Budapest)", "limit",
     "2027-02-04T19:00", "anthropics/claude-code#22603"),
    ("You've hit your session limit · resets 5pm", "limit", "2026-12-02T17:00",
     "anthropics/claude-code#77108"),
    ("Opus weekly limit reached ∙ resets Oct 31, 9am", "limit", "2027-10-31T09:00",
     "anthropics/claude-code#10333"),
    ("5-hour limit reached ∙ resets 2am", "limit", "2026-12-02T02:00",
     "anthropics/claude-code#7157"),
    ("Claude AI usage limit reached|1762952400", "limit", "2025-11-12T13:00",
     "anthropics/claude-code#11429"),
    ("Claude usage limit reached. Your limit will reset at 12am.", "limit", "2026-12-02T00:00",
     "aniketkarne/CCAutoRenew#3"),
    ("You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try "
     "again in 2 days 17 hours 14 minutes.", "limit", "2026-12-04T16:14", "openai/codex#3124"),
    ("ERROR: You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "
     "visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at "
     "Mar 10th, 2026 3:39 AM.", "limit", "2026-03-10T03:39", "a public test quoting Codex"),
    ("You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or try "
     "again at 3:42 PM.", "limit", "2026-12-02T15:42", "a public test quoting Codex"),
    ('http 429 Too Many Requests: Some("{\\"error\\":{\\"type\\":\\"usage_limit_reached\\",'
     '\\"message\\":\\"The usage limit has been reached\\",\\"plan_type\\":\\"plus\\",'
     '\\"resets_at\\":1773113950,\\"eligible_promo\\":null,\\"resets_in_seconds\\":467439}}")',
     "limit", "2026-03-10T03:39:10", "a public test quoting Codex's log (escaped JSON)"),
    ('{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached",'
     '"plan_type":"plus","resets_at":1773113950,"resets_in_seconds":467439}}', "limit",
     "2026-03-10T03:39:10", "earendil-works/pi#4172"),
    ("API Error: Usage credits required for 1M context · run /usage-credits to turn them on, "
     "or /model to switch to standard context", "permanent", None,
     "anthropics/claude-code#64117"),
    ("API Error: Request rejected (429) · This request would exceed your organization rate "
     "limit. Please try again later.", "transient", None, "capture E"),
    ("This request would exceed your account's rate limit. Please try again later.",
     "transient", None, "anthropics/claude-code#54698"),
    ("API Error: Overloaded", "transient", None, "capture N9"),
    ('API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server '
     'error"},"request_id":"req_011CY156CgekdKXjNP84kfFx"}', "transient", None,
     "anthropics/claude-code#24820"),
    ("API Error: 500 Internal server error. This is a server-side issue, usually temporary — "
     "try again in a moment. If it persists, check status.claude.com.", "transient", None,
     "anthropics/claude-code#59744"),
    ("Prompt is too long", "permanent", None, "capture N6"),
    ("Invalid API key · Please run /login", "permanent", None, "anthropics/claude-code#1665"),
    ("Credit balance too low · Add funds: https://platform.claude.com/settings/billing",
     "permanent", None, "anthropics/claude-code#46277"),
    ("Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
     "to upgrade or purchase credits.", "permanent", None, "anthropics/claude-code#4208"),
    ("only prompt commands are supported in streaming mode", "transient", None,
     "anthropics/claude-code#16768 (a CLI bug, never a prompt error)"),
    ("Selected model is at capacity. Please try a different model.", "transient", None,
     "capture C7"),
    ("Error: --session-id can only be used with --continue or --resume if --fork-session is "
     "also specified.", "permanent", None, "anthropics/claude-code#36588 (a usage error)"),
    ("error: unexpected argument '--resume' found", "permanent", None,
     "DonutsDelivery/simple-code-gui#7 (a usage error)"),
    ("You exceeded your current quota, please check your plan and billing details.",
     "permanent", None, "OpenAI insufficient_quota"),
]


@pytest.mark.parametrize(("text", "kind", "reset", "source"), MESSAGES)
def test_real_messages_are_classified_with_their_reset(
    text: str, kind: str, reset: str | None, source: str
) -> None:
    assert classify(text) == kind, source
    found = reset_at_ms(text, NOW, UTC)
    if reset is not None:
        assert found == ms(reset), source
    else:
        assert found is None, source


def test_terminal_reason_and_status_decide_when_the_text_does_not() -> None:
    assert classify("Execution error", terminal_reason="blocking_limit") == "limit"
    assert classify("Execution error", terminal_reason="rapid_refill_breaker") == "permanent"
    assert classify("Execution error", status=529) == "transient"
    assert classify("Execution error", status=400) == "permanent"
    assert classify("something odd") == "transient"  # unknown: worth one more try


def test_an_unknown_zone_gives_no_reset_rather_than_a_wrong_one() -> None:
    assert reset_at_ms("You've hit your limit · resets 2pm (Mars/Olympus)", NOW) is None


def test_resume_failures_are_recognised() -> None:
    assert resume_failed("No conversation found with session ID: 3581…")  # claude-code#62851
    assert resume_failed("ERROR: No saved session found with ID planb")  # openai/codex#16066
    assert resume_failed("thread/resume failed: no rollout found for thread id x")
    assert not resume_failed("API Error: Overloaded")


def test_http_limits_are_not_retried_in_the_call_and_say_when_they_reset() -> None:
    body = '{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached"}}'
    assert not should_retry(429, body, {})
    now_s = NOW / 1000
    assert limit_reset_ms(429, body, {"x-codex-primary-reset-at": "1773113950"}, now_s) == (
        "limit", 1_773_113_950_000)
    # A rate limit asking for an hour is a limit that resets then, not an in-call retry.
    assert limit_reset_ms(429, '{"error":{"type":"rate_limit_error"}}',
                          {"retry-after": "3600"}, now_s) == ("limit", NOW + 3_600_000)
    assert limit_reset_ms(429, '{"error":{"type":"rate_limit_error"}}',
                          {"retry-after": "5"}, now_s) == ("transient", None)
    long_context = '{"error":{"type":"rate_limit_error","message":"Usage credits are required ' \
        'for long context requests."}}'
    assert limit_reset_ms(429, long_context, {}, now_s) == ("permanent", None)


def test_describe_reset() -> None:
    assert describe_reset(ms("2026-12-02T06:40"), NOW) == "2026-12-02 06:40 UTC (in 7 h 40 min)"
    assert describe_reset(NOW + 30_000, NOW) == "23:00 UTC (in 1 min)"
    # Capture N5 replayed after its reset: the node waited three times for a limit whose
    # rate_limit_event reset had passed, and its reason said "2026-09-25 06:40 UTC (in 1 min)".
    n5 = read("claude-code", "N5_session_limit_295_turns.jsonl", 1).error
    assert n5 is not None and n5.resets_at_ms is not None
    tired = plan_retry(n5, failures=0, retries=0, limit_waits=MAX_LIMIT_WAITS, backoff_s=1,
                       now_ms=NOW)
    assert "resets at 2026-09-25 06:40 UTC (already past), and the node already waited" in (
        tired.why_not)
