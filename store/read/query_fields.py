"""The fields of the run query language (:mod:`store.read.run_query`) and how each reads its
values: the kinds, the operators each kind takes, times (UTC dates, times, a time ago),
durations, token counts and dollars. Pure; every bad value is one sentence."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import NamedTuple

from store.db.paging import LARGEST_INTEGER
from store.errors import InvalidInputError
from store.model.states import RUN_STATUSES

# -- the fields ---------------------------------------------------------------------------


class Field(NamedTuple):
    """A field a condition can name: its kind decides the operators and values it takes."""

    name: str
    kind: str
    """text, status, number, count, money, time, duration, multi, json, contains, fulltext."""
    about: str


FIELDS: dict[str, Field] = {
    field.name: field
    for field in (
        Field("run", "text", "the run id"),
        Field("workflow", "text", "the workflow's name"),
        Field("status", "status", "the run's status (stale: running with an old heartbeat; "
              "queued: pending on the queue for a worker)"),
        Field("parent", "text", "the run it continues (none: a first generation)"),
        Field("forked", "text", "the run it was forked from (none: not a fork)"),
        Field("gen", "number", "the generation in its handoff chain"),
        Field("created", "time", "when the run was created"),
        Field("started", "time", "when it started"),
        Field("finished", "time", "when it ended"),
        Field("age", "duration", "how long ago it was created"),
        Field("duration", "duration", "how long it ran (so far, while running)"),
        Field("cost", "money", "its cost in US dollars"),
        Field("tokens", "count", "every token of its calls"),
        Field("nodes", "count", "how many nodes it has"),
        Field("agent", "multi", "an agent one of its attempts ran"),
        Field("model", "multi", "a model one of its attempts or calls used"),
        Field("input", "json", "a field of its input (input.repo, input.ticket.id)"),
        Field("error", "contains", "its error or one of its attempts' errors"),
        Field("text", "fulltext", "its prompts, outputs and logs"),
        Field("prompt", "fulltext", "its prompts as sent"),
        Field("output", "fulltext", "its outputs and raw answers"),
        Field("log", "fulltext", "its agents' stream logs"),
    )
}
ALIASES = {"id": "run", "generation": "gen", "wf": "workflow", "state": "status"}
STATUS_VALUES = (*RUN_STATUSES, "stale", "queued")
FULLTEXT_FIELDS = tuple(name for name, f in FIELDS.items() if f.kind == "fulltext")

ORDERING = (">", ">=", "<", "<=")
OPS_BY_KIND: dict[str, tuple[str, ...]] = {
    "text": ("=", "!=", "~", "!~", "starts", "in", "not in"),
    "status": ("=", "!=", "in", "not in"),
    "number": ("=", "!=", *ORDERING, "in", "not in", "between"),
    "count": ("=", "!=", *ORDERING, "between"),
    "money": ("=", "!=", *ORDERING, "between"),
    "time": ("=", "!=", *ORDERING, "between"),
    "duration": (*ORDERING, "between"),
    "multi": ("=", "!=", "~", "!~", "starts", "in", "not in"),
    "json": ("=", "!=", "~", "!~", "starts", "in", "not in", *ORDERING, "between"),
    "contains": ("~", "!~"),
    "fulltext": ("~", "!~"),
}
OP_WORDS = {"=": "=", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "~": "~",
             "!~": "!~", "starts": "STARTS_WITH", "in": "IN", "not in": "NOT IN",
             "between": "BETWEEN"}

Value = str | int | float


# -- values -------------------------------------------------------------------------------

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
             "w": 604_800_000}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_AGO = re.compile(r"^-?(\d+(?:\.\d+)?)(ms|s|m|h|d|w)(?:\s*ago)?$")
_COUNT = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")
_MONEY = re.compile(r"^\$?(\d+(?:\.\d+)?)$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_PATH_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
DAY_MS = 86_400_000


def _whole(number: float) -> int:
    """``number`` rounded; an infinite one (``9…9d`` overflows a float) stays out of range."""
    return round(number) if math.isfinite(number) else 2 * LARGEST_INTEGER


def _out_of_range(value: Value) -> bool:
    """True for a number no database column could be compared with (binding it would fail)."""
    if isinstance(value, int):
        return abs(value) > LARGEST_INTEGER
    return isinstance(value, float) and not math.isfinite(value)


def _too_large(text: str, what: str) -> InvalidInputError:
    shown = text if len(text) <= 40 else f"{text[:40]}…"
    return InvalidInputError(f"{what} takes smaller values than {shown!r}.")


def _duration_ms(text: str) -> int | None:
    match = _DURATION.match(text)
    return None if match is None else _whole(float(match[1]) * _UNITS_MS[match[2]])


def _time_ms(text: str, now_ms: int) -> tuple[int, bool] | None:
    """(milliseconds since the epoch, whether it names a whole day), or None."""
    lowered = text.lower()
    today = now_ms - now_ms % DAY_MS
    if lowered == "now":
        return now_ms, False
    if lowered in ("today", "yesterday"):
        return today - (DAY_MS if lowered == "yesterday" else 0), True
    ago = _AGO.match(lowered)
    if ago is not None:
        return now_ms - _whole(float(ago[1]) * _UNITS_MS[ago[2]]), False
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000), bool(_DATE.match(text))


def _count(text: str) -> int | None:
    match = _COUNT.match(text)
    if match is None:
        return None
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[match[2].lower()]
    return _whole(float(match[1]) * scale)


_EXAMPLES = {
    "number": "a whole number such as 2",
    "count": "a number such as 5000, 200k or 1.5M",
    "money": "a dollar amount such as 0.50 or $2",
    "time": "a date (2026-01-01), a time (2026-01-01T10:30) or a time ago (-7d, 12h, today)",
    "duration": "a duration such as 90s, 5m, 2h or 7d",
}


def read_value(field: Field, text: str, now_ms: int) -> tuple[Value, bool]:
    """One value of ``field`` typed as ``text``: (value, whether it names a whole day)."""
    kind = field.kind
    value: Value | None
    if kind == "status":
        lowered = text.lower()
        if lowered not in STATUS_VALUES:
            raise InvalidInputError(
                f"status takes one of {', '.join(STATUS_VALUES)}, not {text!r}."
            )
        return lowered, False
    if kind == "time":
        moment = _time_ms(text, now_ms)
        if moment is None:
            raise InvalidInputError(f"{field.name} takes {_EXAMPLES[kind]}, not {text!r}.")
        if _out_of_range(moment[0]):
            raise _too_large(text, field.name)
        return moment
    if kind == "number":
        value = int(text) if text.lstrip("-").isdigit() else None
    elif kind == "count":
        value = _count(text)
    elif kind == "money":
        match = _MONEY.match(text)
        value = None if match is None else float(match[1])
    elif kind == "duration":
        value = _duration_ms(text.lower())
    elif kind == "json" and _NUMBER.match(text):
        value = float(text) if "." in text else int(text)
    else:
        return text, False
    if value is None:
        raise InvalidInputError(f"{field.name} takes {_EXAMPLES[kind]}, not {text!r}.")
    if _out_of_range(value):
        raise _too_large(text, field.name)
    return value, False


def field_names() -> str:
    """The fields a query may name, for messages and help."""
    return ", ".join(f"{name}.FIELD" if f.kind == "json" else name for name, f in FIELDS.items())


def is_field(word: str) -> bool:
    """Whether ``word`` names a field (``input.x`` included)."""
    head = word.partition(".")[0].lower()
    return ALIASES.get(head, head) in FIELDS


def resolve_field(word: str) -> tuple[Field, tuple[str, ...]]:
    """The field ``word`` names (aliases included) and, for ``input.a.b``, its path."""
    head, _, rest = word.partition(".")
    name = ALIASES.get(head.lower(), head.lower())
    field = FIELDS.get(name)
    if field is None:
        import difflib

        close = difflib.get_close_matches(name, [*FIELDS, *ALIASES], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InvalidInputError(f"{head!r} is not a field{hint}; fields are {field_names()}.")
    if field.kind != "json":
        if rest:
            raise InvalidInputError(f"{field.name} has no fields of its own ({word!r}).")
        return field, ()
    path = tuple(rest.split(".")) if rest else ()
    if not path or not all(_PATH_PART.match(part) for part in path):
        raise InvalidInputError(
            f"input needs a field name made of letters, digits, _ and -, such as input.repo, "
            f"not {word!r}."
        )
    return field, path


def describe_time(ms: int) -> str:
    """A moment as the query language writes it (UTC)."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if ms % DAY_MS == 0:
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%dT%H:%M")


def since_ms(text: str, now_ms: int) -> int:
    """``--since 7d`` / ``--since 2026-01-01``: the moment it names.

    Raises:
        InvalidInputError: it names no moment.
    """
    moment = _time_ms(text.strip(), now_ms)
    if moment is None:
        raise InvalidInputError(f"--since takes {_EXAMPLES['time']}, not {text!r}.")
    if _out_of_range(moment[0]):
        raise _too_large(text, "--since")
    return moment[0]
