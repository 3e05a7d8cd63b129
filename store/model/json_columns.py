"""JSON text columns of the run tables: how values are written to them (read back by
:func:`store.model.run_records.read_json`)."""

from __future__ import annotations

import json
from typing import Any

from store.errors import InvalidInputError

# One encoder for every call: json.dumps with options builds a new one each time.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def dump_json(value: Any) -> str:
    """Compact JSON text for a ``*_json`` column (UTF-8 kept as is, no spaces).

    Raises:
        InvalidInputError: the value holds something JSON (or SQLite's UTF-8 text) cannot:
            NaN or infinity, a lone surrogate, an object that is not JSON, or nesting too deep.
    """
    try:
        text = _ENCODE(value)
        text.encode("utf-8")  # a lone surrogate would fail later, at SQLite's bind
    except (TypeError, ValueError) as error:  # UnicodeEncodeError is a ValueError
        reason = "it holds a lone surrogate" if isinstance(error, UnicodeError) else str(error)
        raise InvalidInputError(f"A value cannot be stored as JSON: {reason}.") from None
    except RecursionError:
        raise InvalidInputError("A value cannot be stored as JSON: it is nested too deeply.") \
            from None
    return text
