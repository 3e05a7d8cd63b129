"""The memory examples end to end (offline, simulated agent) and ``tether memory summarize``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memory_support import engine_with_hooks
from pg_support import cli_env

from engine.memory.passages import passage
from engine.workflow.loader import load_workflow
from store.db.seam import Database
from store.memory.memory_store import MemoryStore
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]


async def test_code_review_second_run_sees_what_the_first_retained(db: Database) -> None:
    workflow = load_workflow(ROOT / "examples" / "code_review.py")
    engine = engine_with_hooks(db)
    first = await engine.start(workflow, {"change": "retry flaky pytest fixtures"})
    second = await engine.start(workflow, {"change": "retry flaky pytest fixtures"})
    assert first.status == second.status == "finished"
    retained = await MemoryStore(db).list_notes("workflow:code-review")
    by_run = {note.run_id: note for note in retained}
    assert set(by_run) == {first.run_id, second.run_id}
    runs = RunStore(db)
    block = await runs.get_memory_block(second.run_id, "review", 0)
    assert block is not None and block.text is not None
    assert f"note:{by_run[first.run_id].id}" in [i["id"] for i in block.items]
    prompt = (await runs.list_attempts(second.run_id, "review"))[-1].prompt or ""
    (seen,) = [i for i in block.items if i["id"] == f"note:{by_run[first.run_id].id}"]
    shown, _ = passage(by_run[first.run_id].body, seen["matched_terms"])
    assert seen["included"] and shown in prompt  # the passage around the matched words
    assert prompt.index(block.text) == 0


async def test_incident_runbook_proposes_pending_lessons_superseding_older_ones(
    db: Database,
) -> None:
    workflow = load_workflow(ROOT / "examples" / "incident_runbook.py")
    engine = engine_with_hooks(db)
    for _ in range(2):
        outcome = await engine.start(workflow, {"incident": "queue backlog after deploy"})
        assert outcome.status == "finished"
    memory = MemoryStore(db)
    pending = await memory.list_notes("workflow:incident-runbook", status="pending")
    assert len(pending) == 2
    newest = pending[-1]
    targets = await memory.supersedes(newest.id)
    assert len(targets) == 2 and all(t.status == "accepted" for t in targets)
    # Proposals hide nothing until a person accepts one; then its targets retire.
    live = await memory.list_notes("workflow:incident-runbook")
    assert {t.id for t in targets} <= {n.id for n in live}
    await memory.accept_note(newest.id)
    after = {n.id for n in await memory.list_notes("workflow:incident-runbook")}
    assert newest.id in after and not ({t.id for t in targets} & after)


async def test_memory_summarize_uses_an_engine_agent(db: Database, workspace: Workspace) -> None:
    memory = MemoryStore(db)
    thread = await memory.create_thread("workflow:chat", "triage")
    for index in range(5):
        db.clock.advance(10)  # type: ignore[attr-defined]
        await memory.save_message(thread.thread_id, "user", f"message {index} about the queue")
    (workspace.root / "config.toml").write_text(
        '[memory]\nsummarizer_agent = "brief"\n\n[agents.brief]\ntype = "simulated"\n'
        "latency_ms = 0\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", "memory", "summarize", "--workspace",
         str(workspace.root)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, env=cli_env(db.workspace),
    )
    assert done.returncode == 0, done.stderr
    assert "Wrote 1 summary replacing 3 messages (agent brief)" in done.stdout
    messages = await memory.list_messages(thread.thread_id)
    assert len(messages) == 3 and messages[0].role == "system"
    assert messages[0].content["type"] == "summary" and messages[0].content["text"]
    unknown = subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", "memory", "summarize", "--agent", "nope",
         "--workspace", str(workspace.root)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, env=cli_env(db.workspace),
    )
    assert unknown.returncode == 2 and "No agent named 'nope'" in unknown.stderr
