"""A real Ray cluster on this machine for the Ray tests: ``ray start --head`` and more
``ray start --address=...`` nodes, each a separate set of processes with a temporary folder of
its own and its own resources, sized small (one CPU, 80 MB object store); torn down with
``ray stop --force``. Also: waiting for a file's lines and for a process to exit without
sleeping (watchfiles, pidfd)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import watchfiles

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 80_000_000
START_TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class RayNode:
    name: str
    temp_dir: Path
    ip: str | None

    def raylet_pid(self) -> int:
        """The pid of this node's raylet (its command line names the node's temp folder)."""
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (Path("/proc") / entry / "cmdline").read_bytes().split(b"\0")
                if argv and argv[0].endswith(b"/raylet") and any(
                    str(self.temp_dir).encode() in a for a in argv
                ):
                    return int(entry)
        raise AssertionError(f"no raylet found for node {self.name}")


@dataclass
class RayTestCluster:
    """Starts nodes with ``ray start`` (see the module docstring)."""

    port: int = field(default_factory=free_port)
    nodes: list[RayNode] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str], ip: str | None,
               resources: dict[str, float], num_cpus: int = 1) -> RayNode:
        temp_dir = Path(tempfile.mkdtemp(prefix=f"tr{name}", dir="/tmp"))
        argv = [
            RAY, "start", *args,
            f"--num-cpus={num_cpus}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
            f"--resources={json.dumps(resources)}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
        ]
        if ip is not None:
            argv.append(f"--node-ip-address={ip}")
        done = subprocess.run(argv, env=_env(), capture_output=True, text=True,
                              timeout=START_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise AssertionError(f"ray start failed: {done.stderr[-2000:]}")
        node = RayNode(name, temp_dir, ip)
        self.nodes.append(node)
        return node

    def start_head(self, resources: dict[str, float], num_cpus: int = 1) -> RayNode:
        return self._start("h", ["--head", f"--port={self.port}", "--include-dashboard=false",
                                 f"--dashboard-port={free_port()}"], None, resources, num_cpus)

    def add_node(self, name: str, ip: str, resources: dict[str, float]) -> RayNode:
        """A second node on this machine, told apart by its own loopback address."""
        return self._start(name, [f"--address={self.address}"], ip, resources)

    def stop(self) -> None:
        subprocess.run([RAY, "stop", "--force"], env=_env(), capture_output=True,
                       timeout=120, check=False)
        for node in self.nodes:
            shutil.rmtree(node.temp_dir, ignore_errors=True)


async def lines_matching(path: Path, wanted: Callable[[list[str]], bool],
                         timeout_s: float = 120) -> list[str]:
    """The lines of ``path`` once ``wanted`` holds for them (woken by watchfiles, bounded)."""

    def lines() -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    async def wait() -> list[str]:
        stop = asyncio.Event()
        watched = path.parent
        while not watched.exists():
            watched = watched.parent  # the file's folder may be made later: watch what exists
        async for _ in watchfiles.awatch(watched, stop_event=stop, debounce=20, step=20,
                                         rust_timeout=500, yield_on_timeout=True):
            found = lines()
            if wanted(found):
                stop.set()
                return found
        raise AssertionError("the watcher stopped")

    found = lines()
    if wanted(found):
        return found
    return await asyncio.wait_for(wait(), timeout_s)


async def exited(pid: int, timeout_s: float = 60) -> bool:
    """Wait until process ``pid`` (not a child of ours) has exited: True; False when it is
    still running after ``timeout_s``. Uses a pidfd, which becomes readable at exit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    gone = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(True))
    try:
        await asyncio.wait_for(gone, timeout_s)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
