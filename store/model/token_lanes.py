"""The five token lanes of a model call (BRIEF section 2) and what calls cost, as one value each.

:class:`TokenUsage` is a tuple of the five lanes in one order (fresh input, cache read, cache
write, output, reasoning); :data:`LANE_COLUMNS` names their columns in that order, so rows are
read, summed and written by iterating the lanes, never by spelling them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from store.model.buckets import context_window

LANE_COLUMNS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)
"""The column of each lane, in :class:`TokenUsage`'s order (the same in every table)."""


def each_lane(template: str, separator: str = ", ") -> str:
    """SQL for every lane: ``template`` with ``{c}`` as each lane's column, joined (the rollups'
    sums are written once for the five lanes)."""
    return separator.join(template.format(c=column) for column in LANE_COLUMNS)


class TokenUsage(NamedTuple):
    """Token counts of one call or one attempt: fresh input, both cache lanes, output, reasoning."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def context_tokens(self) -> int:
        """Context window: input + cache read + cache write (BRIEF section 2)."""
        return context_window(self.input, self.cache_read, self.cache_write)

    @property
    def total(self) -> int:
        """Every token counted once: the context window plus output and reasoning."""
        return self.context_tokens + self.output + self.reasoning

    @property
    def cached_share(self) -> float:
        """Fraction of the context window that was read from the prompt cache."""
        context = self.context_tokens
        return self.cache_read / context if context else 0.0

    # Element-wise (usage of two calls together), not the tuple's concatenation.
    def __add__(self, other: TokenUsage) -> TokenUsage:  # type: ignore[override]
        return TokenUsage(*(mine + theirs for mine, theirs in zip(self, other, strict=True)))

    def as_dict(self) -> dict[str, int]:
        """Plain dict with the column names (JSON output, statement parameters)."""
        return dict(zip(LANE_COLUMNS, self, strict=True))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TokenUsage:
        """Read the five token columns of a runs/attempts/calls/usage_rollups row."""
        return cls(*(int(row[column] or 0) for column in LANE_COLUMNS))

    @classmethod
    def sum(cls, usages: Iterable[TokenUsage]) -> TokenUsage:
        """The lanes added over ``usages``."""
        total = cls()
        for usage in usages:
            total = total + usage
        return total


class CostTotal(NamedTuple):
    """Money spent by some calls: the sum over calls with a known price (None: no call had
    one), and how many calls had no known price (their cost is *unknown*, never taken as 0)."""

    usd: float | None = None
    unpriced_calls: int = 0

    @property
    def known(self) -> bool:
        """True when every call in the total had a price."""
        return self.unpriced_calls == 0

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``cost_usd`` sums the calls with a known price, ``unpriced_calls`` counts
        the others and ``cost_complete`` says whether there were none."""
        return {
            "cost_usd": round(self.usd or 0.0, 9),
            "unpriced_calls": self.unpriced_calls,
            "cost_complete": self.known,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CostTotal:
        """Read ``cost_usd`` and ``unpriced_calls`` of a runs/attempts/usage_rollups row."""
        usd = row.get("cost_usd")
        return cls(None if usd is None else float(usd), int(row.get("unpriced_calls") or 0))
