"""Engine settings from ``.tether/config.toml`` (read with tomllib).

```toml
[engine]
concurrency = 8             # tasks running at once (a workflow may set its own)
heartbeat_interval_s = 5    # how often a running run refreshes its heartbeat
poll_interval_s = 0.25      # how often it checks for cancel/clear requests
limit_wait_s = 300          # the longest a node waits for a usage limit to reset

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

import stat
import tomllib
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

_ENGINE_KEYS = {"concurrency", "heartbeat_interval_s", "poll_interval_s", "limit_wait_s"}


@dataclass
class EngineConfig:
    """Scheduler settings and agent definitions."""

    concurrency: int | None = None
    heartbeat_interval_s: float = 5.0
    poll_interval_s: float = 0.25
    limit_wait_s: float = DEFAULT_LIMIT_WAIT_S
    """The longest a node waits for a usage limit to reset (engine.run.retry_plan)."""
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


def parse_config(data: dict[str, Any], source: str = "config") -> EngineConfig:
    """Build an :class:`EngineConfig` from parsed TOML; InvalidInputError names the bad key."""
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


MAX_CONFIG_BYTES = 1024 * 1024


def load_config(path: Path) -> EngineConfig:
    """Read ``path`` (a missing file gives the defaults). A folder, a FIFO, a file over 1 MiB,
    bad UTF-8 or bad TOML is one InvalidInputError sentence."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return EngineConfig()
    except OSError as error:
        raise InvalidInputError(f"Cannot read {path}: {error.strerror or error}.") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInputError(f"{path} is not a regular file; the config must be a TOML file.")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise InvalidInputError(f"Cannot read {path}: {error.strerror or error}.") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise InvalidInputError(f"{path} is larger than 1 MiB; that is not a config file.")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise InvalidInputError(f"{path} is not valid TOML ({reason}).") from None
    return parse_config(data, str(path))
