"""What JSON Tether accepts from people and programs: one policy for every way JSON comes in.

Python's ``json`` module accepts things that break later readers or crash outright: ``NaN`` and
``Infinity``, ``1e400`` (read as infinity), integers too long for ``str()`` (over 4,300 digits:
a ValueError, not a JSONDecodeError), nesting deep enough for a RecursionError, and ``"\\ud800"``
(a lone surrogate no UTF-8 encoder accepts, so every later read of the value fails). Each is
refused here with one sentence, before anything is stored.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from store.errors import InvalidInputError

MAX_JSON_DEPTH = 128
"""Deepest nesting of arrays and objects accepted."""
MAX_INT_DIGITS = 4300
"""Longest integer accepted (Python's own limit for turning an integer back into text)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonTextError(InvalidInputError):
    """JSON text refused; ``line`` and ``column`` (1-based) say where, when that is known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.reason = message
        self.line = line
        self.column = column


def _reject_constant(name: str) -> Any:
    raise JsonTextError(f"{name} is not allowed in JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else text[:21] + "..."
        raise JsonTextError(f"the number {shown} is too large for JSON (beyond about 1.8e308)")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text) - (1 if text.startswith("-") else 0)
    if digits > MAX_INT_DIGITS:
        raise JsonTextError(
            f"an integer has {digits:,} digits; Tether accepts at most {MAX_INT_DIGITS:,}"
        )
    return int(text)


def parse_json_text(text: str) -> Any:
    """Parse one JSON document under Tether's rules and return the value.

    Raises:
        JsonTextError: the text is not JSON, or holds something refused (see the module
            docstring); :func:`describe` makes the sentence.
    """
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except json.JSONDecodeError as error:
        raise JsonTextError(error.msg, error.lineno, error.colno) from None
    except RecursionError:
        raise JsonTextError(
            f"it is nested more than {MAX_JSON_DEPTH} levels deep"
        ) from None
    except ValueError as error:  # int() limits the json module does not turn into its error
        raise JsonTextError(str(error).split(":")[0]) from None
    check_json_value(value)
    return value


def check_json_value(value: Any) -> None:
    """Refuse a parsed (or built) value nested too deep or holding a lone surrogate.

    Iterative, so a deep value cannot exhaust the interpreter's stack while being checked.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise JsonTextError(
                    "a string holds a lone surrogate (such as \\ud800), which is not Unicode text"
                )
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise JsonTextError(f"it is nested more than {MAX_JSON_DEPTH} levels deep")
            if isinstance(item, dict):
                stack.extend((key, depth + 1) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)


def describe(what: str, error: JsonTextError) -> str:
    """One sentence: ``what`` is not usable JSON, why, and where when known."""
    where = f" at line {error.line} column {error.column}" if error.line else ""
    return f"{what[:1].upper()}{what[1:]} is not valid JSON: {error.reason}{where}."


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (text or a JSON value) with every lone surrogate replaced by U+FFFD.

    For what programs hand back rather than what people type: an agent's JSON may say
    ``"\\ud800"``, which no UTF-8 encoder takes. Refusing it would fail the node for a character;
    it is kept as the replacement character instead, like undecodable bytes of its output."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_lone_surrogates(item) for item in value]
    return value


_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a proper pair: kept
    r"|\\u([dD][89a-fA-F][0-9a-fA-F]{2})"  # a surrogate on its own: replaced
    r"|\\.",  # any other escape (\\, \", \n, \u0041...): kept, consumed whole
    re.DOTALL,
)


def _repair(match: re.Match[str]) -> str:
    return "\\ufffd" if match.group(1) is not None else match.group(0)


def repair_surrogate_escapes(text: str) -> str:
    """JSON text with every escaped lone surrogate (``"\\ud800"`` without its pair) written as
    ``\\ufffd`` instead; proper pairs, other escapes and everything else are kept.

    For JSON from programs parsed by a library that refuses such escapes outright (the MCP
    SDK's message parser), so the message is answered rather than dropped."""
    if "\\ud" not in text and "\\uD" not in text:
        return text
    return _ESCAPE.sub(_repair, text)
