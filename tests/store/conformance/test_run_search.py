"""Run search: the query language over real runs, the same answers on SQLite and PostgreSQL,
through a workspace Database and through the dashboard's reader; full-text conditions scan a
bounded window and say what they covered."""

from __future__ import annotations

import pytest

from store.clock import ManualClock
from store.db.backends import open_reader
from store.db.seam import Database
from store.model.run_records import CallUsage
from store.model.token_lanes import TokenUsage
from store.read.run_query import parse_query
from store.read.run_search import ChunkLogs, FolderLogs, LogSource, ScanBounds, search_runs
from store.runs.run_store import RunStore

DAY = 86_400_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


async def _run(store: RunStore, clock: ManualClock, run_id: str, workflow: str, *,
               status: str = "finished", inp: object = None, agent: str = "sim",
               model: str | None = "sim-1", prompt: str = "", answer: str = "",
               error: str | None = None, attempt_error: str | None = None,
               tokens: int = 1000, cost: float | None = 0.01) -> None:
    await store.create_run(workflow, run_id=run_id, input=inp, nodes_total=1)
    await store.upsert_nodes(run_id, [("work", 0, "pending", [])])
    attempt = 1
    if attempt_error is not None:
        await store.start_attempt(run_id, "work", 0, 1, agent=agent, model=model, prompt=prompt)
        await store.finish_attempt(run_id, "work", 0, 1, "failed", error=attempt_error,
                                   node_state="retrying")
        attempt = 2
    await store.start_attempt(run_id, "work", 0, attempt, agent=agent, model=model,
                              prompt=prompt)
    await store.record_call(CallUsage(run_id, "work", 0, attempt, agent, TokenUsage(tokens),
                                      model=model, cost_usd=cost))
    state = "failed" if status == "failed" else "finished"
    await store.finish_attempt(run_id, "work", 0, attempt, state, response_text=answer,
                               error=error if state == "failed" else None, node_state=state,
                               usage=TokenUsage(tokens))
    await store.set_run_status(run_id, status, error=error)
    clock.advance(3_600_000)


@pytest.fixture
async def runs(db: Database, clock: ManualClock) -> RunStore:
    """Six runs over two days: workflows, statuses, agents, models, inputs, errors, prompts."""
    store = RunStore(db)
    clock.set(T0)
    await _run(store, clock, "r-a", "code-review", inp={"repo": "demo", "n": 3},
               prompt="Review demo with pytest -x", answer="two issues", tokens=250_000,
               cost=1.5)
    await _run(store, clock, "r-b", "code-review", status="failed", inp={"repo": "api", "n": 12},
               error="agent timed out after 60 s", agent="claude-code", model="claude-opus-4",
               prompt="Review api")
    await _run(store, clock, "r-c", "incident", inp={"repo": "demo", "urgent": True},
               attempt_error="HTTP 429 rate limited", agent="codex", model="gpt-5.1",
               prompt="Triage THE alert", answer="Mitigated by restart", cost=None)
    clock.set(T0 + DAY)
    await _run(store, clock, "r-d", "incident", status="cancelled", inp={"n": 3.5},
               prompt="Triage again")
    await _run(store, clock, "r-e", "nightly", model=None, inp=[1, 2], prompt="ok",
               answer='{"done": true}')
    await store.create_run("nightly", run_id="r-f")  # running, heartbeat now
    return store


QUERIES = [
    ("", ["r-f", "r-e", "r-d", "r-c", "r-b", "r-a"]),
    ("status = failed", ["r-b"]),
    ("status:failed", ["r-b"]),
    ("status IN (failed, cancelled)", ["r-d", "r-b"]),
    ("status != finished", ["r-f", "r-d", "r-b"]),
    ("workflow = incident", ["r-d", "r-c"]),
    ("workflow STARTS_WITH code", ["r-b", "r-a"]),
    ("workflow ~ IGHT", ["r-f", "r-e"]),
    ("review", ["r-b", "r-a"]),
    ("cost > 1", ["r-a"]),
    ("cost <= 0.01 AND status = finished", ["r-e", "r-c"]),
    ("tokens >= 200k", ["r-a"]),
    ("created = 2026-01-02", ["r-f", "r-e", "r-d"]),
    ("created < 2026-01-02", ["r-c", "r-b", "r-a"]),
    ("created BETWEEN 2026-01-01T01:00 AND 2026-01-01T02:00", ["r-c", "r-b"]),
    ("agent = codex", ["r-c"]),
    ("agent != sim", ["r-f", "r-c", "r-b"]),  # no attempt ran sim
    ("model STARTS_WITH claude OR model = gpt-5.1", ["r-c", "r-b"]),
    ("model ~ opus", ["r-b"]),
    ("input.repo = demo", ["r-c", "r-a"]),
    ("input.repo != demo", ["r-f", "r-e", "r-d", "r-b"]),
    ("input.n > 3", ["r-d", "r-b"]),
    ("input.n = 3", ["r-a"]),
    ("input.urgent = true", ["r-c"]),
    ("error ~ \"timed out\"", ["r-b"]),
    ("error:429", ["r-c"]),
    ("error ~ \"timed out\" OR error:429", ["r-c", "r-b"]),
    ("NOT error:429", ["r-b"]),  # as the plain SQL: a run with no error of its own is unknown
    ("error ~ \"no such error\"", []),
    ("NOT (workflow = incident OR workflow = nightly)", ["r-b", "r-a"]),
    ("gen = 0 parent = none", ["r-f", "r-e", "r-d", "r-c", "r-b", "r-a"]),
]


@pytest.mark.parametrize(("text", "expected"), QUERIES, ids=[q or "empty" for q, _ in QUERIES])
async def test_structured_queries_match_the_same_runs_on_each_backend(
    runs: RunStore, clock: ManualClock, text: str, expected: list[str]
) -> None:
    result = await search_runs(runs.db, parse_query(text, clock.now_ms()), now_ms=clock.now_ms())
    assert [r.run_id for r in result.runs] == expected
    assert result.total == len(expected)
    assert result.scan is None


async def test_pages_and_the_count_of_all(runs: RunStore, clock: ManualClock) -> None:
    query = parse_query("", clock.now_ms())
    page = await search_runs(runs.db, query, now_ms=clock.now_ms(), limit=2, offset=2)
    assert [r.run_id for r in page.runs] == ["r-d", "r-c"] and page.total == 6


async def test_stale_is_a_running_run_with_an_old_heartbeat(
    runs: RunStore, clock: ManualClock
) -> None:
    now = clock.now_ms()
    fresh = await search_runs(runs.db, parse_query("status = stale", now), now_ms=now)
    assert fresh.runs == []
    later = now + 31_000
    stale = await search_runs(runs.db, parse_query("status = stale", later), now_ms=later)
    assert [r.run_id for r in stale.runs] == ["r-f"]


def _logs(db: Database) -> LogSource:
    if db.backend == "postgresql":
        from store.runs.artifact_chunks import ArtifactChunks

        return ChunkLogs(ArtifactChunks(db))  # type: ignore[arg-type]
    return FolderLogs(db.workspace.artifacts_dir)


async def _write_log(db: Database, run_id: str, attempt: int, text: str) -> None:
    relative = f"{run_id}/work/0/{attempt}/stream.log"
    if db.backend == "postgresql":
        from store.runs.artifact_chunks import ArtifactChunks

        await ArtifactChunks(db).replace(relative, text.encode())  # type: ignore[arg-type]
        return
    path = db.workspace.artifacts_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def test_full_text_finds_prompts_outputs_and_logs_and_says_what_it_read(
    runs: RunStore, clock: ManualClock
) -> None:
    db = runs.db
    await _write_log(db, "r-d", 1, "tool_use Bash: uv run PYTEST -q\n" * 10)
    now = clock.now_ms()

    async def ids(text: str, **options: object) -> list[str]:
        found = await search_runs(db, parse_query(text, now), now_ms=now, logs=_logs(db),
                                  **options)  # type: ignore[arg-type]
        return [r.run_id for r in found.runs]

    assert await ids("prompt ~ pytest") == ["r-a"]
    assert await ids("text ~ pytest") == ["r-d", "r-a"]  # a prompt and a log
    assert await ids("log ~ pytest") == ["r-d"]
    assert await ids("output ~ mitigated") == ["r-c"]  # ASCII case folded
    assert await ids('output ~ "\\"done\\": true"') == ["r-e"]  # a node's JSON output
    assert await ids("text ~ triage AND workflow = incident") == ["r-d", "r-c"]
    assert await ids("text !~ triage AND workflow = incident") == []
    assert await ids("text ~ the OR status = failed") == ["r-c", "r-b"]
    found = await search_runs(db, parse_query("text ~ pytest", now), now_ms=now, logs=_logs(db))
    assert found.scan is not None and found.scan.complete
    assert found.scan.runs_searched == found.scan.runs_eligible == 6
    assert found.scan.sentence() == (
        "Prompts, outputs and logs of all 6 eligible runs were searched."
    )


async def test_the_scan_bound_is_exact_and_reported(runs: RunStore, clock: ManualClock) -> None:
    db = runs.db
    log = "x" * 5000 + "needle\n"
    await _write_log(db, "r-e", 1, log)
    await _write_log(db, "r-a", 1, log)
    now = clock.now_ms()
    bounds = ScanBounds(runs=3, log_bytes=len(log.encode()) + 10)
    found = await search_runs(db, parse_query("log ~ needle", now), now_ms=now, logs=_logs(db),
                              bounds=bounds)
    scan = found.scan
    assert scan is not None
    # Only the three newest runs were eligible for the window; r-a (older) was never read.
    assert [r.run_id for r in found.runs] == ["r-e"]
    assert (scan.runs_searched, scan.runs_eligible) == (3, 6)
    assert not scan.complete and scan.sentence() == (
        "Logs were searched in the newest 3 of 6 eligible runs (--scan N searches more)."
    )
    narrow = await search_runs(db, parse_query("log ~ needle AND workflow = code-review", now),
                               now_ms=now, logs=_logs(db), bounds=bounds)
    # The window is the newest runs that pass the rest of the query: r-a is in it now.
    assert [r.run_id for r in narrow.runs] == ["r-a"] and narrow.scan is not None
    assert (narrow.scan.runs_searched, narrow.scan.runs_eligible) == (2, 2)
    tight = await search_runs(db, parse_query("log ~ needle", now), now_ms=now, logs=_logs(db),
                              bounds=ScanBounds(runs=10, log_bytes=100))
    assert tight.runs == [] and tight.scan is not None
    assert tight.scan.log_bytes_read == 100 and tight.scan.log_bytes_left > 0
    assert "were not read" in tight.scan.sentence()


async def test_the_dashboard_reader_gives_the_same_answers(
    runs: RunStore, clock: ManualClock
) -> None:
    reader = await open_reader(runs.db.workspace)
    try:
        now = clock.now_ms()
        for text, expected in QUERIES:
            found = await search_runs(reader, parse_query(text, now), now_ms=now)
            assert [r.run_id for r in found.runs] == expected, text
    finally:
        await reader.close()
