"""JSON text columns of the run tables: how values are written to and read from them."""

from __future__ import annotations

import json
from typing import Any


def dump_json(value: Any) -> str:
    """Compact JSON text for a ``*_json`` column (UTF-8 kept as is, no spaces)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def load_json(text: str | None) -> Any:
    """The value stored in a ``*_json`` column; None stays None."""
    return None if text is None else json.loads(text)
