"""Threads and their ordered messages (conversation history).

Saving a message is idempotent on its id: saving the same id again with the same thread, role
and content is a no-op that returns the stored message (crash-resume and replay are safe);
the same id with different content is a :class:`ConflictError`, never a silent overwrite.

``list_messages(thread_id, limit=N)`` returns the **newest** N messages in chronological order
(oldest of those first) -- what a prompt wants. Messages sort by ``created_at_ms`` then id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from store.db.seam import Connection, RowLike
from store.errors import ConflictError, InvalidInputError, NotFoundError
from store.memory import memory_sql as sql
from store.memory.facts import encode_value
from store.memory.namespaces import Namespace, canonical_namespace, ensure_clean_text
from store.model.ids import random_hex

if TYPE_CHECKING:
    from store.db.seam import Database


class Thread(NamedTuple):
    """A conversation thread in a namespace."""

    thread_id: str
    namespace: str
    title: str | None
    metadata_json: str | None
    created_at_ms: int
    updated_at_ms: int


class Message(NamedTuple):
    """One message of a thread; ``content_json`` is JSON text (a string, or any JSON value)."""

    id: str
    thread_id: str
    role: str
    content_json: str
    run_id: str | None
    node_id: str | None
    iteration: int | None
    created_at_ms: int

    @property
    def content(self) -> Any:
        """The content decoded from JSON."""
        return json.loads(self.content_json)

    def same_payload(self, other: Message) -> bool:
        """True when ``other`` carries the same thread, role and content (ignores timestamps)."""
        return (self.thread_id, self.role, self.content_json) == (
            other.thread_id, other.role, other.content_json
        )


def thread_from_row(row: RowLike) -> Thread:
    """Build a :class:`Thread` from a row selected with ``THREAD_COLUMNS``."""
    return Thread(*tuple(row))


def message_from_row(row: RowLike) -> Message:
    """Build a :class:`Message` from a row selected with ``MESSAGE_COLUMNS``."""
    return Message(*tuple(row))


def _message_params(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "thread_id": message.thread_id,
        "role": message.role,
        "content_json": message.content_json,
        "run_id": message.run_id,
        "node_id": message.node_id,
        "iteration": message.iteration,
        "created_at_ms": message.created_at_ms,
    }


def insert_message(conn: Connection, message: Message) -> Message:
    """Insert ``message`` inside an open transaction; idempotent on id (see module docstring).

    Raises:
        NotFoundError: the thread does not exist.
        ConflictError: the id exists with a different thread, role or content.
    """
    if conn.execute(sql.GET_THREAD, {"thread_id": message.thread_id}).fetchone() is None:
        raise NotFoundError(f"There is no thread with id {message.thread_id!r}.")
    if conn.execute(sql.INSERT_MESSAGE, _message_params(message)).rowcount == 1:
        conn.execute(
            sql.TOUCH_THREAD, {"thread_id": message.thread_id, "at": message.created_at_ms}
        )
        return message
    stored = message_from_row(conn.execute(sql.GET_MESSAGE, {"id": message.id}).fetchone())
    if not stored.same_payload(message):
        raise ConflictError(
            f"Message {message.id!r} already exists with different content; "
            "message ids cannot be reused."
        )
    return stored


def _delete_messages(conn: Connection, rows: list[dict[str, str]]) -> int:
    return sum(conn.execute(sql.DELETE_MESSAGE, row).rowcount for row in rows)


class ThreadOps:
    """Thread and message operations of :class:`store.memory.memory_store.MemoryStore` (needs
    ``self.db``)."""

    db: Database

    async def create_thread(
        self,
        namespace: str | Namespace,
        title: str | None = None,
        *,
        thread_id: str | None = None,
        metadata: Any = None,
    ) -> Thread:
        """Create a thread (a random id unless given); an existing ``thread_id`` is returned."""
        params = {
            "thread_id": thread_id or random_hex(32),
            "namespace": canonical_namespace(namespace),
            "title": title,
            "metadata_json": None if metadata is None else encode_value(metadata),
        }
        ensure_clean_text(params["thread_id"] or "", "the thread id")
        clock = self.db.clock

        def write(conn: Connection) -> Thread:
            conn.execute(sql.INSERT_THREAD, {**params, "now": clock.now_ms()})
            return thread_from_row(conn.execute(sql.GET_THREAD, params).fetchone())

        return await self.db.run_in_transaction(write)

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread with this id, or None."""
        row = await self.db.fetch_one(sql.GET_THREAD, {"thread_id": thread_id})
        return None if row is None else thread_from_row(row)

    async def list_threads(self, namespace: str | Namespace | None = None) -> list[Thread]:
        """Threads (of one namespace, or all), oldest first."""
        if namespace is None:
            rows = await self.db.fetch_all(sql.LIST_THREADS)
        else:
            rows = await self.db.fetch_all(
                sql.LIST_THREADS_IN_NAMESPACE, {"namespace": canonical_namespace(namespace)}
            )
        return [thread_from_row(row) for row in rows]

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete a thread and its messages in one transaction; True when it existed."""
        def write(conn: Connection) -> bool:
            conn.execute(sql.DELETE_THREAD_MESSAGES, {"thread_id": thread_id})
            return conn.execute(sql.DELETE_THREAD, {"thread_id": thread_id}).rowcount == 1

        return await self.db.run_in_transaction(write)

    async def save_message(
        self,
        thread_id: str,
        role: str,
        content: Any,
        *,
        message_id: str | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        iteration: int | None = None,
        created_at_ms: int | None = None,
    ) -> Message:
        """Append a message (content encoded as JSON); idempotent on ``message_id``.

        Raises:
            NotFoundError: the thread does not exist.
            ConflictError: ``message_id`` exists with a different thread, role or content.
        """
        if not role:
            raise InvalidInputError("The message role is empty.")
        message = Message(
            id=message_id or random_hex(32),
            thread_id=thread_id,
            role=role,
            content_json=encode_value(content),
            run_id=run_id,
            node_id=node_id,
            iteration=iteration,
            created_at_ms=self.db.clock.now_ms() if created_at_ms is None else created_at_ms,
        )
        ensure_clean_text(message.id, "the message id")
        return await self.db.run_in_transaction(lambda conn: insert_message(conn, message))

    async def list_messages(self, thread_id: str, limit: int | None = None) -> list[Message]:
        """Messages of a thread in chronological order; with ``limit``, only the newest N."""
        if limit is None:
            rows = await self.db.fetch_all(sql.LIST_MESSAGES, {"thread_id": thread_id})
        else:
            rows = await self.db.fetch_all(
                sql.LIST_NEWEST_MESSAGES, {"thread_id": thread_id, "limit": sql.limit_param(limit)}
            )
        return [message_from_row(row) for row in rows]

    async def count_messages(self, thread_id: str) -> int:
        """How many messages a thread holds."""
        return int(await self.db.fetch_value(sql.COUNT_MESSAGES, {"thread_id": thread_id}))

    async def delete_messages(self, thread_id: str, message_ids: Iterable[str]) -> int:
        """Delete these messages of a thread in one transaction; returns how many existed."""
        rows = [{"thread_id": thread_id, "id": message_id} for message_id in message_ids]
        if not rows:
            return 0
        return await self.db.run_in_transaction(lambda conn: _delete_messages(conn, rows))

    async def compact_messages(
        self, thread_id: str, replaced_ids: Iterable[str], summary: Message
    ) -> int:
        """Save ``summary`` and delete ``replaced_ids`` in ONE transaction (no loss window).

        Returns how many old messages were removed. ``summary`` follows :meth:`save_message`'s
        idempotency rules, so a repeated compaction with a deterministic id is harmless.
        """
        rows = [{"thread_id": thread_id, "id": message_id}
                for message_id in replaced_ids if message_id != summary.id]

        def write(conn: Connection) -> int:
            insert_message(conn, summary)
            return _delete_messages(conn, rows)

        return await self.db.run_in_transaction(write)

