"""A collector that is down, slow or failing costs a warning, never a run: real ``tether run``
processes export to a closed port, to a receiver that holds every request, and to one that
answers 500; the bounded queue drops (and counts) what does not fit."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from otel_support import ROOT, otel_env, tether

from engine.telemetry.otel_mapping import SpanData
from engine.telemetry.otel_pipeline import SpanQueue, SpanSender
from engine.telemetry.otel_status import ExportStatus
from tools.otlp_receiver import HttpReceiver

RUN = ("run", "examples/fanout_review.py", "--input",
       json.dumps({"files": ["api.py", "db.py", "cli.py"]}), "--format", "json")


def _workspace(tmp_path: Path, endpoint: str, **settings: object) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    lines = ["[telemetry]", f'endpoint = "{endpoint}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (folder / "config.toml").write_text("\n".join(lines) + "\n")
    return folder


def _run(folder: Path) -> tuple[int, dict, str]:
    done = tether(ROOT, otel_env(None), *RUN, "--workspace", str(folder))
    run = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, run, done.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_collector_that_is_down_costs_one_warning_and_no_run(tmp_path):
    folder = _workspace(tmp_path, f"http://127.0.0.1:{_closed_port()}", timeout_s=0.5,
                        shutdown_timeout_s=1)
    code, run, stderr = _run(folder)
    assert code == 0 and run["status"] == "finished", stderr
    assert "telemetry: cannot send spans" in stderr and "connection refused" in stderr
    assert stderr.count("telemetry: cannot send") == 1  # one warning, not one per batch
    assert "tether export otlp" in stderr  # and how to send them later


def test_a_collector_that_answers_500_is_reported_with_its_answer(tmp_path):
    with HttpReceiver() as receiver:
        receiver.mode = "fail"
        folder = _workspace(tmp_path, receiver.endpoint, shutdown_timeout_s=2)
        code, run, stderr = _run(folder)
        assert receiver.refused > 0
    assert code == 0 and run["status"] == "finished", stderr
    assert "HTTP 500" in stderr
    assert receiver.spans() == []


def test_a_collector_that_never_answers_never_holds_up_the_run(tmp_path):
    with HttpReceiver() as receiver:
        receiver.mode = "hold"
        folder = _workspace(tmp_path, receiver.endpoint, queue_size=4, batch_size=2,
                            timeout_s=60, interval_s=0.05, shutdown_timeout_s=0.5)
        code, run, stderr = _run(folder)
        # The run went to its end and its process exited while the collector still held
        # the very first request (nothing has been released yet).
        held, accepted = receiver.held, len(receiver.spans())
    assert code == 0 and run["status"] == "finished", stderr
    assert run["nodes_done"] == run["nodes_total"] == 8  # every node of the fan-out ran
    assert held >= 1 and accepted == 0
    assert "not keeping up" in stderr and "queue of 4" in stderr
    assert "spans did not reach" in stderr


def _span(n: int) -> SpanData:
    return SpanData(f"s{n}", 1, n + 1, None, "internal", 0, 0, {})


def test_the_queue_takes_what_fits_and_counts_the_rest():
    status = ExportStatus("http://collector", "http/protobuf", warn=False)
    queue = SpanQueue(3, status)
    assert queue.offer([_span(n) for n in range(5)]) == 3
    assert queue.offer([_span(9)]) == 0
    state = status.snapshot()
    assert (state.spans_dropped, state.spans_waiting) == (3, 3)
    assert [s.name for s in queue.take(10, 0)] == ["s0", "s1", "s2"]


def test_stopping_gives_up_on_a_batch_the_collector_holds():
    status = ExportStatus("http://collector", "http/protobuf", warn=False)
    queue = SpanQueue(10, status)
    release, entered = threading.Event(), threading.Event()
    sent: list[int] = []

    def send(batch):
        entered.set()
        release.wait()
        sent.append(len(batch))
        return True

    sender = SpanSender(queue, send, batch_size=2, interval_s=0.01)
    sender.start()
    queue.offer([_span(n) for n in range(4)])
    assert entered.wait(10)
    import time

    assert sender.stop(time.monotonic() + 0.05) is False  # the held batch is given up on
    release.set()
    sender._thread.join(10)  # released, the thread sends what was left and ends
    assert sent == [2, 2] and not sender._thread.is_alive()
