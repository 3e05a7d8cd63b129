"""Facts: last write wins, provenance of the last writer, TTL hidden on read, collection."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import InvalidInputError
from store.memory.facts import MAX_VALUE_BYTES, is_expired, parse_value_json
from store.memory.memory_store import MemoryStore
from store.memory.processors import TtlCollector

NS = "workflow:code-review"


@pytest.fixture
def memory(db: Database) -> MemoryStore:
    return MemoryStore(db)


async def test_set_then_get_returns_the_exact_json_text(memory: MemoryStore) -> None:
    await memory.set_fact_json(NS, "answer", '"use pytest -x"')
    await memory.set_fact_json(NS, "spaced", '{ "a" : [1, 2] }')
    answer = await memory.get_fact(NS, "answer")
    spaced = await memory.get_fact(NS, "spaced")
    assert answer is not None and answer.value_json == '"use pytest -x"'
    assert answer.value == "use pytest -x"
    assert spaced is not None and spaced.value_json == '{ "a" : [1, 2] }'


async def test_last_write_wins_keeping_creation_time_and_last_provenance(
    memory: MemoryStore, clock: ManualClock
) -> None:
    first = await memory.set_fact(NS, "k", 1, run_id="run-1", node_id="plan", iteration=0)
    clock.advance(5_000)
    second = await memory.set_fact(NS, "k", {"v": 2}, run_id="run-2", node_id="review")
    assert second.value == {"v": 2}
    assert second.created_at_ms == first.created_at_ms
    assert second.updated_at_ms == first.updated_at_ms + 5_000
    assert (second.run_id, second.node_id, second.iteration) == ("run-2", "review", None)
    assert await memory.get_fact(NS, "k") == second


async def test_ttl_counts_from_the_last_write_and_hides_on_read(
    memory: MemoryStore, clock: ManualClock
) -> None:
    await memory.set_fact(NS, "short", "x", ttl_ms=1_000)
    clock.advance(999)
    fact = await memory.get_fact(NS, "short")
    assert fact is not None and fact.ttl_remaining_ms(clock.now_ms()) == 1
    clock.advance(1)  # exactly at updated + ttl: expired
    assert await memory.get_fact(NS, "short") is None
    assert await memory.list_facts(NS) == []
    assert await memory.list_facts() == []
    assert await memory.count_facts_by_namespace() == {}
    assert not await memory.delete_fact(NS, "short")


async def test_overwrite_renews_ttl_and_no_ttl_makes_permanent(
    memory: MemoryStore, clock: ManualClock
) -> None:
    await memory.set_fact(NS, "k", 1, ttl_ms=1_000)
    clock.advance(800)
    await memory.set_fact(NS, "k", 2, ttl_ms=1_000)
    clock.advance(800)
    assert (await memory.get_fact(NS, "k")) is not None
    await memory.set_fact(NS, "k", 3)
    clock.advance(10**9)
    fact = await memory.get_fact(NS, "k")
    assert fact is not None and fact.ttl_ms is None and fact.value == 3


async def test_writing_over_an_expired_fact_starts_a_new_fact(
    memory: MemoryStore, clock: ManualClock
) -> None:
    await memory.set_fact(NS, "k", 1, ttl_ms=10)
    clock.advance(50)
    fresh = await memory.set_fact(NS, "k", 2)
    assert fresh.created_at_ms == clock.now_ms()


async def test_ttl_collector_removes_only_expired_facts(
    memory: MemoryStore, db: Database, clock: ManualClock
) -> None:
    # More than one collector chunk (256) to exercise the chunked loop.
    for index in range(300):
        await memory.set_fact("user:u", f"old-{index}", index, ttl_ms=100)
    await memory.set_fact("user:u", "keep", True)
    await memory.set_fact("user:u", "later", True, ttl_ms=10_000)
    clock.advance(100)
    result = await TtlCollector().process(memory)
    assert result.facts_removed == 300
    assert await db.fetch_value("SELECT count(*) FROM facts") == 2
    assert (await TtlCollector().process(memory)).facts_removed == 0


async def test_listing_orders_by_namespace_then_key(memory: MemoryStore) -> None:
    for namespace, key in [("user:b", "z"), ("agent:a", "y"), ("user:b", "a")]:
        await memory.set_fact(namespace, key, key)
    assert [(f.namespace, f.key) for f in await memory.list_facts()] == [
        ("agent:a", "y"), ("user:b", "a"), ("user:b", "z"),
    ]
    assert [f.key for f in await memory.list_facts("user:b", limit=1)] == ["a"]
    assert await memory.count_facts_by_namespace() == {"agent:a": 1, "user:b": 2}


async def test_namespaces_are_stored_canonically(memory: MemoryStore) -> None:
    await memory.set_fact("foo:bar", "k", 1)
    facts = await memory.list_facts()
    assert [f.namespace for f in facts] == ["global:foo%3Abar"]
    assert await memory.get_fact("global:foo%3Abar", "k") is not None


async def test_delete(memory: MemoryStore) -> None:
    await memory.set_fact(NS, "k", 1)
    assert await memory.delete_fact(NS, "k")
    assert not await memory.delete_fact(NS, "k")
    assert await memory.get_fact(NS, "k") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("use pytest", "not valid JSON: Expecting value at line 1 column 1"),
        ('{"a": 1,}', "line 1 column 9"),
        ("NaN", "NaN is not allowed"),
        ('"\udcff"', "not valid UTF-8"),
        ("", "not valid JSON"),
    ],
)
def test_value_must_be_json(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_value_json(text)


async def test_bad_input_writes_nothing(memory: MemoryStore, db: Database) -> None:
    with pytest.raises(InvalidInputError, match="at most 1.0 MiB"):
        await memory.set_fact_json(NS, "big", '"' + "x" * MAX_VALUE_BYTES + '"')
    with pytest.raises(InvalidInputError, match="key is empty"):
        await memory.set_fact(NS, "", 1)
    with pytest.raises(InvalidInputError, match="control character"):
        await memory.set_fact(NS, "a\nb", 1)
    with pytest.raises(InvalidInputError, match="TTL"):
        await memory.set_fact(NS, "k", 1, ttl_ms=-1)
    with pytest.raises(InvalidInputError, match="cannot be stored as JSON"):
        await memory.set_fact(NS, "k", {1, 2})
    assert await db.fetch_value("SELECT count(*) FROM facts") == 0


def test_is_expired_boundary() -> None:
    assert not is_expired(1_000, None, 10**12)
    assert not is_expired(1_000, 10, 1_009)
    assert is_expired(1_000, 10, 1_010)


async def test_set_facts_writes_a_batch_all_or_nothing(
    memory: MemoryStore, db: Database, clock: ManualClock
) -> None:
    assert await memory.set_facts(NS, {"a": 1, "b": [2]}, ttl_ms=50, run_id="run-9") == 2
    facts = await memory.list_facts(NS)
    assert [(f.key, f.value, f.ttl_ms, f.run_id) for f in facts] == [
        ("a", 1, 50, "run-9"), ("b", [2], 50, "run-9"),
    ]
    with pytest.raises(InvalidInputError):
        await memory.set_facts(NS, {"c": 3, "": 4})
    assert await db.fetch_value("SELECT count(*) FROM facts") == 2
    clock.advance(50)
    assert await memory.list_facts(NS) == []
