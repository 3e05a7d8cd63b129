"""The OpenTelemetry part of the dashboard's status line: whether this workspace's runs are
exported, and whether that is failing (read through :mod:`engine.telemetry.otel_status`, the
exporter's seam; the export threads never touch the screen). The export's warnings become
notifications instead of lines printed over the screen."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from rich.text import Text

from engine.telemetry import otel_status
from engine.telemetry.otel_status import ExportSnapshot
from store.errors import TetherError
from store.model.wording import plural
from store.workspace.layout import Workspace
from tui.format import literal

if TYPE_CHECKING:
    from engine.telemetry.otel_settings import ExportTarget


def export_piece(snapshot: ExportSnapshot | None, configured: bool,
                 problem: str | None = None, unreachable: str | None = None) -> Text | None:
    """The status line's words for the export (None when export is off): on, sending, failing
    with the reason, dropping, or unable to run at all. ``unreachable``: why the collector
    refused the dashboard's own check (for runs other processes export)."""
    line = Text()
    if problem is not None:
        line.append("⚠ OTLP off: ", style="bold red")
        line.append_text(literal(problem, "red", keep_newlines=False))
        return line
    if snapshot is None:
        if configured and unreachable is not None:
            line.append("⚠ OTLP failing: ", style="bold red")
            line.append_text(literal(unreachable, "red", keep_newlines=False))
            return line
        return Text("OTLP on", style="cyan") if configured else None
    if snapshot.problem is not None:
        line.append("⚠ OTLP off: ", style="bold red")
        line.append_text(literal(snapshot.problem, "red", keep_newlines=False))
        return line
    if snapshot.failing:
        line.append("⚠ OTLP failing: ", style="bold red")
        line.append_text(literal(snapshot.reason or "the collector refuses", "red",
                                 keep_newlines=False))
    else:
        line.append("OTLP on", style="cyan")
        line.append(f" {plural(snapshot.spans_sent, 'span')} sent", style="cyan")
    lost = snapshot.spans_dropped + snapshot.spans_failed
    if lost:
        line.append(f" · {plural(lost, 'span')} lost", style="bold yellow")
    return line


def configured_target(workspace: Workspace) -> ExportTarget | None:
    """Where ``workspace``'s runs are exported (None: export is off); TetherError for a bad
    config file or OTEL_* variable.

    Asked before the first paint, so a workspace with no config.toml (or an empty one) and no
    OTEL_* variable, where export is off whatever the rest says, is answered without importing
    the engine's config and telemetry settings (tens of milliseconds on a small machine)."""
    from store.workspace.config_file import read_config

    data = read_config(workspace.config_path)
    if not data and not any(name.startswith("OTEL_") for name in os.environ):
        return None
    from engine.run.engine_config import parse_config
    from engine.telemetry.otel_settings import resolve_target

    return resolve_target(parse_config(data, str(workspace.config_path)).telemetry, os.environ)


class ExportStatusPiece:
    """What the status line shows about the export of ``workspace``'s runs."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.configured = False
        self.problem: str | None = None
        self.target: ExportTarget | None = None
        self.unreachable: str | None = None
        """Why the collector refused the last check (None: it took it, or not checked)."""
        try:
            target = configured_target(workspace)
        except TetherError as error:  # a bad [telemetry] or OTEL_* variable: said on the line
            self.problem = str(error)
            return
        self.configured = target is not None
        self.target = target

    async def check(self) -> None:
        """Ask the collector whether it takes spans now (the runs may be exported elsewhere)."""
        from engine.telemetry.otel_probe import can_probe, probe

        if self.target is not None and can_probe(self.target):
            self.unreachable = await probe(self.target)

    def start_checks(self, app: Any) -> None:
        """Check the collector now and every little while, in workers of ``app`` (never on
        the path of a repaint); nothing when export is off."""
        if self.target is None:
            return
        from engine.telemetry.otel_probe import PROBE_INTERVAL_S

        def check() -> None:
            app.run_worker(self.check(), group="otlp-check", exclusive=True,
                           exit_on_error=False)

        check()
        app.set_interval(PROBE_INTERVAL_S, check)

    def text(self) -> Text | None:
        """The words for the status line now (None: export is off). This process's own export
        says more than the check, so it is shown when there is one."""
        snapshot = otel_status.current(otel_status.workspace_key(self.workspace))
        return export_piece(snapshot, self.configured, self.problem, self.unreachable)

    def pieces(self) -> tuple[Text, Text]:
        """What the status line shows: a problem goes first, with the others (a narrow line
        still shows it), a healthy export last; either may be empty."""
        words = self.text()
        if words is None:
            return Text(), Text()
        if words.plain.startswith("⚠"):
            return words + Text("  "), Text()
        return Text(), Text(" · ") + words

    def take_warnings(self, app: Any) -> None:
        """Show the export's warnings as notifications of ``app``. Called on the app's loop;
        the export's threads hand a warning over without waiting for the screen."""
        loop = asyncio.get_running_loop()

        def notify(text: str) -> None:
            try:
                loop.call_soon_threadsafe(
                    lambda: app.notify(text, severity="warning", timeout=10)
                )
            except RuntimeError:  # the app's loop has closed
                pass

        otel_status.set_sink(notify)

    def release(self) -> None:
        """Warnings go back to stderr (the app is closing)."""
        otel_status.set_sink(None)
