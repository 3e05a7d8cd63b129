"""Money as the command line and the dashboard print it (``tui.plain``)."""

from __future__ import annotations

from tui.plain import cost, money


def test_money_reads_as_people_write_it() -> None:
    assert money(0) == "$0"
    assert money(0.07452) == "$0.0745"
    assert money(1234.5) == "$1,234.50"
    # A reconciliation row below list price: the sign goes before the dollar sign.
    assert money(-0.00066) == "-$0.0007"
    assert money(-12.5) == "-$12.50"


def test_cost_never_shows_an_unknown_price_as_zero() -> None:
    assert cost(None) == "–"
    assert cost(0.0, unpriced_calls=2) == "unknown"
    assert cost(0.5, unpriced_calls=1) == "$0.5000+?"
    assert cost(0.5) == "$0.5000"
