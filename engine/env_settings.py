"""Numbers read from ``TETHER_*`` environment variables, refused in one sentence when wrong.

A value that is not a number, or out of range, used to be replaced by the default without a
word: ``TETHER_MEMORY_TIMEOUT_MS=abc`` ran with 2000 ms and a person believed their setting was
in force. Unset or empty still means the default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from store.errors import InvalidInputError


def env_number(
    name: str,
    default: float,
    *,
    whole: bool = False,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    """``name``'s value from ``environ`` (the process's by default), or ``default`` when unset
    or empty.

    Raises:
        InvalidInputError: the value is not a (whole, with ``whole``) number within
            ``minimum``/``above``/``maximum``; the sentence names the variable and what it
            accepts.
    """
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(int(raw)) if whole else float(raw)
    except ValueError:
        value = math.nan
    if (math.isnan(value) or math.isinf(value)
            or (minimum is not None and value < minimum)
            or (above is not None and value <= above)
            or (maximum is not None and value > maximum)):
        raise InvalidInputError(
            f"{name} must be {_accepted(whole, minimum, above, maximum)}, not {raw[:40]!r}; "
            "unset it for the default."
        )
    return value


def _accepted(whole: bool, minimum: float | None, above: float | None,
              maximum: float | None) -> str:
    kind = "a whole number" if whole else "a number"
    if above is not None:
        return f"{kind} above {above:g}"
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum:g} to {maximum:g}"
    if minimum is not None:
        return f"{kind} of {minimum:g} or more"
    if maximum is not None:
        return f"{kind} of {maximum:g} or less"
    return kind
