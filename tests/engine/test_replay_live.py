"""Replay shows what the live run showed: a real workflow on a real subprocess agent runs while
the dashboard's own reads (run, nodes, per-node usage) take snapshots of it at many event ids;
once it has ended, the replay of its event log to each of those ids gives the same node states,
attempt counts and tokens (per node and for the run). Both backends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import NamedTuple

import pytest

from engine.hooks import RUN, DispatchContext, DispatchDecision, EngineHooks, Progress
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.workflow.loader import load_workflow
from store.db.backends import open_reader
from store.db.seam import Database
from store.model.token_lanes import TokenUsage
from store.read.dashboard_reader import DashboardReader
from store.read.replay import ReplayState
from store.read.replay_reads import read_history, run_last_event_seq
from store.workspace.layout import Workspace

WORKFLOW = Path(__file__).with_name("fork_workflow.py")


class Snapshot(NamedTuple):
    seq: int
    nodes: dict[str, tuple[str, int]]
    tokens: dict[str, tuple[int, TokenUsage]]
    run_tokens: TokenUsage


async def live_snapshot(reader: DashboardReader, run_id: str) -> Snapshot | None:
    """What the run detail reads, bracketed by the run's newest event id: kept only when no
    event of the run committed while it was read (so it is the state as of that id)."""
    for _ in range(200):
        before = await run_last_event_seq(reader, run_id)
        run = await reader.run(run_id)
        nodes = await reader.nodes(run_id)
        usage = await reader.node_usage(run_id)
        if run is None or await run_last_event_seq(reader, run_id) != before:
            continue
        return Snapshot(
            before,
            {n.key: (n.state, n.attempts) for n in nodes},
            {key: (u.calls, u.tokens) for key, u in usage.items()},
            run.tokens,
        )
    return None


def replayed(state: ReplayState) -> Snapshot:
    return Snapshot(
        state.event.seq,
        {n.key: (n.state, n.attempts) for n in state.nodes},
        {key: (u.calls, u.tokens) for key, u in state.usage.items()},
        state.run_tokens,
    )


class Snapshotter:
    """Takes a snapshot at every dispatch (the engine awaits it) and at every progress update."""

    def __init__(self, reader: DashboardReader) -> None:
        self.reader = reader
        self.run_id: str | None = None
        self.taken: dict[int, Snapshot] = {}
        self.wake = asyncio.Event()

    async def take(self) -> None:
        if self.run_id is None:
            return
        snapshot = await live_snapshot(self.reader, self.run_id)
        if snapshot is not None:
            self.taken[snapshot.seq] = snapshot

    async def check(self, context: DispatchContext) -> DispatchDecision:
        self.run_id = context.run.run_id
        await self.take()
        return RUN

    def progress(self, update: Progress) -> None:
        self.wake.set()

    async def follow(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await self.take()


@pytest.fixture
def count_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "invocations.jsonl"
    monkeypatch.setenv("COUNT_FILE", str(path))
    return path


async def test_replay_matches_the_snapshots_taken_while_the_run_was_live(
    db: Database, any_workspace: Workspace, count_file: Path
) -> None:
    reader = await open_reader(any_workspace)
    snapshots = Snapshotter(reader)
    hooks = EngineHooks(guards=[snapshots], on_progress=snapshots.progress)
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.02), hooks=hooks)
    follower = asyncio.create_task(snapshots.follow())
    try:
        outcome = await engine.start(load_workflow(WORKFLOW), {"goal": "replay"},
                                     workflow_path=str(WORKFLOW))
        assert outcome.status == "finished", outcome.error
    finally:
        follower.cancel()
    try:
        await snapshots.take()  # and once more now that it ended
        history = await read_history(reader, outcome.run_id)
    finally:
        await reader.close()

    taken = snapshots.taken
    # The run was caught in several different moments: before any token, mid-way, at the end.
    assert len({tuple(sorted(s.nodes.items())) for s in taken.values()}) >= 4
    assert any(s.run_tokens.total == 0 for s in taken.values())
    assert any(0 < s.run_tokens.total < history.run.tokens.total for s in taken.values())
    assert any("running" in {state for state, _ in s.nodes.values()} for s in taken.values())
    last = max(taken)
    assert taken[last].run_tokens == history.run.tokens
    for seq, snapshot in sorted(taken.items()):
        assert replayed(history.log.at_seq(seq)) == snapshot, f"at event {seq}"
    # Nothing was executed again: one invocation per node iteration.
    assert len(count_file.read_text().splitlines()) == 6

