"""Where and how runs are exported over OpenTelemetry: ``[telemetry]`` in ``.tether/config.toml``
and the standard ``OTEL_*`` variables, resolved into one :class:`ExportTarget` (pure functions).

```toml
[telemetry]
endpoint = "http://127.0.0.1:4318"    # the OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT)
protocol = "http/protobuf"            # or "grpc" (OTEL_EXPORTER_OTLP_PROTOCOL)
headers = { authorization = "Bearer x" }   # OTEL_EXPORTER_OTLP_HEADERS="k=v,k2=v2"
service_name = "tether"               # OTEL_SERVICE_NAME
capture_content = false               # prompts, outputs, recalled text: opt-in
metrics = true                        # false: spans only (OTEL_METRICS_EXPORTER=none)
timeout_s = 10                        # one export request (OTEL_EXPORTER_OTLP_TIMEOUT, ms)
queue_size = 2048                     # spans waiting to be sent; beyond it new ones are dropped
interval_s = 1                        # how often new records are read and sent
metrics_interval_s = 10               # how often metrics are sent (OTEL_METRIC_EXPORT_INTERVAL)
shutdown_timeout_s = 5                # what the end of a process waits for the last batches
```

Export is on when an endpoint is named (in the file or by ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or the table says ``enabled = true``; ``enabled =
false`` or ``OTEL_SDK_DISABLED=true`` turns it off. A variable that is set wins over the file.
Content capture also follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from store.errors import InvalidInputError

PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_ENDPOINTS = {"http/protobuf": "http://localhost:4318", "grpc": "http://localhost:4317"}
TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off", "")

_NUMBERS: dict[str, tuple[type, float, float]] = {
    # key: (type, smallest, largest)
    "timeout_s": (float, 0.01, 600.0),
    "queue_size": (int, 1, 1_000_000),
    "batch_size": (int, 1, 100_000),
    "interval_s": (float, 0.01, 3600.0),
    "metrics_interval_s": (float, 0.1, 86_400.0),
    "shutdown_timeout_s": (float, 0.0, 600.0),
}
_KEYS = {"enabled", "endpoint", "protocol", "headers", "service_name", "capture_content",
         "metrics", *_NUMBERS}

# OTEL_* variable -> (setting, factor from the variable's unit to the setting's).
_ENV_NUMBERS = {
    "OTEL_EXPORTER_OTLP_TIMEOUT": ("timeout_s", 0.001),
    "OTEL_BSP_MAX_QUEUE_SIZE": ("queue_size", 1),
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": ("batch_size", 1),
    "OTEL_BSP_SCHEDULE_DELAY": ("interval_s", 0.001),
    "OTEL_METRIC_EXPORT_INTERVAL": ("metrics_interval_s", 0.001),
}


@dataclass(frozen=True)
class TelemetrySettings:
    """The ``[telemetry]`` table as written (None: not said there)."""

    enabled: bool | None = None
    endpoint: str | None = None
    protocol: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    service_name: str | None = None
    capture_content: bool | None = None
    metrics: bool | None = None
    numbers: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportTarget:
    """Everything an exporter needs, settled: URLs per signal, protocol, limits, content."""

    traces_url: str
    metrics_url: str
    protocol: str = "http/protobuf"
    headers: Mapping[str, str] = field(default_factory=dict)
    service_name: str = "tether"
    capture_content: bool = False
    metrics: bool = True
    timeout_s: float = 10.0
    queue_size: int = 2048
    batch_size: int = 512
    interval_s: float = 1.0
    metrics_interval_s: float = 10.0
    shutdown_timeout_s: float = 5.0
    source: str = "config.toml"

    @property
    def shown(self) -> str:
        """Where spans go, for people: scheme, host and port only (never a password, a query or
        a header)."""
        return shown_url(self.traces_url)

    @property
    def metrics_shown(self) -> str:
        """Where metrics go, shown as :attr:`shown` is."""
        return shown_url(self.metrics_url)


def shown_url(url: str) -> str:
    """``url`` without its user info, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def parse_telemetry(data: Any, source: str) -> TelemetrySettings | None:
    """``[telemetry]`` of config.toml (None when absent); InvalidInputError names the bad key."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{source}: [telemetry] must be a table.")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise InvalidInputError(f"{source}: unknown [telemetry] setting {unknown[0]!r}.")
    where = f"{source}: telemetry"
    for key in ("enabled", "capture_content", "metrics"):
        if key in data and not isinstance(data[key], bool):
            raise InvalidInputError(f"{where}.{key} must be true or false.")
    for key in ("endpoint", "service_name"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            raise InvalidInputError(f"{where}.{key} must be a non-empty string.")
    endpoint = data.get("endpoint")
    if endpoint is not None:
        check_endpoint(endpoint, f"{where}.endpoint")
    protocol = data.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        raise InvalidInputError(f"{where}.protocol must be one of: {', '.join(PROTOCOLS)}.")
    headers = data.get("headers", {})
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidInputError(f"{where}.headers must be a table of strings.")
    numbers = {key: _number(data[key], key, f"{where}.{key}") for key in _NUMBERS if key in data}
    return TelemetrySettings(
        enabled=data.get("enabled"),
        endpoint=endpoint,
        protocol=protocol,
        headers={k.lower(): v for k, v in headers.items()},
        service_name=data.get("service_name"),
        capture_content=data.get("capture_content"),
        metrics=data.get("metrics"),
        numbers=numbers,
    )


def resolve_target(
    settings: TelemetrySettings | None, environ: Mapping[str, str]
) -> ExportTarget | None:
    """The export target the file and the environment name together, or None when export is
    off. A variable that is set wins over the file; InvalidInputError names a bad variable."""
    file = settings or TelemetrySettings()
    if _flag(environ, "OTEL_SDK_DISABLED", False) or file.enabled is False:
        return None
    env_endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or None
    env_traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip() or None
    if not (env_endpoint or env_traces or file.endpoint or file.enabled):
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or file.protocol
    protocol = protocol or "http/protobuf"
    if protocol not in PROTOCOLS:
        raise InvalidInputError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL must be one of: {', '.join(PROTOCOLS)} "
            f"(http/json is not supported), not {protocol!r}."
        )
    if env_endpoint:
        base, source = check_endpoint(env_endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT"), "environment"
    else:
        base, source = file.endpoint or DEFAULT_ENDPOINTS[protocol], "config.toml"
    overrides = {
        "traces": env_traces,
        "metrics": environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip() or None,
    }
    for name, value in overrides.items():
        if value:
            check_endpoint(value, f"OTEL_EXPORTER_OTLP_{name.upper()}_ENDPOINT")
    traces, metrics = signal_urls(base, protocol, overrides)
    numbers = dict(file.numbers)
    for variable, (key, factor) in _ENV_NUMBERS.items():
        raw = environ.get(variable, "").strip()
        if raw:
            numbers[key] = _number(_env_float(raw, variable) * factor, key, variable)
    headers = dict(file.headers)
    headers.update(parse_headers(environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")))
    capture = _flag(
        environ, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", bool(file.capture_content)
    )
    service = environ.get("OTEL_SERVICE_NAME", "").strip() or file.service_name or "tether"
    exporter = environ.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if exporter not in ("", "otlp", "none"):
        raise InvalidInputError(
            f"OTEL_METRICS_EXPORTER must be otlp or none here, not {exporter!r}."
        )
    send_metrics = exporter != "none" if exporter else file.metrics is not False
    return ExportTarget(
        traces_url=traces,
        metrics_url=metrics,
        protocol=protocol,
        headers=headers,
        service_name=service,
        capture_content=capture,
        metrics=send_metrics,
        source=source,
        **numbers,  # type: ignore[arg-type]
    )


def signal_urls(
    base: str, protocol: str, overrides: Mapping[str, str | None]
) -> tuple[str, str]:
    """The traces and metrics URLs: over HTTP the base URL plus ``/v1/traces`` and
    ``/v1/metrics`` (as the OTLP specification says), over gRPC the address itself; a
    signal's own variable is used as it is."""
    urls = []
    for signal in ("traces", "metrics"):
        given = overrides.get(signal)
        if given:
            urls.append(given)
        elif protocol == "grpc":
            urls.append(base)
        else:
            parts = urlsplit(base)
            urls.append(urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/v1/{signal}")))
    return urls[0], urls[1]


def check_endpoint(value: str, where: str) -> str:
    """``value`` if it is an http(s) URL with a host; InvalidInputError otherwise."""
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            f"{where} must be an http:// or https:// URL with a host, such as "
            f"http://127.0.0.1:4318, not {value!r}."
        )
    return value.strip()


def parse_headers(text: str) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``key=value`` pairs separated by commas, values
    percent-encoded (keys lower-cased, as gRPC metadata needs)."""
    headers: dict[str, str] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(
                "OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs separated by commas."
            )
        headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise InvalidInputError(f"{name} must be true or false, not {raw!r}.")


def _env_float(raw: str, variable: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise InvalidInputError(f"{variable} must be a number, not {raw!r}.") from None


def _number(value: Any, key: str, where: str) -> float:
    kind, low, high = _NUMBERS[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{where} must be a number.")
    if kind is int and value != int(value):
        raise InvalidInputError(f"{where} must be a whole number.")
    if not low <= value <= high:
        raise InvalidInputError(f"{where} must be between {low:g} and {high:g}.")
    return kind(value)
