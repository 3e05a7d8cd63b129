"""Whether the collector takes spans now, asked the way an exporter asks (an empty OTLP/HTTP
export request, with the configured headers): what the dashboard's status line shows when
the runs are exported by other processes (``tether run`` in another terminal, workers), whose
exporters it cannot see. No OpenTelemetry import: httpx, which the default install has."""

from __future__ import annotations

import httpx

from engine.telemetry.otel_settings import ExportTarget

PROBE_INTERVAL_S = 15.0
"""How often the dashboard asks (an empty request is a few hundred bytes)."""
PROBE_TIMEOUT_S = 3.0


def can_probe(target: ExportTarget) -> bool:
    """Only OTLP/HTTP is asked (a gRPC collector is left to the exporters' own reports)."""
    return target.protocol == "http/protobuf"


async def probe(target: ExportTarget, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the collector accepts an empty export request at the traces URL; otherwise
    why not, in the words the exporter's warnings use."""
    headers = {**target.headers, "Content-Type": "application/x-protobuf"}
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.post(target.traces_url, content=b"", headers=headers)
    except httpx.ConnectError as error:
        return "connection refused" if _refused(error) else "cannot connect"
    except httpx.TimeoutException:
        return "no answer in time"
    except httpx.HTTPError as error:
        return str(error) or type(error).__name__
    if response.status_code >= 400:
        return f"HTTP {response.status_code} {response.reason_phrase}".strip()
    return None


def _refused(error: BaseException) -> bool:
    """Whether a connection error was the collector's host refusing (its message may not say)."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain of causes is short; never follow a cycle
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False
