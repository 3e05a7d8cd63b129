"""The pure parts, called directly: settings from [telemetry] and OTEL_*, the one mapping from
records to spans and measurements, provider names and the context-window boundaries."""

from __future__ import annotations

import bisect
import json

import pytest

from engine.telemetry import otel_semconv as sc
from engine.telemetry.otel_backfill import parse_since
from engine.telemetry.otel_mapping import (
    MAX_CONTENT_CHARS,
    AttemptBundle,
    Options,
    RunBundle,
    attempt_span_id,
    map_attempt,
    map_run,
    run_span_id,
    tools_of_attempt,
    trace_id_of,
)
from engine.telemetry.otel_settings import parse_headers, parse_telemetry, resolve_target
from store.errors import InvalidInputError
from store.model.buckets import BUCKET_LABELS, bucket_for
from store.model.history_records import EventRecord, HandoffRecord, MemoryBlockRecord
from store.model.run_records import AttemptRecord, CallRecord, RunRecord
from store.model.token_lanes import CostTotal, TokenUsage

# -- settings -------------------------------------------------------------------------------------


def test_export_is_off_unless_an_endpoint_is_named():
    assert resolve_target(None, {}) is None
    assert resolve_target(parse_telemetry({"capture_content": True}, "c"), {}) is None
    on = resolve_target(parse_telemetry({"enabled": True}, "c"), {})
    assert on is not None and on.traces_url == "http://localhost:4318/v1/traces"


def test_variables_win_over_the_file_and_name_each_signal():
    file = parse_telemetry({"endpoint": "http://file:4318", "service_name": "mine",
                            "headers": {"X-Team": "a"}, "timeout_s": 3}, "config.toml")
    target = resolve_target(file, {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://env:4318/base/",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://metrics:9000/m",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20t0k,x-team=b",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        "OTEL_SERVICE_NAME": "svc",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    })
    assert target is not None
    assert target.traces_url == "https://env:4318/base/v1/traces"
    assert target.metrics_url == "https://metrics:9000/m"
    assert target.headers == {"x-team": "b", "authorization": "Bearer t0k"}
    assert (target.timeout_s, target.service_name, target.capture_content) == (2.5, "svc", True)
    assert target.source == "environment"
    grpc = resolve_target(file, {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc is not None and grpc.traces_url == grpc.metrics_url == "http://file:4318"


def test_export_can_be_turned_off_from_either_side():
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert resolve_target(parse_telemetry({"enabled": False}, "c"), on) is None
    assert resolve_target(None, {**on, "OTEL_SDK_DISABLED": "true"}) is None


def test_what_people_are_shown_never_holds_a_secret():
    target = resolve_target(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://u:pw@c:4318/?k=s"})
    assert target is not None and target.shown == "https://c:4318/v1/traces"


@pytest.mark.parametrize("table, words", [
    ({"endpoint": "localhost:4318"}, "http:// or https://"),
    ({"endpoint": "http://:99"}, "with a host"),
    ({"protocol": "http/json"}, "protocol must be one of"),
    ({"queue_size": 0}, "between 1 and"),
    ({"queue_size": 2.5}, "whole number"),
    ({"timeout_s": "10"}, "must be a number"),
    ({"headers": {"a": 1}}, "table of strings"),
    ({"capture_content": "yes"}, "true or false"),
    ({"colour": "red"}, "unknown [telemetry] setting 'colour'"),
])
def test_a_bad_table_is_one_sentence_naming_the_setting(table, words):
    with pytest.raises(InvalidInputError, match=None) as raised:
        parse_telemetry(table, "config.toml")
    assert words in str(raised.value) and str(raised.value).startswith("config.toml: ")


@pytest.mark.parametrize("environ, words", [
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "nope"}, "OTEL_EXPORTER_OTLP_ENDPOINT must be"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
     "http/json is not supported"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_BSP_MAX_QUEUE_SIZE": "many"},
     "OTEL_BSP_MAX_QUEUE_SIZE must be a number"),
    ({"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED must be true or false"),
])
def test_a_bad_variable_is_one_sentence_naming_it(environ, words):
    with pytest.raises(InvalidInputError) as raised:
        resolve_target(None, environ)
    assert words in str(raised.value)


def test_headers_are_pairs_and_garbage_is_refused():
    assert parse_headers(" a=1 , b = x%3Dy ,") == {"a": "1", "b": "x=y"}
    with pytest.raises(InvalidInputError):
        parse_headers("novalue")


def test_since_takes_ages_and_dates():
    now = 1_000_000_000_000
    assert parse_since("90m", now) == now - 90 * 60_000
    assert parse_since("2d", now) == now - 2 * 86_400_000
    assert parse_since("2026-05-01T00:00:00+00:00", now) == 1_777_593_600_000
    with pytest.raises(InvalidInputError, match="--since takes an age"):
        parse_since("yesterday", now)


# -- providers and buckets ---------------------------------------------------------------------


@pytest.mark.parametrize("agent, model, simulated, provider", [
    ("sim", "sim-1", True, "tether.simulated"),
    ("local", "qwen2.5-coder", False, "openai"),        # [agents.local] type = "openai"
    ("claude", None, False, "anthropic"),               # a command agent, preset claude-code
    ("mine", "claude-sonnet-4-5", False, "anthropic"),  # a workflow's own agent: the model says
    ("mine", "openai/gpt-4o", False, "openai"),
    ("mine", "gemini-2.5-pro", False, "gcp.gemini"),
    ("mine", "my-model", False, "tether.unknown"),
])
def test_the_provider_is_what_the_agent_speaks_else_what_the_model_says(
    agent, model, simulated, provider
):
    kinds = sc.agent_kinds({"local": {"type": "openai"},
                            "claude": {"type": "command", "preset": "claude-code"}})
    assert sc.provider_name(agent, model, simulated, kinds) == provider


@pytest.mark.parametrize("base_url, server", [
    ("http://127.0.0.1:8080/v1", {"server.address": "127.0.0.1", "server.port": 8080}),
    ("https://api.openai.com/v1", {"server.address": "api.openai.com", "server.port": 443}),
    ("http://[::1]/v1", {"server.address": "::1", "server.port": 80}),
    ("http://host:99999/v1", {}),  # a bad port: the agent says so when it runs
    (None, {}),                    # a command agent calls no API of its own
])
def test_the_server_is_where_an_http_agent_sends(base_url, server):
    spec = {"type": "openai"} if base_url is None else {"type": "openai", "base_url": base_url}
    assert sc.server_attributes("a", sc.agent_kinds({"a": spec})) == server
    assert sc.server_attributes("other", sc.agent_kinds({"a": spec})) == {}


@pytest.mark.parametrize("tokens", [0, 49_999, 50_000, 99_999, 100_000, 199_999, 200_000,
                                    499_999, 500_000, 999_999, 1_000_000, 5_000_000])
def test_the_context_window_histogram_buckets_are_the_tokens_views(tokens):
    # An OpenTelemetry bucket i holds (bounds[i-1], bounds[i]]: that is bisect_left.
    index = bisect.bisect_left(sc.CONTEXT_WINDOW.boundaries, tokens)
    assert BUCKET_LABELS[index] == bucket_for(tokens)


# -- the mapping -----------------------------------------------------------------------------------


RUN = RunRecord("r-000000000001", "review", status="finished", created_at_ms=1_000,
                started_at_ms=1_000, finished_at_ms=9_000, generation=2,
                parent_run_id="r-000000000000", input_json='{"change": "secret plan"}',
                tokens=TokenUsage(10, 200, 30, 40, 5), cost=CostTotal(0.5, 1))
ATTEMPT = AttemptRecord("r-000000000001", "review", 0, 2, "failed", agent="sim", model="sim-1",
                        prompt="Review the secret plan", response_text="{}",
                        error="Agent output is not JSON\nmore", started_at_ms=2_000,
                        finished_at_ms=3_000, tokens=TokenUsage(10, 200, 30, 40, 5))
CALL = CallRecord(7, "r-000000000001", "review", 0, 2, "sim", "sim-1", True,
                  TokenUsage(10, 200, 30, 40, 5), 240, "<50k", 2_100, 2_900, 0.25)
RETRY = CallRecord(8, "r-000000000001", "review", 0, 2, "api", "gpt-4o", False, TokenUsage(),
                   0, "<50k", 2_000, 2_050, None, "retry",
                   json.dumps({"status": 429, "error": "slow down"}))
BLOCK = MemoryBlockRecord(3, "r-000000000001", "review", 0, 2, query="the secret plan",
                          banks_json='["workflow:review"]', text="advisory\n- a lesson",
                          items_json=json.dumps([{"id": "note:1", "score": 1.5, "text": "a lesson",
                                                  "included": True},
                                                 {"id": "note:2", "included": False}]),
                          bytes_used=20, budget_bytes=2048, truncated=True, duration_ms=40,
                          created_at_ms=2_050)
TOOL = EventRecord(41, 2_500, "memory.tool", "r-000000000001", "review", 0, None,
                   json.dumps({"tool": "remember", "ok": True, "note_id": "n9",
                               "duration_ms": 12}))


def _spans(mapped):
    return {s.attributes["gen_ai.operation.name"]: s for s in mapped.spans}


def test_an_attempt_maps_to_its_span_and_children_under_one_trace():
    mapped = map_attempt(AttemptBundle("review", ATTEMPT, [CALL, RETRY], BLOCK, [TOOL]))
    assert [s.name for s in mapped.spans] == [
        "invoke_agent review", "chat sim-1", "chat sim-1", "retrieval workflow:review",
        "execute_tool remember"]
    own = attempt_span_id("r-000000000001", "review", 0, 2)
    assert mapped.spans[0].parent_span_id == run_span_id("r-000000000001")
    assert all(s.parent_span_id == own for s in mapped.spans[1:])
    assert {s.trace_id for s in mapped.spans} == {trace_id_of("r-000000000001")}
    agent = mapped.spans[0]
    assert agent.attributes["error.type"] == "failed"
    assert agent.error == "Agent output is not JSON"  # the first line, never the output
    chat = mapped.spans[1].attributes
    assert chat["gen_ai.usage.input_tokens"] == 240  # the whole context window
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 200
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 30
    assert chat["gen_ai.usage.output_tokens"] == 45  # output plus reasoning
    assert chat["gen_ai.usage.reasoning.output_tokens"] == 5
    assert (mapped.spans[1].start_ns, mapped.spans[1].end_ns) == (2_100_000_000, 2_900_000_000)
    retry = mapped.spans[2]
    assert retry.attributes["error.type"] == "429" and retry.error == "slow down"
    # The span is named after the model the attempt asked for; the call's is the response's.
    assert (retry.attributes["gen_ai.request.model"],
            retry.attributes["gen_ai.response.model"]) == ("sim-1", "gpt-4o")
    assert retry.kind == "client" and mapped.spans[1].kind == "internal"  # simulated: in-process
    recall = mapped.spans[3]
    assert recall.attributes["tether.memory.item_ids"] == ("note:1",)
    assert (recall.start_ns, recall.end_ns) == (2_010_000_000, 2_050_000_000)
    assert mapped.spans[4].attributes["tether.memory.note_id"] == "n9"
    assert (mapped.spans[4].start_ns, mapped.spans[4].end_ns) == (2_488_000_000, 2_500_000_000)
    texts = [str(v) for s in mapped.spans for v in s.attributes.values()]
    assert not any("secret" in text or "a lesson" in text for text in texts)


def test_content_goes_along_only_when_opted_in():
    mapped = map_attempt(AttemptBundle("review", ATTEMPT, [CALL], BLOCK), Options(content=True))
    spans = _spans(mapped)
    sent = json.loads(spans["invoke_agent"].attributes["gen_ai.input.messages"])
    assert sent == [{"role": "user", "parts": [{"type": "text",
                                                "content": "Review the secret plan"}]}]
    recall = spans["retrieval"].attributes
    assert recall["gen_ai.retrieval.query.text"] == "the secret plan"
    assert json.loads(recall["gen_ai.retrieval.documents"]) == [
        {"id": "note:1", "score": 1.5, "content": "a lesson"}]
    long = ATTEMPT._replace(prompt="x" * (MAX_CONTENT_CHARS + 10))
    cut = _spans(map_attempt(AttemptBundle("review", long), Options(content=True)))
    assert cut["invoke_agent"].attributes["tether.content.truncated"] is True


def test_a_recall_that_was_off_is_no_span_and_a_degraded_one_is_an_error():
    off = BLOCK._replace(query=None, items_json="[]", warning="no block: recall is off")
    assert "retrieval" not in _spans(map_attempt(AttemptBundle("review", ATTEMPT, (), off)))
    failed = BLOCK._replace(degraded=True, warning="recall timed out after 2000 ms")
    span = _spans(map_attempt(AttemptBundle("review", ATTEMPT, (), failed)))["retrieval"]
    assert span.attributes["error.type"] == "degraded"
    assert span.error == "recall timed out after 2000 ms"


def test_measurements_add_up_to_the_calls():
    mapped = map_attempt(AttemptBundle("review", ATTEMPT, [CALL, RETRY]))
    tokens = [m for m in mapped.measurements if m.instrument == sc.TOKEN_USAGE.name]
    assert sorted((m.attributes["gen_ai.token.type"], m.value) for m in tokens) == [
        ("input", 240), ("output", 45)]  # the retry carries no tokens
    durations = [m for m in mapped.measurements if m.instrument == sc.OPERATION_DURATION.name]
    assert sorted(m.value for m in durations) == [0.05, 0.8]
    assert [m.attributes.get("error.type") for m in durations] == [None, "429"]
    (window,) = [m for m in mapped.measurements if m.instrument == sc.CONTEXT_WINDOW.name]
    assert window.value == 240
    (cost,) = [m for m in mapped.measurements if m.instrument == sc.COST.name]
    assert (cost.value, cost.attributes["tether.workflow"]) == (0.25, "review")
    assert not [m for m in mapped.measurements if m.instrument == sc.UNPRICED_CALLS.name]


def test_a_run_links_to_the_run_it_was_handed_off_from():
    came = HandoffRecord(1, "r-000000000000", "r-000000000001", "ceiling", "too big", 2,
                         500, '{"goal": "secret"}', 18)
    mapped = map_run(RunBundle(RUN, came, None))
    (span,) = mapped.spans
    assert span.name == "invoke_workflow review" and span.parent_span_id is None
    (link,) = span.links
    assert (link.trace_id, link.span_id) == (trace_id_of("r-000000000000"),
                                             run_span_id("r-000000000000"))
    assert link.attributes["tether.handoff.carried_bytes"] == 18
    assert "tether.handoff.carried_state" not in link.attributes
    assert span.attributes["tether.run.generation"] == 2
    assert [m.attributes for m in mapped.measurements] == [
        {"tether.workflow": "review", "tether.run.status": "finished"}]
    assert map_run(RunBundle(RUN._replace(status="running"))).spans == []


def test_tool_calls_belong_to_the_attempt_they_happened_in():
    first = ATTEMPT._replace(attempt=1, started_at_ms=1_000)
    second = ATTEMPT._replace(attempt=2, started_at_ms=2_000)
    early, late = TOOL._replace(seq=1, at_ms=1_500), TOOL._replace(seq=2, at_ms=2_500)
    named = TOOL._replace(seq=3, at_ms=2_600, attempt=1)
    other = TOOL._replace(seq=4, node_id="plan")
    events = [early, late, named, other]
    assert tools_of_attempt(first, events, second) == [early, named]
    assert tools_of_attempt(second, events) == [late]


def test_metrics_can_be_left_out_from_either_side():
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert resolve_target(None, on).metrics is True
    assert resolve_target(None, {**on, "OTEL_METRICS_EXPORTER": "none"}).metrics is False
    assert resolve_target(parse_telemetry({"metrics": False}, "c"), on).metrics is False
    with pytest.raises(InvalidInputError, match="OTEL_METRICS_EXPORTER"):
        resolve_target(None, {**on, "OTEL_METRICS_EXPORTER": "prometheus"})


def test_a_call_whose_usage_was_not_reported_has_no_token_counts():
    # A server that reported no usage: its lanes are zero in the workspace, unknown here.
    silent = CALL._replace(call_id=9, simulated=False, tokens=TokenUsage(), context_tokens=0,
                           cost_usd=None, detail_json=json.dumps({"usage": "not reported"}))
    mapped = map_attempt(AttemptBundle("review", ATTEMPT, [CALL, silent], None, []))
    spans = {s.attributes.get("tether.call.id"): s.attributes for s in mapped.spans}
    assert spans[9]["tether.usage.reported"] is False
    assert not [k for k in spans[9] if k.startswith("gen_ai.usage.")]
    assert spans[7]["gen_ai.usage.input_tokens"] == 240  # a reported call keeps its counts
    usage = [m for m in mapped.measurements if m.instrument == sc.TOKEN_USAGE.name]
    assert [m.value for m in usage] == [240, 45]  # only the reported call's input and output
