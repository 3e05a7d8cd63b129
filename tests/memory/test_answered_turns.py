"""A recalled chat turn carries the turn it answers (engine/memory/answered_turns.py)."""

from __future__ import annotations

from engine.memory.answered_turns import ANSWERED_BYTES, tail
from engine.memory.memory_config import MemoryConfig
from engine.memory.runtime import MemoryRuntime
from store.clock import ManualClock
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore

BANK = "user:alice"


async def _turns(db: Database, clock: ManualClock, stream: str,
                 lines: list[str], status: str = "accepted") -> None:
    store = MemoryStore(db)
    for line in lines:
        await store.save_note(BANK, line, kind="turn", tags=[f"stream:{stream}"], status=status)
        clock.advance(1000)


async def _block(db: Database, query: str) -> str:
    runtime = MemoryRuntime(db)
    run = await RunStore(db).create_run("turns")
    config = MemoryConfig(bank=BANK, recall=query, mode="keyword")
    prepared = await runtime.block_for(run.run_id, "ask", 0, 1, config, query)
    assert prepared.text is not None, prepared.warning
    return prepared.text


async def test_a_recalled_turn_carries_the_turn_before_it_in_its_stream(
        db: Database, clock: ManualClock) -> None:
    await _turns(db, clock, "s1", ["Alice: Where did your sister move after the wedding?"])
    # another conversation in between: its turn is not the one answered
    await _turns(db, clock, "s2", ["Bob: The plumber comes on Thursday."])
    await _turns(db, clock, "s1", ["Carol: Portland, she loves the rain there."])
    text = await _block(db, "portland rain")
    line = next(x for x in text.splitlines() if "Portland" in x)
    assert line == ("- [re: Alice: Where did your sister move after the wedding?] "
                    "Carol: Portland, she loves the rain there.")


async def test_the_first_turn_a_note_of_another_kind_and_a_rejected_turn_carry_nothing(
        db: Database, clock: ManualClock) -> None:
    store = MemoryStore(db)
    await _turns(db, clock, "s1", ["Alice: kayaking trip planned for June"])
    await store.save_note(BANK, "Summary: the kayaking trip is in June.",
                          tags=["stream:s1"])  # not a turn
    clock.advance(1000)
    await _turns(db, clock, "s3", ["Dan: Is the canoe repaired?"], status="rejected")
    await _turns(db, clock, "s3", ["Eve: Yes, the canoe is fixed."])
    text = await _block(db, "kayaking canoe")
    assert "[re:" not in text
    assert "Alice: kayaking trip planned for June" in text and "Eve: Yes, the canoe" in text


def test_a_long_answered_turn_keeps_its_end_within_the_bytes() -> None:
    question = "So, after all those months of searching, which city did you finally pick?"
    long = "I remember the long drive and the boxes and the cat hiding under the seat. " * 4
    carried = tail(long + question)
    assert carried.endswith(question) and carried.startswith("…")
    assert len(carried.encode("utf-8")) <= ANSWERED_BYTES
    assert tail("  short   turn ") == "short turn"
    assert len(tail("é" * 200).encode("utf-8")) <= ANSWERED_BYTES


def test_an_answered_turn_never_pushes_a_recalled_item_out_of_the_block() -> None:
    from engine.memory.block import build_block, utf8_len
    from engine.memory.recall_items import RecallItem

    items = [RecallItem(f"note:n{i}", "note", BANK, None, f"Carol: answer number {i} here.",
                        1.0, tags=("stream:s",), answers="Alice: and what was the question?")
             for i in range(6)]
    bare = build_block([RecallItem(**{**i.__dict__, "answers": None}) for i in items], 10_000)
    assert bare.text is not None
    # room for every item and two answered turns: the first two (in rank order) carry theirs
    two = utf8_len("[re: Alice: and what was the question?] ") * 2
    block = build_block(items, bare.bytes_used + two)
    assert block.item_ids == bare.item_ids and not block.truncated
    assert block.text is not None and block.text.count("[re: ") == 2
    assert "[re: Alice: and what was the question?] Carol: answer number 1" in block.text
    # a budget the items alone fill: nothing carried, nothing lost
    tight = build_block(items, bare.bytes_used)
    assert tight.item_ids == bare.item_ids and tight.text == bare.text
