"""The orchestrator's side of faults on a real Ray cluster: a `tether run` killed with -9 leaves
its remote attempts' leftovers, which the resume stops on every node before it dispatches
anything; a cancel stops the remote agent; a cluster that cannot be reached is one sentence
and the run stays resumable; an agent that cannot be sent to a node is refused up front."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import counting_agent
from ray_support import RayTestCluster, alive, exited, free_port, lines_matching

from engine.run.engine_config import parse_config
from engine.run.wiring import open_engine
from engine.workflow.definition import Workflow
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]  # real clusters start slowly under load
TETHER = str(Path(sys.executable).with_name("tether"))
WORKFLOW = '''
from engine import Workflow
workflow = Workflow("ray-held", default_agent="counter",
                    execution={"backend": "ray", "num_cpus": 0})
workflow.fan_out(id="review", items=["a", "b"], retries=1, backoff=0.05)("Review the item.")
'''


def write_workspace(tmp_path: Path, address: str, agent: dict[str, object]) -> Path:
    """A project folder with the workflow file and a .tether/config.toml naming the cluster."""
    (tmp_path / "wf.py").write_text(WORKFLOW)
    folder = tmp_path / ".tether"
    folder.mkdir(mode=0o700)
    command = ", ".join(json.dumps(part) for part in agent["command"])  # type: ignore[union-attr]
    env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in agent["env"].items())  # type: ignore[union-attr]
    (folder / "config.toml").write_text(
        f'[execution]\naddress = "{address}"\n\n'
        f'[agents.counter]\ntype = "command"\npreset = "json"\ncommand = [{command}]\n'
        f"env = {{ {env} }}\n"
    )
    return tmp_path


def runs_of(project: Path) -> list[dict[str, Any]]:
    """The workspace's runs as `tether runs --format json` lists them."""
    listing = json.loads(tether(project, "runs", "--format", "json").stdout)
    return list(listing["items"])


def tether(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TETHER, *args], cwd=project, capture_output=True, text=True,
                          timeout=timeout, check=False)


async def test_a_killed_orchestrators_leftovers_are_stopped_when_the_run_resumes(
    ray_cluster: RayTestCluster, tmp_path: Path
) -> None:
    ray_cluster.start_head({})
    count, release = tmp_path / "count" / "invocations.log", tmp_path / "release"
    count.parent.mkdir()
    project = write_workspace(tmp_path, ray_cluster.address,
                              counting_agent(count, release, leave=True))
    orchestrator = subprocess.Popen([TETHER, "run", "wf.py"], cwd=project,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = await lines_matching(
            count, lambda ls: sum(x.startswith("start") for x in ls) >= 2, timeout_s=180
        )
    finally:
        os.kill(orchestrator.pid, signal.SIGKILL)
        orchestrator.communicate(timeout=60)
    leftovers = [int(x.split()[3]) for x in lines if x.startswith("leftover")]
    agents = [int(x.split()[3]) for x in lines if x.startswith("start")]
    assert len(leftovers) == 2
    for pid in agents:
        assert await exited(pid), "Ray did not stop the dead orchestrator's agent"
    assert all(alive(pid) for pid in leftovers)  # what an agent CLI's children would do

    (run,) = runs_of(project)
    release.touch()
    resumed = tether(project, "run", "wf.py", "--resume", run["run_id"])
    assert resumed.returncode == 0, resumed.stderr
    for pid in leftovers:
        assert await exited(pid), "the resume left a process of the dead run running"
    assert runs_of(project)[0]["status"] == "finished"
    done = [x for x in count.read_text().splitlines() if x.startswith("done")]
    assert sorted(x.split()[1] for x in done) == ["review[0]", "review[1]"]
    db = await open_database(Workspace(project / ".tether"))
    try:
        store = RunStore(db)
        reaped = [e for e in await store.events_since(0) if e.type == "executor.reaped"]
        assert len(reaped) == 1 and reaped[0].payload["processes"] >= 2
        for node in ("review[0]", "review[1]"):
            states = [a.state for a in await store.list_attempts(run["run_id"], node)]
            assert states == ["abandoned", "finished"]
    finally:
        await db.close()


async def test_cancel_stops_the_agent_on_the_node(
    ray_cluster: RayTestCluster, tmp_path: Path
) -> None:
    ray_cluster.start_head({})
    count = tmp_path / "count" / "invocations.log"
    count.parent.mkdir()
    config = parse_config({"execution": {"address": ray_cluster.address},
                           "agents": {"counter": counting_agent(count, tmp_path / "never")}})
    workflow = Workflow("ray-cancel", default_agent="counter", execution={"backend": "ray"})
    workflow.add_task("hold", "Hold on.")
    db = await open_database(Workspace(tmp_path / ".tether"))
    try:
        store = RunStore(db)
        engine = open_engine(db, config=config)
        running = asyncio.create_task(engine.start(workflow, {}))
        (line,) = await lines_matching(count, lambda ls: len(ls) >= 1, timeout_s=180)
        (run,) = await store.list_runs()
        await store.request_cancel(run.run_id)
        outcome = await asyncio.wait_for(running, 120)
        assert outcome.status == "cancelled"
        assert await exited(int(line.split()[3])), "the cancelled remote agent kept running"
        (attempt,) = await store.list_attempts(run.run_id, "hold")
        assert attempt.state == "cancelled" and attempt.executor == "ray"
        assert not [x for x in count.read_text().splitlines() if x.startswith("done")]
    finally:
        await db.close()


def test_a_cluster_that_cannot_be_reached_is_one_sentence_and_resumable(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    project = write_workspace(tmp_path, address, counting_agent(tmp_path / "c.log", None))
    first = tether(project, "run", "wf.py")
    assert first.returncode == 3
    message = first.stderr.strip().splitlines()[-1]
    assert f"the Ray cluster at {address} cannot be reached" in first.stderr
    assert "Traceback" not in first.stderr
    (run,) = runs_of(project)
    assert run["status"] == "failed" and run["error"].startswith("Interrupted because the Ray")
    assert f"--resume {run['run_id']}" in run["error"]
    again = tether(project, "run", "wf.py", "--resume", run["run_id"])
    assert again.returncode == 3 and "cannot be reached" in again.stderr, message
    node = tether(project, "node", "review", "--run", run["run_id"], "--format", "json")
    assert "Traceback" not in node.stderr
    assert not (tmp_path / "c.log").exists()  # no agent ran anywhere


def test_an_agent_that_cannot_be_sent_to_a_node_is_refused(tmp_path: Path) -> None:
    from engine.agents.simulated import SimulatedAgent
    from engine.run.wiring import preflight

    class Holding(SimulatedAgent):
        lock = threading.Lock()

        def __reduce__(self) -> object:
            raise TypeError("cannot pickle '_thread.lock' object")

    workflow = Workflow("w", agents={"held": Holding(name="held")}, default_agent="held",
                        execution={"backend": "ray"})
    workflow.add_task("a", "Say hi.")
    with pytest.raises(InvalidInputError, match="cannot be sent to a Ray node"):
        preflight(workflow, parse_config({}))


def test_rays_error_messages_go_to_the_log_not_to_stdout(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from ray._private import worker

    from engine.executors.ray_cluster import _quiet_driver

    message = {"lines": ["Raylet is terminated. Termination is unexpected."], "pid": "raylet",
               "is_err": False}
    printer = worker.print_to_stdstream
    try:
        _quiet_driver()
        with caplog.at_level("INFO", logger="ray"):
            worker.print_to_stdstream(message, ignore_prefix=False)
    finally:
        worker.print_to_stdstream = printer
    shown = capsys.readouterr()
    assert "Raylet" not in shown.out and "Raylet" not in shown.err
    assert "raylet: Raylet is terminated" in caplog.text
