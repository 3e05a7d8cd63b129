"""The OpenTelemetry GenAI semantic conventions Tether follows, as data: the metric instruments
with their recommended bucket boundaries, the provider names, and how a recorded agent and model
name a provider (pure; no OpenTelemetry import).

Conventions checked against the GenAI semantic conventions (Development status, the version
after v1.36.0 that names ``gen_ai.provider.name``): spans ``invoke_workflow {workflow}``,
``invoke_agent {agent}``, ``chat {model}``, ``retrieval {data source}`` and
``execute_tool {tool}``; metrics ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from store.model.buckets import BUCKET_EDGES


class Instrument(NamedTuple):
    """One metric instrument: histogram or counter, its unit and bucket boundaries."""

    name: str
    kind: str  # "histogram" | "counter"
    unit: str
    description: str
    boundaries: tuple[float, ...] = ()


TOKEN_USAGE = Instrument(
    "gen_ai.client.token.usage",
    "histogram",
    "{token}",
    "Number of input and output tokens used.",
    (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864),
)
OPERATION_DURATION = Instrument(
    "gen_ai.client.operation.duration",
    "histogram",
    "s",
    "GenAI operation duration.",
    (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92),
)
CONTEXT_WINDOW = Instrument(
    "tether.tokens.context_window_per_call",
    "histogram",
    "{token}",
    "Context window of each model call: input + cache read + cache write tokens.",
    # An OpenTelemetry bucket holds its upper bound; Tether's buckets hold their lower bound
    # (a call of exactly 50 000 tokens is in 50k-100k). One below each edge makes the six
    # buckets exactly the Tokens view's for whole token counts.
    tuple(float(edge - 1) for edge in BUCKET_EDGES),
)
COST = Instrument(
    "tether.cost", "counter", "{USD}", "What model calls cost (calls with a known price)."
)
UNPRICED_CALLS = Instrument(
    "tether.cost.unpriced_calls", "counter", "{call}", "Model calls with no known price."
)
RUNS = Instrument("tether.runs", "counter", "{run}", "Runs that ended, by status.")
ATTEMPTS = Instrument("tether.attempts", "counter", "{attempt}", "Attempts that ended, by state.")

INSTRUMENTS: tuple[Instrument, ...] = (
    TOKEN_USAGE, OPERATION_DURATION, CONTEXT_WINDOW, COST, UNPRICED_CALLS, RUNS, ATTEMPTS,
)

SIMULATED_PROVIDER = "tether.simulated"
"""The provider of the simulated agent's calls (a custom value: no model is involved)."""
UNKNOWN_PROVIDER = "tether.unknown"
"""An agent Tether cannot tell the provider of (a command agent of its own, say)."""

WELL_KNOWN_PROVIDERS = (
    "anthropic", "aws.bedrock", "azure.ai.inference", "azure.ai.openai", "cohere", "deepseek",
    "gcp.gemini", "gcp.gen_ai", "gcp.vertex_ai", "groq", "ibm.watsonx.ai", "mistral_ai",
    "openai", "perplexity", "x_ai",
)

# The API each agent type or preset speaks is the telemetry "flavour" the conventions mean.
_AGENT_TYPES = {"openai": "openai", "anthropic": "anthropic", "simulated": SIMULATED_PROVIDER}
_PRESETS = {"claude-code": "anthropic", "codex": "openai"}
_MODEL_PREFIXES = (
    ("claude", "anthropic"), ("gpt-", "openai"), ("chatgpt", "openai"), ("o1", "openai"),
    ("o3", "openai"), ("o4", "openai"), ("codex", "openai"), ("gemini", "gcp.gemini"),
    ("mistral", "mistral_ai"), ("mixtral", "mistral_ai"), ("codestral", "mistral_ai"),
    ("deepseek", "deepseek"), ("grok", "x_ai"), ("command-r", "cohere"),
)


class AgentKind(NamedTuple):
    """What ``[agents.NAME]`` of config.toml says an agent is."""

    type: str
    preset: str | None = None
    server: tuple[str, int] | None = None
    """Host and port of the API an HTTP agent calls (its ``base_url``)."""


def agent_kinds(agents: Mapping[str, Mapping[str, object]]) -> dict[str, AgentKind]:
    """``[agents]`` of config.toml as the kind of each agent name."""
    kinds = {}
    for name, spec in agents.items():
        preset = spec.get("preset")
        kinds[name] = AgentKind(str(spec.get("type")), None if preset is None else str(preset),
                                _server(spec.get("base_url")))
    return kinds


def _server(base_url: object) -> tuple[str, int] | None:
    if not isinstance(base_url, str):
        return None
    try:
        parts = urlsplit(base_url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:  # a bad port: the agent itself says so when it runs
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def model_attributes(asked: str | None, answered: str | None) -> dict[str, str]:
    """``gen_ai.request.model`` (what the attempt asked for) and ``gen_ai.response.model``
    (what the call says answered), each standing in for the other when one is unknown."""
    asked, answered = asked or answered, answered or asked
    if not asked or not answered:
        return {}
    return {"gen_ai.request.model": asked, "gen_ai.response.model": answered}


def server_attributes(agent: str | None, kinds: Mapping[str, AgentKind]) -> dict[str, str | int]:
    """``server.address`` and ``server.port`` of the API an agent's calls went to (none for an
    agent that is no HTTP client of its own)."""
    kind = kinds.get(agent or "")
    if kind is None or kind.server is None:
        return {}
    return {"server.address": kind.server[0], "server.port": kind.server[1]}


def provider_name(
    agent: str | None,
    model: str | None,
    simulated: bool,
    kinds: Mapping[str, AgentKind],
) -> str:
    """``gen_ai.provider.name`` for a call or attempt: the simulated agent's own value; else what
    the agent's config says it speaks (type, or the preset of a command agent); else what the
    model's name says (``claude-…`` is Anthropic's, ``openai/…`` OpenAI's); else unknown."""
    if simulated:
        return SIMULATED_PROVIDER
    kind = kinds.get(agent or "")
    if kind is not None:
        found = _AGENT_TYPES.get(kind.type) or _PRESETS.get(kind.preset or "")
        if found:
            return found
    name = (model or "").strip().lower()
    prefix, _, rest = name.partition("/")
    if rest and prefix in WELL_KNOWN_PROVIDERS:
        return prefix
    name = rest or name
    for start, provider in _MODEL_PREFIXES:
        if name.startswith(start):
            return provider
    return UNKNOWN_PROVIDER
