"""OpenTelemetry export of runs (the optional ``telemetry`` extra): traces and metrics that
follow the GenAI semantic conventions, sent live by the engine and back-filled by
``tether export otlp``.

* :mod:`~engine.telemetry.otel_settings` ``[telemetry]`` and ``OTEL_*``, resolved (pure);
* :mod:`~engine.telemetry.otel_semconv` instruments, bucket boundaries, provider names (pure);
* :mod:`~engine.telemetry.otel_mapping` records to spans and measurements (pure, one mapping);
* :mod:`~engine.telemetry.otel_history` the reads that gather those records;
* :mod:`~engine.telemetry.otel_sdk` the official SDK and OTLP exporters behind the mapping;
* :mod:`~engine.telemetry.otel_pipeline` the bounded queue and its sending thread;
* :mod:`~engine.telemetry.otel_live` the live export that follows the event log;
* :mod:`~engine.telemetry.otel_process` the process the live export runs in, and its pipe;
* :mod:`~engine.telemetry.otel_backfill` ``tether export otlp``;
* :mod:`~engine.telemetry.otel_status` the export's state (the dashboard's seam) and warnings.

Nothing here imports OpenTelemetry until export is configured.
"""
