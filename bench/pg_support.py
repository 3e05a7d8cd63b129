"""Shared pieces of the PostgreSQL benchmarks: a scratch schema per measurement, the machine
and its load, and JSON results beside the other benchmarks'.

The server comes from ``TETHER_BENCH_DATABASE_URL`` (else ``TETHER_TEST_DATABASE_URL``; both
without a password: use PGPASSFILE/PGPASSWORD). ``eval "$(.ci/postgres-up)"`` provides one.
"""

from __future__ import annotations

import json
import os
import platform
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

RESULTS = Path(__file__).with_name("results")


def server_url() -> str:
    """The PostgreSQL server to benchmark against, or exit with the reason."""
    url = os.environ.get("TETHER_BENCH_DATABASE_URL") or os.environ.get("TETHER_TEST_DATABASE_URL")
    if not url:
        raise SystemExit(
            "Set TETHER_BENCH_DATABASE_URL (or run: eval \"$(.ci/postgres-up)\") first."
        )
    return url


@contextmanager
def scratch_schema(prefix: str = "bench", *, settings: str = "") -> Iterator[str]:
    """A fresh schema on the benchmark server; yields a workspace URL (with extra session
    ``settings`` such as ``-csynchronous_commit=off``); dropped afterwards."""
    import psycopg

    url = server_url()
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in url else "?"
    try:
        options = f"-csearch_path={schema} {settings}".strip()
        yield f"{url}{separator}options={quote(options)}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def machine() -> dict[str, Any]:
    """What ran the benchmark, and how busy it was when it started."""
    import sqlite3

    import psycopg

    with psycopg.connect(server_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version'), current_setting('synchronous_commit'), "
            "current_setting('fsync')"
        ).fetchone()
    assert row is not None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count() or 0,
        "sqlite": sqlite3.sqlite_version,
        "postgresql": row[0],
        "postgresql_synchronous_commit": row[1],
        "postgresql_fsync": row[2],
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def write_results(name: str, info: dict[str, Any], results: Any) -> Path:
    """``bench/results/<name>.json`` with the machine, the load at the end and the results."""
    RESULTS.mkdir(exist_ok=True)
    info = {**info, "load_at_end": [round(x, 2) for x in os.getloadavg()]}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": info, "results": results}, indent=2) + "\n",
                    encoding="utf-8")
    return path


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]
