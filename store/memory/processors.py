"""Maintenance processors run over the memory store: TTL collection, history limits, summaries.

Each processor has ``name`` and ``async process(store) -> ProcessorResult``. The decisions are
pure functions (:func:`messages_to_drop`, :func:`summary_prompt`, :func:`summary_id`) tested
directly; ``process`` only reads and writes through :class:`store.memory.memory_store.MemoryStore`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from store.errors import InvalidInputError
from store.memory.threads import Message

if TYPE_CHECKING:
    from store.memory.memory_store import MemoryStore

# Rough approximation used for budgets: one token is about four characters of message JSON.
CHARS_PER_TOKEN = 4
# The summarizer keeps this many newest messages of a thread verbatim.
KEEP_RECENT = 2

SUMMARY_INSTRUCTIONS = (
    "Summarise the older conversation messages below so they can stand in for them later.\n"
    "Keep lasting user preferences, decisions, facts and open tasks; drop small talk.\n"
)

SummarizeFn = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class ProcessorResult:
    """What one processor run changed."""

    name: str
    facts_removed: int = 0
    messages_removed: int = 0
    summaries_written: int = 0
    threads_changed: int = 0


class TtlCollector:
    """Removes expired facts (reads already hide them; this reclaims the space)."""

    name = "ttl-collector"

    async def process(self, store: MemoryStore) -> ProcessorResult:
        """Delete every fact whose TTL has run out."""
        return ProcessorResult(self.name, facts_removed=await store.delete_expired_facts())


def messages_to_drop(sizes: Sequence[tuple[str, int]], budget_chars: int) -> list[str]:
    """Ids to delete, oldest first, until the remaining sizes fit ``budget_chars``.

    ``sizes`` is (message id, characters) in chronological order.
    """
    total = sum(size for _, size in sizes)
    dropped: list[str] = []
    for message_id, size in sizes:
        if total <= budget_chars:
            break
        dropped.append(message_id)
        total -= size
    return dropped


class TokenLimiter:
    """Keeps every thread within ``max_tokens`` by removing its oldest messages.

    Tokens are estimated as ``len(content_json) / chars_per_token``.
    """

    name = "token-limiter"

    def __init__(self, max_tokens: int, *, chars_per_token: int = CHARS_PER_TOKEN) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
            raise InvalidInputError("The token limit must be a whole number, zero or more.")
        if chars_per_token < 1:
            raise InvalidInputError("Characters per token must be at least 1.")
        self.max_tokens = max_tokens
        self.budget_chars = max_tokens * chars_per_token

    async def process(self, store: MemoryStore) -> ProcessorResult:
        """Trim every thread to the budget; each thread in its own short transaction."""
        removed = changed = 0
        for thread in await store.list_threads():
            messages = await store.list_messages(thread.thread_id)
            drop = messages_to_drop(
                [(message.id, len(message.content_json)) for message in messages],
                self.budget_chars,
            )
            if drop:
                removed += await store.delete_messages(thread.thread_id, drop)
                changed += 1
        return ProcessorResult(self.name, messages_removed=removed, threads_changed=changed)


def message_text(message: Message) -> str:
    """A message's content as prose: strings unwrapped, a prior summary's text, else JSON."""
    content: Any = message.content
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return json.dumps(content, ensure_ascii=False)


def summary_prompt(messages: Sequence[Message]) -> str:
    """The text handed to the summarising callable: instructions, then ``role: text`` lines."""
    lines = [f"{message.role}: {message_text(message)}" for message in messages]
    return SUMMARY_INSTRUCTIONS + "\n" + "\n".join(lines)


def summary_id(thread_id: str, message_ids: Sequence[str]) -> str:
    """A deterministic id for the summary of these messages (repeats are idempotent)."""
    digest = hashlib.sha256("\x00".join([thread_id, *message_ids]).encode("utf-8"))
    return f"summary-{digest.hexdigest()[:24]}"


def messages_to_summarise(messages: Sequence[Message], keep_recent: int) -> list[Message]:
    """The older messages to fold into a summary, or [] when there is nothing worth it.

    Nothing is summarised when the thread holds at most ``keep_recent`` messages, or when the
    only older message is already a system message (typically the previous summary).
    """
    older = list(messages[: max(0, len(messages) - keep_recent)])
    if not older or (len(older) == 1 and older[0].role == "system"):
        return []
    return older


class Summarizer:
    """Replaces each thread's older messages with one summary message.

    ``summarize`` is any async callable taking the prompt text and returning the summary (the
    engine passes an agent). The newest ``keep_recent`` messages stay verbatim. The summary
    (role ``system``, content ``{"type": "summary", "text": ...}``, timestamp of the oldest
    summarised message so it sorts first, id from :func:`summary_id`) is saved and the old
    messages are removed in one transaction, so there is no moment when either is lost.
    If ``summarize`` raises, that thread is left untouched and the error propagates.
    """

    name = "summarizer"

    def __init__(self, summarize: SummarizeFn, *, keep_recent: int = KEEP_RECENT) -> None:
        self.summarize = summarize
        self.keep_recent = keep_recent

    async def process(self, store: MemoryStore) -> ProcessorResult:
        """Summarise every thread that has more than ``keep_recent`` messages."""
        removed = written = 0
        for thread in await store.list_threads():
            older = messages_to_summarise(
                await store.list_messages(thread.thread_id), self.keep_recent
            )
            if not older:
                continue
            text = await self.summarize(summary_prompt(older))
            summary = Message(
                id=summary_id(thread.thread_id, [message.id for message in older]),
                thread_id=thread.thread_id,
                role="system",
                content_json=json.dumps({"type": "summary", "text": text}, ensure_ascii=False),
                run_id=None,
                node_id=None,
                iteration=None,
                created_at_ms=older[0].created_at_ms,
            )
            removed += await store.compact_messages(
                thread.thread_id, [message.id for message in older], summary
            )
            written += 1
        return ProcessorResult(
            self.name, messages_removed=removed, summaries_written=written,
            threads_changed=written,
        )
