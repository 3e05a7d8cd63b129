"""Plain-text helpers for stored values, shared by the dashboard and the command line.

No Rich here: the command line imports this module and must start quickly. :func:`visible`
replaces control characters with visible stand-ins, so data can never inject terminal escape
sequences; the dashboard's Rich variants are in :mod:`tui.format`.
"""

from __future__ import annotations

import json
from typing import Any

from store.model.wording import plural as plural  # re-exported: tui counts through here

# C0 controls map to the Unicode "control pictures" block (U+2400 + code), DEL to U+2421.
_VISIBLE = {code: chr(0x2400 + code) for code in range(0x20)}
_VISIBLE[0x7F] = "\u2421"
# C1 controls (U+0080-U+009F; U+009B is a one-byte CSI) are shown as escaped hex.
_VISIBLE.update({code: f"\\x{code:02x}" for code in range(0x80, 0xA0)})


def visible(text: str, *, keep_newlines: bool = True) -> str:
    """Replace control characters by visible stand-ins (tabs become spaces)."""
    table = dict(_VISIBLE)
    table[0x09] = "    "
    if keep_newlines:
        del table[0x0A]
    return text.translate(table)


def pretty_json(text: str | None) -> str:
    """Indent a JSON document for reading; anything that is not JSON is returned unchanged."""
    if text is None:
        return ""
    try:
        value: Any = json.loads(text)
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, a huge integer, or nested too deeply
        return text


def tokens(count: int | None) -> str:
    """Compact token count: 950, 12.3k, 1.25M."""
    if count is None:
        return "–"
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.2f}M"


def duration(ms: int | None) -> str:
    """Compact duration: 850ms, 12.4s, 3m05s, 2h07m."""
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def ago(now_ms: int, then_ms: int | None) -> str:
    """How long ago ``then_ms`` was, e.g. "3.2s ago"; "never" for None."""
    if then_ms is None:
        return "never"
    return f"{duration(max(0, now_ms - then_ms))} ago"


def money(usd: float) -> str:
    """A dollar amount: four decimals below $1 (calls cost fractions of a cent), else two; a
    negative one (a reconciliation below list price) as ``-$0.0007``."""
    if usd == 0:
        return "$0"
    sign = "-" if usd < 0 else ""
    if abs(usd) < 1:
        return f"{sign}${abs(usd):.4f}"
    return f"{sign}${abs(usd):,.2f}"


def cost(usd: float | None, unpriced_calls: int = 0) -> str:
    """A cost for people: ``$0.0745``; ``unknown`` when nothing had a known price;
    ``$0.0745+?`` when some calls had none (never shown as 0); ``–`` for no calls at all."""
    if unpriced_calls and not usd:
        return "unknown"
    if usd is None:
        return "–"
    return money(usd) + ("+?" if unpriced_calls else "")


def spent(tokens_total: int, usd: float | None, unpriced_calls: int = 0) -> str:
    """What a run, node or attempt cost, ``–`` only before any call. Money can be spent
    without tokens (a Claude Code session stopped by a limit reports its $13.80 and no
    usage), so a cost is shown whenever there are tokens or dollars."""
    return cost(usd if tokens_total or usd else None, unpriced_calls)


def percent(share: float) -> str:
    """A fraction as a whole percentage."""
    return f"{share * 100:.0f}%"


def budget_used(run: Any) -> str:
    """How much of its tightest budget a run has used: ``81%/$2.00``, ``64%/120.0k``
    (empty when it has none). Tokens count as budgets count them (all but reasoning)."""
    shown, worst = "", -1.0
    for budget in run.budgets:
        maximum = budget.get("max")
        if not isinstance(maximum, int | float) or isinstance(maximum, bool) or maximum <= 0:
            continue
        if budget.get("unit") == "usd":
            # Calls without a known price are not in the share: "+?" says so.
            unknown = "+?" if run.cost.unpriced_calls else ""
            used, limit = (run.cost.usd or 0.0) / maximum, f"${maximum:,.2f}{unknown}"
        else:
            # Every lane counts against a token budget (engine.ceiling.counted_tokens is the
            # total); the listing commands that draw this import no engine.
            used, limit = run.tokens.total / maximum, tokens(int(maximum))
        if used > worst:
            worst, shown = used, f"{int(used * 100)}%/{limit}"
    return shown
