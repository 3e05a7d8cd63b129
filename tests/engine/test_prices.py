"""The price table against the published figures, written here with their source.

Sources (as stored for this project, checked 2026-12-01):
* Anthropic: platform.claude.com/docs/en/about-claude/pricing, the model table ("Base Input
  Tokens", "5m Cache Writes", "1h Cache Writes", "Cache Hits & Refreshes", "Output Tokens"),
  and its long-context note for Sonnet 4/4.5: "<= 200K input tokens: Input $3, Output $15;
  > 200K: Input $6, Output $22.50".
* OpenAI: developers.openai.com/api/docs/models/<model> (Standard tier: input, cached input,
  output per 1M tokens); long context for gpt-5.4: "2x input and 1.5x output" above 272K.
* Third-party where the vendor page was not stored: Haiku 5.5 and Sonnet 5.5 (2026-10-07 cut)
  per kurofune/claudit v1.9.2 and TheKrush/PromptFuel v1.0.23; gpt-6.1-sol per
  KZCFG/AILSA-SubSwitch v1.0.0(g).
"""

from __future__ import annotations

import json

import pytest

from engine.agents.cli.claude_session import ClaudeSession
from engine.price_list import BUILTIN
from engine.pricing import PriceTable, day_ms, normalise, parse_prices
from store.errors import InvalidInputError
from store.model.token_lanes import TokenUsage
from tests.cli_agent_support import FIXTURES

NOW = day_ms("2026-12-01")
MILLION = 1_000_000

# model: (input $/1M, output $/1M) as published: the price of 1M input + 1M output tokens
# sent as requests below any long-context threshold.
PUBLISHED = {
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-haiku-5-5": (0.10, 0.50),
    "claude-fable-5": (10.0, 50.0),
    "claude-fable-5-1": (10.0, 50.0),
    "gpt-4o": (2.50, 10.0),
    "gpt-4.1": (2.0, 8.0),
    "o3": (2.0, 8.0),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-codex": (1.25, 10.0),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5.1-codex": (1.25, 10.0),
    "gpt-5.1-codex-max": (1.25, 10.0),
    "gpt-5.1-codex-mini": (0.25, 2.0),
    "gpt-5.2": (1.75, 14.0),
    "gpt-5.2-codex": (1.75, 14.0),
    "gpt-5.3-codex": (1.75, 14.0),
    "gpt-5.4": (2.50, 15.0),
    "gpt-5.4-mini": (0.75, 4.50),
    "gpt-5.5": (5.0, 30.0),
    "gpt-5.6-sol": (5.0, 30.0),
    "gpt-5.6-terra": (2.0, 12.0),
    "gpt-5.6-luna": (0.20, 1.20),
    "gpt-6-sol": (2.0, 10.0),
    "gpt-6.1-sol": (2.0, 10.0),
    # Older and niche rows, same sources (Anthropic's table; OpenAI's Standard tier as
    # genai-prices openai.yml and LiteLLM agree, unless named):
    "claude-opus-4": (15.0, 75.0),
    "claude-opus-4-0": (15.0, 75.0),
    "claude-3-opus": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-sonnet-4-0": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-haiku": (0.80, 4.0),
    "claude-3-haiku": (0.25, 1.25),
    "claude-mythos-5": (10.0, 50.0),  # "as Fable 5", limited availability
    "claude-mythos-5-1": (10.0, 50.0),  # as Fable 5.1
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o1": (15.0, 60.0),  # genai-prices
    "o1-pro": (150.0, 600.0),
    "o3-mini": (1.10, 4.40),
    "o3-pro": (20.0, 80.0),
    "codex-mini-latest": (1.50, 6.0),  # genai-prices; the model page's "$1.50"
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-pro": (15.0, 120.0),
    "gpt-5.2-pro": (21.0, 168.0),
    "gpt-5.3": (1.75, 14.0),  # gpt-5.3-chat-latest, genai-prices 2026-05-07
    "gpt-5.3-chat-latest": (1.75, 14.0),
    "gpt-5.3-codex-spark": (1.75, 14.0),  # LiteLLM only
    "gpt-5.4-nano": (0.20, 1.25),
    "gpt-5.4-pro": (30.0, 180.0),
    "gpt-5.5-pro": (30.0, 180.0),  # LiteLLM
    "gpt-5.6": (5.0, 30.0),  # alias of gpt-5.6-sol, genai-prices 2026-08-02
}

# The same 1M input + 1M output as ONE request: above the long-context threshold where the
# model has one, so every token is billed at the long-context rates.
ONE_REQUEST = {
    "claude-opus-4-6": 30.0,  # flat since 2026-03-13 (1M context GA)
    "claude-sonnet-4-5": 6.0 + 22.5,  # "> 200K: Input $6, Output $22.50"
    "claude-sonnet-4-6": 18.0,  # flat since 2026-03-13
    "claude-haiku-5-5": 0.50 + 2.50,  # prompt above 100k: 0.50 / 2.50
    "gpt-5.4": 5.0 + 22.5,  # 2x input, 1.5x output above 272k
    "gpt-6.1-sol": 4.0 + 15.0,  # same rule, checked 2026-10-01
    "claude-opus-5": 30.0,
}


@pytest.mark.parametrize(("model", "published"), sorted(PUBLISHED.items()))
def test_a_million_in_and_out_costs_the_published_price(
    model: str, published: tuple[float, float]
) -> None:
    table = PriceTable()
    ten = TokenUsage(input=100_000, output=100_000)  # ten requests of 100k in + 100k out
    total = sum(table.cost(model, ten, at_ms=NOW) or 0 for _ in range(10))
    assert total == pytest.approx(sum(published))
    assert table.cost(model, TokenUsage(input=MILLION), at_ms=NOW, request=False) == (
        pytest.approx(published[0])
    )


def test_every_listed_model_has_its_published_price_here() -> None:
    # A row added to the list without its published figure in this file fails here.
    assert {row.model for row in BUILTIN} == set(PUBLISHED)


@pytest.mark.parametrize(("model", "expected"), sorted(ONE_REQUEST.items()))
def test_one_million_token_request_pays_the_long_context_rate(model: str, expected: float) -> None:
    usage = TokenUsage(input=MILLION, output=MILLION)
    assert PriceTable().cost(model, usage, at_ms=NOW) == pytest.approx(expected)


def test_the_issue_cases_opus_4_6_and_the_1m_suffix() -> None:
    table = PriceTable()
    usage = TokenUsage(input=MILLION, output=MILLION)
    assert table.cost("claude-opus-4-6", usage, at_ms=NOW) == pytest.approx(30.0)  # not $90
    assert table.cost("claude-opus-5[1m]", usage, at_ms=NOW) == pytest.approx(30.0)
    assert table.cost("anthropic/claude-opus-4-6", usage, at_ms=NOW) == pytest.approx(30.0)
    bedrock = "us.anthropic.claude-opus-4-5-20251101-v1:0"
    assert normalise(bedrock) == "claude-opus-4-5"
    # A version that is not listed is unknown, never a shorter name's price.
    assert table.cost("claude-opus-4-9", usage) is None
    assert table.cost("gpt-4.1-mini-high", usage) == table.cost("gpt-4.1-mini", usage)


def test_one_hour_cache_writes_cost_twice_the_input_price() -> None:
    table = PriceTable()
    writes = TokenUsage(cache_write=MILLION)
    # Opus 4.5: 5m writes $6.25, 1h writes $10 (pricing page).
    assert table.cost("claude-opus-4-5", writes) == pytest.approx(6.25)
    assert table.cost("claude-opus-4-5", writes, cache_write_1h=MILLION) == pytest.approx(10.0)
    assert table.cost("claude-opus-4-5", writes, cache_write_1h=400_000) == pytest.approx(
        0.6 * 6.25 + 0.4 * 10.0
    )
    # Haiku 3: 5m $0.30, 1h $0.50; Opus 5.5's cache read is 0.05x input ($0.20).
    assert table.cost("claude-3-haiku-20240307", writes) == pytest.approx(0.30)
    assert table.cost("claude-opus-5-5", TokenUsage(cache_read=MILLION)) == pytest.approx(0.20)


def test_dated_rows_apply_from_their_day() -> None:
    table = PriceTable()
    reads = TokenUsage(cache_read=MILLION)
    assert table.cost("claude-sonnet-5-5", reads, at_ms=day_ms("2026-10-06")) == pytest.approx(0.2)
    assert table.cost("claude-sonnet-5-5", reads, at_ms=day_ms("2026-10-07")) == pytest.approx(0.1)
    long = TokenUsage(input=300_000, output=10_000)
    before = table.cost("claude-opus-4-6", long, at_ms=day_ms("2026-03-12"))
    after = table.cost("claude-opus-4-6", long, at_ms=day_ms("2026-03-13"))
    assert before == pytest.approx(3.0 + 0.375) and after == pytest.approx(1.5 + 0.25)


def test_reasoning_is_output_and_exactly_the_threshold_is_short_context() -> None:
    table = PriceTable()
    assert table.cost("gpt-5.4", TokenUsage(reasoning=MILLION)) == pytest.approx(15.0)
    edge = TokenUsage(input=272_000)
    assert table.cost("gpt-5.4", edge) == pytest.approx(0.272 * 2.5)
    assert table.cost("gpt-5.4", edge + TokenUsage(input=1)) == pytest.approx(0.272001 * 5.0)


def test_every_row_names_its_source_and_date() -> None:
    for row in BUILTIN:
        assert row.source and row.checked, row.model
        assert row.price.input >= 0 and row.price.output >= row.price.input * 0.5


def test_configured_prices_replace_the_list_with_every_lane() -> None:
    table = PriceTable(
        parse_prices(
            {
                "claude-opus-4-5": {"input": 1.0, "output": 2.0},
                "local": {"input": 0.1, "output": 0.2, "cache_write_1h": 0.5,
                          "long_context": {"above": 10, "input": 1.0, "output": 2.0}},
            },
            "config",
        )
    )
    assert table.cost("claude-opus-4-5", TokenUsage(input=MILLION)) == pytest.approx(1.0)
    assert table.resolve("claude-opus-4-5").configured  # type: ignore[union-attr]
    writes = TokenUsage(cache_write=MILLION)
    assert table.cost("local", writes, cache_write_1h=MILLION, request=False) == (
        pytest.approx(0.5)
    )
    # One request of a million written tokens is above the tier's 10: its 1h rate is its input.
    assert table.cost("local", writes, cache_write_1h=MILLION) == pytest.approx(1.0)
    assert table.cost("local", TokenUsage(input=20, output=MILLION)) == pytest.approx(2.0, 1e-3)
    for bad, said in [
        ({"m": {"input": 1, "output": 1, "long_context": {"input": 1, "output": 2}}}, "above"),
        ({"m": {"input": 1, "output": 1, "cache_1h": 2}}, "unknown key"),
        ({"m": {"input": 1, "output": 1, "long_context": 3}}, "must be a table"),
    ]:
        with pytest.raises(InvalidInputError, match=said):
            parse_prices(bad, "config")


def test_a_reported_zero_cost_is_zero_not_unknown() -> None:
    # E_429: the session failed at once and Claude Code reported total_cost_usd 0.
    session = ClaudeSession()
    session.feed((FIXTURES / "claude-code" / "E_429.json").read_text(), 1)
    outcome = session.finish(1, "", 2)
    assert [c.cost_usd for c in outcome.calls] == [0.0]
    assert outcome.calls[0].kind == "reconciliation"
    # A model nobody lists stays unknown (None), never $0.
    assert PriceTable().cost("made-up-model", TokenUsage(input=5)) is None
    assert json.dumps(outcome.calls[0].detail)
