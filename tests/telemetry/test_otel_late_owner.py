"""The engine tells its export process about each engine over a pipe while that engine already
writes, so the export's tail can read past an engine's first events before it hears of it.
Those events must still be exported, once: the export reads them again for that owner."""

from __future__ import annotations

import time
from pathlib import Path

from otel_support import ROOT, otel_env, tether

from engine.telemetry.otel_live import LiveExport
from engine.telemetry.otel_settings import ExportTarget
from store.db.sqlite.direct import DirectDatabase, run_now
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tools.otlp_receiver import HttpReceiver

TINY = Path(__file__).with_name("tiny_workflow.py")


def _recorded(folder: Path) -> tuple[str, int, int]:
    db = DirectDatabase.open_now(Workspace(folder), create=False, read_only=True)
    try:
        store = RunStore(db)
        (run,) = run_now(store.list_runs(limit=10))
        attempts = run_now(db.fetch_all("SELECT * FROM attempts"))
        last = run_now(store.last_event_seq())
    finally:
        db.close_now()
    assert run.owner_id is not None
    return run.owner_id, len(attempts), last


def test_an_owner_heard_of_late_still_has_every_attempt_exported_once(tmp_path: Path):
    folder = tmp_path / "ws"
    folder.mkdir()
    started_ms = int(time.time() * 1000) - 1000
    done = tether(ROOT, otel_env(None), "run", str(TINY), "--workspace", str(folder))
    assert done.returncode == 0, done.stderr
    owner, attempts, last_seq = _recorded(folder)
    assert attempts == 2
    with HttpReceiver() as receiver:
        target = ExportTarget(traces_url=f"{receiver.endpoint}/v1/traces",
                              metrics_url=f"{receiver.endpoint}/v1/metrics",
                              interval_s=0.05, shutdown_timeout_s=120)
        live = LiveExport(Workspace(folder), target, {}, since_ms=started_ms)
        # The tail reads the whole run while it knows of no owner: nothing is sent.
        assert _eventually(lambda: live._cursor == last_seq)
        live.add_owner(owner, since_ms=started_ms)
        live.stop()
        spans = receiver.spans()
    operations = sorted(s["attributes"]["gen_ai.operation.name"] for s in spans)
    assert operations.count("invoke_workflow") == 1
    assert operations.count("invoke_agent") == attempts
    assert len({s["span_id"] for s in spans}) == len(spans)


def _eventually(condition, bound: float = 120.0) -> bool:
    """Wait for the export's own thread (polls a condition; never asserts on time)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()
