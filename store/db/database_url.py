"""PostgreSQL database URLs: checking them and never showing their password.

A team workspace is named by a libpq URL (``postgresql://user@host:5432/db?sslmode=verify-full``).
Everything libpq understands passes through unchanged: TLS options (``sslmode``, ``sslrootcert``,
``sslcert``, ``sslkey``), ``options=-csearch_path=...`` to keep several workspaces in one
database, and the ``PG*`` environment variables. The password should come from ``PGPASSWORD``,
``PGPASSFILE`` (``~/.pgpass``) or a ``TETHER_DATABASE_URL`` that only the owner can read; a URL
given on the command line must not carry one, because every user of the machine can read a
process's arguments (``ps``). Messages and logs only ever show :func:`redact_url`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from store.errors import InvalidInputError

SCHEMES = ("postgresql", "postgres")
_PASSWORD_PARAM = re.compile(r"(?i)(password=)[^&\s]*")


def is_database_url(text: str) -> bool:
    """True when ``text`` looks like a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return text.split("://", 1)[0].lower() in SCHEMES and "://" in text


def check_url(url: str) -> str:
    """Return ``url`` when it is a PostgreSQL URL; raise InvalidInputError (without echoing a
    password) otherwise."""
    if not is_database_url(url):
        raise InvalidInputError(
            f"The database URL {redact_url(url)!r} is not a PostgreSQL URL; "
            "write postgresql://user@host:port/database."
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise InvalidInputError(
            f"The database URL {redact_url(url)!r} is malformed (check the host and port)."
        ) from None
    return url


def has_password(url: str) -> bool:
    """True when the URL carries a password (in the authority or as ``password=``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ":" in url.split("@", 1)[0].split("://", 1)[-1]
    if parts.password:
        return True
    return any(key.lower() == "password" for key, _ in parse_qsl(parts.query))


def refuse_password_in_argument(url: str) -> str:
    """Refuse a URL with a password given as a command-line argument (visible in ``ps``)."""
    if has_password(url):
        raise InvalidInputError(
            "The --database-url argument carries a password, which any user can read with ps; "
            "put it in PGPASSWORD, ~/.pgpass (PGPASSFILE) or TETHER_DATABASE_URL instead."
        )
    return check_url(url)


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (safe to print or log)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _PASSWORD_PARAM.sub(r"\1***", url)
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        userinfo, _, host = authority.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        authority = f"{userinfo}@{host}"
    return scheme + sep + authority + slash + _PASSWORD_PARAM.sub(r"\1***", tail)


def scrub(text: str, url: str | None) -> str:
    """``text`` with the URL's password removed wherever it appears (for error messages)."""
    if not url:
        return text
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        text = text.replace(password, "***")
    return text.replace(url, redact_url(url))


# libpq environment variables a child process needs to reach the same server, and the URL
# parameter each becomes. None of them is a secret (PGPASSWORD is deliberately not here).
_CARRIED = {
    "PGPASSFILE": "passfile",
    "PGSSLMODE": "sslmode",
    "PGSSLROOTCERT": "sslrootcert",
    "PGSSLCERT": "sslcert",
    "PGSSLKEY": "sslkey",
}


def for_child_process(url: str, environ: Mapping[str, str] | None = None) -> str:
    """The URL a child process (``tether mcp`` started by an agent CLI, whose environment the
    CLI may filter) uses to reach the same workspace: without a password (it would show in
    ``ps``), with the password file and TLS settings of this process's environment written in
    as libpq parameters. The child then authenticates from that file (or ``~/.pgpass``)."""
    env = os.environ if environ is None else environ
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    if len(netloc) == 2 and ":" in netloc[0]:
        netloc[0] = netloc[0].split(":", 1)[0]
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k.lower() != "password"]
    present = {k.lower() for k, _ in query}
    for variable, parameter in _CARRIED.items():
        if env.get(variable) and parameter not in present:
            query.append((parameter, env[variable]))
    return urlunsplit(parts._replace(netloc="@".join(netloc), query=urlencode(query)))
