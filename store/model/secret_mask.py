"""Masking secrets in text before it is recorded: rows, events, artifact logs, messages.

An agent may print what it can see (``env``, a config file, an HTTP error that echoes the
request), and what an agent prints is stored in the workspace, which a team shares. So every
text Tether records from outside passes :func:`mask_secrets` first, which replaces with
``***``:

* the **values** of this process's secrets: environment variables whose name says they hold
  one (``*PASSWORD*``, ``*SECRET*``, ``*TOKEN*``, ``*API_KEY*``, ``*ACCESS_KEY*``,
  ``*CREDENTIAL*``...), the password of the workspace's database URL, and anything registered
  with :func:`register_secret` (``tether serve``'s token);
* what has the **shape** of a secret wherever it comes from: the password in a URL's userinfo
  (``postgresql://user:***@host``), an ``Authorization``/``Proxy-Authorization`` header's
  credentials, ``X-Api-Key``-style headers, libpq's ``password=...``, and API keys with a
  well-known prefix (``sk-...``, ``ghp_...``, ``github_pat_...``, ``xox?-...``).

Pure text work (no I/O besides reading ``os.environ`` once); :class:`StreamMask` does the same
for a byte stream written chunk by chunk (an agent's ``stream.log``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping

MASK = "***"
MIN_SECRET_CHARS = 8
"""Shorter values are not masked by value (``1`` or ``true`` would be masked everywhere)."""

_SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL"
    r"|SESSION_?KEY",
    re.IGNORECASE,
)
_LOCATION_NAME = re.compile(r"URL|URI|DSN", re.IGNORECASE)
"""Variables naming a server (``TETHER_DATABASE_URL``, ``SENTRY_DSN``): only the password in
them is a secret; the rest (host, database) stays readable in messages."""

# Each pattern keeps group "keep" and replaces group "secret".
_SHAPES = (
    # scheme://user:PASSWORD@host
    r"(?P<k1>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:\"'<>]*:)(?P<s1>[^\s/?#@\"'<>]+)(?=@)",
    # Authorization: Bearer TOKEN (also Basic, Token, Digest; HTTP, JSON or repr spelling)
    r"(?P<k2>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|token|digest)\s+)?)(?P<s2>[^\s\"',;}\]]+)",
    # X-Api-Key: KEY, api-key: KEY, x-goog-api-key: KEY
    r"(?P<k3>\b(?:x-)?(?:goog-)?api-key[\"']?\s*[:=]\s*[\"']?)(?P<s3>[^\s\"',;}\]]+)",
    # libpq conninfo or a URL parameter: password=SECRET
    r"(?P<k4>\bpassword\s*=\s*)(?P<s4>'[^']*'|[^\s&'\";]+)",
    # API keys with a well-known prefix
    r"(?P<k5>)(?P<s5>\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}|ghp_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abpr]-[A-Za-z0-9\-]{10,}))",
)
_SHAPE_COUNT = len(_SHAPES)


def is_secret_name(name: str) -> bool:
    """True when a variable's name says its value is a secret (``PGPASSWORD``,
    ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``...)."""
    return _SECRET_NAME.search(name) is not None


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The secret values found in ``environ`` (see the module docstring): the values of
    variables named like secrets, and the password inside any URL a variable holds."""
    found: list[str] = []
    for name, value in environ.items():
        if is_secret_name(name) and not _LOCATION_NAME.search(name):
            found.append(value)
        if "://" in value:
            found.extend(_url_passwords(value))
    return [value for value in found if len(value) >= MIN_SECRET_CHARS]


def _url_passwords(text: str) -> list[str]:
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(text).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []


_TRIGGERS = ("://", "authorization", "api-key", "password", "sk-", "ghp_", "github_pat_", "xox")
"""Every shape holds one of these (lower case): text holding none of them, and no known value,
is returned as it is without running the expression (the common case, a few hundred ns)."""


class SecretMask:
    """Known secret values plus the secret shapes, compiled into one expression."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: tuple[str, ...] = ()
        self._needles: tuple[str, ...] = ()
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        self.add(values)

    @property
    def values(self) -> frozenset[str]:
        """The secret values masked wherever they appear."""
        return frozenset(self._values)

    def add(self, values: Iterable[str]) -> None:
        """Mask these values from now on (shorter than :data:`MIN_SECRET_CHARS`: ignored)."""
        fresh = {v for v in values if len(v) >= MIN_SECRET_CHARS} - set(self._values)
        if fresh:
            # Longest first, so a value that contains another is masked whole.
            self._values = tuple(sorted({*self._values, *fresh}, key=len, reverse=True))
            # How each value may appear: as it is, or escaped inside JSON text.
            escaped = (json.dumps(v, ensure_ascii=False)[1:-1] for v in self._values)
            self._needles = tuple(dict.fromkeys((*self._values, *escaped)))
            self._text = self._bytes = None  # compiled again on next use

    def _source(self) -> str:
        shapes = "|".join(f"(?i:{shape})" for shape in _SHAPES)
        if not self._values:
            return shapes
        return f"{shapes}|(?P<v>{'|'.join(re.escape(v) for v in self._values)})"

    def might_hold(self, text: str) -> bool:
        """False when ``text`` (plain, or JSON text) certainly holds no secret: none of the
        words every secret shape holds, and no known value, appears in it."""
        lowered = text.lower()
        for trigger in _TRIGGERS:
            if trigger in lowered:
                return True
        # Plain loops: any() over a generator costs more on this path (every recorded event).
        for needle in self._needles:  # noqa: SIM110
            if needle in text:
                return True
        return False

    def mask(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        if not text or not self.might_hold(text):
            return text
        if self._text is None:
            self._text = re.compile(self._source())
        return self._text.sub(_replace_text, text)

    def mask_bytes(self, data: bytes) -> bytes:
        """:meth:`mask` for bytes (UTF-8 or anything ASCII-compatible)."""
        if not data:
            return data
        lowered = data.lower()
        if not any(t.encode() in lowered for t in _TRIGGERS) and not any(
            v.encode() in data for v in self._values
        ):
            return data
        return self.pattern_bytes().sub(_replace_bytes, data)

    def pattern_bytes(self) -> re.Pattern[bytes]:
        """The compiled expression over bytes (for :class:`StreamMask`)."""
        if self._bytes is None:
            self._bytes = re.compile(self._source().encode())
        return self._bytes


def _kept(match: re.Match[str] | re.Match[bytes]) -> int | None:
    for index in range(1, _SHAPE_COUNT + 1):
        if match.group(f"s{index}") is not None:
            return index
    return None


def _replace_text(match: re.Match[str]) -> str:
    index = _kept(match)
    return MASK if index is None else match.group(f"k{index}") + MASK


def _replace_bytes(match: re.Match[bytes]) -> bytes:
    index = _kept(match)
    return MASK.encode() if index is None else match.group(f"k{index}") + MASK.encode()


_PROCESS: SecretMask | None = None


def process_mask() -> SecretMask:
    """This process's mask, seeded from its environment on first use."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = SecretMask(secret_values(os.environ))
    return _PROCESS


def register_secret(*values: str) -> None:
    """Mask these values in everything this process records from now on."""
    process_mask().add(values)


def mask_secrets(text: str | None) -> str | None:
    """``text`` with this process's secrets masked (None stays None)."""
    if text is None:
        return None
    return process_mask().mask(text)


class StreamMask:
    """Masks a byte stream written in chunks (an agent's output as it arrives): complete lines
    are masked and passed on at once; a partial line waits for its end, or once it is longer
    than ``hold`` bytes, is passed on except its last ``tail`` bytes, so a secret split
    between two chunks is still masked whole."""

    def __init__(self, mask: SecretMask | None = None, *, hold: int = 64 * 1024,
                 tail: int = 4096) -> None:
        # A cut is at most ``tail`` bytes before the end, and never inside a known value.
        self.mask = mask or process_mask()
        self.hold = hold
        self.tail = tail
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """What of the stream so far may be written now, masked."""
        data = self._pending + chunk
        line_start = cut = data.rfind(b"\n") + 1
        if len(data) - cut > self.hold:
            # Hold back at least the longest known value: its start may be here already.
            longest = max((len(v.encode()) for v in self.mask.values), default=0)
            cut = len(data) - max(self.tail, longest)
            # Never cut through a secret: move the cut to the start of one that spans it
            # (no secret crosses a line end, so the search starts where the line does).
            for match in self.mask.pattern_bytes().finditer(data, line_start):
                if match.start() >= cut:
                    break
                if match.end() > cut:
                    # A "secret" longer than the hold is no secret: memory stays bounded.
                    if len(data) - match.start() <= 4 * self.hold:
                        cut = match.start()
                    break
        self._pending = data[cut:]
        return self.mask.mask_bytes(data[:cut])

    def finish(self) -> bytes:
        """The rest of the stream, masked."""
        rest, self._pending = self._pending, b""
        return self.mask.mask_bytes(rest)


def mask_value(value: object, mask: SecretMask | None = None) -> object:
    """A JSON value with secrets masked in every string (keys included); numbers and the
    structure are kept, so the result is as valid as the value was."""
    mask = mask or process_mask()
    if isinstance(value, str):
        return mask.mask(value)
    if isinstance(value, dict):
        return {mask_value(key, mask): mask_value(item, mask) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mask_value(item, mask) for item in value]
    return value
