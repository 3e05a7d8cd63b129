"""When a usage limit resets, read from what the agent said (pure functions).

Every form found in real output (sources in ``tests/engine/test_failure_classes.py``):

* Claude Code: ``resets 6:40am (UTC)``, ``resets Sep 21, 10pm (UTC)``, ``resets 2pm
  (Asia/Shanghai)``, ``resets 5pm`` (no zone: this machine's), ``∙ resets Oct 31, 9am``,
  ``Your limit will reset at 12am.``, the oldest ``usage limit reached|1762952400`` (epoch
  seconds) and ``rate_limit_event.resetsAt`` (epoch seconds, read by the session reader);
* Codex: ``try again in 2 days 17 hours 14 minutes``, ``try again at 3:42 PM``, ``try again at
  Mar 10th, 2026 3:39 AM`` (local time), and the server's JSON ``"resets_at": 1773113950`` or
  ``"resets_in_seconds": 467439``.

A clock time without a date is its next occurrence (today, else tomorrow); a date without a
year is its next occurrence within a year. An unknown zone name gives no time at all rather
than a wrong one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_CLOCK = r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ap>[ap]\.?m\.?)"
_DATE = (
    r"(?:(?P<mon>[A-Za-z]{3})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"(?:(?P<year>\d{4})\s+)?)?"
)
_RESETS = re.compile(
    r"(?:resets?(?:\s+at)?|reset\s+at|try again at)\s+" + _DATE + _CLOCK
    + r"(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z_+\-]+)*)\))?",
    re.IGNORECASE,
)
_EPOCH = re.compile(r"limit reached\s*\|\s*(?P<s>\d{9,11})\b", re.IGNORECASE)
# JSON keys, also inside an escaped JSON string quoted in a log line (\"resets_at\":...).
_JSON_AT = re.compile(r'\\?"resets_?[aA]t\\?"\s*:\s*(?P<s>\d{9,13})')
_JSON_IN = re.compile(r'\\?"resets_in_seconds\\?"\s*:\s*(?P<s>\d+)')
_IN = re.compile(
    r"try again in\s+(?P<span>(?:\d+\s*(?:days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|[dhms])"
    r"[\s,]*(?:and\s+)?)+)",
    re.IGNORECASE,
)
_SPAN_PART = re.compile(r"(\d+)\s*(days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|[dhms])",
                        re.IGNORECASE)
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def _epoch_ms(value: str) -> int:
    number = int(value)
    return number if number > 10**11 else number * 1000  # seconds unless already ms


def _zone(name: str | None, local: tzinfo) -> tzinfo | None:
    if not name:
        return local
    if name.upper() in ("UTC", "GMT", "Z"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _span_s(text: str) -> int:
    total = 0
    for number, unit in _SPAN_PART.findall(text):
        key = unit.lower()
        key = "m" if key.startswith("mi") else key[0]
        total += int(number) * _UNIT_S[key]
    return total


def _clock_reset(match: re.Match[str], now: datetime, local: tzinfo) -> datetime | None:
    zone = _zone(match.group("zone"), local)
    if zone is None:
        return None
    hour = int(match.group("h")) % 12 + (12 if match.group("ap").lower().startswith("p") else 0)
    minute = int(match.group("m") or 0)
    if hour > 23 or minute > 59:
        return None
    here = now.astimezone(zone)
    month = match.group("mon")
    if month is None:
        at = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
        return at if at > here else at + timedelta(days=1)
    number = _MONTHS.get(month.lower()[:3])
    if number is None:
        return None
    year = int(match.group("year") or here.year)
    try:
        at = here.replace(year=year, month=number, day=int(match.group("day")), hour=hour,
                          minute=minute, second=0, microsecond=0)
    except ValueError:
        return None
    if match.group("year") is None and at < here - timedelta(days=1):
        at = at.replace(year=year + 1)
    return at


def reset_at_ms(text: str, now_ms: int, local: tzinfo | None = None) -> int | None:
    """When the limit ``text`` reports resets (epoch ms), or None when it says no time.

    ``local`` is the zone of a time printed without one (default: this machine's)."""
    zone = local or datetime.now().astimezone().tzinfo or UTC
    now = datetime.fromtimestamp(now_ms / 1000, UTC)
    for pattern in (_EPOCH, _JSON_AT):
        found = pattern.search(text)
        if found:
            return _epoch_ms(found.group("s"))
    found = _JSON_IN.search(text)
    if found:
        return now_ms + int(found.group("s")) * 1000
    found = _IN.search(text)
    if found:
        seconds = _span_s(found.group("span"))
        return now_ms + seconds * 1000 if seconds else None
    found = _RESETS.search(text)
    if found:
        at = _clock_reset(found, now, zone)
        return None if at is None else int(at.timestamp() * 1000)
    return None


def describe_reset(at_ms: int, now_ms: int) -> str:
    """``06:40 UTC (in 4 h 12 min)``, or with the date when it is not today; a time already
    past (a provider's clock, or a reset that did not lift the limit) says so."""
    at = datetime.fromtimestamp(at_ms / 1000, UTC)
    now = datetime.fromtimestamp(now_ms / 1000, UTC)
    when = at.strftime("%H:%M UTC") if at.date() == now.date() else at.strftime(
        "%Y-%m-%d %H:%M UTC")
    if at_ms <= now_ms:
        return f"{when} (already past)"
    left = max(0, (at_ms - now_ms) // 1000)
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = max(1, rest // 60) if not days and not hours else rest // 60
    parts = ([f"{days} d"] if days else []) + ([f"{hours} h"] if hours else []) + (
        [f"{minutes} min"] if minutes and not days else [])
    return f"{when} (in {' '.join(parts) or 'under a minute'})"
