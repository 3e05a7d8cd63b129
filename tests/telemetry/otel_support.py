"""The GenAI semantic conventions as the tests check them (written down here from the
specification, not taken from the code under test), and helpers to run Tether against a
receiver."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_REQUEST = {
    "gen_ai.request.choice.count", "gen_ai.request.seed", "gen_ai.request.model",
    "gen_ai.request.frequency_penalty", "gen_ai.request.max_tokens",
    "gen_ai.request.presence_penalty", "gen_ai.request.stop_sequences",
    "gen_ai.request.temperature", "gen_ai.request.top_k", "gen_ai.request.top_p",
    "gen_ai.request.stream",
}
_USAGE = {
    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
    "gen_ai.usage.reasoning.output_tokens",
}
_MESSAGES = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
             "gen_ai.tool.definitions"}
OPT_IN = _MESSAGES | {"gen_ai.retrieval.documents", "gen_ai.retrieval.query.text",
                      "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}

# operation -> (span kinds allowed, required attributes, every attribute the convention lists)
SPANS: dict[str, tuple[set[str], set[str], set[str]]] = {
    "invoke_workflow": ({"internal"}, {"gen_ai.operation.name"},
                        {"gen_ai.operation.name", "error.type", "gen_ai.workflow.name",
                         "gen_ai.input.messages", "gen_ai.output.messages"}),
    "invoke_agent": ({"internal", "client"}, {"gen_ai.operation.name", "gen_ai.provider.name"},
                     {"gen_ai.operation.name", "gen_ai.provider.name", "error.type",
                      "gen_ai.agent.description", "gen_ai.agent.id", "gen_ai.agent.name",
                      "gen_ai.agent.version", "gen_ai.conversation.id", "gen_ai.data_source.id",
                      "gen_ai.output.type", "gen_ai.response.finish_reasons", "server.port",
                      "server.address", *_REQUEST, *_USAGE, *_MESSAGES}),
    "chat": ({"client", "internal"}, {"gen_ai.operation.name", "gen_ai.provider.name"},
             {"gen_ai.operation.name", "gen_ai.provider.name", "error.type",
              "gen_ai.conversation.id", "gen_ai.output.type", "server.port", "server.address",
              "gen_ai.response.finish_reasons", "gen_ai.response.id", "gen_ai.response.model",
              "gen_ai.response.time_to_first_chunk", *_REQUEST, *_USAGE, *_MESSAGES}),
    "retrieval": ({"client"}, {"gen_ai.operation.name"},
                  {"gen_ai.operation.name", "error.type", "gen_ai.data_source.id",
                   "gen_ai.provider.name", "gen_ai.request.model", "server.port",
                   "gen_ai.request.top_k", "server.address", "gen_ai.retrieval.documents",
                   "gen_ai.retrieval.query.text"}),
    "execute_tool": ({"internal"}, {"gen_ai.operation.name", "gen_ai.tool.name"},
                     {"gen_ai.operation.name", "gen_ai.tool.name", "error.type",
                      "gen_ai.tool.call.id", "gen_ai.tool.description", "gen_ai.tool.type",
                      "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}),
}
# What names each span after its operation (``{gen_ai.operation.name} {this}``).
NAMED_BY = {"invoke_workflow": "gen_ai.workflow.name", "invoke_agent": "gen_ai.agent.name",
            "chat": "gen_ai.request.model", "retrieval": "gen_ai.data_source.id",
            "execute_tool": "gen_ai.tool.name"}
INT_ATTRIBUTES = _USAGE
STRING_ATTRIBUTES = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                     "gen_ai.response.model", "gen_ai.agent.name", "gen_ai.workflow.name",
                     "gen_ai.data_source.id", "gen_ai.tool.name", "gen_ai.tool.type",
                     "error.type"}
WELL_KNOWN_PROVIDERS = {"anthropic", "aws.bedrock", "azure.ai.inference", "azure.ai.openai",
                        "cohere", "deepseek", "gcp.gemini", "gcp.gen_ai", "gcp.vertex_ai",
                        "groq", "ibm.watsonx.ai", "mistral_ai", "openai", "perplexity", "x_ai"}

TOKEN_BOUNDS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                16777216, 67108864]
DURATION_BOUNDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                   40.96, 81.92]
METRIC_ATTRIBUTES = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.token.type",
                     "gen_ai.request.model", "server.port", "gen_ai.response.model",
                     "server.address", "error.type"}


def convention_problems(span: Mapping[str, Any]) -> list[str]:
    """Every way ``span`` (as the receiver decoded it) departs from its convention."""
    attributes = span["attributes"]
    operation = attributes.get("gen_ai.operation.name")
    if operation not in SPANS:
        return [f"{span['name']}: unknown operation {operation!r}"]
    kinds, required, listed = SPANS[operation]
    problems = []
    if span["kind"] not in kinds:
        problems.append(f"{span['name']}: kind {span['kind']}")
    for key in sorted(required - set(attributes)):
        problems.append(f"{span['name']}: {key} is required")
    for key, value in attributes.items():
        if not key.startswith("tether.") and key not in listed:
            problems.append(f"{span['name']}: {key} is not in the {operation} convention")
        if key in INT_ATTRIBUTES and (not isinstance(value, int) or value < 0):
            problems.append(f"{span['name']}: {key} = {value!r} is not a count")
        if key in STRING_ATTRIBUTES and not isinstance(value, str):
            problems.append(f"{span['name']}: {key} = {value!r} is not a string")
    named = attributes.get(NAMED_BY[operation])
    expected = f"{operation} {named}" if named else operation
    if span["name"] != expected:
        problems.append(f"{span['name']}: the name should be {expected!r}")
    if span["status"] == "error" and "error.type" not in attributes:
        problems.append(f"{span['name']}: an error without error.type")
    provider = attributes.get("gen_ai.provider.name")
    if provider is not None and provider not in WELL_KNOWN_PROVIDERS and not str(
        provider
    ).startswith("tether."):
        problems.append(f"{span['name']}: provider {provider!r} is neither well known nor ours")
    usage = attributes.get("gen_ai.usage.input_tokens")
    for part in ("gen_ai.usage.cache_read.input_tokens",
                 "gen_ai.usage.cache_creation.input_tokens"):
        if usage is not None and attributes.get(part, 0) > usage:
            problems.append(f"{span['name']}: {part} is not included in input_tokens")
    reasoning = attributes.get("gen_ai.usage.reasoning.output_tokens", 0)
    if reasoning > attributes.get("gen_ai.usage.output_tokens", reasoning):
        problems.append(f"{span['name']}: reasoning tokens are not included in output_tokens")
    return problems


# The end of a process waits for its export at most shutdown_timeout_s (5 s by default); on a
# machine loaded far past its cores the export process's start-up alone can take longer, so
# tests that count every span give it this much.
PATIENT_SHUTDOWN = "[telemetry]\nshutdown_timeout_s = 120\n"


def otel_env(endpoint: str | None, **extra: str) -> dict[str, str]:
    """The environment of a Tether process exporting to ``endpoint`` (none of the caller's own
    OTEL_* variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TETHER_SIM_LATENCY_MS"] = "5"
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    env.update(extra)
    return env


def tether(cwd: Path, env: Mapping[str, str], *args: str,
           timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the ``tether`` command line in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.entry", *args], cwd=cwd, env=dict(env),
        capture_output=True, text=True, timeout=timeout,
    )
