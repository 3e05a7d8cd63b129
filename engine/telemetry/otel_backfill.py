"""``tether export otlp``: history from the workspace database, sent with the live export's own
mapping. Spans carry the times the workspace recorded (and the same ids the live export gives
them, so a span sent twice is one span); metric points carry the time of the export, as
metrics are aggregates of what was sent.

Unlike the live export nothing is dropped: batches go out one after the other and the first
one the collector refuses stops the export, which says how far it got.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from engine.telemetry.otel_history import run_history
from engine.telemetry.otel_mapping import Options, SpanData, map_attempt, map_run
from engine.telemetry.otel_semconv import AgentKind
from engine.telemetry.otel_settings import ExportTarget
from engine.telemetry.otel_status import ExportSnapshot, ExportStatus
from store.db.paging import LARGEST_INTEGER
from store.errors import InvalidInputError
from store.model.run_records import RunRecord
from store.runs.run_store import RunStore

_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: an age (``30m``, ``12h``, ``7d``, ``2w``) or a local date or time
    (``2026-05-01``, ``2026-05-01T09:30``, with an offset it is that zone's); the moment
    it names, in epoch milliseconds. InvalidInputError (one sentence) otherwise."""
    match = _AGO.match(text)
    if match:
        age_ms = float(match.group(1)) * _UNITS[match.group(2)]
        if age_ms > LARGEST_INTEGER:  # (infinity too) the query could not bind it
            raise InvalidInputError(f"--since takes a shorter age than {text.strip()!r}.")
        return now_ms - int(age_ms)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(
            f"--since takes an age such as 30m, 12h or 7d, or a date such as 2026-05-01, "
            f"not {text!r}."
        ) from None
    return int(moment.timestamp() * 1000)


class BackfillResult(NamedTuple):
    """What an export sent."""

    runs: int
    spans: int
    measurements: int
    runs_still_going: int
    complete: bool
    status: ExportSnapshot


async def runs_to_export(
    store: RunStore, run_ids: Sequence[str], since_ms: int | None
) -> list[RunRecord]:
    """The runs named (NotFoundError for an unknown one), else every run created since
    ``since_ms`` (every run without it), oldest first."""
    if run_ids:
        return [await store.get_run(run_id) for run_id in dict.fromkeys(run_ids)]
    found: list[RunRecord] = []
    page = await store.runs_since(since_ms or 0)
    while page:
        found.extend(page)
        page = await store.runs_since(since_ms or 0, after=page[-1])
    return found


async def export_runs(
    store: RunStore,
    runs: Sequence[RunRecord],
    target: ExportTarget,
    kinds: Mapping[str, AgentKind],
    *,
    metrics: bool = True,
    on_run: Callable[[RunRecord], None] | None = None,
) -> BackfillResult:
    """Send the spans (and with ``metrics`` the measurements) of ``runs`` to ``target``."""
    from engine.telemetry.otel_sdk import SdkBridge

    status = ExportStatus(
        target.shown, target.protocol, metrics_endpoint=target.metrics_shown, warn=False
    )
    sdk = SdkBridge(target, status, periodic=False)
    options = Options(content=target.capture_content, kinds=dict(kinds))
    batch: list[SpanData] = []
    spans = measurements = going = done = waiting = 0
    complete = True

    async def flush() -> bool:
        nonlocal spans, done, waiting
        if batch and not await asyncio.to_thread(sdk.export_spans, list(batch)):
            return False
        spans, done, waiting = spans + len(batch), done + waiting, 0
        batch.clear()
        return True

    try:
        for run in runs:
            run_bundle, attempts = await run_history(store, run)
            mapped = [map_attempt(bundle, options) for bundle in attempts]
            mapped.append(map_run(run_bundle, options))
            going += not run.is_terminal
            waiting += 1
            for part in mapped:
                batch.extend(part.spans)
                if metrics:
                    sdk.record(part.measurements)
                    measurements += len(part.measurements)
            if len(batch) >= target.batch_size and not await flush():
                complete = False
                break
            if on_run is not None:
                on_run(run)
        complete = complete and await flush()
    finally:
        await asyncio.to_thread(
            sdk.shutdown, target.timeout_s, send_metrics=complete and metrics
        )
    state = status.snapshot()
    complete = complete and not state.failing
    sent_measurements = measurements if complete else 0
    return BackfillResult(done, spans, sent_measurements, going, complete, state)
