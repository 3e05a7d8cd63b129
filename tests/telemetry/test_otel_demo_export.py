"""The demo workflows run with export on, in a process of their own, against a real OTLP
receiver on 127.0.0.1 (the official opentelemetry-proto messages over HTTP and gRPC): the span
tree, every attribute against the GenAI conventions, token sums equal to Tether's own totals,
context-window buckets equal to the Tokens view."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from otel_support import (
    DURATION_BOUNDS,
    METRIC_ATTRIBUTES,
    OPT_IN,
    PATIENT_SHUTDOWN,
    ROOT,
    TOKEN_BOUNDS,
    convention_problems,
    otel_env,
    tether,
)

from store.db.sqlite.direct import DirectDatabase, run_now
from store.model.buckets import BUCKET_LABELS
from store.read.dashboard_reader import DashboardReader
from store.runs.run_store import RunStore
from store.workspace.layout import Workspace
from tools.otlp_receiver import GrpcReceiver, HttpReceiver, latest


def _records(folder: Path) -> dict[str, Any]:
    """What the workspace recorded, read back after the process ended."""
    db = DirectDatabase.open_now(Workspace(folder), create=False, read_only=True)
    try:
        store = RunStore(db)
        runs = run_now(store.list_runs(limit=1000))
        calls = [c for run in runs for c in run_now(store.list_calls(run.run_id))]
        attempts = run_now(db.fetch_all("SELECT * FROM attempts"))
        prompts = [row["prompt"] for row in attempts if row["prompt"]]
        blocks = [b for run in runs for b in run_now(store.list_memory_blocks(run.run_id))]
    finally:
        db.close_now()
    return {"runs": runs, "calls": calls, "attempts": attempts, "prompts": prompts,
            "blocks": blocks}


async def _tokens_view(folder: Path) -> dict[str, int]:
    reader = await DashboardReader.open(Workspace(folder))
    try:
        return {b.bucket: b.calls for b in await reader.usage_by_bucket()}
    finally:
        await reader.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("otel-demo")
    (folder / "tether-demo").mkdir()
    (folder / "tether-demo" / "config.toml").write_text(PATIENT_SHUTDOWN)
    with HttpReceiver() as receiver:
        done = tether(folder, otel_env(receiver.endpoint), "demo", "--headless")
        assert done.returncode == 0, done.stderr
        spans, points = receiver.spans(), receiver.metric_points()
    workspace = folder / "tether-demo"
    return {"spans": spans, "points": points, "stderr": done.stderr, **_records(workspace),
            "tokens_view": asyncio.run(_tokens_view(workspace))}


def _by_operation(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        found.setdefault(span["attributes"]["gen_ai.operation.name"], []).append(span)
    return found


def test_the_span_tree_is_runs_over_attempts_over_calls_recalls_and_tools(demo):
    spans, runs = demo["spans"], demo["runs"]
    assert len({s["span_id"] for s in spans}) == len(spans)  # each span arrived once
    ops = _by_operation(spans)
    run_spans = {s["attributes"]["tether.run.id"]: s for s in ops["invoke_workflow"]}
    assert set(run_spans) == {r.run_id for r in runs}
    assert len({s["trace_id"] for s in run_spans.values()}) == len(runs)  # a trace per run
    for span in run_spans.values():
        assert span["parent_span_id"] is None
    attempt_spans = {s["span_id"]: s for s in ops["invoke_agent"]}
    assert len(attempt_spans) == len(demo["attempts"])
    for span in attempt_spans.values():
        run_span = run_spans[span["attributes"]["tether.run.id"]]
        assert (span["trace_id"], span["parent_span_id"]) == (
            run_span["trace_id"], run_span["span_id"])
    assert len(ops["chat"]) == len(demo["calls"])
    recalled = [b for b in demo["blocks"] if b.query is not None]
    assert len(ops["retrieval"]) == len(recalled) > 0
    assert len(ops["execute_tool"]) > 0
    for span in ops["chat"] + ops["retrieval"] + ops["execute_tool"]:
        parent = attempt_spans[span["parent_span_id"]]
        assert parent["trace_id"] == span["trace_id"]
        assert parent["attributes"]["tether.node.id"] == span["attributes"]["tether.node.id"]
    statuses = Counter(s["attributes"]["tether.attempt.state"] for s in attempt_spans.values())
    assert statuses["failed"] > 0  # the demo's simulated failures are there, as errors
    for span in attempt_spans.values():
        if span["attributes"]["tether.attempt.state"] == "failed":
            assert span["status"] == "error" and span["attributes"]["error.type"] == "failed"


def test_handoffs_are_span_links_to_the_run_before(demo):
    run_spans = {s["attributes"]["tether.run.id"]: s for s in demo["spans"]
                 if s["attributes"]["gen_ai.operation.name"] == "invoke_workflow"}
    handed = [r for r in demo["runs"] if r.parent_run_id]
    assert len(handed) >= 3
    for run in handed:
        span, parent = run_spans[run.run_id], run_spans[run.parent_run_id]
        (link,) = span["links"]
        assert (link["trace_id"], link["span_id"]) == (parent["trace_id"], parent["span_id"])
        assert link["attributes"]["tether.link.type"] == "handoff"
        assert link["attributes"]["tether.handoff.carried_bytes"] > 0
        assert span["attributes"]["tether.run.generation"] == run.generation
        assert parent["attributes"]["tether.handoff.to_run_id"] == run.run_id
        assert parent["attributes"]["tether.run.status"] == "handed-off"


def test_every_span_follows_the_genai_conventions_and_carries_no_content(demo):
    problems = [p for span in demo["spans"] for p in convention_problems(span)]
    assert problems == []
    texts = [str(v) for s in demo["spans"] for v in s["attributes"].values()]
    for span in demo["spans"]:
        assert not OPT_IN & set(span["attributes"]), span["name"]
        assert span["resource"]["service.name"] == "tether"
    # No prompt, not even a line of one, went out: content is opt-in.
    lines = {line for p in demo["prompts"] for line in p.splitlines() if len(line) > 30}
    assert lines and not any(line in text for text in texts for line in lines)


def test_spans_carry_the_times_the_workspace_recorded(demo):
    calls = {(c.run_id, c.call_id): c for c in demo["calls"]}
    run_of = {s["trace_id"]: s["attributes"]["tether.run.id"] for s in demo["spans"]
              if s["attributes"]["gen_ai.operation.name"] == "invoke_workflow"}
    for span in demo["spans"]:
        if span["attributes"]["gen_ai.operation.name"] != "chat":
            continue
        call = calls[(run_of[span["trace_id"]], span["attributes"]["tether.call.id"])]
        assert span["start_ns"] == call.started_at_ms * 1_000_000
        assert span["end_ns"] == call.finished_at_ms * 1_000_000


def test_token_sums_equal_tethers_own_totals(demo):
    runs = demo["runs"]
    total = sum(r.tokens.total for r in runs)
    context = sum(r.tokens.context_tokens for r in runs)
    usage = latest(demo["points"]["gen_ai.client.token.usage"])
    by_type = Counter()
    for point in usage:
        assert point["unit"] == "{token}" and point["bounds"] == TOKEN_BOUNDS
        assert set(point["attributes"]) <= METRIC_ATTRIBUTES
        by_type[point["attributes"]["gen_ai.token.type"]] += point["sum"]
    assert by_type["input"] == context
    assert by_type["input"] + by_type["output"] == total
    chats = [s["attributes"] for s in demo["spans"]
             if s["attributes"]["gen_ai.operation.name"] == "chat"]
    assert sum(a["gen_ai.usage.input_tokens"] + a["gen_ai.usage.output_tokens"]
               for a in chats) == total
    durations = latest(demo["points"]["gen_ai.client.operation.duration"])
    assert sum(p["count"] for p in durations) == len(demo["calls"])
    assert all(p["unit"] == "s" and p["bounds"] == DURATION_BOUNDS for p in durations)
    runs_ended = latest(demo["points"]["tether.runs"])
    assert sum(p["value"] for p in runs_ended) == len(runs)
    attempts = latest(demo["points"]["tether.attempts"])
    assert sum(p["value"] for p in attempts) == len(demo["attempts"])


def test_context_window_buckets_equal_the_tokens_view(demo):
    points = latest(demo["points"]["tether.tokens.context_window_per_call"])
    counts = [0] * len(BUCKET_LABELS)
    for point in points:
        assert point["bounds"] == [49_999, 99_999, 199_999, 499_999, 999_999]
        counts = [a + b for a, b in zip(counts, point["bucket_counts"], strict=True)]
    view = [demo["tokens_view"].get(label, 0) for label in BUCKET_LABELS]
    assert counts == view and sum(view) == len(demo["calls"])
    assert view[1] > 0  # the handoff demo's large calls reach 50k-100k


def test_grpc_export_with_content_opted_in(tmp_path: Path):
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "config.toml").write_text(PATIENT_SHUTDOWN)
    seeded = tether(ROOT, otel_env(None), "notes", "add", "workflow:code-review",
                    "Run the fixtures twice before blaming a flaky test.", "--workspace",
                    str(workspace))
    assert seeded.returncode == 0, seeded.stderr
    with GrpcReceiver() as receiver:
        done = tether(ROOT, otel_env(receiver.endpoint, **env), "run", "examples/code_review.py",
                      "--input", json.dumps({"change": "retry flaky fixtures"}),
                      "--workspace", str(workspace))
        assert done.returncode == 0, done.stderr
        spans = receiver.spans()
    records = _records(workspace)
    agents = [s for s in spans if s["attributes"]["gen_ai.operation.name"] == "invoke_agent"]
    sent = {json.loads(s["attributes"]["gen_ai.input.messages"])[0]["parts"][0]["content"]
            for s in agents}
    assert sent == set(records["prompts"])
    recalls = [s["attributes"] for s in spans
               if s["attributes"]["gen_ai.operation.name"] == "retrieval"]
    with_items = [a for a in recalls if a["tether.memory.items"]]
    assert with_items, "the review recalls the note"
    for attributes in with_items:
        documents = json.loads(attributes["gen_ai.retrieval.documents"])
        assert [d["id"] for d in documents] == list(attributes["tether.memory.item_ids"])
        assert all(d["content"] for d in documents)
        assert attributes["gen_ai.retrieval.query.text"].startswith("Review the change")
    assert [p for s in spans for p in convention_problems(s)] == []
