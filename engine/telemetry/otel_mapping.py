"""What Tether recorded, as OpenTelemetry spans and metric measurements: the one mapping the live
exporter and ``tether export otlp`` share (pure: records in, plain values out).

One trace per run. Its spans, each with the start and end times the workspace recorded:

* ``invoke_workflow {workflow}`` the run (linked to the run it was handed off from);
* ``invoke_agent {node}`` each attempt of a node iteration, under its run;
* ``chat {model}`` each model call of the attempt (a retried request is a failed one);
* ``retrieval {bank}`` the memory recall that built the attempt's block;
* ``execute_tool {tool}`` each memory tool the agent called.

Identifiers are derived from what they describe (the run id, the node, the call id), so a span
is the same span whichever path sends it, and a child can be sent before its parent ends.
Prompts, outputs, recalled text and run inputs are content: only with ``content`` on.
Token attributes follow the conventions' meaning: ``gen_ai.usage.input_tokens`` is the whole
context window (fresh input and both cache lanes), ``gen_ai.usage.output_tokens`` includes the
reasoning tokens; the attempt and run spans carry their totals as ``tether.usage.*`` only, so a
backend that adds up ``gen_ai.usage`` over a trace counts each token once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from engine.telemetry import otel_semconv as sc
from store.model.history_records import EventRecord, HandoffRecord, MemoryBlockRecord
from store.model.run_records import AttemptRecord, CallRecord, RunRecord
from store.model.token_lanes import TokenUsage

AttributeValue = str | bool | int | float | tuple[str, ...]
MAX_CONTENT_CHARS = 65_536
"""The longest text one content attribute carries (longer text is cut, and says so)."""
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class SpanLink:
    """A link to a span of another trace (a handoff's predecessor)."""

    trace_id: int
    span_id: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class SpanData:
    """One finished span, with nanosecond times and a status (``error`` set: ERROR)."""

    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    kind: str  # "internal" | "client"
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttributeValue]
    links: tuple[SpanLink, ...] = ()
    error: str | None = None


class Measurement(NamedTuple):
    """One value for an instrument of :data:`engine.telemetry.otel_semconv.INSTRUMENTS`."""

    instrument: str
    value: float
    attributes: Mapping[str, AttributeValue]


class Mapped(NamedTuple):
    """What some records map to."""

    spans: list[SpanData]
    measurements: list[Measurement]


class Options(NamedTuple):
    """How to map: whether content goes along, and what each configured agent is."""

    content: bool = False
    kinds: Mapping[str, sc.AgentKind] = {}


class AttemptBundle(NamedTuple):
    """An attempt that ended, with its calls, the recall block it built and its tool calls."""

    workflow: str
    attempt: AttemptRecord
    calls: Sequence[CallRecord] = ()
    block: MemoryBlockRecord | None = None
    tools: Sequence[EventRecord] = ()


class RunBundle(NamedTuple):
    """A run that ended, with the handoff it started from and the one it ended with."""

    run: RunRecord
    handed_from: HandoffRecord | None = None
    handed_to: HandoffRecord | None = None


# -- identifiers -------------------------------------------------------------------------------


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()


def trace_id_of(run_id: str) -> int:
    """The trace of a run (128 bits, never 0)."""
    return int.from_bytes(_digest("tether.trace", run_id)[:16], "big") or 1


def span_id_of(*parts: object) -> int:
    """The span of what ``parts`` name (64 bits, never 0)."""
    return int.from_bytes(_digest("tether.span", *parts)[:8], "big") or 1


def run_span_id(run_id: str) -> int:
    """The span of a run itself."""
    return span_id_of("run", run_id)


def attempt_span_id(run_id: str, node_id: str, iteration: int, attempt: int) -> int:
    """The span of one attempt of a node iteration."""
    return span_id_of("attempt", run_id, node_id, iteration, attempt)


# -- helpers ------------------------------------------------------------------------------------


def _ns(ms: int | None) -> int:
    return int(ms or 0) * 1_000_000


def _times(start_ms: int | None, end_ms: int | None) -> tuple[int, int]:
    start = _ns(start_ms if start_ms is not None else end_ms)
    return start, max(start, _ns(end_ms if end_ms is not None else start_ms))


def _short(text: str | None) -> str | None:
    if not text:
        return None
    first = text.strip().splitlines()[0] if text.strip() else text
    return first[:MAX_ERROR_CHARS]


def _clip(text: str, attributes: dict[str, AttributeValue]) -> str:
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    attributes["tether.content.truncated"] = True
    return text[:MAX_CONTENT_CHARS]


def _messages(role: str, text: str, finish: str | None = None) -> str:
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish is not None:
        message["finish_reason"] = finish
    return json.dumps([message], ensure_ascii=False)


def _usage_attributes(prefix: str, usage: TokenUsage) -> dict[str, AttributeValue]:
    return {
        f"{prefix}.input_tokens": usage.input,
        f"{prefix}.cache_read_tokens": usage.cache_read,
        f"{prefix}.cache_write_tokens": usage.cache_write,
        f"{prefix}.output_tokens": usage.output,
        f"{prefix}.reasoning_tokens": usage.reasoning,
    }


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# -- runs -----------------------------------------------------------------------------------------


def map_run(bundle: RunBundle, options: Options = Options()) -> Mapped:
    """The span of a run that ended, and its outcome (nothing for a run still going)."""
    run = bundle.run
    if not run.is_terminal:
        return Mapped([], [])
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": run.workflow,
        "tether.run.id": run.run_id,
        "tether.run.status": run.status,
        "tether.run.generation": run.generation,
        "tether.run.nodes_total": run.nodes_total,
        "tether.run.nodes_done": run.nodes_done,
        **_usage_attributes("tether.usage", run.tokens),
    }
    if run.cost.usd is not None:
        attributes["tether.cost_usd"] = run.cost.usd
    if run.cost.unpriced_calls:
        attributes["tether.cost.unpriced_calls"] = run.cost.unpriced_calls
    if run.parent_run_id:
        attributes["tether.run.parent_id"] = run.parent_run_id
    links: tuple[SpanLink, ...] = ()
    came = bundle.handed_from
    if came is not None:
        links = (
            SpanLink(
                trace_id_of(came.from_run_id),
                run_span_id(came.from_run_id),
                {"tether.link.type": "handoff", **_handoff_attributes(came, options)},
            ),
        )
    elif run.parent_run_id:
        links = (SpanLink(trace_id_of(run.parent_run_id), run_span_id(run.parent_run_id),
                          {"tether.link.type": "handoff"}),)
    went = bundle.handed_to
    if went is not None:
        attributes.update(_handoff_attributes(went, options))
        if went.to_run_id:
            attributes["tether.handoff.to_run_id"] = went.to_run_id
    error = None
    if run.status == "failed":
        attributes["error.type"] = "failed"
        error = _short(run.error) or "the run failed"
    if options.content:
        if run.input_json is not None:
            attributes["gen_ai.input.messages"] = _messages(
                "user", _clip(run.input_json, attributes)
            )
        if run.output_json is not None:
            attributes["gen_ai.output.messages"] = _messages(
                "assistant", _clip(run.output_json, attributes), "stop"
            )
    start, end = _times(run.started_at_ms or run.created_at_ms,
                        run.finished_at_ms or run.updated_at_ms)
    span = SpanData(
        f"invoke_workflow {run.workflow}", trace_id_of(run.run_id), run_span_id(run.run_id),
        None, "internal", start, end, attributes, links, error,
    )
    outcome = Measurement(
        sc.RUNS.name, 1, {"tether.workflow": run.workflow, "tether.run.status": run.status}
    )
    return Mapped([span], [outcome])


def _handoff_attributes(handoff: HandoffRecord, options: Options) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "tether.handoff.trigger": handoff.trigger,
        "tether.handoff.reason": _short(handoff.reason) or "",
        "tether.handoff.carried_bytes": handoff.carried_bytes,
    }
    if handoff.tokens_at_handoff is not None:
        attributes["tether.handoff.tokens"] = handoff.tokens_at_handoff
    if options.content:
        attributes["tether.handoff.carried_state"] = _clip(
            handoff.carried_state_json, attributes
        )
    return attributes


# -- attempts ------------------------------------------------------------------------------------


def map_attempt(bundle: AttemptBundle, options: Options = Options()) -> Mapped:
    """The spans of an attempt that ended (its own, its calls', its recall's and its tools'),
    and its measurements: tokens, durations, context windows and cost of each call, and the
    attempt's outcome."""
    a = bundle.attempt
    trace = trace_id_of(a.run_id)
    own = attempt_span_id(a.run_id, a.node_id, a.iteration, a.attempt)
    simulated = any(call.simulated for call in bundle.calls)
    provider = sc.provider_name(a.agent, a.model, simulated, options.kinds)
    # The attempt's own span says where it ran; its children (in the same trace, under it)
    # name only the node, so a backend can list one node's calls.
    where: dict[str, AttributeValue] = {"tether.node.id": a.node_id}
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider,
        "gen_ai.agent.name": a.node_id,
        **({"gen_ai.request.model": a.model} if a.model else {}),
        "tether.workflow": bundle.workflow,
        "tether.run.id": a.run_id,
        "tether.node.id": a.node_id,
        "tether.node.iteration": a.iteration,
        "tether.attempt": a.attempt,
        "tether.attempt.state": a.state,
        "tether.cache.hit": a.cached,
        **_usage_attributes("tether.usage", a.tokens),
    }
    if a.agent:
        attributes["tether.agent"] = a.agent
    if a.cost.usd is not None:
        attributes["tether.cost_usd"] = a.cost.usd
    error = None
    if a.state in ("failed", "abandoned"):
        attributes["error.type"] = a.state
        error = _short(a.error) or f"the attempt was {a.state}"
    if options.content:
        if a.prompt is not None:
            attributes["gen_ai.input.messages"] = _messages(
                "user", _clip(a.prompt, attributes)
            )
        if a.response_text is not None:
            finish = "stop" if a.state == "finished" else "error"
            attributes["gen_ai.output.messages"] = _messages(
                "assistant", _clip(a.response_text, attributes), finish
            )
    start, end = _times(a.started_at_ms, a.finished_at_ms)
    spans = [
        SpanData(f"invoke_agent {a.node_id}", trace, own, run_span_id(a.run_id), "internal",
                 start, end, attributes, (), error)
    ]
    measurements = [
        Measurement(sc.ATTEMPTS.name, 1, {
            "tether.workflow": bundle.workflow, "tether.attempt.state": a.state,
            "tether.cache.hit": a.cached,
        })
    ]
    for call in bundle.calls:
        call_provider = sc.provider_name(call.agent, call.model, call.simulated, options.kinds)
        models = {**sc.model_attributes(a.model, call.model),
                  **sc.server_attributes(call.agent, options.kinds)}
        spans.append(_call_span(call, trace, own, call_provider, where, models))
        measurements.extend(_call_measurements(call, call_provider, bundle.workflow, models))
    if bundle.block is not None and (bundle.block.query is not None or bundle.block.degraded):
        spans.append(_recall_span(bundle.block, trace, own, where, options))
    spans.extend(_tool_span(event, trace, own, where) for event in bundle.tools)
    return Mapped(spans, measurements)


def _call_span(call: CallRecord, trace: int, parent: int, provider: str,
               where: Mapping[str, AttributeValue],
               models: Mapping[str, AttributeValue]) -> SpanData:
    usage = call.tokens
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        **models,
        "gen_ai.usage.input_tokens": usage.context_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
        "gen_ai.usage.output_tokens": usage.output + usage.reasoning,
        **where,
        "tether.call.id": call.call_id,
        # The five lanes are all here: fresh input = input - cache read - cache creation, and
        # the output lane = output - reasoning; the context window is input_tokens itself.
        "tether.context_window.bucket": call.bucket,
    }
    if usage.reasoning:
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning
    if _unreported(call):  # the server reported no usage: unknown, not zero
        attributes = {k: v for k, v in attributes.items() if not k.startswith("gen_ai.usage.")}
        attributes["tether.usage.reported"] = False
    if call.cost_usd is not None:
        attributes["tether.cost_usd"] = call.cost_usd
    if call.kind != "model":
        attributes["tether.call.kind"] = call.kind
    error = None
    if call.kind == "retry":
        detail = call.detail if isinstance(call.detail, dict) else {}
        status = detail.get("status")
        attributes["error.type"] = str(status) if status is not None else "_OTHER"
        error = _short(str(detail.get("error") or "")) or "the request was retried"
    start, end = _times(call.started_at_ms, call.finished_at_ms)
    name = f"chat {models['gen_ai.request.model']}" if models else "chat"
    kind = "internal" if call.simulated else "client"
    return SpanData(name, trace, span_id_of("call", call.run_id, call.call_id), parent, kind,
                    start, end, attributes, (), error)


def _unreported(call: CallRecord) -> bool:
    return isinstance(call.detail, dict) and call.detail.get("usage") == "not reported"


def _call_measurements(call: CallRecord, provider: str, workflow: str,
                       models: Mapping[str, AttributeValue]) -> list[Measurement]:
    base: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, **models,
    }
    usage = call.tokens
    found: list[Measurement] = []
    if call.kind in ("model", "reconciliation") and not _unreported(call):
        extra: dict[str, AttributeValue] = {"tether.call.kind": call.kind}
        extra = {} if call.kind == "model" else extra
        for token_type, value in (("input", usage.context_tokens),
                                  ("output", usage.output + usage.reasoning)):
            found.append(Measurement(
                sc.TOKEN_USAGE.name, value, {**base, "gen_ai.token.type": token_type, **extra}
            ))
    if call.kind in ("model", "retry"):
        duration = max(0, call.finished_at_ms - call.started_at_ms) / 1000
        attributes = dict(base)
        if call.kind == "retry":
            detail = call.detail if isinstance(call.detail, dict) else {}
            status = detail.get("status")
            attributes["error.type"] = str(status) if status is not None else "_OTHER"
        found.append(Measurement(sc.OPERATION_DURATION.name, duration, attributes))
    if call.kind == "model":
        found.append(Measurement(sc.CONTEXT_WINDOW.name, call.context_tokens, {
            "gen_ai.provider.name": provider, **models, "tether.workflow": workflow,
        }))
    priced: dict[str, AttributeValue] = {
        "gen_ai.provider.name": provider, "tether.workflow": workflow, **models,
    }
    if call.cost_usd is not None:
        found.append(Measurement(sc.COST.name, float(call.cost_usd), priced))
    elif call.kind != "retry":
        found.append(Measurement(sc.UNPRICED_CALLS.name, 1, priced))
    return found


def _recall_span(block: MemoryBlockRecord, trace: int, parent: int,
                 where: Mapping[str, AttributeValue], options: Options) -> SpanData:
    included = [item for item in block.item_dicts if item.get("included", True)]
    source = ",".join(block.banks) or "memory"
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": source,
        **where,
        "tether.memory.banks": tuple(block.banks),
        "tether.memory.items": len(included),
        "tether.memory.item_ids": tuple(str(item.get("id", "")) for item in included),
        "tether.memory.bytes_used": block.bytes_used,
        "tether.memory.budget_bytes": block.budget_bytes,
        "tether.memory.truncated": block.truncated,
        "tether.memory.degraded": block.degraded,
    }
    if block.warning:
        attributes["tether.memory.warning"] = _short(block.warning) or ""
    error = None
    if block.degraded:
        attributes["error.type"] = "degraded"
        error = _short(block.warning) or "recall failed"
    if options.content:
        if block.query is not None:
            attributes["gen_ai.retrieval.query.text"] = _clip(block.query, attributes)
        documents = [
            {"id": str(item.get("id", "")), "score": float(item.get("score") or 0.0),
             "content": str(item.get("text", ""))}
            for item in included
        ]
        attributes["gen_ai.retrieval.documents"] = _clip(_json_text(documents), attributes)
        if block.text is not None:
            attributes["tether.memory.block.text"] = _clip(block.text, attributes)
    end = block.created_at_ms
    start = end - int(block.duration_ms or 0)
    span_id = span_id_of("recall", block.run_id, block.node_id, block.iteration, block.attempt)
    return SpanData(f"retrieval {source}", trace, span_id, parent, "client",
                    *_times(start, end), attributes, (), error)


def _tool_span(event: EventRecord, trace: int, parent: int,
               where: Mapping[str, AttributeValue]) -> SpanData:
    payload = event.payload if isinstance(event.payload, dict) else {}
    tool = str(payload.get("tool") or "tool")
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "function",
        **where,
        "tether.tool.ok": bool(payload.get("ok")),
    }
    for key in ("note_id", "namespace", "status"):
        if isinstance(payload.get(key), str):
            attributes[f"tether.memory.{key}"] = payload[key]
    if isinstance(payload.get("items"), list):
        attributes["tether.memory.item_ids"] = tuple(str(i) for i in payload["items"])
    error = None
    if not payload.get("ok"):
        attributes["error.type"] = "tool_error"
        error = _short(str(payload.get("error") or "")) or "the tool call failed"
    end = event.at_ms
    start = end - int(payload.get("duration_ms") or 0)
    return SpanData(f"execute_tool {tool}", trace, span_id_of("tool", event.run_id, event.seq),
                    parent, "internal", *_times(start, end), attributes, (), error)


def tools_of_attempt(attempt: AttemptRecord, events: Sequence[EventRecord],
                     later: AttemptRecord | None = None) -> list[EventRecord]:
    """The ``memory.tool`` events of ``events`` that happened during ``attempt``: those naming
    it, and those of its node iteration naming none that came after it started (and before
    ``later``, the next attempt, started)."""
    found = []
    for event in events:
        if event.type != "memory.tool" or event.node_id != attempt.node_id:
            continue
        if (event.iteration or 0) != attempt.iteration:
            continue
        if event.attempt is not None:
            if event.attempt == attempt.attempt:
                found.append(event)
        elif event.at_ms >= attempt.started_at_ms and (
            later is None or event.at_ms < later.started_at_ms
        ):
            found.append(event)
    return found
