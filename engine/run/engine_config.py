"""Engine settings from ``.tether/config.toml`` (read by :mod:`store.workspace.config_file`).

```toml
[engine]
concurrency = 8             # tasks running at once (a workflow may set its own)
heartbeat_interval_s = 5    # how often a running run refreshes its heartbeat
poll_interval_s = 0.25      # how often it checks for cancel/clear requests
limit_wait_s = 300          # the longest a node waits for a usage limit to reset
max_prompt_bytes = 8388608  # a task prompt larger than this (8 MiB) fails its node

[agents.sim]
type = "simulated"          # simulated | command | openai | anthropic
latency_ms = 300

[agents.claude]
type = "command"
preset = "claude-code"      # claude-code | codex | json | text

[agents.local]
type = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "qwen2.5-coder"
api_key_env = "OPENAI_API_KEY"

[execution]                 # where attempts run (see engine.executors.settings)
backend = "ray"             # in-process (default) | ray
address = "head:6379"       # or RAY_ADDRESS

[prices."qwen2.5-coder"]    # USD per million tokens (see engine.pricing)
input = 0.20
output = 0.60

[budget]                    # per run and per UTC day (see engine.budget)
run_usd = 5.0
day_usd = 40.0

[memory]                    # see engine.memory.recall_mode
mode = "auto"               # auto | hybrid | semantic | keyword
encoder = "auto"            # auto | minilm-onnx-int8 | minilm-numpy | e5-small-q4

[telemetry]                 # OpenTelemetry export (see engine.telemetry.otel_settings)
endpoint = "http://127.0.0.1:4318"
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.budget import BudgetConfig, parse_budget
from engine.executors.settings import ExecutionConfig, parse_execution
from engine.memory.recall_mode import MemorySettings, memory_settings_from
from engine.pricing import Price, PriceTable, parse_prices
from engine.run.retry_plan import DEFAULT_LIMIT_WAIT_S
from engine.telemetry.otel_settings import TelemetrySettings, parse_telemetry
from store.errors import InvalidInputError
from store.workspace.config_file import read_config

_ENGINE_KEYS = {
    "concurrency", "heartbeat_interval_s", "poll_interval_s", "limit_wait_s", "max_prompt_bytes",
}
TOP_LEVEL_KEYS = (
    "agents", "budget", "database_url", "engine", "execution", "memory", "prices", "telemetry",
    "workspace",
)
"""What config.toml may hold at its top level (docs/configuration.md lists each)."""
WORKSPACE_KEYS = ("durability",)
DEFAULT_MAX_PROMPT_BYTES = 8 * 1024 * 1024
"""No model takes more (a million tokens is about 4 MB of text); a bigger prompt is a bug in
what it interpolates, and would be stored whole with its attempt."""


@dataclass
class EngineConfig:
    """Scheduler settings and agent definitions."""

    concurrency: int | None = None
    heartbeat_interval_s: float = 5.0
    poll_interval_s: float = 0.25
    limit_wait_s: float = DEFAULT_LIMIT_WAIT_S
    """The longest a node waits for a usage limit to reset (engine.run.retry_plan)."""
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    prices: dict[str, Price] = field(default_factory=dict)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """``[budget]``: per-run and per-day limits (engine.budget)."""
    memory: MemorySettings = field(default_factory=MemorySettings)
    telemetry: TelemetrySettings | None = None
    """``[telemetry]``: OpenTelemetry export (see :mod:`engine.telemetry.otel_settings`)."""
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    """Where attempts run (``[execution]``: in-process, or a Ray cluster)."""

    @property
    def price_table(self) -> PriceTable:
        """Configured prices over the built-in table."""
        return PriceTable(self.prices)


def _unknown(keys: Any, known: tuple[str, ...], where: str) -> str | None:
    """The sentence for the first key of ``keys`` not in ``known``, with the nearest known
    one when it looks like a typo, or None."""
    import difflib

    unknown = sorted(set(keys) - set(known))
    if not unknown:
        return None
    near = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"unknown {where} {unknown[0]!r} ({hint}known: {', '.join(known)})."


def check_known_settings(data: dict[str, Any], source: str) -> None:
    """Refuse a top-level key or ``[workspace]`` setting Tether does not read: a typo such as
    ``[budgets]`` would otherwise leave the user believing a budget holds."""
    problem = _unknown(data, TOP_LEVEL_KEYS, "setting")
    workspace = data.get("workspace")
    if problem is None and isinstance(workspace, dict):
        problem = _unknown(workspace, WORKSPACE_KEYS, "[workspace] setting")
    if problem is not None:
        raise InvalidInputError(f"{source}: {problem}")


def parse_config(data: dict[str, Any], source: str = "config") -> EngineConfig:
    """Build an :class:`EngineConfig` from parsed TOML; InvalidInputError names the bad key."""
    check_known_settings(data, source)
    config = EngineConfig()
    engine = data.get("engine", {})
    if not isinstance(engine, dict):
        raise InvalidInputError(f"{source}: [engine] must be a table.")
    unknown = sorted(set(engine) - _ENGINE_KEYS)
    if unknown:
        raise InvalidInputError(f"{source}: unknown [engine] setting {unknown[0]!r}.")
    if "concurrency" in engine:
        value = engine["concurrency"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidInputError(f"{source}: engine.concurrency must be a whole number >= 1.")
        config.concurrency = value
    if "max_prompt_bytes" in engine:
        value = engine["max_prompt_bytes"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidInputError(
                f"{source}: engine.max_prompt_bytes must be a whole number >= 1."
            )
        config.max_prompt_bytes = value
    for key in ("heartbeat_interval_s", "poll_interval_s", "limit_wait_s"):
        if key in engine:
            value = engine[key]
            low = 0 if key == "limit_wait_s" else 1e-9
            if not isinstance(value, int | float) or isinstance(value, bool) or value < low:
                what = "a number >= 0" if key == "limit_wait_s" else "a positive number"
                raise InvalidInputError(f"{source}: engine.{key} must be {what}.")
            setattr(config, key, float(value))
    agents = data.get("agents", {})
    if not isinstance(agents, dict):
        raise InvalidInputError(f"{source}: [agents] must be a table of agent tables.")
    for name, spec in agents.items():
        if not isinstance(spec, dict) or "type" not in spec:
            raise InvalidInputError(f"{source}: agents.{name} must be a table with a type.")
        config.agents[name] = dict(spec)
    config.prices = parse_prices(data.get("prices"), source)
    config.budget = parse_budget(data.get("budget"), source)
    config.memory = memory_settings_from(data, source)
    config.telemetry = parse_telemetry(data.get("telemetry"), source)
    config.execution = parse_execution(data.get("execution"), source)
    return config




def load_config(path: Path) -> EngineConfig:
    """Read ``path`` (a missing file gives the defaults). A folder, a FIFO, a device, a file
    over 1 MiB, bad UTF-8 or bad TOML is one InvalidInputError sentence
    (:mod:`store.workspace.config_file`)."""
    return parse_config(read_config(path), str(path))
