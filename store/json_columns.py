"""JSON text columns of the run tables: how values are written to and read from them."""

from __future__ import annotations

import json
from typing import Any

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dump_json(value: Any) -> str:
    """Compact JSON text for a ``*_json`` column (UTF-8 kept as is, no spaces)."""
    # One encoder for every call: json.dumps with options builds a new one each time.
    return _ENCODE(value)


def load_json(text: str | None) -> Any:
    """The value stored in a ``*_json`` column; None stays None."""
    return None if text is None else json.loads(text)
