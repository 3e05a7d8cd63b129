"""A run's fork chain (store/read/fork_chain.py) on both backends: from any run of the
family, the first run and every fork below it as a tree, forks of forks under the fork they
came from, oldest first; a deleted origin starts the chain at the oldest run still there."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import NotFoundError
from store.read import fork_chain
from store.read.fork_chain import read_fork_chain
from store.runs.run_store import RunStore


async def fork_of(store: RunStore, clock: ManualClock, origin: str, node: str) -> str:
    clock.advance(1000)
    run = await store.create_run("demo", status="finished", forked_from=origin,
                                 fork={"node": node, "carried": [], "prompt": "edited"})
    return run.run_id


async def test_the_chain_is_the_same_tree_from_every_run_of_it(
    db: Database, clock: ManualClock
) -> None:
    store = RunStore(db)
    first = (await store.create_run("demo", status="finished")).run_id
    a = await fork_of(store, clock, first, "draft")
    b = await fork_of(store, clock, first, "plan")
    a1 = await fork_of(store, clock, a, "review")
    other = (await store.create_run("demo", status="finished")).run_id
    for asked in (first, a, b, a1):
        chain = await read_fork_chain(db, asked)
        assert chain.asked == asked and not chain.cut
        assert [(link.depth, link.run.run_id, link.last) for link in chain.links] == [
            (0, first, True), (1, a, False), (2, a1, True), (1, b, True)]
        assert [link.run.fork_node for link in chain.links] == [None, "draft", "review", "plan"]
        assert chain.links[1].run.fork == {"node": "draft", "carried": [], "prompt": "edited"}
    alone = await read_fork_chain(db, other)
    assert [link.run.run_id for link in alone.links] == [other]
    try:
        await read_fork_chain(db, "r-000000000000")
    except NotFoundError as error:
        assert str(error) == "There is no run 'r-000000000000' in this workspace."
    else:
        raise AssertionError("an unknown run was read")
    await store.delete_run(first)
    chain = await read_fork_chain(db, a1)
    assert [(link.depth, link.run.run_id) for link in chain.links] == [(0, a), (1, a1)]


async def test_a_chain_larger_than_the_bound_is_cut_and_says_so(
    db: Database, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fork_chain, "MAX_FAMILY", 3)
    store = RunStore(db)
    first = (await store.create_run("demo", status="finished")).run_id
    forks = [await fork_of(store, clock, first, f"n{i}") for i in range(4)]
    chain = await read_fork_chain(db, forks[-1])
    assert chain.cut and len(chain.links) == 3
    assert chain.links[0].run.run_id == first and forks[-1] in {
        link.run.run_id for link in chain.links}  # the run asked for is always there
