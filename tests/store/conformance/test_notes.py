"""Notes: append-only saves, status decisions, supersession and the default read contract."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.seam import Database
from store.errors import ConflictError, InvalidInputError, NotFoundError
from store.memory.memory_store import MemoryStore

NS = "workflow:incident"


@pytest.fixture
def memory(db: Database) -> MemoryStore:
    return MemoryStore(db)


async def _ids(memory: MemoryStore, namespace: str | None = NS, **filters: object) -> list[str]:
    return [note.id for note in await memory.list_notes(namespace, **filters)]  # type: ignore[arg-type]


async def _two_lessons_and_a_rule(memory: MemoryStore, clock: ManualClock) -> None:
    await memory.save_note(NS, "Restart the cache when latency spikes.", note_id="lesson-1")
    clock.advance(1)
    await memory.save_note(NS, "Check the cache hit rate first.", note_id="lesson-2")
    clock.advance(1)
    await memory.save_note(
        NS, "Runbook: check hit rate, then restart the cache.", note_id="rule",
        status="pending", supersedes=["lesson-1", "lesson-2"],
    )


async def test_defaults_and_stored_fields(memory: MemoryStore, clock: ManualClock) -> None:
    note = await memory.save_note(
        NS, "body", kind="lesson", tags=["scope:ci", "scope:ci", "x"], author="agent",
        run_id="run-1", node_id="triage", iteration=2,
    )
    assert note.status == "accepted"
    assert note.tags == ("scope:ci", "x")
    assert (note.run_id, note.node_id, note.iteration) == ("run-1", "triage", 2)
    assert note.created_at_ms == clock.now_ms()
    assert note.status_changed_at_ms is None
    assert await memory.get_note(note.id) == note


async def test_pending_superseder_hides_nothing(memory: MemoryStore, clock: ManualClock) -> None:
    await _two_lessons_and_a_rule(memory, clock)
    assert await _ids(memory) == ["lesson-1", "lesson-2"]
    assert await _ids(memory, status="pending") == ["rule"]
    assert [n.id for n in await memory.supersedes("rule")] == ["lesson-1", "lesson-2"]
    assert [n.id for n in await memory.superseded_by("lesson-1")] == ["rule"]


async def test_accepting_retires_targets_in_one_write(
    memory: MemoryStore, db: Database, clock: ManualClock
) -> None:
    await _two_lessons_and_a_rule(memory, clock)
    clock.advance(10)
    accepted = await memory.accept_note("rule", reason="approved in review")
    assert accepted.status == "accepted"
    assert accepted.status_reason == "approved in review"
    assert accepted.status_changed_at_ms == clock.now_ms()
    assert await _ids(memory) == ["rule"]
    # The targets themselves were not written: retirement is derived from the one status write.
    for target in ("lesson-1", "lesson-2"):
        note = await memory.get_note(target)
        assert note is not None and note.status == "accepted"
        assert note.status_changed_at_ms is None
    assert await _ids(memory, include_superseded=True) == ["lesson-1", "lesson-2", "rule"]
    assert await db.fetch_value("SELECT count(*) FROM note_supersessions") == 2


async def test_reject_after_accept_revives_targets(
    memory: MemoryStore, clock: ManualClock
) -> None:
    await _two_lessons_and_a_rule(memory, clock)
    await memory.accept_note("rule")
    rejected = await memory.reject_note("rule", reason="too broad")
    assert rejected.status == "rejected"
    assert await _ids(memory) == ["lesson-1", "lesson-2"]
    assert await _ids(memory, status="rejected") == ["rule"]
    assert await _ids(memory, status="any") == ["lesson-1", "lesson-2", "rule"]


async def test_rejecting_a_proposal_leaves_originals_live(
    memory: MemoryStore, clock: ManualClock
) -> None:
    await _two_lessons_and_a_rule(memory, clock)
    await memory.reject_note("rule")
    assert await _ids(memory) == ["lesson-1", "lesson-2"]


async def test_id_collision_adds_no_edges_and_changes_nothing(
    memory: MemoryStore, db: Database
) -> None:
    await memory.save_note(NS, "keep me", note_id="keep")
    await memory.save_note(NS, "original", note_id="dup")
    # A losing save with different content and edges is refused, and leaves no edge behind.
    with pytest.raises(ConflictError, match="already exists with different content"):
        await memory.save_note(NS, "other body", note_id="dup", supersedes=["keep"])
    with pytest.raises(ConflictError):
        await memory.save_note(NS, "original", note_id="dup", supersedes=["keep"])
    assert await db.fetch_value("SELECT count(*) FROM note_supersessions") == 0
    assert await _ids(memory) == ["keep", "dup"]
    # Re-saving identical content is an idempotent no-op returning the stored note.
    again = await memory.save_note(NS, "original", note_id="dup", status="pending")
    assert again.status == "accepted" and again.body == "original"


async def test_identical_resave_with_edges_is_idempotent(memory: MemoryStore) -> None:
    await memory.save_note(NS, "old", note_id="old")
    first = await memory.save_note(NS, "new", note_id="new", supersedes=["old"])
    second = await memory.save_note(NS, "new", note_id="new", supersedes=["old", "old"])
    assert first == second


async def test_self_and_cross_namespace_supersession_refused(
    memory: MemoryStore, db: Database
) -> None:
    await memory.save_note("workflow:other", "elsewhere", note_id="elsewhere")
    with pytest.raises(InvalidInputError, match="cannot supersede itself"):
        await memory.save_note(NS, "me", note_id="me", supersedes=["me"])
    with pytest.raises(InvalidInputError, match="only supersede notes of its own namespace"):
        await memory.save_note(NS, "cross", note_id="cross", supersedes=["elsewhere"])
    with pytest.raises(NotFoundError, match="no note with id 'ghost'"):
        await memory.save_note(NS, "ghost target", note_id="g", supersedes=["ghost"])
    # The refused saves rolled back entirely: no note row, no edge.
    assert await db.fetch_value("SELECT count(*) FROM notes") == 1
    assert await db.fetch_value("SELECT count(*) FROM note_supersessions") == 0


async def test_status_changes(memory: MemoryStore) -> None:
    with pytest.raises(NotFoundError, match="no note with id 'nope'"):
        await memory.accept_note("nope")
    note = await memory.save_note(NS, "x", status="pending")
    with pytest.raises(InvalidInputError, match="Unknown note status"):
        await memory.set_note_status(note.id, "maybe")
    with pytest.raises(InvalidInputError, match="Unknown note status"):
        await memory.save_note(NS, "x", status="live")


async def test_filters(memory: MemoryStore, clock: ManualClock) -> None:
    await memory.save_note(NS, "a", note_id="a", kind="lesson")
    clock.advance(1)
    await memory.save_note("user:bob", "b", note_id="b", kind="rule")
    clock.advance(1)
    await memory.save_note(NS, "c", note_id="c", status="pending", kind="rule")
    assert await _ids(memory, None) == ["a", "b"]
    assert await _ids(memory, None, kind="rule") == ["b"]
    assert await _ids(memory, None, status=["pending", "accepted"]) == ["a", "b", "c"]
    assert await _ids(memory, None, status="any", limit=2) == ["a", "b"]
    assert await _ids(memory, "user:bob") == ["b"]
    assert await _ids(memory, None, status="any", newest_first=True, limit=2) == ["c", "b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"body": "   "}, "body is empty"),
        ({"body": "x" * (64 * 1024 + 1)}, "at most 65536 bytes"),
        ({"body": "bad \udcff"}, "not valid UTF-8"),
        ({"body": "x", "tags": [f"t{i}" for i in range(17)]}, "limit is 16"),
        ({"body": "x", "tags": [""]}, "A tag is empty"),
        ({"body": "x", "note_id": "a\x1bb"}, "control character"),
    ],
)
async def test_invalid_notes_are_refused(
    memory: MemoryStore, db: Database, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await memory.save_note(NS, **kwargs)  # type: ignore[arg-type]
    assert await db.fetch_value("SELECT count(*) FROM notes") == 0
