"""Local recall: BM25 over accepted, live notes and unexpired facts of the configured banks,
tag-scoped, explained, and a degraded result that is not the same as finding nothing."""

from __future__ import annotations

from memory_support import HangingBackend, RaisingBackend

from engine.memory.items import RecallRequest
from engine.memory.recall import (
    PROBE_CAP,
    RANK_ALL_MAX_DOCS,
    LocalRecallBackend,
    bm25,
    choose_terms,
    idf,
    query_terms,
)
from engine.memory.runtime import recall_with_timeout
from store.clock import ManualClock
from store.database import Database
from store.memory import MemoryStore
from store.recall import match_expression

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
    backend = LocalRecallBackend(db)
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
    result = await LocalRecallBackend(db).recall(
        RecallRequest((NS,), "deploy staging", tags=("branch:main",)))
    assert [i.id for i in result.items] == [f"note:{tagged.id}"]
    both = await LocalRecallBackend(db).recall(RecallRequest((NS,), "deploy staging"))
    assert both.items[0].id == f"note:{tagged.id}"  # more matched terms rank first
    assert both.items[0].score >= both.items[1].score


async def test_nothing_found_differs_from_degraded(db: Database) -> None:
    found = await LocalRecallBackend(db).recall(RecallRequest((NS,), "zebra"))
    assert found.items == () and not found.degraded
    timed_out = await recall_with_timeout(HangingBackend(), RecallRequest((NS,), "q"), 20)
    assert timed_out.degraded and "timed out after 20 ms" in (timed_out.reason or "")
    failed = await recall_with_timeout(RaisingBackend(), RecallRequest((NS,), "q"), 1000)
    assert failed.degraded and "index unavailable" in (failed.reason or "")


def test_query_terms_are_safe_fts_strings() -> None:
    assert query_terms('Run "pytest" -x; OR NEAR(a b) 🔥 Ünïcode the of') == (
        "run", "pytest", "near", "ünïcode")
    assert match_expression(["a", 'b"c']) == '"a" OR "b""c"'


def test_common_terms_are_dropped_or_pooled() -> None:
    cap = PROBE_CAP
    choice = choose_terms({"parser": cap, "flaky": 40, "pytest": 999, "nothing": 0, "w": 600})
    assert choice.terms == ("flaky", "w", "pytest") and choice.dropped_common == ("parser",)
    assert choice.newest_pool == (RANK_ALL_MAX_DOCS < 40 + 600 + 999)
    assert choose_terms({"flaky": 40, "pytest": 999}, max_terms=1).terms == ("flaky",)
    only_common = choose_terms({"test": cap, "run": cap, "fix": cap, "code": cap})
    assert only_common.terms == ("test", "run", "fix") and only_common.newest_pool
    assert choose_terms({"x": 0}).terms == ()


def test_bm25_prefers_rarer_and_more_frequent_terms() -> None:
    weights = {"flaky": idf(10, 1000), "test": idf(900, 1000)}
    assert weights["flaky"] > weights["test"] > 0
    rare = bm25(["flaky", "fix"], weights, 2.0)
    common = bm25(["test", "fix"], weights, 2.0)
    twice = bm25(["flaky", "flaky"], weights, 2.0)
    assert twice > rare > common > 0
    assert bm25(["other"], weights, 1.0) == 0
    assert idf(5000, 1000) >= 0
