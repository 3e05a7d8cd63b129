"""Money as the command line and the dashboard print it (``tui.plain``)."""

from __future__ import annotations

from store.model.history_records import HandoffRecord
from store.read.dashboard_rows import HandoffChain
from tui.plain import cost, money
from tui.screens.handoffs_view import chain_rows, handoff_detail


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


def test_carried_bytes_read_with_thousands_separators() -> None:
    # Seen in the Handoffs screenshot: "662 B" above "1132 B".
    handoff = HandoffRecord(1, "r-a", "r-b", "ceiling", "Token ceiling reached.", 1,
                            carried_bytes=1132)
    ((_key, cells),) = chain_rows([HandoffChain(["r-a", "r-b"], [handoff])], "")
    assert cells[-1].plain == "1,132 B"
    assert "carried 1,132 bytes of distilled state" in handoff_detail(handoff).plain
