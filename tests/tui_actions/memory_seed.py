"""A small memory seed for the dashboard-action tests: facts in two namespaces, two accepted
lessons, a pending rule superseding both, and a pending note that supersedes nothing."""

from __future__ import annotations

from dataclasses import dataclass

from store.memory.memory_store import MemoryStore


@dataclass
class Seeded:
    """Ids of the notes the seed wrote."""

    lesson_a: str
    lesson_b: str
    rule: str
    lone: str


async def seed_memory(memory: MemoryStore) -> Seeded:
    """Facts in two namespaces, two accepted lessons, a pending rule superseding both, and a
    pending note that supersedes nothing."""
    await memory.set_fact("workflow:code-review", "answer", "use pytest -x")
    await memory.set_fact("workflow:code-review", "limits", {"max_files": 20}, ttl_ms=300_000,
                          run_id="run-1a2b", node_id="plan", iteration=0)
    await memory.set_fact("user:ada", "editor", "helix")
    lesson_a = await memory.save_note(
        "workflow:code-review", "Run ruff before pytest.", note_id="lesson-a",
        author="reviewer-agent", run_id="run-1a2b", node_id="review",
    )
    lesson_b = await memory.save_note(
        "workflow:code-review", "Lint first; it catches import errors early.",
        note_id="lesson-b", author="reviewer-agent", run_id="run-1a2b", node_id="review",
    )
    rule = await memory.save_note(
        "workflow:code-review", "Always lint (ruff) before running the tests.",
        note_id="rule-lint", status="pending", supersedes=[lesson_a.id, lesson_b.id],
        author="consolidator", run_id="run-3c4d", node_id="consolidate", tags=["lint"],
    )
    lone = await memory.save_note(
        "workflow:code-review", "[bold red]x[/] prefers small diffs", note_id="lone",
        status="pending", author="reviewer-agent",
    )
    return Seeded(lesson_a.id, lesson_b.id, rule.id, lone.id)
