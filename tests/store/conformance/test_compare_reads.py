"""Two runs side by side: node iterations paired by key with each side's numbers, and one
pair's texts (prompt as sent, memory block, output), the same on both backends."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import NotFoundError
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.read.compare_reads import compare_runs, node_texts
from store.runs.run_store import RunStore


async def _run(store: RunStore, run_id: str, nodes: list[str], prompt: str, *,
               parent: str | None = None) -> None:
    await store.create_run("w", run_id=run_id, parent_run_id=parent,
                           generation=1 if parent else 0)
    await store.upsert_nodes(run_id, [(n, 0, "pending", []) for n in nodes])
    for index, node in enumerate(nodes):
        await store.start_attempt(run_id, node, 0, 1, agent="sim", prompt=f"{prompt} {node}")
        await store.record_call(CallUsage(run_id, node, 0, 1, "sim", TokenUsage(100 * (index + 1)),
                                          cost_usd=0.01))
        await store.finish_attempt(run_id, node, 0, 1, "finished", node_state="finished",
                                   set_node_output=True, node_output={"n": prompt})
    await store.save_memory_block(run_id, nodes[0], 0, text=f"advice for {prompt}",
                                  budget_bytes=100, bytes_used=10)


@pytest.fixture
async def store(db: Database, clock: ManualClock) -> RunStore:
    runs = RunStore(db)
    await _run(runs, "r-a", ["plan", "work"], "first")
    clock.advance(10)
    await _run(runs, "r-b", ["plan", "check"], "second", parent="r-a")
    return runs


async def test_nodes_are_paired_by_key_with_both_sides_numbers(store: RunStore) -> None:
    comparison = await compare_runs(store.db, "r-a", "r-b")
    assert [(p.key, p.a is not None, p.b is not None) for p in comparison.pairs] == [
        ("plan#0", True, True), ("work#0", True, False), ("check#0", False, True)
    ]
    plan = comparison.pairs[0]
    assert plan.a is not None and plan.b is not None
    assert plan.a.tokens.total == plan.b.tokens.total == 100 and not plan.differs
    assert comparison.pairs[1].differs
    assert comparison.relation == "r-b continues r-a (generation 1)"


async def test_one_pairs_texts(store: RunStore) -> None:
    a, b = await node_texts(store.db, "r-a", "plan#0"), await node_texts(store.db, "r-b", "plan#0")
    assert (a.prompt, b.prompt) == ("first plan", "second plan")
    assert (a.memory, b.memory) == ("advice for first", "advice for second")
    assert a.output == '{"n":"first"}' or a.output.replace(" ", "") == '{"n":"first"}'
    missing = await node_texts(store.db, "r-a", "check#0")
    assert missing.prompt is None and missing.output is None


async def test_an_unknown_run_is_not_found(store: RunStore) -> None:
    with pytest.raises(NotFoundError):
        await compare_runs(store.db, "r-a", "r-zzz")
