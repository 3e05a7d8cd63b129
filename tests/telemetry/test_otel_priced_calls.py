"""Model calls to a real OpenAI-compatible server on 127.0.0.1 (a priced model and one with no
price), exported to a real OTLP receiver: the provider, the response model, the five token
lanes and the cost the collector holds are the workspace's own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
from otel_support import PATIENT_SHUTDOWN, ROOT, convention_problems, otel_env, tether

from store.db.sqlite.direct import DirectDatabase, run_now
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tools.otlp_receiver import HttpReceiver, latest


class _Provider(BaseHTTPRequestHandler):
    """/v1/chat/completions answering with fixed usage (cache and reasoning lanes included)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = json.dumps({
            "id": "chatcmpl-1",
            "model": body["model"] + "-2026-01-01",
            "choices": [{"message": {"role": "assistant", "content": "done"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 90,
                      "prompt_tokens_details": {"cached_tokens": 1000},
                      "completion_tokens_details": {"reasoning_tokens": 40}},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _workspace(tmp_path: Path, base_url: str) -> Path:
    folder = tmp_path / "ws"
    (folder / ".tether").mkdir(parents=True)
    (folder / ".tether" / "config.toml").write_text(
        f'[agents.priced]\ntype = "openai"\nbase_url = "{base_url}"\nmodel = "gpt-4o-mini"\n'
        'api_key_env = "TETHER_TEST_KEY"\n\n'
        f'[agents.unpriced]\ntype = "openai"\nbase_url = "{base_url}"\nmodel = "house-model"\n'
        'api_key_env = "TETHER_TEST_KEY"\n\n' + PATIENT_SHUTDOWN
    )
    return folder


def test_cost_and_lanes_of_real_model_calls_reach_the_collector(tmp_path, provider):
    folder = _workspace(tmp_path, provider)
    with HttpReceiver() as receiver:
        done = tether(folder, otel_env(receiver.endpoint, TETHER_TEST_KEY="k"), "run",
                      str(ROOT / "tests" / "telemetry" / "priced_workflow.py"))
        assert done.returncode == 0, done.stderr
        spans, points = receiver.spans(), receiver.metric_points()
    db = DirectDatabase.open_now(Workspace(folder / ".tether"), create=False, read_only=True)
    try:
        store = RunStore(db)
        (run,) = run_now(store.list_runs(limit=10))
        calls = run_now(store.list_calls(run.run_id))
    finally:
        db.close_now()
    priced = [c for c in calls if c.cost_usd is not None]
    assert len(calls) == 3 and len(priced) == 2 and sum(c.cost_usd for c in priced) > 0

    chats = {s["attributes"]["tether.call.id"]: s for s in spans
             if s["attributes"]["gen_ai.operation.name"] == "chat"}
    assert set(chats) == {c.call_id for c in calls}
    asked = {"gpt-4o-mini-2026-01-01": "gpt-4o-mini", "house-model-2026-01-01": "house-model"}
    for call in calls:
        span = chats[call.call_id]
        attributes = span["attributes"]
        # The model asked for names the span; the one that answered is the response model.
        assert span["kind"] == "client" and span["name"] == f"chat {asked[call.model]}"
        assert attributes["gen_ai.request.model"] == asked[call.model]
        assert attributes["gen_ai.response.model"] == call.model
        assert attributes["gen_ai.provider.name"] == "openai"
        assert (attributes["server.address"], attributes["server.port"]) == (
            "127.0.0.1", int(provider.rsplit(":", 1)[1].split("/")[0]))
        # The conventions' meaning: input is the whole context window, output has reasoning.
        assert attributes["gen_ai.usage.input_tokens"] == 1200
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 1000
        assert attributes["gen_ai.usage.output_tokens"] == 90
        assert attributes["gen_ai.usage.reasoning.output_tokens"] == 40
        if call.cost_usd is None:
            assert "tether.cost_usd" not in attributes
        else:
            assert attributes["tether.cost_usd"] == pytest.approx(call.cost_usd)
    assert [p for s in spans for p in convention_problems(s)] == []

    usage = latest(points["gen_ai.client.token.usage"])
    assert {p["attributes"]["server.address"] for p in usage} == {"127.0.0.1"}
    cost = latest(points["tether.cost"])
    assert {p["attributes"]["gen_ai.request.model"] for p in cost} == {"gpt-4o-mini"}
    assert all(p["attributes"]["tether.workflow"] == "priced" for p in cost)
    assert sum(p["value"] for p in cost) == pytest.approx(sum(c.cost_usd for c in priced))
    unpriced = latest(points["tether.cost.unpriced_calls"])
    assert [(p["attributes"]["gen_ai.request.model"], p["value"]) for p in unpriced] == [
        ("house-model", 1)]
