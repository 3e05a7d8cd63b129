"""The seam to budgets: the workspace's daily spending limit in dollars, when
``.tether/config.toml`` sets one, for the Usage view (a line on the per-day chart) and
``tether usage`` (days over it marked). Nothing is drawn when none is set; enforcing budgets
is the engine's business, not this module's.

Read from a ``[budget]`` table: ``workspace_daily_usd`` (also ``daily_usd`` or
``per_day_usd``); a value that is not a positive number is left out (the engine's own config
check reports it).
"""

from __future__ import annotations

import tomllib
from typing import Any

from store.workspace.layout import Workspace

DAILY_KEYS = ("workspace_daily_usd", "daily_usd", "per_day_usd")


def daily_budget_from(config: dict[str, Any]) -> float | None:
    """The daily dollar budget a parsed config sets, or None."""
    table = config.get("budget")
    if not isinstance(table, dict):
        return None
    for key in DAILY_KEYS:
        value = table.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def daily_budget_usd(workspace: Workspace) -> float | None:
    """The workspace's daily dollar budget, or None (no config, no budget, not readable)."""
    try:
        text = workspace.config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "budget" not in text:
        return None
    try:
        return daily_budget_from(tomllib.loads(text))
    except tomllib.TOMLDecodeError:
        return None
