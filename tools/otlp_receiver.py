"""A small OTLP receiver on 127.0.0.1 built on the official ``opentelemetry-proto`` messages: it
takes traces and metrics over HTTP/protobuf (``POST /v1/traces``, ``/v1/metrics``) and over
gRPC, keeps what it received, and can be told to fail (HTTP 500 / gRPC UNAVAILABLE) or to hold
every request until released (a collector that is slow). The tests and the benchmark use it;
``python -m tools.otlp_receiver`` runs one and prints each span it receives.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_pb

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value (arrays as tuples)."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return None if which is None else getattr(value, which)


def attributes(items: Any) -> dict[str, Any]:
    """OTLP key-values as a dict."""
    return {kv.key: any_value(kv.value) for kv in items}


class Receiver:
    """What arrived, and how to answer. ``mode``: ``ok``, ``fail`` or ``hold``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # wait_for's predicates read under it
        self.traces: list[trace_pb.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_pb.ExportMetricsServiceRequest] = []
        self.requests = 0
        self.refused = 0
        self.held = 0
        self.mode = "ok"
        self.release = threading.Event()
        self.arrived = threading.Condition(self.lock)

    def take(self, signal: str, body: bytes) -> bool:
        """Keep a request's payload; False when told to fail. Holds while in ``hold`` mode."""
        with self.lock:
            self.requests += 1
            mode = self.mode
            if mode == "hold":
                self.held += 1
            self.arrived.notify_all()
        if mode == "hold":
            self.release.wait()
        if mode == "fail":
            with self.lock:
                self.refused += 1
            return False
        if signal == "traces":
            message: Any = trace_pb.ExportTraceServiceRequest.FromString(body)
        else:
            message = metrics_pb.ExportMetricsServiceRequest.FromString(body)
        with self.lock:
            (self.traces if signal == "traces" else self.metrics).append(message)
            self.arrived.notify_all()
        return True

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> bool:
        """Block until ``predicate(self)`` holds (checked whenever a request arrives)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: predicate(self), timeout)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, flattened: ids as hex, attributes decoded, the resource's and
        the scope's attributes beside them."""
        with self.lock:
            requests = list(self.traces)
        found = []
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append({
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex() or None,
                            "kind": KINDS[span.kind],
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "attributes": attributes(span.attributes),
                            "links": [
                                {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex(),
                                 "attributes": attributes(link.attributes)}
                                for link in span.links
                            ],
                            "status": {0: "unset", 1: "ok", 2: "error"}[span.status.code],
                            "status_message": span.status.message,
                            "resource": resource,
                            "scope": scope_spans.scope.name,
                        })
        return found

    def metric_points(self, first: int = 0) -> dict[str, list[dict[str, Any]]]:
        """Every data point received (in requests ``first`` on), by metric name, newest export
        last (cumulative metrics: the last point of a series is its total)."""
        with self.lock:
            requests = list(self.metrics[first:])
        found: dict[str, list[dict[str, Any]]] = {}
        for request in requests:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        for point in _points(metric):
                            found.setdefault(metric.name, []).append(point)
        return found


def _points(metric: Any) -> Iterator[dict[str, Any]]:
    which = metric.WhichOneof("data")
    if which == "histogram":
        for p in metric.histogram.data_points:
            yield {"unit": metric.unit, "attributes": attributes(p.attributes), "count": p.count,
                   "sum": p.sum, "bucket_counts": list(p.bucket_counts),
                   "bounds": list(p.explicit_bounds), "time_ns": p.time_unix_nano}
    elif which == "sum":
        for p in metric.sum.data_points:
            value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
            yield {"unit": metric.unit, "attributes": attributes(p.attributes), "value": value,
                   "monotonic": metric.sum.is_monotonic, "time_ns": p.time_unix_nano}


def latest(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last point of each series (by attributes) of cumulative points."""
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for point in points:
        last[tuple(sorted(point["attributes"].items()))] = point
    return list(last.values())


# -- HTTP -----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    receiver: Receiver

    def do_POST(self) -> None:
        signal = {"/v1/traces": "traces", "/v1/metrics": "metrics"}.get(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if signal is None:
            self._answer(404, b"")
            return
        if not self.receiver.take(signal, body):
            self._answer(500, b"refused on purpose")
            return
        reply: Any = (trace_pb.ExportTraceServiceResponse() if signal == "traces"
                      else metrics_pb.ExportMetricsServiceResponse())
        self._answer(200, reply.SerializeToString())

    def _answer(self, code: int, body: bytes) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the exporter gave up on a held request

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HttpReceiver(Receiver):
    """The receiver over HTTP/protobuf on 127.0.0.1 (a free port unless ``port``)."""

    def __init__(self, port: int = 0) -> None:
        super().__init__()
        handler = type("Handler", (_Handler,), {"receiver": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="otlp-receiver")

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)


# -- gRPC -----------------------------------------------------------------------------------------


class GrpcReceiver(Receiver):
    """The receiver over gRPC on 127.0.0.1 (a free port)."""

    def __init__(self) -> None:
        import grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        super().__init__()
        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                if not receiver.take("traces", request.SerializeToString()):
                    context.abort(grpc.StatusCode.UNAVAILABLE, "refused on purpose")
                return trace_pb.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                if not receiver.take("metrics", request.SerializeToString()):
                    context.abort(grpc.StatusCode.UNAVAILABLE, "refused on purpose")
                return metrics_pb.ExportMetricsServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"

    def __enter__(self) -> GrpcReceiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.stop(grace=None).wait(10)


def main() -> None:
    """Run an HTTP receiver on port 4318 and print what arrives until interrupted."""
    receiver = HttpReceiver(4318)
    seen = 0
    with receiver:
        print(f"receiving OTLP/HTTP on {receiver.endpoint} (ctrl-c to stop)", flush=True)
        try:
            while True:
                receiver.wait_for(lambda r, shown=seen: len(r.spans()) > shown, timeout=3600)
                spans = receiver.spans()
                for span in spans[seen:]:
                    print(f"{span['trace_id'][:8]} {span['name']}  {span['attributes']}",
                          flush=True)
                seen = len(spans)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
