"""``tether export otlp [--since AGE|DATE] [--run RUN]...``: send the workspace's history to an
OpenTelemetry collector, with the spans and metrics the live export sends (see
:mod:`engine.telemetry.otel_backfill`).

Exit codes: 0 everything was sent; 1 a named run does not exist; 2 invalid input (a bad
``--since``, no collector configured, the ``telemetry`` extra missing); 3 the collector did not
take everything (the message says how far the export got).
"""

from __future__ import annotations

import os
import sys

import click

from engine.run.engine_config import load_config
from engine.telemetry.otel_backfill import export_runs, parse_since, runs_to_export
from engine.telemetry.otel_semconv import agent_kinds
from engine.telemetry.otel_settings import PROTOCOLS, check_endpoint, resolve_target
from store.db.backends import open_database
from store.errors import InvalidInputError
from store.model.ids import validate_run_id
from store.model.wording import plural
from store.runs.run_store import RunStore
from tui.cli.common import (
    EXIT_NOT_COMPLETED,
    database_url_option,
    format_option,
    run_async,
    workspace_from,
    workspace_option,
)
from tui.cli.output import fail, print_json

NOT_CONFIGURED = (
    "No collector is configured; set endpoint under [telemetry] in .tether/config.toml, "
    "OTEL_EXPORTER_OTLP_ENDPOINT, or pass --endpoint."
)


@click.group("export")
def export() -> None:
    """Send the workspace's runs to other tools (OpenTelemetry: tether export otlp)."""


@export.command("otlp")
@click.option("--since", "since", metavar="AGE|DATE",
              help="Runs created since then: 30m, 12h, 7d, or a date such as 2026-05-01.")
@click.option("--run", "run_ids", metavar="RUN", multiple=True,
              help="Only this run (repeat for more).")
@click.option("--endpoint", metavar="URL",
              help="The collector's OTLP base URL, over the configured one.")
@click.option("--protocol", type=click.Choice(PROTOCOLS), default=None,
              help="http/protobuf (default) or grpc.")
@click.option("--no-metrics", "no_metrics", is_flag=True,
              help="Send spans only (metrics would count the runs again on a collector that "
                   "already has them).")
@format_option
@workspace_option
@database_url_option
@run_async
async def export_otlp(
    since: str | None,
    run_ids: tuple[str, ...],
    endpoint: str | None,
    protocol: str | None,
    no_metrics: bool,
    output_format: str,
    workspace_dir: str | None,
    database_url: str | None,
) -> None:
    """Send runs to an OpenTelemetry collector: spans (a trace per run) and metrics."""
    if since is not None and run_ids:
        raise InvalidInputError("--since and --run choose runs two ways; give one of them.")
    for run_id in run_ids:
        validate_run_id(run_id)
    if since is not None:
        parse_since(since, 0)  # a bad --since is said before anything else (the real moment below)
    workspace = workspace_from(workspace_dir, database_url)
    config = load_config(workspace.config_path)
    environ = dict(os.environ)
    environ.pop("OTEL_SDK_DISABLED", None)  # asking for an export is asking for one
    if endpoint is not None:
        environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = check_endpoint(endpoint, "--endpoint")
        environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        environ.pop("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", None)
    if protocol is not None:
        environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    target = resolve_target(config.telemetry, environ)
    if target is None:
        raise InvalidInputError(NOT_CONFIGURED)
    from engine.telemetry.otel_sdk import check_installed

    check_installed(target)
    async with await open_database(workspace, create=False, read_only=True) as db:
        store = RunStore(db)
        since_ms = None if since is None else parse_since(since, db.clock.now_ms())
        runs = await runs_to_export(store, run_ids, since_ms)
        result = await export_runs(
            store, runs, target, agent_kinds(config.agents), metrics=not no_metrics
        )
    document = {
        "endpoint": target.shown,
        "protocol": target.protocol,
        "runs": result.runs,
        "spans": result.spans,
        "measurements": result.measurements,
        "runs_still_going": result.runs_still_going,
        "complete": result.complete,
        "reason": result.status.reason,
    }
    if output_format == "json":
        print_json(document)
    elif result.complete:
        line = (f"Sent {plural(result.spans, 'span')} ({result.runs:,} of "
                f"{plural(len(runs), 'run')})"
                + ("" if no_metrics else f" and {plural(result.measurements, 'measurement')}")
                + f" to {target.shown} ({target.protocol}).")
        click.echo(line)
        if result.runs_still_going:
            click.echo(f"{result.runs_still_going} of them still going: their finished "
                       "attempts were sent, not yet the span of the run itself.")
    if not result.complete:
        sys.stdout.flush()
        fail(
            f"The collector at {target.shown} did not take everything "
            f"({result.status.reason or 'no reason given'}); {result.spans} spans went out.",
            EXIT_NOT_COMPLETED,
        )


COMMANDS = [export]
