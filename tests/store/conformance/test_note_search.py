"""Note search end to end: operators as plain words, ranking, scope, the read contract, exact
per-bank BM25, stemming, the sentence fallback, the weak-match guard and question echo over
real notes (the pure policy is tested in test_search_policy.py)."""

from __future__ import annotations

import random

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import InvalidInputError
from store.memory.memory_store import MemoryStore
from store.search.search_policy import bm25, idf, index_terms, weak_terms
from store.search.term_index import index_for

NS = "workflow:code-review"


@pytest.fixture
def memory(db: Database) -> MemoryStore:
    return MemoryStore(db)


async def test_operators_in_the_query_are_plain_words(memory: MemoryStore) -> None:
    await memory.save_note(NS, "use ruff OR black", note_id="literal")
    await memory.save_note(NS, "use ruff", note_id="ruff-only")
    hits = await memory.search_notes("ruff OR")
    # Both words: only "literal"; then the any-word fallback ("or" is a stop word) adds the
    # other ruff note, and each hit says which search found it.
    assert [(hit.note.id, hit.mode) for hit in hits] == [
        ("literal", "all words"), ("ruff-only", "any word")]
    assert [h.note.id for h in await memory.search_notes("ruff OR", limit=1)] == ["literal"]
    # 'body' is a word here, not a column: no note holds both words, only the fallback finds.
    column = await memory.search_notes_with_mode("body:ruff*")
    assert column.mode == "any word" and all(h.mode == "any word" for h in column.hits)
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


def exact_bm25(bodies: dict[str, str], terms: tuple[str, ...]) -> dict[str, float]:
    """BM25 by brute force over ``bodies`` (the live notes of one bank)."""
    docs = {note_id: index_terms(body) for note_id, body in bodies.items()}
    average = sum(map(len, docs.values())) / len(docs)
    weights = {t: idf(sum(1 for d in docs.values() if t in d), len(docs)) for t in terms}
    return {note_id: bm25(doc, weights, average) for note_id, doc in docs.items()
            if all(t in doc for t in terms)}


async def test_scores_are_exact_bm25_over_the_banks_live_notes(memory: MemoryStore) -> None:
    rng = random.Random(3)
    words = ["test", "fix", "parser", "retry", "budget", "flaky", "module", "cache", "lint"]
    live: dict[str, str] = {}
    for index in range(120):
        body = " ".join(rng.choices(words, weights=[30, 20, 5, 5, 3, 2, 8, 4, 1], k=8))
        status = "pending" if index % 7 == 0 else "accepted"
        await memory.save_note(NS, body, note_id=f"n{index}", status=status)
        if status == "accepted":
            live[f"n{index}"] = body
    # Another bank full of "parser" must not change this bank's statistics.
    for index in range(50):
        await memory.save_note("workflow:other", "parser parser", note_id=f"o{index}")
    for query in ("test", "parser", "test fix", "flaky parser", "test fix module cache"):
        terms = tuple(index_terms(query))
        expected = exact_bm25(live, terms)
        for limit in (1000, 3):
            hits = await memory.search_notes(query, namespace=NS, limit=limit)
            got = {h.note.id: h.score for h in hits if h.mode == "all words"}
            best = sorted(expected.values(), reverse=True)[:limit]
            assert sorted(got.values(), reverse=True) == pytest.approx(best, rel=1e-5)
            for note_id, score in got.items():
                assert score == pytest.approx(expected[note_id], rel=1e-5)
    # Any word, with the weak-match guard (recall's ranking): "test" and "fix" are weak here.
    index = index_for(memory.db)
    for query in ("test flaky", "fix lint parser", "test fix"):
        terms = tuple(index_terms(query))
        docs = {note_id: index_terms(body) for note_id, body in live.items()}
        df = {t: sum(1 for d in docs.values() if t in d) for t in terms}
        weak = weak_terms(df, len(docs))
        average = sum(map(len, docs.values())) / len(docs)
        weights = {t: idf(df[t], len(docs)) for t in terms}
        expected = {note_id: bm25(doc, weights, average) for note_id, doc in docs.items()
                    if any(t in doc and t not in weak for t in terms)}
        found = await memory.db.run_read(lambda c, t=terms: index.search(
            c, [NS], t, limit=5, require_all=False, guard=True))
        best = sorted(expected.values(), reverse=True)[:5]
        assert sorted((r.score for r in found), reverse=True) == pytest.approx(best, rel=1e-5)


async def test_word_forms_meet_through_stemming(memory: MemoryStore) -> None:
    await memory.save_note(NS, "We dropped the flaky fixtures after researching them.",
                           note_id="a")
    assert [h.note.id for h in await memory.search_notes("drop fixture research")] == ["a"]


async def test_a_sentence_falls_back_to_any_word_and_says_so(memory: MemoryStore) -> None:
    await memory.save_note(NS, "The canary deploy rolls back when error rate passes 2%.",
                           note_id="answer")
    await memory.save_note(NS, "Lunch order for friday.", note_id="noise")
    found = await memory.search_notes_with_mode(
        "What happens to a canary deploy when errors spike?", limit=5)
    assert [h.note.id for h in found.hits] == ["answer"]
    assert found.mode == "any word" and found.hits[0].mode == "any word"
    assert set(found.hits[0].matched) >= {"canari", "deploi"}
    exact = await memory.search_notes_with_mode("canary deploy", limit=1)
    assert exact.mode == "all words"


async def test_weak_words_alone_admit_nothing_in_the_fallback(memory: MemoryStore) -> None:
    # "alice" is in every note of the bank: a match on it alone says nothing.
    for index in range(12):
        await memory.save_note(NS, f"alice: bye {index}", note_id=f"bye{index}")
    await memory.save_note(NS, "alice: the staging database password rotates monthly",
                           note_id="answer")
    found = await memory.search_notes_with_mode("did alice mention the database?", limit=5)
    assert [h.note.id for h in found.hits] == ["answer"]
    assert await memory.search_notes("alice what about lunch?", limit=5) == []


async def test_a_question_echo_does_not_outrank_the_answer(memory: MemoryStore) -> None:
    await memory.save_note(NS, "How do we rotate the staging database password?",
                           note_id="echo")
    await memory.save_note(NS, "Rotate it with vault rotate staging-db; the database "
                           "password changes monthly.", note_id="answer")
    for index in range(6):
        await memory.save_note(NS, f"unrelated lunch note {index}")
    hits = await memory.search_notes("how to rotate the staging database password?", limit=2)
    assert [h.note.id for h in hits][:1] in (["answer"],)
    assert hits[0].note.id == "answer"


async def test_a_long_lived_index_follows_decisions_and_new_notes(memory: MemoryStore) -> None:
    await memory.save_note(NS, "deploy with blue green", note_id="old")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["old"]
    await memory.save_note(NS, "deploy with canary", note_id="new", status="pending",
                           supersedes=["old"])
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["old"]
    await memory.accept_note("new")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["new"]
    await memory.reject_note("new")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["old"]
    for index in range(2_100):  # enough to merge the delta segment into the arrays
        await memory.save_note("workflow:bulk", f"deploy bulk {index}")
    assert len(await memory.search_notes("deploy bulk", limit=1000)) == 1000


async def test_an_index_sees_what_another_connection_writes(memory: MemoryStore) -> None:
    workspace = memory.db.workspace  # SQLite file or PostgreSQL schema alike
    await memory.save_note(NS, "deploy with blue green", note_id="old")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["old"]
    async with await MemoryStore.open(workspace) as other:  # another process would do the same
        await other.save_note(NS, "deploy with canary", note_id="new", supersedes=["old"])
        await other.save_note(NS, "deploy on fridays", note_id="late", status="pending")
    assert [h.note.id for h in await memory.search_notes("deploy")] == ["new"]
    async with await MemoryStore.open(workspace) as other:
        await other.accept_note("late")
        await other.reject_note("new")
    assert sorted(h.note.id for h in await memory.search_notes("deploy")) == ["late", "old"]
