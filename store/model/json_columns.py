"""JSON text columns of the run tables: how values are written to them (read back by
:func:`store.model.run_records.read_json`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from store.errors import InvalidInputError
from store.model.json_text import without_lone_surrogates
from store.model.secret_mask import mask_value, process_mask

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _c_encode() -> Callable[[Any], str] | None:
    """The C encoder with :data:`_ENCODER`'s options, made once: ``JSONEncoder.encode`` makes
    a new one for every value (a tenth of the cost of an event's payload). It keeps no
    record of the containers it is inside (a dict or list that holds itself recurses until
    :class:`RecursionError`, as nesting too deep does): a record kept between calls would
    outlive a failed call."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    chunks = make(None, _ENCODER.default, json.encoder.encode_basestring, None,
                  _ENCODER.key_separator, _ENCODER.item_separator, False, False, False)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_ENCODE: Callable[[Any], str] = _c_encode() or _ENCODER.encode
"""Compact JSON text of a value (one encoder for every call)."""


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


def dump_recorded_json(value: Any) -> str:
    """:func:`dump_json` of a value recorded from a run (an output, an event's payload, what an
    agent reported): secrets masked (:mod:`store.model.secret_mask`) and lone surrogates
    replaced (:func:`store.model.json_text.without_lone_surrogates`), so what an agent says
    is recorded, never refused."""
    try:
        text = dump_json(value)
    except InvalidInputError:
        value = without_lone_surrogates(value)
        text = dump_json(value)
    mask = process_mask()
    # One look at the whole text first: most payloads hold nothing that could be a secret.
    return dump_json(mask_value(value, mask)) if mask.might_hold(text) else text


def recorded_text(text: str | None) -> str | None:
    """A text column recorded from a run (a prompt, an answer, an error): secrets masked and
    lone surrogates replaced, as :func:`dump_recorded_json` does for JSON."""
    if text is None:
        return None
    return process_mask().mask(without_lone_surrogates(text))
