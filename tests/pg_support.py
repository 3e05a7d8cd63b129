"""PostgreSQL for the tests: a fresh schema per test in the database named by
``TETHER_TEST_DATABASE_URL`` (``.ci/run`` starts the server and sets it).

Without that variable the PostgreSQL half of the suite skips with the reason, except under
``CI=true``, where a missing or unreachable server fails the run instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

from store.workspace.layout import DATABASE_URL_ENV_VAR, Workspace

URL_VAR = "TETHER_TEST_DATABASE_URL"
SKIP_REASON = (
    f"PostgreSQL half skipped: set {URL_VAR} (e.g. postgresql://tether_test@127.0.0.1/"
    "tether_test, password in PGPASSFILE) or run .ci/run, which starts a server"
)


CURRENT_TEST: pytest.Item | None = None
"""The running test (set by conftest.py)."""


def base_url() -> str:
    """The test database URL, or skip (fail under CI=true) when there is none."""
    if CURRENT_TEST is not None and "postgresql" not in CURRENT_TEST.keywords:
        pytest.fail(
            f"{CURRENT_TEST.nodeid} uses PostgreSQL but is not marked postgresql "
            "(add @pytest.mark.postgresql so --postgresql runs it)."
        )
    url = os.environ.get(URL_VAR)
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {URL_VAR} is not set: the PostgreSQL half cannot run.")
        pytest.skip(SKIP_REASON)
    return url


def with_schema(url: str, schema: str) -> str:
    """``url`` with its search path set to ``schema`` (libpq ``options``)."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_schema(prefix: str = "t") -> Iterator[str]:
    """Create an empty schema, yield a workspace URL pointing at it, drop it afterwards."""
    url = base_url()
    try:
        import psycopg
    except ImportError:
        message = "PostgreSQL half needs the driver: pip install '.[test,postgres]'"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except psycopg.OperationalError as error:
        message = f"PostgreSQL at {URL_VAR} is unreachable: {error}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def cli_env(workspace: Workspace) -> dict[str, str]:
    """The environment for a ``tether`` subprocess on ``workspace``: its database URL, when it
    has one, travels in ``TETHER_DATABASE_URL`` (never on the command line)."""
    env = dict(os.environ)
    env.pop(DATABASE_URL_ENV_VAR, None)
    if workspace.database_url:
        env[DATABASE_URL_ENV_VAR] = workspace.database_url
    return env
