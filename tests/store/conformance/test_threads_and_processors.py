"""Threads/messages (idempotent on id, newest-N listing) and the maintenance processors."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import ConflictError, InvalidInputError, NotFoundError
from store.memory.memory_store import MemoryStore
from store.memory.processors import (
    Summarizer,
    TokenLimiter,
    messages_to_drop,
    messages_to_summarise,
    summary_id,
    summary_prompt,
)
from store.memory.threads import Message


@pytest.fixture
def memory(db: Database) -> MemoryStore:
    return MemoryStore(db)


async def _thread_with(memory: MemoryStore, clock: ManualClock, contents: list[str]) -> str:
    thread = await memory.create_thread("user:alice", "chat")
    for index, content in enumerate(contents):
        clock.advance(1_000)
        role = "user" if index % 2 == 0 else "assistant"
        await memory.save_message(thread.thread_id, role, content, message_id=f"m{index}")
    return thread.thread_id


async def test_save_message_is_idempotent_on_id(memory: MemoryStore, clock: ManualClock) -> None:
    thread_id = await _thread_with(memory, clock, ["hello"])
    clock.advance(5)
    again = await memory.save_message(thread_id, "user", "hello", message_id="m0")
    assert again.created_at_ms == clock.now_ms() - 5  # the stored message, unchanged
    assert await memory.count_messages(thread_id) == 1
    with pytest.raises(ConflictError, match="already exists with different content"):
        await memory.save_message(thread_id, "user", "changed", message_id="m0")
    with pytest.raises(NotFoundError, match="no thread"):
        await memory.save_message("missing", "user", "x")
    with pytest.raises(InvalidInputError, match="role is empty"):
        await memory.save_message(thread_id, "", "x")


async def test_list_messages_limit_returns_newest_in_order(
    memory: MemoryStore, clock: ManualClock
) -> None:
    thread_id = await _thread_with(memory, clock, ["a", "b", "c", "d"])
    assert [m.id for m in await memory.list_messages(thread_id)] == ["m0", "m1", "m2", "m3"]
    assert [m.id for m in await memory.list_messages(thread_id, limit=2)] == ["m2", "m3"]
    assert await memory.list_messages(thread_id, limit=0) == []


async def test_thread_updated_at_follows_messages(
    memory: MemoryStore, clock: ManualClock
) -> None:
    thread_id = await _thread_with(memory, clock, ["a"])
    thread = await memory.get_thread(thread_id)
    assert thread is not None and thread.updated_at_ms == clock.now_ms()
    # An older timestamp (as a summary carries) never moves updated_at backwards.
    await memory.save_message(thread_id, "system", "x", created_at_ms=0)
    again = await memory.get_thread(thread_id)
    assert again is not None and again.updated_at_ms == clock.now_ms()


async def test_threads_are_idempotent_and_deletable(
    memory: MemoryStore, clock: ManualClock
) -> None:
    first = await memory.create_thread("user:a", "t", thread_id="fixed")
    assert await memory.create_thread("user:a", "other", thread_id="fixed") == first
    await memory.save_message("fixed", "user", "x")
    assert [t.thread_id for t in await memory.list_threads("user:a")] == ["fixed"]
    assert await memory.delete_thread("fixed")
    assert await memory.count_messages("fixed") == 0
    assert not await memory.delete_thread("fixed")


def test_messages_to_drop_oldest_first() -> None:
    sizes = [("a", 40), ("b", 40), ("c", 40)]
    assert messages_to_drop(sizes, 120) == []
    assert messages_to_drop(sizes, 100) == ["a"]
    assert messages_to_drop(sizes, 40) == ["a", "b"]
    assert messages_to_drop(sizes, 0) == ["a", "b", "c"]


async def test_token_limiter_trims_each_thread(memory: MemoryStore, clock: ManualClock) -> None:
    # Each content_json is '"xxxxxxxxxx"' = 12 characters = 3 tokens.
    long_thread = await _thread_with(memory, clock, ["x" * 10] * 5)
    short_thread = (await memory.create_thread("user:bob")).thread_id
    await memory.save_message(short_thread, "user", "x" * 10)
    result = await TokenLimiter(6).process(memory)
    assert result.messages_removed == 3 and result.threads_changed == 1
    assert [m.id for m in await memory.list_messages(long_thread)] == ["m3", "m4"]
    assert await memory.count_messages(short_thread) == 1
    with pytest.raises(InvalidInputError):
        TokenLimiter(-1)


def test_summary_policy() -> None:
    def message(message_id: str, role: str, content_json: str) -> Message:
        return Message(message_id, "t", role, content_json, None, None, None, 0)

    old_summary = message("s", "system", '{"type": "summary", "text": "earlier"}')
    recent = [message("a", "user", '"hi"'), message("b", "assistant", '{"n": 1}')]
    assert messages_to_summarise(recent, 2) == []
    assert messages_to_summarise([old_summary, *recent], 2) == []
    older = messages_to_summarise([old_summary, *recent, message("c", "user", '"x"')], 2)
    assert [m.id for m in older] == ["s", "a"]
    prompt = summary_prompt(older)
    assert prompt.endswith("system: earlier\nuser: hi")
    assert summary_id("t", ["s", "a"]) == summary_id("t", ["s", "a"])
    assert summary_id("t", ["s", "a"]) != summary_id("t", ["s", "b"])


async def test_summarizer_replaces_older_messages_atomically(
    memory: MemoryStore, clock: ManualClock
) -> None:
    thread_id = await _thread_with(memory, clock, ["one", "two", "three", "four"])
    prompts: list[str] = []

    async def summarise(text: str) -> str:
        prompts.append(text)
        return "they said one and two"

    result = await Summarizer(summarise).process(memory)
    assert (result.summaries_written, result.messages_removed) == (1, 2)
    assert "user: one\nassistant: two" in prompts[0]
    messages = await memory.list_messages(thread_id)
    assert [m.id for m in messages] == [summary_id(thread_id, ["m0", "m1"]), "m2", "m3"]
    assert messages[0].role == "system"
    assert messages[0].content == {"type": "summary", "text": "they said one and two"}
    # Nothing left to summarise: the only older message is the summary itself.
    assert (await Summarizer(summarise).process(memory)).summaries_written == 0
    assert len(prompts) == 1


async def test_failing_summarizer_leaves_the_thread_untouched(
    memory: MemoryStore, clock: ManualClock
) -> None:
    thread_id = await _thread_with(memory, clock, ["one", "two", "three"])

    async def broken(text: str) -> str:
        raise RuntimeError("model unavailable")

    with pytest.raises(RuntimeError):
        await Summarizer(broken).process(memory)
    assert [m.id for m in await memory.list_messages(thread_id)] == ["m0", "m1", "m2"]


async def test_compaction_is_one_transaction(memory: MemoryStore, clock: ManualClock) -> None:
    thread_id = await _thread_with(memory, clock, ["one", "two", "three"])
    # A summary whose id collides with different content makes the whole compaction fail:
    # the old messages must still be there.
    clash = Message("m2", thread_id, "system", '"different"', None, None, None, 0)
    with pytest.raises(ConflictError):
        await memory.compact_messages(thread_id, ["m0", "m1"], clash)
    assert await memory.count_messages(thread_id) == 3
