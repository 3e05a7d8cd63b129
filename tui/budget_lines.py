"""The seam to budgets: the workspace's daily spending limit in dollars, when
``.tether/config.toml`` sets one, for the Usage view (a line on the per-day chart) and
``tether usage`` (days over it marked). Nothing is drawn when none is set; enforcing budgets
is the engine's business, not this module's.

Read from ``[budget]`` ``day_usd``, the key the engine enforces, parsed by the engine's own
:func:`engine.budget.parse_budget`; a table it refuses draws nothing (``tether run`` and
``tether budget`` report why).
"""

from __future__ import annotations

import tomllib
from typing import Any

from engine.budget import parse_budget
from store.errors import InvalidInputError
from store.workspace.layout import Workspace


def daily_budget_from(config: dict[str, Any]) -> float | None:
    """The daily dollar budget a parsed config sets, or None."""
    try:
        return parse_budget(config.get("budget"), "config.toml").day_usd
    except InvalidInputError:
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
