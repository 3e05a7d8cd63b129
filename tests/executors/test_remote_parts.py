"""The parts of remote execution that need no cluster: Ray's failures as attempt failures
(matched by class name), the reaper's match on a real process's environment, the folder tail
that ships artifact bytes, the agent thread a Ray worker runs, and the refusals made before
anything is written."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from pathlib import Path

import pytest

from engine.agents.agent import AgentError, AgentRequest
from engine.agents.simulated import SimulatedAgent
from engine.executors.folder_tail import FolderTail, safe_name
from engine.executors.ray_agent import portable_request, tool_specs
from engine.executors.ray_cluster import RAY_MISSING, import_ray
from engine.executors.ray_faults import NODE_LOST, ExecutorUnavailable, attempt_failure
from engine.executors.ray_runner import RemoteJob, _AgentThread
from engine.executors.reaper import names_run, processes_of_run, reap_run
from engine.executors.remote_events import CallEnded, Ended, portable_error
from engine.run.engine_config import EngineConfig, parse_config
from engine.run.wiring import preflight
from engine.workflow.definition import Workflow
from store.clock import ManualClock
from store.errors import InvalidInputError, StorageError


def _named(name: str, base: type[BaseException] = Exception) -> BaseException:
    """An exception whose class has Ray's name (the mapping reads names, not Ray's types)."""
    return type(name, (base,), {})("Task failed because the node it was running on is dead.")


@pytest.mark.parametrize("name", ["NodeDiedError", "WorkerCrashedError", "ObjectLostError",
                                  "LocalRayletDiedError", "OwnerDiedError"])
def test_a_lost_node_fails_the_attempt_for_tethers_retries(name: str) -> None:
    failure = attempt_failure(_named(name), "host vm, node 5094f00f")
    assert isinstance(failure, AgentError) and failure.retryable
    assert str(failure) == f"{NODE_LOST} (host vm, node 5094f00f)"


def test_other_ray_failures() -> None:
    setup = attempt_failure(_named("RuntimeEnvSetupError"))
    assert isinstance(setup, AgentError) and not setup.retryable
    assert str(setup).startswith("the Ray node could not set up the task's runtime_env: ")
    gone = attempt_failure(_named("RaySystemError"))
    assert isinstance(gone, ExecutorUnavailable) and isinstance(gone, StorageError)
    assert gone.reason.startswith("the Ray cluster stopped answering")
    odd = attempt_failure(ValueError("boom\nsecond line"))
    assert str(odd) == "its Ray task failed: ValueError: boom"
    # A subclass of a lost-node error is a lost node too.
    sub = type("Sub", (type(_named("ObjectLostError")),), {})("x")
    assert str(attempt_failure(sub)) == NODE_LOST


def test_reaper_matches_the_exact_run_and_stops_only_its_processes(tmp_path: Path) -> None:
    assert names_run(b"A=1\0TETHER_RUN_ID=r-abc\0B=2", "r-abc")
    assert not names_run(b"TETHER_RUN_ID=r-abcd\0", "r-abc")
    assert not names_run(b"X_TETHER_RUN_ID=r-abc\0", "r-abc")
    run_id = f"r-reap{os.getpid()}"
    env = {**os.environ, "TETHER_RUN_ID": run_id}
    ours = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], env=env,
                            stdin=subprocess.PIPE)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             env={**env, "TETHER_RUN_ID": run_id + "x"}, stdin=subprocess.PIPE)
    try:
        assert processes_of_run(run_id) == [ours.pid]
        assert reap_run(run_id) == [ours.pid]
        assert ours.wait(30) == -9
        assert other.poll() is None
    finally:
        for process in (ours, other):
            if process.poll() is None:
                process.kill()
            process.wait(30)
            assert process.stdin is not None
            process.stdin.close()


def test_folder_tail_ships_new_bytes_once(tmp_path: Path) -> None:
    tail = FolderTail(tmp_path)
    assert tail.read() == []
    (tmp_path / "stream.log").write_bytes(b"one\n")
    assert tail.read() == [("stream.log", b"one\n")]
    with (tmp_path / "stream.log").open("ab") as handle:
        handle.write(b"two\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.txt").write_bytes(b"x" * 300_000)
    first = tail.read()
    assert first[0] == ("stream.log", b"two\n") and first[1][0] == "sub/x.txt"
    rest = tail.drain()
    assert sum(len(d) for _, d in first[1:] + rest) == 300_000
    assert safe_name("stream.log") and safe_name("sub/x.txt")
    assert not safe_name("../escape") and not safe_name("/etc/passwd") and not safe_name("")


def test_the_agent_thread_of_a_ray_worker_reports_calls_files_and_the_end(
    tmp_path: Path,
) -> None:
    agent = SimulatedAgent(latency_ms=0, seed=3)
    request = portable_request(
        AgentRequest(prompt="Review a.py", run_id="r-1", node_id="n", clock=ManualClock(),
                     stream_path=tmp_path / "real" / "stream.log")
    )
    assert request.stream_path is None and not isinstance(request.clock, ManualClock)
    events: queue.Queue[object] = queue.Queue()
    thread = _AgentThread(RemoteJob(agent, request, "stream.log"), tmp_path, events)
    thread.start()
    thread.join(60)
    seen = []
    while not events.empty():
        seen.append(events.get())
    assert any(isinstance(e, CallEnded) for e in seen)
    end = seen[-1]
    assert isinstance(end, Ended) and end.error is None and end.result is not None
    assert end.result.text


def test_an_error_that_cannot_cross_becomes_an_agent_error() -> None:
    import threading

    class Holding(Exception):
        def __init__(self) -> None:
            super().__init__("holds a lock")
            self.lock = threading.Lock()

    crossed = portable_error(Holding())
    assert isinstance(crossed, AgentError) and "Holding: holds a lock" in str(crossed)
    plain = AgentError("rate limited", retryable=True, retry_after_s=3)
    assert portable_error(plain) is plain
    assert tool_specs([]) == ()


def test_ray_missing_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as on a host without the ray extra
    with pytest.raises(InvalidInputError) as caught:
        import_ray()
    assert str(caught.value) == RAY_MISSING
    workflow = Workflow("w", execution={"backend": "ray"})
    workflow.add_task("a", "Say hi.")
    with pytest.raises(InvalidInputError, match=r"pip install '\.\[ray\]'"):
        preflight(workflow, EngineConfig())
    in_process = Workflow("v")
    in_process.add_task("a", "Say hi.")
    preflight(in_process, parse_config({"execution": {"backend": "in-process"}}))
