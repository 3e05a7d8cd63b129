"""Note search end to end: operators as plain words, ranking, scope, the read contract and the
common-word plan over real notes (the pure policy is tested in test_search_policy.py)."""

from __future__ import annotations

import pytest

from store import notes as notes_module
from store.clock import ManualClock
from store.database import Database
from store.errors import InvalidInputError
from store.memory import MemoryStore

NS = "workflow:code-review"


@pytest.fixture
def memory(db: Database) -> MemoryStore:
    return MemoryStore(db)


async def test_operators_in_the_query_are_plain_words(memory: MemoryStore) -> None:
    await memory.save_note(NS, "use ruff OR black", note_id="literal")
    await memory.save_note(NS, "use ruff", note_id="ruff-only")
    hits = await memory.search_notes("ruff OR")
    assert [hit.note.id for hit in hits] == ["literal"]
    assert await memory.search_notes("body:ruff*") == []  # 'body' is a word here, not a column
    assert [h.note.id for h in await memory.search_notes('"ruff"')] == ["ruff-only", "literal"]


async def test_ranking_and_limit(memory: MemoryStore, clock: ManualClock) -> None:
    await memory.save_note(NS, "pytest pytest pytest fixtures", note_id="dense")
    clock.advance(1)
    await memory.save_note(NS, "a long note that mentions pytest once among many other words "
                           "about linters formatters and type checkers", note_id="sparse")
    for index in range(5):
        await memory.save_note(NS, f"unrelated note {index}")
    hits = await memory.search_notes("pytest")
    assert [hit.note.id for hit in hits] == ["dense", "sparse"]
    assert hits[0].score > hits[1].score
    assert len(await memory.search_notes("pytest", limit=1)) == 1
    with pytest.raises(InvalidInputError, match="limit"):
        await memory.search_notes("pytest", limit=0)


async def test_default_contract_and_widening(memory: MemoryStore) -> None:
    await memory.save_note(NS, "deploy with blue green", note_id="old")
    await memory.save_note(NS, "deploy with canary", note_id="new", status="pending",
                           supersedes=["old"])
    await memory.save_note(NS, "deploy on fridays", note_id="rejected", status="rejected")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["old"]
    await memory.accept_note("new")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["new"]
    widened = await memory.search_notes("deploy", status="any", include_superseded=True)
    assert sorted(h.note.id for h in widened) == ["new", "old", "rejected"]


async def test_scope_by_namespace_and_kind(memory: MemoryStore) -> None:
    await memory.save_note("workflow:a", "shared word", note_id="wa")
    await memory.save_note("workflow:b", "shared word", note_id="wb")
    await memory.save_note("user:a", "shared word", note_id="ua")
    await memory.save_note("workflowx", "shared word", note_id="gx")  # global:workflowx
    assert [h.note.id for h in await memory.search_notes("shared", namespace="workflow:a")] == [
        "wa"
    ]
    by_kind = await memory.search_notes("shared", namespace_kind="workflow")
    assert sorted(h.note.id for h in by_kind) == ["wa", "wb"]
    by_global = await memory.search_notes("shared", namespace_kind="global")
    assert [h.note.id for h in by_global] == ["gx"]
    with pytest.raises(InvalidInputError, match="Unknown namespace kind"):
        await memory.search_notes("shared", namespace_kind="team")


async def test_common_words_are_dropped_or_ranked_by_density_in_the_newest_pool(
    memory: MemoryStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Make "the" and "common" common (more than 2 notes) and keep only 3 recent matches.
    monkeypatch.setattr(notes_module, "COMMON_DF", 2)
    monkeypatch.setattr(notes_module, "RECENT_POOL", 3)
    for index in range(6):
        clock.advance(1)
        await memory.save_note(NS, f"the common word {index}", note_id=f"n{index}")
    await memory.save_note(NS, "the common the common", note_id="dense-pending",
                           status="pending")
    await memory.save_note(NS, "the common rarity", note_id="rare-old")
    clock.advance(1)
    await memory.save_note(NS, "the common the common", note_id="dense-new")
    # Only common words: the newest 3 live matches (the pending note does not count), denser
    # and shorter first; n4 and older are outside the pool.
    hits = await memory.search_notes("the common", limit=3)
    assert [h.note.id for h in hits] == ["dense-new", "rare-old", "n5"]
    assert hits[0].score > hits[1].score > hits[2].score
    # A rarer word present: common words are dropped and BM25 ranks the rest.
    assert [h.note.id for h in await memory.search_notes("the rarity common")] == ["rare-old"]
