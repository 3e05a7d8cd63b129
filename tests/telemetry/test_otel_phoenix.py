"""Opt-in: Arize Phoenix (``phoenix serve``, from PyPI) receives the demo's export and stores it.
Phoenix is a large install (a web server, a database layer, hundreds of MB), so it is not part
of the default suite: name its ``phoenix`` executable with ``TETHER_PHOENIX`` and run
``pytest -m phoenix`` (``.ci/run`` does when ``TETHER_CI_PHOENIX=1``)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest
from otel_support import ROOT, otel_env, tether

from engine.telemetry.otel_probe import probe
from engine.telemetry.otel_settings import resolve_target

PHOENIX = os.environ.get("TETHER_PHOENIX")
STORED_WITHIN_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spans(port: int) -> list[dict]:
    found, cursor = [], None
    while True:
        query = "limit=1000" + (f"&cursor={cursor}" if cursor else "")
        url = f"http://127.0.0.1:{port}/v1/projects/default/spans?{query}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            page = json.load(answer)
        found.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return found


@pytest.mark.phoenix
@pytest.mark.skipif(not PHOENIX, reason="set TETHER_PHOENIX to a phoenix executable")
def test_phoenix_stores_the_demo_with_its_tree_and_token_counts(tmp_path: Path):
    port, grpc_port = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc_port),
           "PHOENIX_HOST": "127.0.0.1"}
    server = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:  # ready once it says so (no polling for the port)
            if "Uvicorn running on" in line or "Application startup complete" in line:
                break
        threading.Thread(target=server.stdout.read, daemon=True).start()  # keep the pipe clear
        done = tether(tmp_path, otel_env(f"http://127.0.0.1:{port}",
                                         OTEL_METRICS_EXPORTER="none"), "demo", "--headless")
        assert done.returncode == 0, done.stderr
        assert "telemetry" not in done.stderr
        expected = _expected(tmp_path / "tether-demo")
        # Phoenix stores what it received in the background; no completion signal to wait
        # on, so ask again (boundedly) until everything is there.
        settled = threading.Event()
        spans: list[dict] = []
        for _ in range(int(STORED_WITHIN_S / 0.5)):
            spans = _spans(port)
            if len(spans) >= expected["spans"]:
                break
            settled.wait(0.5)
        assert len(spans) == expected["spans"]
        by_id = {s["context"]["span_id"]: s for s in spans}
        chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
        assert chats and all(s["span_kind"] == "LLM" for s in chats)  # Phoenix read them so
        for chat in chats:
            parent = by_id[chat["parent_id"]]
            assert parent["name"].startswith("invoke_agent ")
        total = sum(s["attributes"]["gen_ai.usage.input_tokens"]
                    + s["attributes"]["gen_ai.usage.output_tokens"] for s in chats)
        assert total == expected["tokens"]
        # The dashboard's own check of the collector is an export request Phoenix takes.
        target = resolve_target(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"})
        assert target is not None and asyncio.run(probe(target)) is None
    finally:
        server.terminate()
        server.wait(30)


def _expected(folder: Path) -> dict[str, int]:
    from store.db.sqlite.direct import DirectDatabase, run_now
    from store.runs.run_store import RunStore
    from store.workspace.layout import Workspace

    db = DirectDatabase.open_now(Workspace(folder), create=False, read_only=True)
    try:
        runs = run_now(RunStore(db).list_runs(limit=1000))
        attempts = run_now(db.fetch_value("SELECT count(*) FROM attempts"))
        calls = run_now(db.fetch_value("SELECT count(*) FROM calls"))
        recalls = run_now(db.fetch_value(
            "SELECT count(*) FROM memory_blocks WHERE query IS NOT NULL OR degraded = 1"))
        tools = run_now(db.fetch_value("SELECT count(*) FROM events WHERE type = 'memory.tool'"))
    finally:
        db.close_now()
    return {"spans": len(runs) + attempts + calls + recalls + tools,
            "tokens": sum(r.tokens.total for r in runs)}


def test_the_phoenix_check_is_wired_into_ci():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "TETHER_CI_PHOENIX" in ci and "arize-phoenix" in ci and "-m phoenix" in ci
