"""A small, deterministic workspace for dashboard tests and snapshots (written via
store.runs.run_store)."""

from __future__ import annotations

from engine.artifact_files import stream_log_path
from store.clock import ManualClock
from store.db.backends import open_database
from store.db.seam import Database
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
NOW_MS = START_MS + 49_300
"""The sample's "now": run-stale-1's heartbeat is 41 s old, the other running runs' fresh."""
MARKUP = "[bold red]x[/] [@click=app.quit]q[/]"
ANSI = "\x1b[31mred\x1b[0m\x1b]0;title\x07"


async def populate(db: Database, clock: ManualClock) -> None:
    """Three workflows' worth of runs: finished with a retry and memory, running, stale,
    and a three-generation handoff chain."""
    store = RunStore(db)
    clock.set(START_MS)

    # A finished code review with parallel nodes, a retry, a cache hit and memory blocks.
    run = "run-review-1"
    await store.create_run("code-review", run_id=run, input={"repo": "demo"}, nodes_total=4)
    await store.upsert_nodes(
        run,
        [
            ("plan", 0, "pending", []),
            ("review-a", 0, "pending", ["plan"]),
            ("review-b", 0, "pending", ["plan"]),
            ("summarize", 0, "pending", ["review-a", "review-b"]),
        ],
    )
    clock.advance(500)
    await store.save_memory_block(
        run, "plan", 0,
        text="Advisory context, not instructions:\n- prefer pytest -x\n- " + MARKUP,
        budget_bytes=2048, bytes_used=2040, truncated=True, query="plan the review of demo",
        banks=["workflow:code-review"],
        items=[
            {"id": "note:n1", "source": "note", "namespace": "workflow:code-review",
             "score": 0.91, "matched_terms": ["review", "pytest"], "text": "prefer pytest -x"},
            {"id": "fact:workflow:code-review/style", "source": "fact",
             "namespace": "workflow:code-review", "key": "style", "score": 0.42,
             "matched_terms": ["style"], "text": MARKUP},
        ],
        duration_ms=12,
    )
    await store.start_attempt(run, "plan", 0, 1, agent="simulated", model="sim-1",
                              prompt="Plan the review.\n" + MARKUP)
    clock.advance(1200)
    await store.record_call(CallUsage(run, "plan", 0, 1, agent="simulated", model="sim-1",
                                      simulated=True,
                                      usage=TokenUsage(30_000, 12_000, 2_000, 800, 200)))
    await store.finish_attempt(run, "plan", 0, 1, "finished",
                               usage=TokenUsage(30_000, 12_000, 2_000, 800, 200),
                               node_state="finished", set_node_output=True,
                               node_output={"steps": ["read", MARKUP]}, nodes_done=1)
    for node in ("review-a", "review-b"):
        await store.start_attempt(run, node, 0, 1, agent="simulated", model="sim-1",
                                  prompt=f"Review part {node}.")
    await store.save_memory_block(
        run, "review-a", 0, text=None, budget_bytes=2048, bytes_used=0,
        warning="recall timed out after 2000 ms; the task ran without memory", degraded=True,
    )
    clock.advance(900)
    await store.record_call(CallUsage(run, "review-b", 0, 1, agent="simulated", model="sim-1",
                                      simulated=True, usage=TokenUsage(120_000, 20_000, 0, 50, 0)))
    await store.finish_attempt(run, "review-b", 0, 1, "failed", error="agent output was not JSON: "
                               + MARKUP, node_state="retrying")
    await store.start_attempt(run, "review-b", 0, 2, agent="simulated", model="sim-1",
                              prompt="Review part review-b (retry).", node_state="running")
    clock.advance(700)
    usage_a = TokenUsage(50_000, 20_000, 0, 900, 300)
    await store.record_call(CallUsage(run, "review-a", 0, 1, agent="simulated", model="sim-1",
                                      simulated=True, usage=usage_a))
    await store.finish_attempt(run, "review-a", 0, 1, "finished", node_state="finished",
                               usage=TokenUsage(50_000, 20_000, 0, 900, 300), nodes_done=2,
                               set_node_output=True, node_output={"issues": 2})
    await store.record_call(CallUsage(run, "review-b", 0, 2, agent="simulated", model="sim-1",
                                      simulated=True, usage=TokenUsage(40_000, 100_000, 0, 700, 0)))
    await store.finish_attempt(run, "review-b", 0, 2, "finished", node_state="finished",
                               usage=TokenUsage(40_000, 100_000, 0, 700, 0), nodes_done=3,
                               set_node_output=True, node_output={"issues": 0})
    await store.start_attempt(run, "summarize", 0, 1, agent="simulated", cached=True,
                              prompt="Summarize.")
    await store.finish_attempt(run, "summarize", 0, 1, "finished", cached=True,
                               node_state="finished", set_node_output=True,
                               node_output={"summary": "two issues"}, nodes_done=4)
    await store.upsert_node(run, "summarize", 0, "finished", cached=True)
    await store.set_run_status(run, "finished")

    log_path = stream_log_path(db.workspace.artifacts_dir, run, "review-b", 0, 2)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(
        "starting review-b\n" + ANSI + "\n" + MARKUP + "\ndone\n", encoding="utf-8"
    )

    # A healthy running run and a stale one.
    clock.advance(5_000)
    await store.create_run("incident-runbook", run_id="run-incident-1", nodes_total=3)
    await store.upsert_nodes("run-incident-1", [("triage", 0, "pending", []),
                                                ("mitigate", 0, "pending", ["triage"]),
                                                ("report", 0, "pending", ["mitigate"])])
    await store.start_attempt("run-incident-1", "triage", 0, 1, agent="simulated",
                              prompt="Triage the alert.")
    await store.create_run("code-review", run_id="run-stale-1", nodes_total=2)
    clock.advance(1_000)

    # A handoff chain: ceiling, then a person, then the live generation.
    await store.create_run("context-handoff", run_id="run-long-g0", nodes_total=5)
    await store.record_call(CallUsage("run-long-g0", "loop", 0, 1, agent="simulated",
                                      simulated=True, usage=TokenUsage(400_000, 150_000, 0, 0, 0)))
    await store.create_run("context-handoff", run_id="run-long-g1", generation=1,
                           parent_run_id="run-long-g0", nodes_total=5)
    await store.record_handoff("run-long-g0", to_run_id="run-long-g1", trigger="ceiling",
                               reason="token ceiling 500000 exceeded", generation=1,
                               tokens_at_handoff=550_000,
                               carried_state={"goal": "migrate", "generation": 1,
                                              "learnings": [MARKUP]})
    await store.set_run_status("run-long-g0", "handed-off")
    await store.create_run("context-handoff", run_id="run-long-g2", generation=2,
                           parent_run_id="run-long-g1", nodes_total=5)
    await store.record_handoff("run-long-g1", to_run_id="run-long-g2", trigger="person",
                               reason="cleared from the dashboard", generation=2,
                               carried_state={"goal": "migrate", "generation": 2})
    await store.set_run_status("run-long-g1", "handed-off")
    clock.advance(40_000)
    # Everything but run-stale-1 has a fresh heartbeat at "now".
    for run_id in ("run-incident-1", "run-long-g2"):
        await store.heartbeat(run_id)


async def build(workspace: Workspace, clock: ManualClock) -> None:
    """Create and fill ``workspace``."""
    db = await open_database(workspace, clock=clock)
    try:
        await populate(db, clock)
    finally:
        await db.close()
