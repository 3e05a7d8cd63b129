"""What model calls cost: a price table per model (US dollars per million tokens).

Prices come from ``[prices."MODEL"]`` tables in ``.tether/config.toml`` first, then from a small
built-in table of common models. A model with no known price gets cost ``None`` ("unknown"),
never 0. Reasoning tokens are billed at the output price.

```toml
[prices."qwen2.5-coder"]
input = 0.20          # fresh input, USD per million tokens
output = 0.60
cache_read = 0.02     # default: input
cache_write = 0.25    # default: input
```

Model names are matched exactly, then without a provider prefix (``openai/gpt-4o``) and a date
suffix (``claude-haiku-4-5-20251001``, ``gpt-4o-mini-2024-07-18``), then by the longest table
name the model starts with followed by ``-`` (``gpt-4.1-mini-high`` -> ``gpt-4.1-mini``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store.errors import InvalidInputError
from store.model.token_lanes import TokenUsage

MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens for each lane."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: TokenUsage) -> float:
        """What ``usage`` costs at this price."""
        return (
            usage.input * self.input
            + usage.cache_read * self.cache_read
            + usage.cache_write * self.cache_write
            + (usage.output + usage.reasoning) * self.output
        ) / MILLION


def _price(input: float, output: float, cache_read: float, cache_write: float) -> Price:
    return Price(input, output, cache_read, cache_write)


# Public list prices (USD per million tokens). Anthropic: cache write = 1.25x input (5-minute
# cache), cache read = 0.1x input. OpenAI bills no cache writes (its lane stays 0).
BUILTIN_PRICES: dict[str, Price] = {
    "claude-opus-4-5": _price(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": _price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4": _price(15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-5": _price(3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4": _price(3.0, 15.0, 0.3, 3.75),
    "claude-3-7-sonnet": _price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": _price(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": _price(0.8, 4.0, 0.08, 1.0),
    "gpt-5": _price(1.25, 10.0, 0.125, 1.25),
    "gpt-5-mini": _price(0.25, 2.0, 0.025, 0.25),
    "gpt-5-nano": _price(0.05, 0.4, 0.005, 0.05),
    "gpt-4.1": _price(2.0, 8.0, 0.5, 2.0),
    "gpt-4.1-mini": _price(0.4, 1.6, 0.1, 0.4),
    "gpt-4.1-nano": _price(0.1, 0.4, 0.025, 0.1),
    "gpt-4o": _price(2.5, 10.0, 1.25, 2.5),
    "gpt-4o-mini": _price(0.15, 0.6, 0.075, 0.15),
    "o3": _price(2.0, 8.0, 0.5, 2.0),
    "o4-mini": _price(1.1, 4.4, 0.275, 1.1),
}

# How Anthropic prices the lanes relative to each other (the same for every current Claude
# model): used to split a reported session cost over calls when the model's price is unknown.
ANTHROPIC_RELATIVE = _price(1.0, 5.0, 0.1, 1.25)

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_PRICE_KEYS = {"input", "output", "cache_read", "cache_write"}


def _normalise(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]
    return _DATE_SUFFIX.sub("", name)


class PriceTable:
    """Prices by model name: configured ones first, then the built-in table."""

    def __init__(self, configured: Mapping[str, Price] | None = None) -> None:
        self._table: dict[str, Price] = {k.lower(): v for k, v in BUILTIN_PRICES.items()}
        self._table.update({k.lower(): v for k, v in (configured or {}).items()})
        self._configured = {k.lower() for k in (configured or {})}

    def price_of(self, model: str | None) -> Price | None:
        """The price of ``model`` (see the module docstring for matching), or None."""
        if not model:
            return None
        exact = model.strip().lower()
        if exact in self._configured:
            return self._table[exact]
        for name in (exact, _normalise(model)):
            if name in self._table:
                return self._table[name]
        name = _normalise(model)
        matches = [key for key in self._table if name.startswith(key + "-")]
        return self._table[max(matches, key=len)] if matches else None

    def cost(self, model: str | None, usage: TokenUsage) -> float | None:
        """What ``usage`` of ``model`` costs, or None when no price is known."""
        price = self.price_of(model)
        return None if price is None else price.cost(usage)


def parse_prices(data: Any, source: str) -> dict[str, Price]:
    """``[prices]`` of config.toml as Price objects; InvalidInputError names the bad entry."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{source}: [prices] must be a table of model tables.")
    prices: dict[str, Price] = {}
    for model, entry in data.items():
        where = f"{source}: prices.{model!r}"
        if not isinstance(entry, Mapping):
            raise InvalidInputError(f"{where} must be a table with input and output.")
        unknown = sorted(set(entry) - _PRICE_KEYS)
        if unknown:
            raise InvalidInputError(f"{where} has an unknown key {unknown[0]!r}.")
        values: dict[str, float] = {}
        for key in sorted(_PRICE_KEYS):
            value = entry.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidInputError(f"{where}.{key} must be a number >= 0 (USD per 1M).")
            values[key] = float(value)
        if "input" not in values or "output" not in values:
            raise InvalidInputError(f"{where} needs both input and output prices.")
        prices[str(model)] = Price(
            values["input"],
            values["output"],
            values.get("cache_read", values["input"]),
            values.get("cache_write", values["input"]),
        )
    return prices


def split_cost(total: float, weights: Sequence[float]) -> list[float]:
    """``total`` shared out in proportion to ``weights`` (equal shares when all are 0); the
    shares add up to ``total``."""
    if not weights:
        return []
    whole = sum(weights)
    if whole <= 0:
        return [total / len(weights)] * len(weights)
    shares = [total * w / whole for w in weights]
    shares[-1] = total - sum(shares[:-1])
    return shares
