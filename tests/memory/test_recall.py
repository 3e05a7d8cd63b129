"""Local recall: BM25 over accepted, live notes and unexpired facts of the configured banks,
tag-scoped, explained, and a degraded result that is not the same as finding nothing."""

from __future__ import annotations

from memory_support import HangingBackend, RaisingBackend

from engine.memory.keyword_recall import KeywordRecallBackend
from engine.memory.memory_access import recall_with_timeout
from engine.memory.recall_items import RecallRequest
from store.clock import ManualClock
from store.db.seam import Database
from store.memory.memory_store import MemoryStore

NS = "workflow:code-review"


async def test_recall_reads_accepted_live_notes_and_facts(db: Database, clock: ManualClock) -> None:
    memory = MemoryStore(db)
    old = await memory.save_note(NS, "Run pytest with -x to stop at the first flaky failure.")
    await memory.save_note(NS, "Pending idea about pytest markers.", status="pending")
    await memory.save_note("workflow:other", "pytest lesson from another bank.")
    newer = await memory.save_note(NS, "Use pytest -x -q for flaky suites.", supersedes=[old.id],
                                   status="pending")
    await memory.set_fact(NS, "pytest.command", {"content": "pytest -x --lf"})
    await memory.set_fact(NS, "pytest.expired", "pytest old", ttl_ms=1000)
    clock.advance(5000)
    backend = KeywordRecallBackend(db)
    result = await backend.recall(RecallRequest((NS,), "How should I run pytest on flaky tests?"))
    ids = [item.id for item in result.items]
    assert f"note:{old.id}" in ids  # the pending superseder hides nothing
    assert f"fact:{NS}/pytest.command" in ids
    assert not result.degraded
    assert all("pytest" in item.matched_terms for item in result.items)
    assert {item.source for item in result.items} == {"note", "fact"}
    assert all(item.namespace == NS for item in result.items)  # other banks never leak in
    assert not any("expired" in i for i in ids)
    assert not any("Pending" in i.text for i in result.items)
    await memory.accept_note(newer.id)
    after = await backend.recall(RecallRequest((NS,), "pytest flaky"))
    assert [i.id for i in after.items if i.source == "note"] == [f"note:{newer.id}"]


async def test_recall_is_tag_scoped_and_ranked(db: Database) -> None:
    memory = MemoryStore(db)
    tagged = await memory.save_note(NS, "deploy deploy staging checklist", tags=["branch:main"])
    await memory.save_note(NS, "deploy notes without tags")
    result = await KeywordRecallBackend(db).recall(
        RecallRequest((NS,), "deploy staging", tags=("branch:main",)))
    assert [i.id for i in result.items] == [f"note:{tagged.id}"]
    both = await KeywordRecallBackend(db).recall(RecallRequest((NS,), "deploy staging"))
    assert both.items[0].id == f"note:{tagged.id}"  # more matched terms rank first
    assert both.items[0].score >= both.items[1].score


async def test_nothing_found_differs_from_degraded(db: Database) -> None:
    found = await KeywordRecallBackend(db).recall(RecallRequest((NS,), "zebra"))
    assert found.items == () and not found.degraded
    timed_out = await recall_with_timeout(HangingBackend(), RecallRequest((NS,), "q"), 20)
    assert timed_out.degraded and "timed out after 20 ms" in (timed_out.reason or "")
    failed = await recall_with_timeout(RaisingBackend(), RecallRequest((NS,), "q"), 1000)
    assert failed.degraded and "index unavailable" in (failed.reason or "")


async def test_accents_and_case_match_like_the_index(db: Database) -> None:
    memory = MemoryStore(db)
    note = await memory.save_note(NS, "Crème brûlée needs a torch")
    result = await KeywordRecallBackend(db).recall(RecallRequest((NS,), "CREME brulee"))
    assert [i.id for i in result.items] == [f"note:{note.id}"]
    assert result.items[0].matched_terms == ("creme", "brule") and result.items[0].score > 0
