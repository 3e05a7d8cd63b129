"""Following a PostgreSQL workspace without polling: ``LISTEN`` on its channel.

Every write transaction of the store sends one notification at commit, carrying the last event
sequence number it wrote (``store/db/postgres/pg_database.py``). :class:`ChangeListener` keeps one
connection
listening and yields each payload; when the connection drops it says so (:attr:`state` becomes
``"reconnecting"``), reconnects by itself with backoff, and yields once more after reconnecting
so the reader catches up on whatever committed meanwhile. While idle it pings the server every
few seconds, so a connection that died silently is noticed too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from psycopg import sql

from store.db.retry import backoff_s

IDLE_PING_S = 5.0
BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0
CONNECT_TIMEOUT_S = 5

CATCH_UP = ""
"""The payload yielded after (re)connecting: read everything since the last position."""


def application_name(channel: str) -> str:
    """How a listening session names itself in ``pg_stat_activity``."""
    return f"tether-listen {channel}"[:63]


class ChangeListener:
    """Yields notification payloads of one channel, reconnecting as needed."""

    def __init__(
        self,
        url: str,
        channel: str,
        *,
        on_state: Callable[[str], None] | None = None,
        ping_s: float = IDLE_PING_S,
    ) -> None:
        self.url = url
        self.channel = channel
        self.state = "connecting"
        self.reconnects = 0
        self._on_state = on_state
        self._ping_s = ping_s

    def _set(self, state: str) -> None:
        if state != self.state:
            self.state = state
            if self._on_state is not None:
                self._on_state(state)

    async def payloads(self, stop: asyncio.Event) -> AsyncIterator[str]:
        """Yield each notification's payload (and :data:`CATCH_UP` after every connect) until
        ``stop`` is set."""
        failures = 0  # in a row: the wait before reconnecting doubles with each
        while not stop.is_set():
            conn: Any = None
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    application_name=application_name(self.channel),
                )
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self._set("live")
                failures = 0
                yield CATCH_UP
                while not stop.is_set():
                    got = False
                    async for notify in conn.notifies(timeout=self._ping_s):
                        got = True
                        yield notify.payload
                        if stop.is_set():
                            break
                    if not got:
                        await conn.execute("SELECT 1")  # raises if the link died silently
            except (psycopg.OperationalError, OSError):
                if stop.is_set():
                    break
                self._set("reconnecting")
                self.reconnects += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=backoff_s(
                        failures, first_s=BACKOFF_FIRST_S, max_s=BACKOFF_MAX_S, jitter=0
                    ))
                failures += 1
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
