"""Fixtures of the Ray tests: a cluster started with ``ray start`` for the test and torn down
with ``ray stop --force``, the workflow file and config of a counting command agent."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_support import RayTestCluster

COUNTING_AGENT = Path(__file__).resolve().parents[1] / "ray_counting_agent.py"


@pytest.fixture
def ray_cluster() -> Iterator[RayTestCluster]:
    """A cluster to start nodes in (the test says which); everything stops afterwards, the
    test's own connection to it first."""
    cluster = RayTestCluster()
    try:
        yield cluster
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()


def counting_agent(count: Path, release: Path | None, *, leave: bool = False) -> dict[str, object]:
    """The [agents.counter] table: the counting agent CLI with the json preset."""
    env = {"TETHER_TEST_COUNT": str(count)}
    if release is not None:
        env["TETHER_TEST_RELEASE"] = str(release)
    if leave:
        env["TETHER_TEST_LEAVE"] = "1"
    return {"type": "command", "preset": "json", "command": [sys.executable,
            str(COUNTING_AGENT)], "env": env}
