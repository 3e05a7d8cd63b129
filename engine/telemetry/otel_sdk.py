"""The official OpenTelemetry SDK and OTLP exporters (the ``telemetry`` extra) behind Tether's
mapping: mapped spans become the SDK's ``ReadableSpan`` and go out through ``OTLPSpanExporter``
(HTTP/protobuf or gRPC), measurements are recorded on the SDK's instruments and sent by its
periodic metric reader. Nothing here is imported unless export is configured.

No global provider is set: a workflow's own OpenTelemetry use stays its own.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
import threading
from collections.abc import Sequence
from typing import Any

from engine.telemetry import otel_semconv as sc
from engine.telemetry.otel_mapping import Measurement, SpanData
from engine.telemetry.otel_settings import ExportTarget
from engine.telemetry.otel_status import ExportStatus, now_ms
from store.errors import InvalidInputError

NEEDED = {
    "http/protobuf": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "grpc": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.grpc"),
}
SCOPE = "tether"


def tether_version() -> str:
    """The installed Tether's version (the resource's ``service.version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tether")
    except PackageNotFoundError:
        return "0"


class TelemetryUnavailable(InvalidInputError):
    """Export is configured but the OpenTelemetry packages are not installed."""


def check_installed(target: ExportTarget) -> None:
    """Raise :class:`TelemetryUnavailable` (one sentence) when the packages ``target`` needs
    are missing."""
    for module in NEEDED[target.protocol]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise TelemetryUnavailable(
                f"Telemetry export is configured ({target.source}) but the OpenTelemetry "
                f"packages for {target.protocol} are not installed; install them with: "
                f"pip install {install_hint(target.protocol)}."
            )


class _Reasons(logging.Handler):
    """Keeps what the SDK's exporters logged, per signal (they say why a gRPC export failed only
    in their log), and keeps their lines off the terminal: the status says it once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: dict[str, list[str]] = {"spans": [], "metrics": []}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format
            message = str(record.msg)
        signal = "metrics" if "metric" in record.name else "spans"
        self.messages[signal] = [*self.messages[signal][-19:], message]

    def take(self, signal: str) -> list[str]:
        """What was logged about ``signal`` since the last call."""
        found, self.messages[signal] = self.messages[signal], []
        return found


def reason_of(messages: list[str]) -> str | None:
    """Why an export failed, in a few words, from what the SDK's exporters logged about it."""
    text = " ".join(messages)
    if not text:
        return None
    if "refused" in text.lower():
        return "connection refused"
    code = re.search(r"code: (\d{3}), reason: ([^,.]*)", text)
    if code:
        return f"HTTP {code.group(1)} {code.group(2).strip()}".strip()
    grpc_code = re.search(r"StatusCode\.([A-Z_]+)", text)
    if grpc_code:
        return f"gRPC {grpc_code.group(1)}"
    if "timed out" in text.lower() or "timeout" in text.lower():
        return "no answer in time"
    return messages[-1]


def _watched_session() -> Any:
    """A ``requests`` session (what the HTTP exporters send with) that remembers why its last
    request failed: the exporter retries a refused connection until its timeout and then
    logs only "timeout"."""
    import requests

    class WatchedSession(requests.Session):
        last: str | None = None

        def request(self, *args: Any, **kwargs: Any) -> Any:
            try:
                response = super().request(*args, **kwargs)
            except requests.ConnectionError as error:
                refused = "refused" in str(error).lower()
                self.last = "connection refused" if refused else "cannot connect"
                raise
            except requests.Timeout:
                self.last = "no answer in time"
                raise
            if response.status_code >= 400:
                self.last = f"HTTP {response.status_code} {response.reason or ''}".strip()
            else:
                self.last = None
            return response

    return WatchedSession()


_REASONS = _Reasons()
_logging_lock = threading.Lock()


def _capture_sdk_logs() -> None:
    with _logging_lock:
        logger = logging.getLogger("opentelemetry")
        if _REASONS not in logger.handlers:
            logger.addHandler(_REASONS)
            logger.propagate = False


class SdkBridge:
    """One exporter set (spans and metrics) for an :class:`ExportTarget`, reporting every
    export's outcome to ``status``. ``periodic`` false: metrics go out only at
    :meth:`shutdown` (a back-fill)."""

    def __init__(self, target: ExportTarget, status: ExportStatus, *, periodic: bool = True):
        check_installed(target)
        _capture_sdk_logs()
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.target = target
        self.status = status
        self.resource = Resource.create(
            {"service.name": target.service_name, "service.version": tether_version()}
        )
        self.scope = InstrumentationScope(SCOPE, tether_version())
        span_class, metric_class = _exporter_classes(target.protocol)
        self._span_session = _watched_session() if target.protocol != "grpc" else None
        metric_session = _watched_session() if target.protocol != "grpc" else None
        self._spans = span_class(
            **_exporter_options(target, target.traces_url, self._span_session)
        )
        metrics = _watched_metrics(metric_class, status, metric_session)(
            **_exporter_options(target, target.metrics_url, metric_session)
        )
        self.periodic = periodic
        interval = target.metrics_interval_s * 1000 if periodic else math.inf
        readers = [] if not target.metrics else [PeriodicExportingMetricReader(
            metrics,
            export_interval_millis=interval,
            export_timeout_millis=target.timeout_s * 1000,
        )]
        self._provider = MeterProvider(resource=self.resource, metric_readers=readers)
        meter = self._provider.get_meter(SCOPE, tether_version())
        self._instruments: dict[str, Any] = {}
        for instrument in sc.INSTRUMENTS:
            made: Any
            if instrument.kind == "histogram":
                made = meter.create_histogram(
                    instrument.name,
                    unit=instrument.unit,
                    description=instrument.description,
                    explicit_bucket_boundaries_advisory=list(instrument.boundaries),
                )
            else:
                made = meter.create_counter(
                    instrument.name, unit=instrument.unit, description=instrument.description
                )
            self._instruments[instrument.name] = made

    def export_spans(self, spans: Sequence[SpanData]) -> bool:
        """Send one batch; the outcome (and the SDK's reason for a failure) goes to the status."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        _REASONS.take("spans")
        try:
            result = self._spans.export([self.readable(span) for span in spans])
        except Exception as error:  # an exporter bug must never reach a run
            self.status.failed(len(spans), f"{type(error).__name__}: {error}")
            return False
        if result == SpanExportResult.SUCCESS:
            self.status.sent(len(spans), now_ms())
            return True
        said = getattr(self._span_session, "last", None)
        self.status.failed(len(spans), said or reason_of(_REASONS.take("spans")))
        return False

    def record(self, measurements: Sequence[Measurement]) -> None:
        """Record measurements on the instruments (sent with the next metrics export)."""
        if not self.target.metrics:
            return
        for m in measurements:
            instrument = self._instruments[m.instrument]
            if hasattr(instrument, "record"):
                instrument.record(m.value, dict(m.attributes))
            else:
                instrument.add(m.value, dict(m.attributes))

    def readable(self, span: SpanData) -> Any:
        """A mapped span as the SDK's ``ReadableSpan``, with its recorded times and ids."""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import ReadableSpan

        flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
        context = trace.SpanContext(span.trace_id, span.span_id, False, flags)
        parent = (
            None
            if span.parent_span_id is None
            else trace.SpanContext(span.trace_id, span.parent_span_id, False, flags)
        )
        links = [
            trace.Link(trace.SpanContext(link.trace_id, link.span_id, True, flags),
                       dict(link.attributes))
            for link in span.links
        ]
        status = (
            trace.Status(trace.StatusCode.ERROR, span.error)
            if span.error is not None
            else trace.Status(trace.StatusCode.UNSET)
        )
        kind = trace.SpanKind.CLIENT if span.kind == "client" else trace.SpanKind.INTERNAL
        return ReadableSpan(
            span.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=dict(span.attributes),
            links=links,
            kind=kind,
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self.scope,
        )

    def shutdown(self, timeout_s: float, *, send_metrics: bool = True) -> None:
        """Send the metrics recorded so far (bounded by ``timeout_s``; a back-fill whose spans
        failed sends none) and close the exporters."""
        try:
            if not self.periodic and send_metrics:  # a periodic reader collects as it stops
                self._provider.force_flush(timeout_millis=max(1.0, timeout_s * 1000))
            self._provider.shutdown(timeout_millis=max(1.0, timeout_s * 1000))
        except Exception as error:  # never let the end of a process fail on telemetry
            self.status.failed(0, f"{type(error).__name__}: {error}", "metrics")
        try:
            self._spans.shutdown()
        except Exception:
            pass


def _exporter_classes(protocol: str) -> tuple[Any, Any]:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc import metric_exporter, trace_exporter
    else:
        from opentelemetry.exporter.otlp.proto.http import (  # type: ignore[no-redef]
            metric_exporter,
            trace_exporter,
        )
    return trace_exporter.OTLPSpanExporter, metric_exporter.OTLPMetricExporter


def _exporter_options(target: ExportTarget, url: str, session: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "endpoint": url,
        "headers": dict(target.headers),
        "timeout": target.timeout_s,
    }
    if target.protocol == "grpc":
        options["insecure"] = url.startswith("http://")
    else:
        options["session"] = session
    return options


def _watched_metrics(base: Any, status: ExportStatus, session: Any) -> Any:
    """``base`` (an OTLP metric exporter class) reporting each export's outcome to ``status``."""
    from opentelemetry.sdk.metrics.export import MetricExportResult

    class WatchedMetricExporter(base):
        def export(self, *args: Any, **kwargs: Any) -> Any:
            _REASONS.take("metrics")
            result = super().export(*args, **kwargs)
            if result == MetricExportResult.SUCCESS:
                status.metrics_sent()
            else:
                said = getattr(session, "last", None)
                status.failed(0, said or reason_of(_REASONS.take("metrics")), "metrics")
            return result

    return WatchedMetricExporter


def install_hint(protocol: str) -> str:
    """The packages ``protocol``'s export needs, as pip names them (the ``telemetry`` extra of a
    checkout has both exporters)."""
    wire = "grpc" if protocol == "grpc" else "http"
    return f"opentelemetry-sdk opentelemetry-exporter-otlp-proto-{wire}"
