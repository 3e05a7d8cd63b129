"""What model calls cost: the price of a model at the time of a call (US dollars per million
tokens), from the user's ``.tether/config.toml`` first, then from the built-in list
(:mod:`engine.price_list`: every current Anthropic, OpenAI and Codex model, each row with its
source and date). A model with no known price gets cost ``None`` ("unknown"), never 0.
Reasoning tokens are billed at the output price; cache writes with the 1-hour TTL at their own
rate; a request above a model's long-context threshold at its long-context rates.

```toml
[prices."qwen2.5-coder"]
input = 0.20          # fresh input, USD per million tokens
output = 0.60
cache_read = 0.02     # default: input
cache_write = 0.25    # 5-minute cache write; default: input
cache_write_1h = 0.40 # 1-hour cache write; default: cache_write
long_context = { above = 200000, input = 0.40, output = 0.90 }   # optional tier
```

A configured price replaces every built-in row of that model (dates included). Model names are
matched exactly, then without a bracketed suffix (``claude-opus-5[1m]``), a provider prefix
(``openai/gpt-4o``, ``us.anthropic.…-v1:0``) and a date suffix (``claude-haiku-4-5-20251001``,
``gpt-4o-mini-2024-07-18``), then by the longest listed name the model starts with followed by
``-`` and a word (``gpt-4.1-mini-high`` -> ``gpt-4.1-mini``). A version number never matches a
shorter name: ``claude-opus-4-6`` is not ``claude-opus-4``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.price_list import BUILTIN, Listed, Price
from store.errors import InvalidInputError
from store.model.token_lanes import TokenUsage

__all__ = ["ANTHROPIC_RELATIVE", "Price", "PriceTable", "Priced", "parse_prices", "split_cost"]

ANTHROPIC_RELATIVE = Price(1.0, 5.0, 0.1, 1.25, 2.0)
"""How Anthropic prices the lanes relative to each other: used to split a reported session
cost over calls when the model's price is unknown."""

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_BRACKETS = re.compile(r"\[[^\]]*\]$")
_BEDROCK = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.(.+?)(?:-v\d+(?::\d+)?)?$")
_PRICE_KEYS = {"input", "output", "cache_read", "cache_write", "cache_write_1h", "long_context"}
_LONG_KEYS = {"above", "input", "output", "cache_read", "cache_write", "cache_write_1h"}


def normalise(model: str) -> str:
    """``model`` as listed: lower case, without brackets, provider prefix or date suffix."""
    name = _BRACKETS.sub("", model.strip().lower()).strip()
    name = name.rsplit("/", 1)[-1]
    bedrock = _BEDROCK.match(name)
    if bedrock:
        name = bedrock.group(1)
    return _DATE_SUFFIX.sub("", name)


def day_ms(day: str) -> int:
    """Midnight UTC of ``YYYY-MM-DD`` in epoch milliseconds."""
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class Priced:
    """Which row priced a model: its listed name, the row, and whether the user configured it."""

    name: str
    row: Listed
    configured: bool


class PriceTable:
    """Prices by model name: configured ones first, then the built-in list."""

    def __init__(self, configured: Mapping[str, Price] | None = None) -> None:
        self._rows: dict[str, list[Listed]] = {}
        for row in BUILTIN:
            self._rows.setdefault(row.model, []).append(row)
        self._configured: set[str] = set()
        for model, price in (configured or {}).items():
            name = model.strip().lower()
            self._rows[name] = [Listed(name, price, ".tether/config.toml", "")]
            self._configured.add(name)

    def rows(self) -> list[Priced]:
        """Every row in use: configured models first, then the built-in list in its order."""
        found = [Priced(n, r, True) for n in sorted(self._configured) for r in self._rows[n]]
        return found + [
            Priced(r.model, r, False) for r in BUILTIN if r.model not in self._configured
        ]

    def resolve(self, model: str | None, at_ms: int | None = None) -> Priced | None:
        """The row pricing ``model`` for a call that ended at ``at_ms`` (default: now)."""
        name = self._name(model)
        if name is None:
            return None
        rows = self._rows[name]
        when = at_ms if at_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
        row = rows[0]
        for candidate in rows[1:]:
            if candidate.since is None or day_ms(candidate.since) <= when:
                row = candidate
        return Priced(name, row, name in self._configured)

    def _name(self, model: str | None) -> str | None:
        if not model or not model.strip():
            return None
        exact = model.strip().lower()
        if exact in self._rows:
            return exact
        name = normalise(model)
        for candidate in (name, name.removesuffix("-latest")):
            if candidate in self._rows:
                return candidate
        # A longer name built on a listed one (``gpt-4.1-mini-high``), never a version of it.
        matches = [
            key for key in self._rows
            if name.startswith(key + "-") and not name[len(key) + 1 : len(key) + 2].isdigit()
        ]
        return max(matches, key=len) if matches else None

    def price_of(self, model: str | None, at_ms: int | None = None) -> Price | None:
        """The price of ``model`` at ``at_ms`` (see the module docstring), or None."""
        priced = self.resolve(model, at_ms)
        return None if priced is None else priced.row.price

    def cost(
        self,
        model: str | None,
        usage: TokenUsage,
        *,
        cache_write_1h: int = 0,
        at_ms: int | None = None,
        request: bool = True,
    ) -> float | None:
        """What ``usage`` of ``model`` costs (``request`` False: a sum of several requests, at
        base rates), or None when no price is known."""
        price = self.price_of(model, at_ms)
        return None if price is None else price.cost(usage, cache_write_1h, request=request)


def _number(entry: Mapping[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidInputError(f"{where}.{key} must be a number >= 0 (USD per 1M).")
    return float(value)


def _lanes(entry: Mapping[str, Any], where: str) -> Price:
    values = {key: _number(entry, key, where) for key in sorted(_PRICE_KEYS - {"long_context"})}
    input_price, output_price = values["input"], values["output"]
    if input_price is None or output_price is None:
        raise InvalidInputError(f"{where} needs both input and output prices.")
    write = values["cache_write"] if values["cache_write"] is not None else input_price
    return Price(
        input_price,
        output_price,
        values["cache_read"] if values["cache_read"] is not None else input_price,
        write,
        values["cache_write_1h"] if values["cache_write_1h"] is not None else write,
    )


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
        price = _lanes(entry, where)
        long = entry.get("long_context")
        if long is not None:
            price = _with_long(price, long, f"{where}.long_context")
        prices[str(model)] = price
    return prices


def _with_long(price: Price, long: Any, where: str) -> Price:
    if not isinstance(long, Mapping):
        raise InvalidInputError(f"{where} must be a table with above, input and output.")
    unknown = sorted(set(long) - _LONG_KEYS)
    if unknown:
        raise InvalidInputError(f"{where} has an unknown key {unknown[0]!r}.")
    above = long.get("above")
    if isinstance(above, bool) or not isinstance(above, int) or above < 1:
        raise InvalidInputError(f"{where}.above must be a whole number of prompt tokens >= 1.")
    rates = _lanes({k: v for k, v in long.items() if k != "above"}, where)
    return Price(price.input, price.output, price.cache_read, price.cache_write,
                 price.cache_write_1h, above, rates)


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
