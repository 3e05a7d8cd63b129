"""The built-in price list: every current Anthropic, OpenAI and Codex model, with its source and
the date its figures were checked (US dollars per million tokens).

Lanes: fresh input, output (reasoning and thinking tokens are billed as output), cache read,
cache write with the 5-minute TTL (Anthropic's default) and with the 1-hour TTL. A model whose
provider bills no cache writes (OpenAI before gpt-5.6) prices written tokens as input, which is
what they would cost otherwise. ``long`` is the long-context tier: a request whose prompt (input
+ cache read + cache write) is *above* ``above`` tokens is billed at those rates for every token
of that request, output included (Anthropic: "Requests exceeding 200K tokens are charged
long-context rates"; OpenAI: "Exactly 272,000 input tokens uses short-context rates"). A row
with ``since`` replaces the row before it from that date (UTC) on: a call is priced by the row
in effect when it ended.

Sources (checked 2026-12-01 unless a row says otherwise):

* ``anthropic``: platform.claude.com/docs/en/about-claude/pricing (newest stored copy, listing
  models up to Fable 5.1) and the per-model overview pages; multipliers 5m write 1.25x input,
  1h write 2x input, cache read 0.1x input unless the row says otherwise. Cross-checked with
  pydantic/genai-prices ``prices/providers/anthropic.yml`` (prices_checked 2026-07-29).
* ``openai``: developers.openai.com model pages, cross-checked with genai-prices ``openai.yml``
  and LiteLLM's ``model_prices_and_context_window.json`` (synced 2026-07-24).
* Rows marked *third-party* come from tools that quote the live page (named in the row).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from store.model.token_lanes import TokenUsage

ANTHROPIC = "platform.claude.com/docs/en/about-claude/pricing"
OPENAI = "developers.openai.com/api/docs/models (Standard tier)"


MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens for each lane, and the long-context tier (see the module
    docstring)."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    """Cache write, 5-minute TTL (the default one)."""
    cache_write_1h: float | None = None
    """Cache write, 1-hour TTL (None: priced as a 5-minute write)."""
    long_above: int | None = None
    long: Price | None = None

    def for_request(self, usage: TokenUsage) -> Price:
        """The rates one request is billed at: the long-context tier when its prompt (input +
        cache read + cache write) is above :attr:`long_above`."""
        above = self.long_above
        if self.long is not None and above is not None and usage.context_tokens > above:
            return self.long
        return self

    def cost(self, usage: TokenUsage, cache_write_1h: int = 0, *, request: bool = True) -> float:
        """What ``usage`` costs; ``cache_write_1h`` of its cache-write tokens had the 1-hour
        TTL. ``request`` False prices a sum of several requests (a reconciliation row) at the
        base rates, since no tier can be told for it."""
        rates = self.for_request(usage) if request else self
        one_hour = min(max(0, cache_write_1h), usage.cache_write)
        hour_rate = rates.cache_write if rates.cache_write_1h is None else rates.cache_write_1h
        return (
            usage.input * rates.input
            + usage.cache_read * rates.cache_read
            + (usage.cache_write - one_hour) * rates.cache_write
            + one_hour * hour_rate
            + (usage.output + usage.reasoning) * rates.output
        ) / MILLION


@dataclass(frozen=True)
class Listed:
    """One row of the list: a model's price, from when it applies, and where the figures come
    from."""

    model: str
    price: Price
    source: str
    checked: str
    since: str | None = None
    """The first UTC day (``YYYY-MM-DD``) this row applies; None: since the model existed."""
    note: str = ""


def claude(input: float, output: float, *, read: float | None = None) -> Price:
    """Anthropic's lanes from the input price: 5m write 1.25x, 1h write 2x, read 0.1x."""
    return Price(input, output, input * 0.1 if read is None else read, input * 1.25, input * 2)


def gpt(input: float, cached: float | None, output: float, write: float | None = None) -> Price:
    """OpenAI's lanes: cached input as the cache read; no cache-write billing unless given
    (written tokens then cost what fresh input costs)."""
    written = input if write is None else write
    return Price(input, output, input if cached is None else cached, written, written)


def tiered(base: Price, input_factor: float, output_factor: float) -> Price:
    """``base`` with a long-context tier above 272k prompt tokens: every input lane times
    ``input_factor``, output times ``output_factor`` (OpenAI's "2x input, 1.5x output")."""
    long = Price(
        base.input * input_factor,
        base.output * output_factor,
        base.cache_read * input_factor,
        base.cache_write * input_factor,
        (base.cache_write_1h or base.cache_write) * input_factor,
    )
    return replace(base, long_above=272_000, long=long)


def with_long(base: Price, above: int, long: Price) -> Price:
    """``base`` with the long-context rates ``long`` above ``above`` prompt tokens."""
    return replace(base, long_above=above, long=long)


def _row(model: str, price: Price, source: str = ANTHROPIC, checked: str = "2026-12-01",
         **extra: str) -> Listed:
    return Listed(model, price, source, checked, **extra)


_SONNET_4 = with_long(claude(3.0, 15.0), 200_000, claude(6.0, 22.5))
"""Pricing page: "<= 200K input tokens: Input $3, Output $15; > 200K: Input $6, Output $22.50"
(cache lanes per genai-prices and LiteLLM)."""
_FLAT_SONNET = claude(3.0, 15.0)
_OPUS_46 = with_long(claude(5.0, 25.0), 200_000, claude(10.0, 37.5))
_HAIKU_55 = claude(0.10, 0.50)
_CLAIMED = "third-party: kurofune/claudit v1.9.2 and TheKrush/PromptFuel v1.0.23, quoting the page"

BUILTIN: tuple[Listed, ...] = (
    # -- Anthropic --------------------------------------------------------------------------
    _row("claude-opus-4", claude(15.0, 75.0), note="retired except on Google Cloud"),
    _row("claude-opus-4-0", claude(15.0, 75.0)),
    _row("claude-opus-4-1", claude(15.0, 75.0), note="retired except on Bedrock and Google Cloud"),
    _row("claude-opus-4-5", claude(5.0, 25.0)),
    _row("claude-opus-4-6", _OPUS_46, note="long-context surcharge until 2026-03-13"),
    _row("claude-opus-4-6", claude(5.0, 25.0), since="2026-03-13",
         note="1M context at standard rates (claude.com/blog/1m-context-ga)"),
    _row("claude-opus-4-7", claude(5.0, 25.0)),
    _row("claude-opus-4-8", claude(5.0, 25.0)),
    _row("claude-opus-5", claude(5.0, 25.0)),
    _row("claude-opus-5-5", claude(4.0, 20.0, read=0.20), note="cache read 0.05x input"),
    _row("claude-3-opus", claude(15.0, 75.0), note="deprecated"),
    _row("claude-3-7-sonnet", claude(3.0, 15.0), note="deprecated"),
    _row("claude-sonnet-4", _SONNET_4),
    _row("claude-sonnet-4-0", _SONNET_4),
    _row("claude-sonnet-4-5", _SONNET_4, note="retires 2026-11-30"),
    _row("claude-sonnet-4-6", _SONNET_4, note="long-context surcharge until 2026-03-13"),
    _row("claude-sonnet-4-6", _FLAT_SONNET, since="2026-03-13"),
    _row("claude-sonnet-5", claude(2.0, 10.0),
         note="genai-prices lists 3/15 from 2026-09-01; the newest official pages show 2/10"),
    _row("claude-sonnet-5-5", claude(2.0, 10.0)),
    _row("claude-sonnet-5-5", claude(2.0, 10.0, read=0.10), since="2026-10-07", source=_CLAIMED,
         note="cache read cut to 0.05x input"),
    _row("claude-3-haiku", Price(0.25, 1.25, 0.03, 0.30, 0.50)),
    _row("claude-3-5-haiku", claude(0.80, 4.0)),
    _row("claude-haiku-4-5", claude(1.0, 5.0)),
    _row("claude-haiku-5-5", _HAIKU_55),
    _row("claude-haiku-5-5", with_long(_HAIKU_55, 100_000, claude(0.50, 2.50)),
         since="2026-10-07", source=_CLAIMED, note="prompt-length tier above 100k"),
    _row("claude-fable-5", claude(10.0, 50.0)),
    _row("claude-fable-5-1", claude(10.0, 50.0, read=0.25), note="cache hit price, footnote 1"),
    _row("claude-mythos-5", claude(10.0, 50.0), note="limited availability; as Fable 5"),
    _row("claude-mythos-5-1", claude(10.0, 50.0, read=0.25), note="as Fable 5.1"),
    # -- OpenAI and Codex -------------------------------------------------------------------
    _row("gpt-4o", gpt(2.50, 1.25, 10.0), OPENAI),
    _row("gpt-4o-mini", gpt(0.15, 0.075, 0.60), OPENAI),
    _row("gpt-4.1", gpt(2.0, 0.50, 8.0), OPENAI),
    _row("gpt-4.1-mini", gpt(0.40, 0.10, 1.60), OPENAI),
    _row("gpt-4.1-nano", gpt(0.10, 0.025, 0.40), OPENAI),
    _row("o1", gpt(15.0, 7.50, 60.0), OPENAI),
    _row("o1-pro", gpt(150.0, None, 600.0), OPENAI),
    _row("o3", gpt(10.0, None, 40.0), OPENAI, note="until 2025-06-10"),
    _row("o3", gpt(2.0, 0.50, 8.0), OPENAI, since="2025-06-10"),
    _row("o3-pro", gpt(20.0, None, 80.0), OPENAI),
    _row("o3-mini", gpt(1.10, 0.55, 4.40), OPENAI),
    _row("o4-mini", gpt(1.10, 0.275, 4.40), OPENAI),
    _row("codex-mini-latest", gpt(1.50, 0.375, 6.0), OPENAI),
    _row("gpt-5", gpt(1.25, 0.125, 10.0), OPENAI),
    _row("gpt-5-mini", gpt(0.25, 0.025, 2.0), OPENAI),
    _row("gpt-5-nano", gpt(0.05, 0.005, 0.40), OPENAI),
    _row("gpt-5-pro", gpt(15.0, None, 120.0), OPENAI),
    _row("gpt-5-codex", gpt(1.25, 0.125, 10.0), OPENAI, note="shut down"),
    _row("gpt-5.1", gpt(1.25, 0.125, 10.0), OPENAI),
    _row("gpt-5.1-codex", gpt(1.25, 0.125, 10.0), OPENAI),
    _row("gpt-5.1-codex-max", gpt(1.25, 0.125, 10.0), OPENAI),
    _row("gpt-5.1-codex-mini", gpt(0.25, 0.025, 2.0), OPENAI),
    _row("gpt-5.2", gpt(1.75, 0.175, 14.0), OPENAI),
    _row("gpt-5.2-codex", gpt(1.75, 0.175, 14.0), OPENAI),
    _row("gpt-5.2-pro", gpt(21.0, None, 168.0), OPENAI),
    _row("gpt-5.3", gpt(1.75, 0.175, 14.0), OPENAI),
    _row("gpt-5.3-chat-latest", gpt(1.75, 0.175, 14.0), OPENAI),
    _row("gpt-5.3-codex", gpt(1.75, 0.175, 14.0), OPENAI),
    _row("gpt-5.3-codex-spark", gpt(1.75, 0.175, 14.0), OPENAI,
         note="LiteLLM; Codex's rate card charges it 0 credits as a research preview"),
    _row("gpt-5.4", tiered(gpt(2.50, 0.25, 15.0), 2.0, 1.5), OPENAI),
    _row("gpt-5.4-mini", gpt(0.75, 0.075, 4.50), OPENAI),
    _row("gpt-5.4-nano", gpt(0.20, 0.02, 1.25), OPENAI),
    _row("gpt-5.4-pro", tiered(gpt(30.0, 3.0, 180.0), 2.0, 1.5), OPENAI),
    _row("gpt-5.5", tiered(gpt(5.0, 0.50, 30.0), 2.0, 1.5), OPENAI,
         note="long-context tier from LiteLLM; genai-prices (2026-04-24) lists none"),
    _row("gpt-5.5-pro", tiered(gpt(30.0, 3.0, 180.0), 2.0, 1.5), OPENAI),
    _row("gpt-5.6", tiered(gpt(5.0, 0.50, 30.0, write=6.25), 2.0, 1.5), OPENAI,
         note="alias of gpt-5.6-sol; cache writes billed at 1.25x input"),
    _row("gpt-5.6-sol", tiered(gpt(5.0, 0.50, 30.0, write=6.25), 2.0, 1.5), OPENAI),
    _row("gpt-5.6-terra", gpt(2.50, 0.25, 15.0, write=3.125), OPENAI),
    _row("gpt-5.6-terra", gpt(2.0, 0.20, 12.0, write=2.50), OPENAI, since="2026-07-30"),
    _row("gpt-5.6-luna", gpt(1.0, 0.10, 6.0, write=1.25), OPENAI),
    _row("gpt-5.6-luna", gpt(0.20, 0.02, 1.20, write=0.25), OPENAI, since="2026-07-30"),
    _row("gpt-6-sol", gpt(2.0, 0.20, 10.0, write=2.50),
         "third-party: dev.to/hassann, citing the model page"),
    _row("gpt-6.1-sol", tiered(gpt(2.0, 0.10, 10.0, write=2.50), 2.0, 1.5),
         "third-party: KZCFG/AILSA-SubSwitch v1.0.0(g), checked on 2026-10-01"),
)
"""Every built-in row (several per model when its price changed on a date)."""
